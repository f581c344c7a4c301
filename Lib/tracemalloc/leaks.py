"""Leak checking: run code in rounds, report the allocation sites that grow.

A leak check runs a workload W times to warm up (caches fill, modules get
imported, strings get interned), then R more times, taking a snapshot of the
traced memory after each of these rounds.  An allocation site -- the file and
line that allocated the memory -- leaks when the memory still allocated there
grew in every measured round, or in a clear majority of them, by at least a
threshold on average.  Sites are reported largest first, each with the
traceback through which most of its growth was allocated:

    import tracemalloc.leaks

    report = tracemalloc.leaks.check(handle_one_request)
    if report:
        print(report)

    tracemalloc.leaks.assert_no_leaks(handle_one_request)   # LeakError

    with tracemalloc.leaks.LeakCheck(rounds=5) as check:    # a block of code
        for _ in check:
            handle_one_request()

What is not a leak (see "What is not reported, and why" in
Doc/library/tracemalloc.rst):

* memory that grows only during the warm-up rounds, or in a minority of the
  measured rounds (a dict that resizes once, a cache filling up);
* memory of the caches that clear_caches() empties before each snapshot;
* the allocations of this package (the checker and the snapshots it holds):
  a trace is the checker's when the most recent of its frames that belongs
  to this package is not the line that calls the workload.
"""

import gc
import linecache
import os
import sys
from collections import Counter
from itertools import compress
from operator import itemgetter, not_

import tracemalloc
from tracemalloc import Traceback, _format_size, _sum_by_key

__all__ = ['check', 'assert_no_leaks', 'clear_caches', 'LeakCheck',
           'LeakReport', 'LeakSite', 'LeakError',
           'DEFAULT_WARMUP', 'DEFAULT_ROUNDS', 'DEFAULT_THRESHOLD',
           'DEFAULT_NFRAME']

DEFAULT_WARMUP = 2
DEFAULT_ROUNDS = 5
DEFAULT_THRESHOLD = 1           # bytes per measured round, on average
DEFAULT_NFRAME = 25             # traceback limit when the check starts tracing


class LeakError(AssertionError):
    """Raised by assert_no_leaks() and friends; the message is the report."""

    def __init__(self, report):
        super().__init__(report.format())
        self.report = report


# --------------------------------------------------------------------------
# Noise control

def clear_caches():
    """Empty the interpreter's and the stdlib's caches that refill on use.

    Run before each snapshot of a leak check, like regrtest's -R cleanup: a
    cache that the workload refills each round then shows no growth, while
    a cache that only fills up would look like a leak until it is full.
    Only modules already imported are touched.
    """
    modules = sys.modules
    re = modules.get('re')
    if re is not None:
        re.purge()
    linecache.clearcache()
    for name, clear in (('struct', '_clearcache'),
                        ('urllib.parse', 'clear_cache'),
                        ('filecmp', None)):
        module = modules.get(name)
        if module is None:
            continue
        if clear is not None:
            getattr(module, clear, lambda: None)()
        elif name == 'filecmp':
            module._cache.clear()
    fnmatch = modules.get('fnmatch')
    if fnmatch is not None and hasattr(fnmatch._compile_pattern,
                                       'cache_clear'):
        fnmatch._compile_pattern.cache_clear()
    typing = modules.get('typing')
    if typing is not None:
        for cleanup in getattr(typing, '_cleanups', ()):
            cleanup()
    abc_module = modules.get('collections.abc')
    if abc_module is not None:
        # isinstance() checks against an ABC cache the classes seen.
        for name in abc_module.__all__:
            abc = getattr(abc_module, name)
            if not hasattr(abc, '_abc_caches_clear'):
                continue
            for cls in [abc, *type.__subclasses__(abc)]:
                if hasattr(cls, '_abc_caches_clear'):
                    cls._abc_caches_clear()
    sys._clear_type_cache()


# --------------------------------------------------------------------------
# Whose memory is it?

def _call_workload(func):
    # The call below is the line of this package through which the
    # workload allocates: see _Ownership.
    return func()


# (filename, lineno) of the lines of this package through which a workload
# is called: _call_workload()'s, and those of the helpers of the test
# framework integrations that sit between it and the test (registered with
# _calls_workload()).
_WORKLOAD_CALLS = set()
_OWN_DIRECTORY = os.path.dirname(_call_workload.__code__.co_filename)


def _calls_workload(function):
    """Register the lines of *function*, a helper of this package between
    _call_workload() and the workload, as lines that call the workload.

    The helper must allocate nothing that outlives it on those lines.
    """
    code = function.__code__
    _WORKLOAD_CALLS.update((code.co_filename, lineno)
                           for _, _, lineno in code.co_lines()
                           if lineno is not None
                           and lineno != code.co_firstlineno)
    return function


_calls_workload(_call_workload)
_RUNNER_FILES = frozenset()     # filled by _runner_files()


def _runner_files():
    """Files whose frames run a workload without being part of it."""
    global _RUNNER_FILES
    if not _RUNNER_FILES:
        import runpy
        _RUNNER_FILES = frozenset({runpy.run_path.__code__.co_filename})
    return _RUNNER_FILES


class _Ownership:
    """Decide, once per distinct traceback, whether a trace is the tool's.

    The workload's memory is allocated either through _call_workload()'s
    call line (check(), the CLI, unittest and pytest) and the helpers
    registered with _calls_workload(), or in frames of no file of this
    package at all (a block run by iterating a LeakCheck; and whatever the
    process allocated before the check, which does not grow).  Anything
    else whose traceback reaches this package is the checker's own.
    Traces of no frame at all ('<unknown>') count as the workload's: C
    code running without a Python frame may leak too.
    """

    def __init__(self):
        # The co_filename of every module of this package: they all share
        # the directory part of _call_workload()'s.
        try:
            names = os.listdir(_OWN_DIRECTORY)
        except OSError:
            names = []      # a zip file, for one: the loaded modules below
        own_files = {os.path.join(_OWN_DIRECTORY, name) for name in names
                     if name.endswith('.py')}
        for name, module in list(sys.modules.items()):
            spec = getattr(module, '__spec__', None)
            spec_name = getattr(spec, 'name', None) or name
            if spec_name == 'tracemalloc' or spec_name.startswith(
                    'tracemalloc.'):
                filename = getattr(module, '__file__', None)
                if filename:
                    own_files.add(filename)
        self._own_files = frozenset(own_files)
        self._filenames = _FILENAMES

    def is_workload(self, frames):
        own_files = self._own_files
        # Most tracebacks never reach this package: one C-level pass.
        if own_files.isdisjoint(map(self._filenames, frames)):
            return True
        for index, frame in enumerate(frames):
            if frame[0] in own_files:
                # Allocated by the workload line itself, not below it: the
                # frame object of _call_workload(), which a leaking
                # workload's frames may pin (frame.f_back), is the tool's.
                return index > 0 and frame in _WORKLOAD_CALLS
        return True

    def workload_frames(self, frames):
        """*frames* (most recent first) without the checker's and runner's
        frames at the oldest end."""
        end = len(frames)
        for index, frame in enumerate(frames):
            if frame[0] in self._own_files:
                end = index
                break
        runners = _runner_files()
        while end > 1 and frames[end - 1][0] in runners:
            end -= 1
        return frames[:end]


_DOMAIN = itemgetter(0)
_SIZE = itemgetter(1)
_FRAMES = itemgetter(2)
_FILENAMES = itemgetter(0)


def _workload_totals(ownership, traces, canonical):
    """Return {(domain, frames): [size, count]} of the workload's traces
    among the raw *traces*.

    Each frames tuple is replaced by the equal one found in *canonical* (a
    dict filled as needed), so that the totals of all the rounds share one
    copy of each traceback.

    This runs once per round over every live trace of the process, so the
    per-trace work is done by C loops (map, zip, Counter, compress); Python
    code runs once per distinct traceback.
    """
    domains = list(map(_DOMAIN, traces))
    if any(domains):
        other_domains = list(compress(traces, domains))
        traces = list(compress(traces, map(not_, domains)))
    else:
        other_domains = ()
    del domains
    # Traces of one call context share one frames tuple: group by identity,
    # which costs no hashing of the frames.
    frames_column = list(map(_FRAMES, traces))
    ids = list(map(id, frames_column))
    counts = Counter(ids)
    sizes = dict.fromkeys(counts, 0)
    for key, size in zip(ids, map(_SIZE, traces)):
        sizes[key] += size
    frames_by_id = dict(zip(ids, frames_column))
    del frames_column, ids

    groups = [(0, frames_by_id[key], sizes[key], count)
              for key, count in counts.items()]
    other_totals = {}
    for domain, size, frames, _ in other_domains:
        total = other_totals.get((domain, id(frames)))
        if total is None:
            other_totals[(domain, id(frames))] = [domain, frames, size, 1]
        else:
            total[2] += size
            total[3] += 1
    groups.extend(other_totals.values())

    is_workload = ownership.is_workload
    # Equal frames in distinct tuples (hand-made snapshots) are summed.
    return _sum_by_key(((domain, canonical.setdefault(frames, frames)),
                        size, count)
                       for domain, frames, size, count in groups
                       if is_workload(frames))


def _site_of(frames):
    return frames[0] if frames else ('<unknown>', 0)


def _totals_by_site(totals):
    return _sum_by_key((_site_of(frames), size, count)
                       for (domain, frames), (size, count) in totals.items())


# --------------------------------------------------------------------------
# Results

class LeakSite:
    """An allocation site whose memory grew while the workload ran.

    *sizes* and *counts* hold, for each measured round, how much the memory
    allocated at the site grew (bytes, blocks); *traceback* is the Traceback
    that contributed most of the growth, without the checker's frames.
    """

    __slots__ = ('filename', 'lineno', 'sizes', 'counts', 'traceback',
                 'domain')

    def __init__(self, filename, lineno, sizes, counts, traceback, domain=0):
        self.filename = filename
        self.lineno = lineno
        self.sizes = sizes
        self.counts = counts
        self.traceback = traceback
        self.domain = domain

    @property
    def size(self):
        """Total growth in bytes over the measured rounds."""
        return sum(self.sizes)

    @property
    def count(self):
        """Total growth in blocks over the measured rounds."""
        return sum(self.counts)

    @property
    def rounds_grown(self):
        """In how many measured rounds the site grew."""
        return sum(1 for size in self.sizes if size > 0)

    def __repr__(self):
        return (f"<LeakSite {self.filename}:{self.lineno} "
                f"sizes={self.sizes} counts={self.counts}>")

    def format(self):
        """Return the site's report as a list of lines, without newlines."""
        rounds = len(self.sizes)
        per_round_size = _format_size(self.size / rounds, False)
        per_round_count = self.count / rounds
        if per_round_count == int(per_round_count):
            per_round_count = int(per_round_count)
        else:
            per_round_count = f"{per_round_count:.1f}"
        line = (f"{self.filename}:{self.lineno}: size={per_round_size}, "
                f"count={per_round_count} per round (grew in "
                f"{self.rounds_grown} of {rounds} rounds")
        if self.domain:
            line += f", domain {self.domain}"
        lines = [line + ")"]
        source = linecache.getline(self.filename, self.lineno).strip()
        if source:
            lines.append(f"    {source}")
        lines.append("  Traceback (most recent call first):")
        lines.extend("  " + line for line in
                     self.traceback.format(most_recent_first=True))
        return lines


class LeakReport:
    """The result of a leak check.

    *sites* lists the leaking LeakSite objects, largest growth first (empty
    when nothing leaked; a report is true when something leaked).  *sizes*
    and *counts* give, per measured round, the growth of all the workload's
    traced memory, leaking or not.
    """

    def __init__(self, sites, *, warmup, rounds, threshold, min_rounds,
                 traceback_limit, sizes, counts, title=None):
        self.sites = sites
        self.warmup = warmup
        self.rounds = rounds
        self.threshold = threshold
        self.min_rounds = min_rounds
        self.traceback_limit = traceback_limit
        self.sizes = sizes
        self.counts = counts
        self.title = title

    def __bool__(self):
        return bool(self.sites)

    @property
    def leaked(self):
        return bool(self.sites)

    def __repr__(self):
        return (f"<LeakReport sites={len(self.sites)} rounds={self.rounds} "
                f"warmup={self.warmup}>")

    def __str__(self):
        return self.format()

    def format(self, limit=10):
        """Return the report as text: a summary line, then up to *limit*
        sites (None: all), each starting with a FILE:LINE: line."""
        what = f"{self.title}: " if self.title else ""
        if not self.sites:
            return (f"tracemalloc: {what}no allocation site grew in "
                    f"{self.min_rounds} or more of {self.rounds} rounds "
                    f"(after {self.warmup} warm-up rounds)")
        shown = self.sites if limit is None else self.sites[:limit]
        plural = "s" if len(self.sites) > 1 else ""
        lines = [f"tracemalloc: {what}{len(self.sites)} allocation "
                 f"site{plural} leaked: memory grew in {self.min_rounds} or "
                 f"more of {self.rounds} rounds (after {self.warmup} warm-up "
                 f"rounds; traceback limit {self.traceback_limit})"]
        for site in shown:
            lines.extend(site.format())
        rest = self.sites[len(shown):]
        if rest:
            size = sum(site.size for site in rest) / self.rounds
            lines.append(f"{len(rest)} other leaking sites: "
                         f"size={_format_size(size, False)} per round")
        return "\n".join(lines)


# --------------------------------------------------------------------------
# The check

class LeakCheck:
    """Run a workload in rounds and find the allocation sites that grow.

    Run a callable with run(), or a block of code by iterating over the
    check (each iteration is one round); as a context manager, the check
    raises LeakError at the end of the with block when something leaked.
    The report is the *report* attribute once the rounds are done.

    *warmup* rounds run first and are not measured; then *rounds* rounds
    are, with a snapshot after each.  A site leaks when its memory grew in
    at least *min_rounds* of them (default: all but one in four, so 4 of
    5) and by at least *threshold* bytes per round on average.  When
    tracing is off, the check starts it with *nframe* frames per traceback
    and stops it at the end.  With *cleanup* true, clear_caches() runs
    before each snapshot; a callable *cleanup* runs after it.

    Only per-traceback totals are kept between rounds, never a whole
    snapshot, unless *keep_snapshots* is true: then *first_snapshot* and
    *last_snapshot* are Snapshot objects of the workload's traces at the
    start and at the end of the measured rounds (for an HTML report).
    """

    def __init__(self, *, warmup=DEFAULT_WARMUP, rounds=DEFAULT_ROUNDS,
                 threshold=DEFAULT_THRESHOLD, min_rounds=None,
                 nframe=DEFAULT_NFRAME, cleanup=True, title=None,
                 keep_snapshots=False):
        if warmup < 0:
            raise ValueError("warmup must be >= 0")
        if rounds < 1:
            raise ValueError("rounds must be >= 1")
        if min_rounds is None:
            min_rounds = rounds - rounds // 4
        if not 1 <= min_rounds <= rounds:
            raise ValueError("min_rounds must be between 1 and rounds")
        if threshold < 0:
            raise ValueError("threshold must be >= 0")
        self.warmup = warmup
        self.rounds = rounds
        self.threshold = threshold
        self.min_rounds = min_rounds
        self.nframe = nframe
        self.cleanup = cleanup
        self.title = title
        self.keep_snapshots = keep_snapshots
        self.first_snapshot = self.last_snapshot = None
        self.report = None
        self._iterator = None
        self._started_tracing = False
        # regrtest collects garbage itself, before reading its statistics.
        self._collect_garbage = True

    # Running

    def run(self, func):
        """Run *func()* warmup + rounds times; return the LeakReport."""
        self._begin()
        try:
            for index in range(self.warmup + self.rounds):
                _call_workload(func)
                self._end_round(index)
            self.report = self._finish()
        finally:
            self._stop_tracing()
        return self.report

    def __iter__(self):
        if self._iterator is not None:
            raise RuntimeError("a LeakCheck can only be iterated once")
        self._iterator = self._iterate()
        return self._iterator

    def _iterate(self):
        self._begin()
        try:
            for index in range(self.warmup + self.rounds):
                yield index
                self._end_round(index)
            self.report = self._finish()
        finally:
            self._stop_tracing()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if self._iterator is not None:
            self._iterator.close()
        if exc_type is None and self.report:
            raise LeakError(self.report)
        return False

    # Rounds

    def _begin(self):
        self.report = None
        self._ownership = _Ownership()
        self._canonical = {}        # frames -> the first equal frames seen
        # Between rounds, only the per-site totals of the previous snapshot
        # and the growth of the sites that changed are kept: a process has
        # thousands of sites, of which a few change.
        self._previous_sites = None     # {site: [size, count]}
        self._changes = {}              # {site: ([size...], [count...])}
        self._measured = -1             # snapshots taken after the first
        self._round_sizes = []          # growth of all the workload's
        self._round_counts = []         # memory, per measured round
        self._first_totals = None   # first snapshot, per traceback
        self._last_totals = None    # last snapshot, per traceback
        if not tracemalloc.is_tracing():
            tracemalloc.start(self.nframe)
            self._started_tracing = True
        if self.warmup == 0:
            self._snapshot()

    def _end_round(self, index):
        if index >= self.warmup - 1:
            self._snapshot()

    def _snapshot(self):
        if self.cleanup:
            clear_caches()
            if callable(self.cleanup):
                self.cleanup()
        if self._collect_garbage:
            gc.collect()
        # The raw snapshot is dropped before the next round: only these
        # totals stay alive between rounds (unless keep_snapshots).
        if self.keep_snapshots:
            snapshot = tracemalloc.take_snapshot()
            traces = snapshot.traces._traces
            is_workload = self._ownership.is_workload
            snapshot = tracemalloc.Snapshot(
                [trace for trace in traces if is_workload(trace[2])],
                snapshot.traceback_limit)
            if self.first_snapshot is None:
                self.first_snapshot = snapshot
            self.last_snapshot = snapshot
        else:
            traces = tracemalloc._get_traces()
        totals = _workload_totals(self._ownership, traces, self._canonical)
        del traces
        if self._first_totals is None:
            self._first_totals = totals
        self._last_totals = totals
        sites = _totals_by_site(totals)
        if self._previous_sites is not None:
            self._record_changes(self._previous_sites, sites)
        self._previous_sites = sites
        self._measured += 1

    def _record_changes(self, previous, current):
        measured = self._measured
        rounds = self.rounds
        changes = self._changes

        def record(site, size, count):
            change = changes.get(site)
            if change is None:
                change = changes[site] = ([0] * rounds, [0] * rounds)
            change[0][measured] = size
            change[1][measured] = count

        total_size = total_count = 0
        for site, (size, count) in current.items():
            old = previous.get(site)
            if old is not None:
                size -= old[0]
                count -= old[1]
            if size or count:
                record(site, size, count)
                total_size += size
                total_count += count
        for site, (size, count) in previous.items():
            if site not in current:
                record(site, -size, -count)
                total_size -= size
                total_count -= count
        self._round_sizes.append(total_size)
        self._round_counts.append(total_count)

    def _stop_tracing(self):
        if self._started_tracing:
            self._started_tracing = False
            tracemalloc.stop()

    def _finish(self):
        rounds = self._measured
        traceback_limit = tracemalloc.get_traceback_limit()
        result = []
        for site, (sizes, counts) in self._changes.items():
            grown = sum(1 for size in sizes if size > 0)
            total = sum(sizes)
            if (grown >= self.min_rounds and total > 0
                    and total >= self.threshold * rounds):
                domain, frames = self._biggest_traceback(site)
                frames = self._ownership.workload_frames(frames)
                result.append(LeakSite(site[0], site[1], sizes, counts,
                                       Traceback(frames), domain))
        result.sort(key=lambda s: (-s.size, -s.count, s.filename, s.lineno))
        report = LeakReport(result, warmup=self.warmup, rounds=rounds,
                            threshold=self.threshold,
                            min_rounds=self.min_rounds,
                            traceback_limit=traceback_limit,
                            sizes=self._round_sizes,
                            counts=self._round_counts, title=self.title)
        self._previous_sites = self._changes = None
        self._first_totals = self._last_totals = self._canonical = None
        return report

    def _biggest_traceback(self, site):
        """The (domain, frames) of *site* that grew most overall."""
        best = None
        best_growth = None
        first = self._first_totals
        for key, (size, count) in self._last_totals.items():
            if _site_of(key[1]) != site:
                continue
            growth = size - first.get(key, (0, 0))[0]
            if best is None or growth > best_growth:
                best, best_growth = key, growth
        if best is None:
            return 0, (site,)
        return best


def check(func, **options):
    """Run *func()* in rounds (see LeakCheck); return a LeakReport.

    The report is true when some allocation site leaked.
    """
    return LeakCheck(**options).run(func)


def assert_no_leaks(func, **options):
    """Like check(), but raise LeakError (an AssertionError) on a leak."""
    report = check(func, **options)
    if report:
        raise LeakError(report)
    return report
