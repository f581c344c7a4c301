"""The core of the leak checker, shared by its integrations.

Private to the tracemalloc package.  tracemalloc.leaks (the public API),
tracemalloc.testing, tracemalloc.regrtest, tracemalloc.pytest_plugin and the
command line (tracemalloc.__main__) use it through the names below, and
only them:

  DEFAULT_NFRAME            traceback limit when a tool starts tracing
  format_size(size, sign)   "1.5 KiB", as in the reports of the package
  sum_by_key(rows)          {key: [size, count]} of (key, size, count) rows
  runner_files()            files of the code that runs a script (runpy)
  call_workload(func, ...)  call the workload: its allocations, C code's
                            included, are the workload's, not the tool's
  calls_workload(function)  register a helper between call_workload() and
                            the workload (a test runner's)
  Ownership                 decides whether a traceback is the workload's
  package_files()           files of the modules of this package
  strip_tool_frames(tb)     a Traceback with only the frames more recent
                            than the tool's
  resolve_target(spec)      the callable named by "module:qualname"
  TargetError               raised by resolve_target()
  is_leak(sizes, ...)       the verdict on one site's growth per round
  TracingGuard              notices that tracing was stopped or cleared
  LeakCheckError            no verdict (tracing stopped, check unfinished)
  Recorder                  the per-site growth over a check's snapshots,
                            which can be packed into bytes between rounds
  LiveRecorder              the per-site growth over a check's rounds, read
                            from the engine's live totals per call context
                            (no snapshot); adaptive rounds (suspects())
  live_totals_available()   whether the engine gives the live totals
  workload_totals(...)      {(domain, frames): [size, count]} of one
                            snapshot's traces that are the workload's
  LeakSite, LeakReport      the results (public in tracemalloc.leaks)
"""

import os
import sys
from collections import Counter
from operator import itemgetter

from tracemalloc import Traceback, _format_size, _sum_by_key

import _tracemalloc


def clear_free_lists():
    """Empty the interpreter's free lists before a round: what they hold
    from before tracing started has no trace, and the workload's next
    objects must not come from there untraced.  (A snapshot's objects need
    no such care: the engine traces them at the line that reuses them.)"""
    clear = getattr(_tracemalloc, "_clear_free_lists", None)
    if clear is not None:
        clear()

def flush_std_streams():
    """Flush the standard streams.  A text stream keeps what was written
    to it in a list until the list reaches its chunk size (8 KiB): a clean
    workload that prints, with output not captured (pytest -s, tee-sys,
    a pipe), would otherwise show that list growing from round to round
    until it happens to flush."""
    for name in ("stdout", "stderr", "__stdout__", "__stderr__"):
        stream = getattr(sys, name, None)
        if stream is None:
            continue
        try:
            stream.flush()
        except Exception:
            pass

DEFAULT_NFRAME = 25


def format_size(size, sign=False):
    """Return *size* (bytes) as text, "+" first if *sign* is true."""
    return _format_size(size, sign)


def sum_by_key(rows):
    """Return {key: [size, count]}, summed over the (key, size, count)
    *rows*."""
    return _sum_by_key(rows)


# --------------------------------------------------------------------------
# Whose memory is it?

# (filename, lineno) of the lines through which the tool calls a workload:
# call_workload()'s, and the lines of the helpers registered with
# calls_workload().
_WORKLOAD_CALLS = set()


def call_workload(func, *args, **kwargs):
    """Call *func* as the workload; return its result.

    The call line is the root of the workload: what is allocated under it,
    by Python code or directly by a C callable (a builtin, a C method, a
    functools.partial of one), is the workload's.
    """
    # This frame's frame object, which a workload that keeps one of its own
    # frames pins through f_back, is made here, on a line of the tool, and
    # not later on the call line below, where it would count as the
    # workload's.
    sys._getframe()
    return func(*args, **kwargs)


_code = call_workload.__code__
_CALL_LINE = (_code.co_filename,
              max(line for _, _, line in _code.co_lines() if line is not None))
_WORKLOAD_CALLS.add(_CALL_LINE)
del _code
_PACKAGE_DIRECTORY = os.path.dirname(call_workload.__code__.co_filename)


def calls_workload(function):
    """Register the lines of *function*, a helper that sits between
    call_workload() and the workload, as lines that call the workload.

    What is allocated under those lines is the workload's, so the helper
    must allocate nothing that outlives it there -- not even its own frame
    object, which a workload that keeps its frames pins (f_back), and which
    is then allocated on the helper's line that called it.  A helper that
    makes each of its calls into the workload through call_workload()
    (which makes its own frame object on a line of the tool) needs no
    registration, and has no such catch.  Return *function*.
    """
    code = function.__code__
    _WORKLOAD_CALLS.update((code.co_filename, lineno)
                           for _, _, lineno in code.co_lines()
                           if lineno is not None
                           and lineno != code.co_firstlineno)
    return function


_RUNNER_FILES = None


def runner_files():
    """Files whose frames run a script without being part of it (runpy)."""
    global _RUNNER_FILES
    if _RUNNER_FILES is None:
        import runpy
        _RUNNER_FILES = frozenset({runpy.run_path.__code__.co_filename})
    return _RUNNER_FILES


_PACKAGE_FILES = (None, None)      # (len(sys.modules), files)


def package_files():
    """The co_filename of every module of the tracemalloc package.

    Computed again only when the number of loaded modules changed: callers
    such as strip_tool_frames() run once per traceback.
    """
    global _PACKAGE_FILES
    modules = sys.modules
    loaded, files = _PACKAGE_FILES
    if loaded == len(modules):
        return files
    try:
        names = os.listdir(_PACKAGE_DIRECTORY)
    except OSError:
        names = []          # a zip file, for one: the loaded modules below
    files = {os.path.join(_PACKAGE_DIRECTORY, name) for name in names
             if name.endswith('.py')}
    for name, module in list(modules.items()):
        try:
            spec = getattr(module, '__spec__', None)
            spec_name = getattr(spec, 'name', None) or name
        except Exception:
            # A lazy object in sys.modules whose __getattr__ imports (and
            # raises ImportError): not tracemalloc's (s38 review, G8).
            continue
        if not isinstance(spec_name, str):
            continue
        if spec_name == 'tracemalloc' or spec_name.startswith(
                'tracemalloc.'):
            filename = getattr(module, '__file__', None)
            if filename:
                files.add(filename)
    files = frozenset(files)
    _PACKAGE_FILES = (len(modules), files)
    return files


_FILENAME = itemgetter(0)


class Ownership:
    """Decide whether a traceback (raw frames, most recent first) is the
    workload's or the tool's.

    A traceback that reaches no file of this package is the workload's:
    a block of code run by iterating a LeakCheck, a thread, whatever the
    process allocated before the check, and '<unknown>' (C code running
    without a Python frame, which may leak too).  Otherwise, the most recent
    frame of the package decides: the traceback is the workload's when that
    frame is a line that calls the workload (call_workload()'s, or a
    registered helper's), even when it is the innermost frame -- then a C
    callable called directly as the workload allocated the memory -- and
    the tool's otherwise.  A traceback that reaches none of the package's
    files but a file under one of *harness_directories* is the harness's:
    a thread of the code that runs the workload (pytest-xdist's execnet
    receiving its controller's messages), not the workload's.

    A check may run inside another check's workload (a test that runs its
    own check, under pytest --tracemalloc-leaks): then the memory of the
    inner check's own code (its recorder, its rounds) is allocated under
    the outer check's call line, as the workload's would be.  The
    Ownership is made by the check that it serves, and notes the stack
    that called that check (the frames from the first one that is not the
    package's): a traceback that reaches that stack through a frame of the
    package, with no call line on the way, is the check's own code --
    the tool's, whatever is older (_is_checks_own()).
    """

    def __init__(self, harness_directories=()):
        self._own_files = package_files()
        self._harness = tuple(os.path.join(os.path.abspath(directory), '')
                              for directory in harness_directories)
        self._caller = self._caller_stack()

    def _caller_stack(self):
        """The raw frames, most recent first, of the stack that called the
        check being made: from the most recent frame that is not the
        package's, older than the package's frames that made this object;
        () when there is none."""
        own_files = self._own_files
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename in own_files:
            frame = frame.f_back
        frames = []
        while frame is not None:
            frames.append((frame.f_code.co_filename, frame.f_lineno))
            frame = frame.f_back
        return tuple(frames)

    def _is_checks_own(self, frames):
        """Whether *frames* are the check's own code: they reach the stack
        that called the check (its caller's file, then the older frames
        as they were, as far as the traceback goes) right after a frame of
        the package, and no call line comes first.  The workload runs
        under a call line; workload code run by iterating the check runs
        in the caller's frame itself, under no frame of the package."""
        caller = self._caller
        if not caller:
            return False
        own_files = self._own_files
        caller_file = caller[0][0]
        older = caller[1:]
        previous = frames[0] if frames else None
        for index in range(1, len(frames)):
            if previous in _WORKLOAD_CALLS:
                return False
            frame = frames[index]
            if frame[0] == caller_file and previous[0] in own_files:
                rest = frames[index + 1:]
                if rest == older[:len(rest)]:
                    return True
            previous = frame
        return False

    def is_workload(self, frames):
        own_files = self._own_files
        # Most tracebacks never reach this package: one C-level pass.
        if own_files.isdisjoint(map(_FILENAME, frames)):
            harness = self._harness
            return not (harness and any(filename.startswith(harness)
                                        for filename, _ in frames))
        if self._is_checks_own(frames):
            return False
        # The package's frames at the most recent end: the tool's own code,
        # or the package's API called by the workload.  After them, the
        # first frame of the package decides, as above: when the code
        # between is not the package's (workload code that called
        # take_snapshot(), statistics()...), a call line there makes the
        # memory the workload's -- a workload that keeps every snapshot
        # leaks.  A call line right under the most recent frames, with no
        # other code between, is the tool's code called as a workload
        # helper (its own allocations).
        leading = frames[0][0] in own_files if frames else False
        if leading and frames[0] in _WORKLOAD_CALLS:
            return True     # a C callable called directly as the workload
        for frame in frames:
            if frame[0] in own_files:
                if not leading:
                    return frame in _WORKLOAD_CALLS
                if frame in _WORKLOAD_CALLS:
                    return False
            else:
                leading = False
        return False


def strip_tool_frames(traceback, directories=()):
    """Return *traceback* (a Traceback) with only the frames more recent
    than its most recent frame of the tool: a frame of this package, of
    runpy, or of a file in one of *directories* (a test harness's).

    The frames from there on are the tool's calling the workload, the same
    for every allocation of it.  When the most recent frame is itself the
    tool's (a C callable called directly as the workload allocates on the
    tool's call line), it alone is kept.
    """
    own = package_files()
    runners = runner_files()
    directories = frozenset(directories)
    # Raw frames (C frames of native frames included), most recent first.
    frames = [frame._frame for frame in traceback]
    frames.reverse()
    end = len(frames)
    for index, frame in enumerate(frames):
        filename = frame[0]
        if (filename in own or filename in runners
                or (directories
                    and os.path.dirname(filename) in directories)):
            end = max(index, 1)
            break
    if end == len(frames):
        return traceback
    return Traceback(tuple(frames[:end]), traceback.total_nframe)


# --------------------------------------------------------------------------
# Targets of the command line

class TargetError(ValueError):
    """A target that cannot be resolved; the message says why."""


def resolve_target(spec):
    """Return the callable named by *spec*, "module:qualname".

    The module is imported as ``python -m`` would, with the current
    directory on the path.  For "module:Class.method" where *method* is a
    plain function of the class (not a static or class method), the class
    is instantiated once, without arguments, and the method of that
    instance is returned.  Raise TargetError when the module or the name is
    not found, or the result is not callable; an exception raised while
    importing the module propagates.
    """
    import importlib
    import inspect

    module_name, _, qualname = spec.partition(':')
    if not module_name or not qualname:
        raise TargetError(f"invalid target {spec!r}: expected "
                          f"module:function or a script path")
    if '' not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target = importlib.import_module(module_name)
    except ImportError as exc:
        raise TargetError(f"cannot import {module_name!r}: {exc}") from None
    owner = None
    for name in qualname.split('.'):
        owner = target
        try:
            target = getattr(target, name)
        except AttributeError:
            raise TargetError(f"module {module_name!r} has no attribute "
                              f"{qualname!r}") from None
    if (inspect.isclass(owner)
            and inspect.isfunction(inspect.getattr_static(owner, name,
                                                          None))):
        try:
            instance = owner()
        except Exception as exc:
            raise TargetError(
                f"{spec!r} is a method: its class {owner.__qualname__} "
                f"cannot be instantiated without arguments "
                f"({type(exc).__name__}: {exc})") from None
        target = getattr(instance, name)
    if not callable(target):
        raise TargetError(f"{spec!r} is not callable")
    return target


# --------------------------------------------------------------------------
# The verdict

def _rise_and_fall(sizes):
    """Return (rise, fall, levels) of the growth *sizes*: the levels that
    they build from 0, the last level, and the most that the level went
    down from an earlier level to a later one."""
    levels = [0]
    for size in sizes:
        levels.append(levels[-1] + size)
    peak = fall = 0
    for level in levels:
        if level > peak:
            peak = level
        elif peak - level > fall:
            fall = peak - level
    return levels[-1], fall, levels


def _keeps_rising(sizes, threshold):
    rise, fall, levels = _rise_and_fall(sizes)
    if rise <= 0 or rise < threshold * len(sizes) or rise <= 2 * fall:
        return False
    count = len(levels)
    bounds = (0, (count + 1) // 3, (2 * count + 1) // 3, count)
    floors = [min(levels[start:end])
              for start, end in zip(bounds, bounds[1:]) if start < end]
    return all(lower < higher for lower, higher in zip(floors, floors[1:]))


def is_leak(sizes, counts=None, threshold=1, min_rounds=1):
    """Return true when the growth of a site, *sizes* (bytes) and *counts*
    (blocks) per measured round, makes a leak: its level keeps rising.

    Take the levels L0 = 0, L1 = sizes[0], L2 = L1 + sizes[1]... Lr.  The
    site leaks when all of these hold:

    1. its rise, Lr - L0, is positive and at least *threshold* bytes per
       round on average;
    2. its rise is more than twice its largest fall, the most that the
       level ever went down from an earlier level to a later one: what a
       bounded structure adds, it gives back when it drops;
    3. its floor rises: split the levels into three consecutive parts (as
       equal as the count allows); the lowest level of each part is higher
       than the lowest level of the part before.  Growth must repeat: a
       step made once is not a leak, a leak in every other round is;
    4. if its number of blocks (*counts*) does not keep rising by rules 1
       to 3 (with no threshold), its size never fell: a site that holds as
       many blocks as before, replaced or resized, leaks as a buffer that
       keeps growing, while a cache that swaps entries of random sizes goes
       up and down;
    5. it grew in at least *min_rounds* rounds.
    """
    if not _keeps_rising(sizes, threshold):
        return False
    if (counts is not None and not _keeps_rising(counts, 0)
            and _rise_and_fall(sizes)[1] > 0):
        return False
    return sum(1 for size in sizes if size > 0) >= min_rounds


class LeakCheckError(RuntimeError):
    """A leak check reached no verdict: tracing was stopped, cleared or
    restarted while it ran, or it did not run all its rounds."""

    __module__ = 'tracemalloc.leaks'


class TracingGuard:
    """Notice that tracing was stopped, cleared or restarted.

    It holds one traced object, allocated when the guard is made: as long
    as tracing was neither stopped nor cleared, the object has a traceback.
    The object is a bytes object large enough to be allocated outside
    pymalloc (regrtest counts pymalloc's blocks).
    """

    def __init__(self):
        import tracemalloc
        sample = tracemalloc.get_sample()
        if sample is not None:
            # Sampled traces are estimates, and most blocks have none: a
            # verdict needs every block.
            raise LeakCheckError(
                f"tracemalloc is sampling (one sample per {sample} bytes "
                f"on average): the leak check needs exact tracing; run "
                f"without -X tracemalloc_sample/PYTHONTRACEMALLOCSAMPLE, or "
                f"stop() and start() without sample")
        self._marker = bytes(1024)

    def check(self):
        """Raise LeakCheckError if tracing is off or was cleared since the
        guard was made."""
        import tracemalloc
        if not tracemalloc.is_tracing():
            raise LeakCheckError("tracing was stopped during the leak "
                                 "check: no verdict")
        if tracemalloc.get_object_traceback(self._marker) is None:
            raise LeakCheckError("the traces were cleared (clear_traces(), "
                                 "or tracing restarted) during the leak "
                                 "check: no verdict")


# --------------------------------------------------------------------------
# Per-round totals

_DOMAIN = itemgetter(0)
_SIZE = itemgetter(1)
_FRAMES = itemgetter(2)


def workload_totals(ownership, traces, canonical):
    """Return {(domain, frames): [size, count]} of the workload's traces
    among the raw *traces*.

    Each frames tuple is replaced by the equal one found in *canonical* (a
    dict filled as needed), so that the totals of all the rounds share one
    copy of each traceback.  This runs once per round over every live trace
    of the process: traces are grouped by the identity of their frames tuple
    (traces of one call context share it) with C loops, and Python code runs
    once per group.
    """
    frames_column = list(map(_FRAMES, traces))
    keys = list(map(id, frames_column))
    counts = Counter(keys) if not any(map(_DOMAIN, traces)) else None
    if counts is not None:
        # Domain 0 only, the usual case: the key is the frames' identity.
        frames_by_key = dict(zip(keys, frames_column))
        domain_of = _domain_zero
    else:
        keys = list(zip(map(_DOMAIN, traces), keys))
        frames_by_key = dict(zip(keys, frames_column))
        counts = Counter(keys)
        domain_of = _DOMAIN
    del frames_column
    sizes = dict.fromkeys(counts, 0)
    for key, size in zip(keys, map(_SIZE, traces)):
        sizes[key] += size
    del keys
    is_workload = ownership.is_workload
    # Equal frames in distinct tuples (hand-made snapshots) are summed.
    return sum_by_key(((domain_of(key), canonical.setdefault(frames, frames)),
                       sizes[key], count)
                      for key, count in counts.items()
                      for frames in (frames_by_key[key],)
                      if is_workload(frames))


def _domain_zero(key):
    return 0


def _site_of(frames):
    """(filename, lineno) of the most recent Python frame (a native leak
    with native frames has C frames before it); ('<unknown>', 0)."""
    if not frames:
        return ('<unknown>', 0)
    if len(frames[0]) == 2:
        return frames[0]
    for frame in frames:
        if len(frame) == 2:
            return frame
    return frames[0][:2]


def _not_given_back(sizes, counts, leaking):
    """True when the site whose growth is *sizes* and *counts* keeps what
    its *leaking* tracebacks ((key, sizes, counts) each) gained: the site
    rose by more than half of their rise, in bytes and, when they added
    blocks, in blocks.

    A site leaks through some of its tracebacks when its other tracebacks
    do not give back what these gain: a cache whose first entries, made
    through one traceback, are replaced by entries made through another
    holds as many blocks as before, and the traceback that grows is no
    leak.
    """
    rise = sum(sum(entry[1]) for entry in leaking)
    blocks = sum(sum(entry[2]) for entry in leaking)
    if 2 * sum(sizes) <= rise:
        return False
    return blocks <= 0 or 2 * sum(counts) > blocks


def _blocks_stopped(sizes, counts):
    """Whether a site whose blocks keep rising (rules 1 to 3, with no
    threshold) stopped adding them by the end of the rounds: no longer
    rising in the last third, or _stopped()."""
    if not _keeps_rising(counts, 0):
        return False
    return not _still_rising(counts) or _stopped(counts)


def _leak_sites(sites, tracebacks, leaks, biggest, directories,
                site_stopped=None):
    """The LeakSites of a report, largest first.

    *sites* and *tracebacks* map a site, and a (domain, frames) key, to its
    growth per measured round (sizes, counts).  A site leaks when
    *leaks*(sizes, counts) says so (its traceback: *biggest*(site)), or
    through its tracebacks that leak by themselves, when the site does not
    give that growth back (a site whose total is masked by a bounded
    buffer sharing its line), unless *site_stopped*(sizes, counts) says
    that the site itself stopped growing (a full cache whose entries,
    made through one traceback, are replaced through another).  The
    checker's frames are stripped (strip_tool_frames(), with
    *directories*)."""
    leaking_tracebacks = {}
    for key, (sizes, counts) in tracebacks.items():
        if leaks(sizes, counts):
            leaking_tracebacks.setdefault(_site_of(key[1]), []).append(
                (key, sizes, counts))
    result = []
    for site, (sizes, counts) in sites.items():
        leaking = leaking_tracebacks.get(tuple(site))
        if leaks(sizes, counts):
            domain, frames = biggest(site)
        elif (leaking and _not_given_back(sizes, counts, leaking)
                and not (site_stopped and site_stopped(sizes, counts))):
            # The site leaks through these tracebacks: report their
            # growth, with the one that grew most.
            sizes = [sum(column) for column
                     in zip(*(entry[1] for entry in leaking))]
            counts = [sum(column) for column
                      in zip(*(entry[2] for entry in leaking))]
            domain, frames = max(leaking,
                                 key=lambda entry: sum(entry[1]))[0]
        else:
            continue
        traceback = strip_tool_frames(Traceback(frames), directories)
        result.append(LeakSite(site[0], site[1], sizes, counts,
                               traceback, domain))
    result.sort(key=lambda s: (-s.size, -s.count, s.filename, s.lineno))
    return result


class Recorder:
    """The growth of each allocation site over the snapshots of a check.

    record() takes the traces of one snapshot; the first is the base, and
    each later one is a measured round.  Between snapshots, only the
    per-site totals of the previous one, the growth of the sites that
    changed, and the per-traceback totals of the first and the last
    snapshot are kept: a process has thousands of sites, of which a few
    change.  dumps() packs that state into one bytes object and loads()
    unpacks it, for a caller that must hold no Python object between
    rounds (regrtest).
    """

    def __init__(self, rounds):
        self.rounds = rounds
        self._previous_sites = None     # {site: [size, count]}
        self._changes = {}              # {site: ([size...], [count...])}
        self._measured = -1             # snapshots taken after the first
        self._round_sizes = []          # growth of all the workload's
        self._round_counts = []         # memory, per measured round
        self._first_totals = None       # first snapshot, per traceback
        self._last_totals = None        # last snapshot, per traceback
        self._canonical = {}            # frames -> the first equal frames
        self._traceback_changes = {}    # {(domain, frames): ([size...],
                                        #                     [count...])}

    @property
    def measured(self):
        """How many measured rounds were recorded."""
        return max(self._measured, 0)

    def record(self, ownership, traces):
        """Record the snapshot whose raw traces are *traces*."""
        totals = workload_totals(ownership, traces, self._canonical)
        if self._first_totals is None:
            self._first_totals = totals
        else:
            self._record_traceback_changes(self._last_totals, totals)
        self._last_totals = totals
        sites = sum_by_key((_site_of(frames), size, count)
                           for (domain, frames), (size, count)
                           in totals.items())
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

    def _record_traceback_changes(self, previous, current):
        # The growth of each traceback, as _record_changes() keeps that of
        # each site: a site can hold a leak through one traceback and a
        # bounded buffer, that goes up and down, through another (the same
        # parser line called from two places).  Only the tracebacks that
        # changed are kept.
        measured = self._measured
        rounds = self.rounds
        changes = self._traceback_changes
        for key, (size, count) in current.items():
            old = previous.get(key)
            if old is not None:
                size -= old[0]
                count -= old[1]
            if size or count:
                change = changes.get(key)
                if change is None:
                    change = changes[key] = ([0] * rounds, [0] * rounds)
                change[0][measured] = size
                change[1][measured] = count
        for key, (size, count) in previous.items():
            if key not in current:
                change = changes.get(key)
                if change is None:
                    change = changes[key] = ([0] * rounds, [0] * rounds)
                change[0][measured] = -size
                change[1][measured] = -count

    _STATE = ('_previous_sites', '_changes', '_measured', '_round_sizes',
              '_round_counts', '_first_totals', '_last_totals',
              '_traceback_changes')

    def dumps(self):
        """Return the state as one bytes object (see loads())."""
        import marshal
        return marshal.dumps((self.rounds,) + tuple(
            getattr(self, name) for name in self._STATE))

    @classmethod
    def loads(cls, data):
        """Return the Recorder whose state dumps() returned as *data*."""
        import marshal
        rounds, *state = marshal.loads(data)
        recorder = cls(rounds)
        for name, value in zip(cls._STATE, state):
            setattr(recorder, name, value)
        return recorder

    def report(self, *, warmup, threshold, min_rounds, traceback_limit,
               title=None, directories=()):
        """Return the LeakReport: the sites that is_leak() calls leaks,
        largest first, each with its traceback that grew most, less the
        tool's frames (strip_tool_frames(), with *directories*)."""
        rounds = self.measured
        sites = {site: (sizes[:rounds], counts[:rounds])
                 for site, (sizes, counts) in self._changes.items()}
        tracebacks = {key: (sizes[:rounds], counts[:rounds])
                      for key, (sizes, counts)
                      in self._traceback_changes.items()}
        result = _leak_sites(
            sites, tracebacks,
            lambda sizes, counts: is_leak(sizes, counts, threshold,
                                          min_rounds),
            self._biggest_traceback, directories)
        return LeakReport(result, warmup=warmup, rounds=rounds,
                          threshold=threshold, min_rounds=min_rounds,
                          traceback_limit=traceback_limit,
                          sizes=self._round_sizes[:rounds],
                          counts=self._round_counts[:rounds], title=title)

    def _biggest_traceback(self, site):
        """The (domain, frames) of *site* that grew most overall."""
        best = None
        best_growth = None
        first = self._first_totals
        for key, (size, count) in self._last_totals.items():
            if _site_of(key[1]) != tuple(site):
                continue
            growth = size - first.get(key, (0, 0))[0]
            if best is None or growth > best_growth:
                best, best_growth = key, growth
        if best is None:
            return 0, (tuple(site),)
        return best


def _stopped(counts):
    """Whether the blocks that *counts* add per round stopped being added:
    the rounds after the last one that added blocks are 2 or more, and
    more than the longest run of rounds without growth between two that
    grew.  A cache that fills one entry per call and is then full grew in
    every round, then in none; a leak every *k*-th call never goes more
    than *k* - 1 rounds without growth, at the end as before."""
    grew = [index for index, count in enumerate(counts) if count > 0]
    if not grew:
        return True
    tail = len(counts) - 1 - grew[-1]
    gaps = [later - earlier - 1 for earlier, later in zip(grew, grew[1:])]
    return tail >= 2 and tail > max(gaps, default=0)


def _still_rising(sizes, counts=None):
    """Whether the level that *sizes* build still rose in the last third
    of the rounds: its highest level there is above every level before.
    A bounded cache that fills more slowly than the warm-up rises at
    first and then stays flat; a leak goes on rising.

    When the site's number of blocks, *counts*, keeps rising (rules 1 to
    3, with no threshold), its blocks must still rise in the last third
    too, and must not have stopped (_stopped()): a site that leaks blocks
    goes on adding them, while a bounded cache that is full holds as many
    blocks as before, even when its bytes still rise once (its dict
    rebuilt at a bigger size once the dummy slots that its evictions
    leave fill the table) or by a few bytes (its new entries' keys one
    digit longer)."""
    if counts is not None and _blocks_stopped(sizes, counts):
        return False
    levels = [0]
    for size in sizes:
        levels.append(levels[-1] + size)
    count = len(levels)
    start = (2 * count + 1) // 3
    if start >= count or start == 0:
        return True
    return max(levels[start:]) > max(levels[:start])


def is_suspect(sizes, counts=None, threshold=1):
    """Whether the growth *sizes* of a site over the screening rounds may
    be a leak, and needs more rounds to tell: it leaks by is_leak(), or
    it rose (by at least *threshold* bytes per round on average, by more
    than twice its largest fall) and grew in at least two rounds.  A step
    made once is not suspect; a leak in every other round is, whatever its
    phase, over 4 rounds or more."""
    if is_leak(sizes, counts, threshold):
        return True
    rise, fall, _ = _rise_and_fall(sizes)
    if rise <= 0 or rise < threshold * len(sizes) or rise <= 2 * fall:
        return False
    return sum(1 for size in sizes if size > 0) >= 2


def ignore_pattern(filename, lineno, patterns):
    """The first of *patterns* (fnmatch patterns of "FILE:LINE", or of
    "FILE" alone) that the site *filename*:*lineno* matches, or None.  A
    relative pattern also matches at the end of an absolute path:
    "pkg/cache.py:*" matches "/src/pkg/cache.py:12"."""
    import fnmatch
    location = f"{filename}:{lineno}"
    for pattern in patterns:
        target = location if ":" in pattern else filename
        if fnmatch.fnmatchcase(target, pattern):
            return pattern
        if not os.path.isabs(pattern) and fnmatch.fnmatchcase(
                target, "*/" + pattern):
            return pattern
    return None


def live_totals_available():
    """Whether the engine gives the live totals per call context."""
    import _tracemalloc
    return hasattr(_tracemalloc, '_live_totals_diff')


class LiveRecorder:
    """The growth of each traceback over the rounds of a check, read from
    the engine's live totals per call context.

    record() compares the totals with those of the previous call, in C:
    one pass over the call contexts, however many traces the process
    holds, and Python code only for the contexts whose totals changed
    (a few per round).  No snapshot is taken.  When the engine renumbered
    its call contexts between two calls (compaction, which a growing
    process triggers now and then), the growth of that round cannot be
    told: record() returns False, the rounds measured so far are dropped,
    and the current totals are the new base.
    """

    def __init__(self):
        import _tracemalloc
        self._diff = _tracemalloc._live_totals_diff
        self._state = None
        self._measured = 0
        self._changes = {}          # {(domain, frames): {round: (s, c)}}
        self._canonical = {}        # frames -> the first equal frames
        self._owned = {}            # frames -> is it the workload's?
        self._round_sizes = []
        self._round_counts = []
        self.restarts = 0

    @property
    def measured(self):
        """How many measured rounds were recorded."""
        return self._measured

    def record(self, ownership):
        """Record the totals now: the base at the first call, a measured
        round after.  Return False when the round could not be measured
        (see the class), True otherwise."""
        first = self._state is None
        self._state, changes = self._diff(self._state)
        if first:
            return True
        if changes is None:
            self._changes = {}
            self._round_sizes = []
            self._round_counts = []
            self._measured = 0
            self.restarts += 1
            return False
        index = self._measured
        canonical = self._canonical
        owned = self._owned
        total_size = total_count = 0
        for domain, frames, size, count in changes:
            frames = canonical.setdefault(frames, frames)
            workload = owned.get(frames)
            if workload is None:
                workload = owned[frames] = ownership.is_workload(frames)
            if not workload:
                continue
            key = (domain, frames)
            rounds = self._changes.get(key)
            if rounds is None:
                rounds = self._changes[key] = {}
            old = rounds.get(index)
            if old is not None:         # equal frames, two contexts
                size += old[0]
                count += old[1]
            rounds[index] = (size, count)
            total_size += size if old is None else size - old[0]
            total_count += count if old is None else count - old[1]
        self._round_sizes.append(total_size)
        self._round_counts.append(total_count)
        self._measured += 1
        return True

    def _series(self, start=0):
        """{(domain, frames): (sizes, counts)} over the measured rounds
        from *start*, and {site: (sizes, counts)}."""
        rounds = range(start, self._measured)
        tracebacks = {}
        sites = {}
        for key, changes in self._changes.items():
            sizes = [changes.get(index, (0, 0))[0] for index in rounds]
            counts = [changes.get(index, (0, 0))[1] for index in rounds]
            if not any(sizes) and not any(counts):
                continue
            tracebacks[key] = (sizes, counts)
            site = _site_of(key[1])
            total = sites.get(site)
            if total is None:
                sites[site] = (list(sizes), list(counts))
            else:
                for column, values in zip(total, (sizes, counts)):
                    for index, value in enumerate(values):
                        column[index] += value
        return tracebacks, sites

    def rebase(self):
        """Drop the rounds measured so far: the current totals are the
        base of the next round."""
        self._changes = {}
        self._round_sizes = []
        self._round_counts = []
        self._measured = 0

    def grown(self):
        """The sites (file, line) of the workload whose memory grew, in
        bytes or in blocks, over the measured rounds: the screen's test
        (LeakCheck's *screen*).  A site, not a traceback: a dict whose
        table a rerun rebuilds through another call path moves its bytes
        from one traceback of its line to another, and grew in none.
        Every growth counts, whoever's code made it: a test's leak may
        be allocated by its runner's code alone (a builtin that the test
        registers as a finalizer), so no runner's growth is excused.
        Only the contexts that changed are kept: a few entries."""
        _, sites = self._series()
        return [site for site, (sizes, counts) in sites.items()
                if sum(sizes) > 0 or sum(counts) > 0]

    def suspects(self, threshold):
        """The sites (and sites through one of their tracebacks) whose
        growth over the measured rounds is_suspect()."""
        tracebacks, sites = self._series()
        found = {site for site, (sizes, counts) in sites.items()
                 if is_suspect(sizes, counts, threshold)}
        found.update(_site_of(key[1])
                     for key, (sizes, counts) in tracebacks.items()
                     if is_suspect(sizes, counts, threshold))
        return found

    def report(self, *, warmup, threshold, min_rounds, traceback_limit,
               title=None, directories=(), confirm=False, extended=0):
        """Return the LeakReport, as Recorder.report() does; with
        *confirm*, a site leaks only if its level still rose in the last
        third of the rounds too (_still_rising())."""
        rounds = self._measured
        tracebacks, sites = self._series()

        def leaks(sizes, counts):
            return (is_leak(sizes, counts, threshold, min_rounds)
                    and (not confirm or _still_rising(sizes, counts)))

        def biggest(site):
            return max((key for key in tracebacks
                        if _site_of(key[1]) == site),
                       key=lambda key: sum(tracebacks[key][0]))

        result = _leak_sites(sites, tracebacks, leaks, biggest, directories,
                             _blocks_stopped if confirm else None)
        return LeakReport(result, warmup=warmup, rounds=rounds,
                          threshold=threshold, min_rounds=min_rounds,
                          traceback_limit=traceback_limit,
                          sizes=self._round_sizes[:rounds],
                          counts=self._round_counts[:rounds], title=title,
                          extended=extended)


# --------------------------------------------------------------------------
# Results (public as tracemalloc.leaks.LeakSite and LeakReport)

def _plural(count, word):
    return f"{count} {word}{'' if count == 1 else 's'}"


def _per_round_count(count, rounds):
    """(blocks per round, exact): a whole number of blocks, the nearest to
    *count* / *rounds* (at least 1 when *count* is positive), and whether
    it is exact.  A site grows by whole objects; a mean such as 1.2 is
    said as "1, about" rather than as a fraction of an object."""
    whole, rest = divmod(count, rounds)
    if not rest:
        return whole, True
    nearest = round(count / rounds)
    if count > 0 and nearest < 1:
        nearest = 1
    return nearest, False


class LeakSite:
    """An allocation site whose memory kept rising while the workload ran.

    *sizes* and *counts* hold, for each measured round, how much the memory
    allocated at the site grew (bytes, blocks; negative when it shrank);
    *traceback* is the Traceback that contributed most of the growth,
    without the checker's frames.

    *retention* is what holds the site's live objects, a
    tracemalloc.retention.Retention (its *chains*, largest first, at most
    three), found by the leak check after its verdict; None when it was
    not searched for (LeakCheck(retention=False), a site of another domain
    than 0) or the search failed.  The objects are all those alive that
    were allocated at the site's line, the warm-up rounds' included.
    *retention_error* says why the search failed ("TypeError: ..."), else
    None: the report then says so under the site instead of a chain.
    *retention_skipped*, when the search did not run for the site, says
    why ("time budget": the pytest plugin's), else None: the report then
    says "holder search skipped: ..." in place of a chain.
    """

    __module__ = 'tracemalloc.leaks'
    __slots__ = ('filename', 'lineno', 'sizes', 'counts', 'traceback',
                 'domain', 'retention', 'retention_error',
                 'retention_skipped')

    def __init__(self, filename, lineno, sizes, counts, traceback, domain=0,
                 retention=None):
        self.filename = filename
        self.lineno = lineno
        self.sizes = sizes
        self.counts = counts
        self.traceback = traceback
        self.domain = domain
        self.retention = retention
        self.retention_error = None
        self.retention_skipped = None

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

    def as_dict(self):
        """The site as JSON-ready data (the schema of the JSON reports)."""
        return {
            "filename": self.filename,
            "lineno": self.lineno,
            "domain": self.domain,
            "size": self.size,
            "count": self.count,
            "sizes": list(self.sizes),
            "counts": list(self.counts),
            "rounds_grown": self.rounds_grown,
            "traceback": [[frame.filename, frame.lineno]
                          for frame in reversed(self.traceback)],
            "retention": (None if self.retention is None
                          else self.retention.as_dict()),
            "retention_error": self.retention_error,
            "retention_skipped": self.retention_skipped,
        }

    def format(self, frames=None, chains=None):
        """Return the site's report as a list of lines, without newlines.

        With *frames* (an int >= 2), a longer traceback shows its
        *frames* - 1 most recent frames and its oldest one, and says how
        many it left out.  Under the traceback, up to *chains* (None: all)
        of the *retention* chains, each as a "held by:" line followed by
        its count, size and types; with fewer chains than holders, a line
        says how many holders are not shown.
        """
        import linecache
        rounds = len(self.sizes)
        per_round_size = format_size(self.size / rounds)
        per_round_count, exact = _per_round_count(self.count, rounds)
        line = (f"{self.filename}:{self.lineno}: size={per_round_size}, "
                f"count={per_round_count} per round (")
        if not exact:
            line += (f"about: {_plural(self.count, 'block')} in "
                     f"{_plural(rounds, 'round')}; ")
        line += f"grew in {self.rounds_grown} of {rounds} rounds"
        if self.domain:
            line += f", domain {self.domain}"
        lines = [line + ")"]
        if (self.filename, self.lineno) == _CALL_LINE:
            lines.append("    (allocated by C code called directly as the "
                         "workload, on the checker's call line)")
        else:
            source = linecache.getline(self.filename, self.lineno).strip()
            if source:
                lines.append(f"    {source}")
        lines.append("  Traceback (most recent call first):")
        traceback = self.traceback
        if frames is None or len(traceback) <= frames:
            lines.extend("  " + text for text in
                         traceback.format(most_recent_first=True))
        else:
            frames = max(frames, 2)
            left_out = len(traceback) - frames
            lines.extend("  " + text for text in
                         traceback.format(frames - 1,
                                          most_recent_first=True))
            lines.append(f"      ... {_plural(left_out, 'frame')} left "
                         f"out ...")
            lines.extend("  " + text for text in traceback.format(
                -(len(traceback) - 1), most_recent_first=True))
        lines.extend(self.format_retention(chains))
        return lines

    def format_retention(self, chains=None):
        """The "held by:" lines of the site's *retention* (at most
        *chains* chains; None: all): none when it has no retention."""
        retention = self.retention
        if chains == 0:
            return []
        if retention is None:
            skipped = self.retention_skipped
            if skipped is not None:
                # The search did not run for it (the pytest plugin's
                # time budget): said, so that no chain is not taken for
                # "no holder".
                return [f"  holder search skipped: {skipped}"]
            if self.retention_error is None:
                return []
            # Said, not hidden: the verdict stands, the chain is unknown.
            return [f"  held by: unknown: the search failed "
                    f"({self.retention_error})"]
        lines = []
        shown = retention.chains if chains is None \
            else retention.chains[:chains]
        for chain in shown:
            lines.append(f"  held by: {chain.format()}")
            lines.append(f"      {chain.summary()}")
        if not retention.chains:
            # Only what the search checked (retention.Retention.no_chain).
            lines.append(f"  held by: {retention.no_chain()}")
        elif retention.holders > len(shown):
            others = _plural(retention.holders - len(shown), 'other holder')
            lines.append(f"  ({others})")
        return lines


class LeakReport:
    """The result of a leak check.

    *sites* lists the leaking LeakSite objects, largest growth first (empty
    when nothing leaked; a report is true when something leaked).  *sizes*
    and *counts* give, per measured round, the growth of all the workload's
    traced memory, leaking or not.
    """

    __module__ = 'tracemalloc.leaks'

    def __init__(self, sites, *, warmup, rounds, threshold, min_rounds,
                 traceback_limit, sizes, counts, title=None, extended=0):
        self.sites = sites
        self.extended = extended
        self.ignored = []           # (pattern, LeakSite) left out
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

    def as_dict(self):
        """The report as JSON-ready data: see "JSON reports" in
        Doc/library/tracemalloc.rst for the schema."""
        return {
            "title": self.title,
            "leaked": bool(self.sites),
            "warmup": self.warmup,
            "rounds": self.rounds,
            "extended": self.extended,
            "threshold": self.threshold,
            "min_rounds": self.min_rounds,
            "traceback_limit": self.traceback_limit,
            "sizes": list(self.sizes),
            "counts": list(self.counts),
            "sites": [site.as_dict() for site in self.sites],
            "ignored": [dict(site.as_dict(), pattern=pattern)
                        for pattern, site in self.ignored],
        }

    def format(self, limit=10, frames=None, more=None, chains=None):
        """Return the report as text: a summary line, then up to *limit*
        sites (None: all), each starting with a FILE:LINE: line and
        followed by its traceback, most recent call first (at most
        *frames* frames of it: see LeakSite.format()).  When sites or
        frames were left out, a last line says so, followed by *more* (text
        that says how to get the whole report) if given.  Each site shows
        up to *chains* (None: all) chains of what holds its objects
        (LeakSite.retention)."""
        what = f"{self.title}: " if self.title else ""
        rounds = _plural(self.rounds, 'round')
        warmup = _plural(self.warmup, 'warm-up round')
        if self.extended:
            warmup += (f"; {self.extended} of them added to confirm a "
                       f"suspect site")
        if self.ignored:
            warmup += (f"; {_plural(len(self.ignored), 'leaking site')} "
                       f"ignored by pattern")
        if not self.sites:
            return (f"tracemalloc: {what}no allocation site grew over "
                    f"{rounds} (after {warmup})")
        shown = self.sites if limit is None else self.sites[:limit]
        lines = [f"tracemalloc: {what}"
                 f"{_plural(len(self.sites), 'allocation site')} leaked: "
                 f"memory kept rising over {rounds} (after {warmup}; "
                 f"traceback limit {self.traceback_limit})"]
        for site in shown:
            lines.extend(site.format(frames, chains))
        rest = self.sites[len(shown):]
        cut = frames is not None and any(len(site.traceback) > frames
                                         for site in shown)
        if rest:
            size = sum(site.size for site in rest) / self.rounds
            lines.append(f"{_plural(len(rest), 'other leaking site')}: "
                         f"size={format_size(size)} per round")
        if (rest or cut) and more:
            lines.append(more)
        return "\n".join(lines)
