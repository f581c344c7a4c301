"""Leak checking: run code in rounds, report the allocation sites that grow.

A leak check runs a workload W times to warm up (caches fill, modules get
imported, strings get interned), then R more times, reading after each of
these rounds the traced memory of every call context (the engine's totals,
not a snapshot), and E more times when some site is suspect after them, to
confirm it (adaptive rounds: "Adaptive rounds" in
Doc/library/tracemalloc.rst).  An allocation site -- the file and
line that allocated the memory -- leaks when the level of the memory still
allocated there kept rising over the measured rounds: it rose by at least a
threshold per round on average, by more than twice the most it ever fell,
and its lowest level rose from each third of the rounds to the next (see
_leakcore.is_leak()).  Sites are reported largest first, each with the
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

* memory that grows only during the warm-up rounds, or once in the
  measured rounds (a dict that resizes once, a cache filling up);
* a level that goes up and down: a bounded buffer or cache that gives back
  what it took;
* memory of the caches that clear_caches() empties before each snapshot;
* the allocations of this package (the checker and the snapshots it holds):
  a trace is the checker's when the most recent of its frames that belongs
  to this package is not the line that calls the workload (see
  _leakcore.Ownership).

A check raises LeakCheckError instead of giving a verdict when tracing was
stopped, cleared or restarted while it ran, or when its rounds did not all
run.
"""

import functools
import gc
import linecache
import sys
from time import perf_counter as _clock

import tracemalloc
from tracemalloc import _leakcore
from tracemalloc._leakcore import (DEFAULT_NFRAME, LeakCheckError,
                                   LeakReport, LeakSite)

__all__ = ['check', 'assert_no_leaks', 'clear_caches', 'LeakCheck',
           'LeakReport', 'LeakSite', 'LeakError', 'LeakCheckError',
           'DEFAULT_WARMUP', 'DEFAULT_ROUNDS', 'DEFAULT_EXTEND',
           'DEFAULT_THRESHOLD',
           'DEFAULT_NFRAME']

DEFAULT_WARMUP = 1
DEFAULT_ROUNDS = 4              # screening rounds: enough when nothing
                                # looks like a leak (4: a leak in every
                                # other round grows twice, a step once)
DEFAULT_EXTEND = 8              # rounds added when some site is suspect
DEFAULT_THRESHOLD = 1           # bytes per measured round, on average
MAX_NFRAME = 65535              # the most frames tracemalloc.start() takes
# How many times a check measures again from a new base when the engine
# renumbered its call contexts during a round (see _leakcore.LiveRecorder).
MAX_RESTARTS = 3


class LeakError(AssertionError):
    """Raised by assert_no_leaks() and friends.

    The message is *message*, by default the whole report
    (``report.format()``); *report* is the LeakReport.
    """

    def __init__(self, report, message=None):
        super().__init__(report.format() if message is None else message)
        self.report = report


# --------------------------------------------------------------------------
# Noise control

def clear_caches():
    """Empty the interpreter's, the stdlib's and this package's caches
    that refill on use.

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
    # The package's own caches of label sets (tracemalloc.label()).
    labels = modules.get('tracemalloc._labels')
    if labels is not None:
        labels._clear_caches()
    sys._clear_type_cache()


# --------------------------------------------------------------------------
# The check

class LeakCheck:
    """Run a workload in rounds and find the allocation sites that grow.

    Run a callable with run(), or a block of code by iterating over the
    check (each iteration is one round); as a context manager, the check
    raises LeakError at the end of the with block when something leaked,
    and LeakCheckError when its rounds did not all run (the loop was left
    with break, or never entered).  The report is the *report* attribute
    once the rounds are done.

    *warmup* rounds run first and are not measured; then *rounds* rounds
    are, with a snapshot after each.  A site leaks when the level of its
    memory kept rising over them (see tracemalloc._leakcore.is_leak() and
    "How the checker decides" in Doc/library/tracemalloc.rst), by at least
    *threshold* bytes per round on average, and, when *min_rounds* is given,
    when it grew in at least *min_rounds* rounds.  When tracing is off, the
    check starts it with *nframe* frames per traceback and stops it at the
    end.  With *cleanup* true, clear_caches() runs before each snapshot; a
    callable *cleanup* runs after it.

    The check raises LeakCheckError, with no verdict, when tracing was
    stopped, cleared (clear_traces()) or restarted while it ran.

    *extend* rounds are added when some site is suspect after the *rounds*
    (see "Adaptive rounds" in Doc/library/tracemalloc.rst); 0: never.
    With *screen* (a count, at most *rounds*), the check ends after the
    warm-up and *screen* measured rounds when no site of the workload grew
    in them, ignored sites included: nothing can be a leak, and the
    verdict is clean (see "The screen" in Doc/library/tracemalloc.rst).
    Otherwise it goes on as without a screen.  None or 0: no screen.
    With *freeze* true, the objects alive when the check starts are frozen
    (gc.freeze()) until it ends, so that its collections walk only what
    was made since.  *ignore* lists fnmatch patterns of "FILE:LINE" (or
    "FILE"): a leaking site that matches one is left out of the report's
    sites, and listed in its *ignored* attribute with the pattern.

    *harness_directories* names the directories of a harness that runs
    the workload with threads of its own (pytest-xdist's execnet, which
    receives messages from its controller while a test runs): an
    allocation whose traceback reaches one of them and none of this
    package's lines is the harness's, not the workload's.  Other threads'
    allocations are the workload's (it may have started them).

    Only per-traceback totals are kept between rounds, never a whole
    snapshot, unless *keep_snapshots* is true: then *first_snapshot* and
    *last_snapshot* are Snapshot objects of the workload's traces at the
    start and at the end of the measured rounds (for an HTML report).
    """

    def __init__(self, *, warmup=DEFAULT_WARMUP, rounds=DEFAULT_ROUNDS,
                 threshold=DEFAULT_THRESHOLD, min_rounds=None,
                 nframe=DEFAULT_NFRAME, cleanup=True, title=None,
                 keep_snapshots=False, harness_directories=(),
                 extend=DEFAULT_EXTEND, freeze=True, ignore=(),
                 retention=True, screen=None):
        for name, value in (("warmup", warmup), ("rounds", rounds),
                            ("extend", extend), ("nframe", nframe),
                            ("min_rounds", min_rounds), ("screen", screen)):
            # Counts: 2.0 or True would fail later, in the middle of a run.
            if value is not None and (type(value) is bool
                                      or not isinstance(value, int)):
                raise TypeError(f"{name} must be an int, not "
                                f"{type(value).__name__}")
        if warmup < 0:
            raise ValueError("warmup must be >= 0")
        if rounds < 1:
            raise ValueError("rounds must be >= 1")
        if extend < 0:
            raise ValueError("extend must be >= 0")
        if screen is not None and screen < 0:
            raise ValueError("screen must be >= 0")
        if min_rounds is None:
            min_rounds = 1
        if not 1 <= min_rounds <= rounds:
            raise ValueError("min_rounds must be between 1 and rounds")
        if threshold < 0:
            raise ValueError("threshold must be >= 0")
        if not 1 <= nframe <= MAX_NFRAME:
            raise ValueError(f"nframe must be between 1 and {MAX_NFRAME}")
        self.warmup = warmup
        self.rounds = rounds
        self.extend = extend
        self.threshold = threshold
        self.min_rounds = min_rounds
        self.nframe = nframe
        self.cleanup = cleanup
        self.title = title
        self.keep_snapshots = keep_snapshots
        self.freeze = freeze
        # True, False, or a callable that searches the sites of a report
        # itself (the pytest plugin's: the sites it shows, shared between
        # tests, within a time budget); it runs while tracing holds the
        # sites' traces.
        self.retention = retention if callable(retention) else bool(retention)
        # The screen ends the check early only when it comes before the
        # last measured round.
        self.screen = screen if screen and screen < rounds else 0
        if isinstance(ignore, str):
            ignore = (ignore,)
        ignore = tuple(ignore)
        if not all(isinstance(pattern, str) and pattern
                   for pattern in ignore):
            raise ValueError("ignore must be a list of patterns (non-empty "
                             "strings such as 'pkg/cache.py:*')")
        self.ignore = ignore
        self.harness_directories = tuple(harness_directories)
        self.first_snapshot = self.last_snapshot = None
        self.report = None
        self.extended = False
        self.screened = False
        # Seconds spent by the check's own work, by kind (see _timed()):
        # "collect" (the collection before each reading), "totals" (the
        # reading), "caches" (clear_caches()), "freeze" (gc.freeze() and
        # unfreeze()), "search" (the holder search).
        self.timings = {}
        self._iterator = None
        self._started_tracing = False
        self._base_index = -1
        self._target = rounds

    @property
    def planned_rounds(self):
        """How many times the workload runs, as planned now: warmup +
        rounds at first, extend more once a site is suspect (and more
        again when the check had to measure from a new base)."""
        return self._base_index + 1 + self._target

    # Running

    def run(self, func):
        """Run *func()* warmup + rounds times, or extend times more when a
        site is suspect after them; return the LeakReport.

        A coroutine function runs to completion in each round, with
        asyncio.run(); a generator function or an asynchronous generator
        function is exhausted: their bodies are the workload, not the
        making of a coroutine or generator object that nothing runs.
        """
        func = _completing(func)
        try:
            self._begin()
            index = 0
            while index < self.planned_rounds:
                # The untraced blocks of what existed before tracing
                # started must not reach this round from the free lists,
                # round after round.  (What the checker freed since the
                # last round, a snapshot's trace tuples, the round's
                # changes, would be traced at the workload's line, as
                # objects of its own: emptied too, so that each round
                # starts alike.)
                _leakcore.clear_free_lists()
                _leakcore.call_workload(func)
                self._end_round(index)
                index += 1
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
        try:
            self._begin()
            index = 0
            while index < self.planned_rounds:
                _leakcore.clear_free_lists()
                yield index
                self._end_round(index)
                index += 1
            self.report = self._finish()
        finally:
            self._stop_tracing()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if self._iterator is not None:
            self._iterator.close()
        if exc_type is not None:
            return False
        if self.report is None:
            raise LeakCheckError("the leak check did not run its rounds "
                                 "(its loop was never entered, or left "
                                 "early): no verdict")
        if self.report:
            raise LeakError(self.report)
        return False

    # Rounds

    def _begin(self):
        self.report = None
        self.extended = False
        self.screened = False
        self.timings = {}
        self._base_index = -1
        self._target = self.rounds
        # The screen's measured rounds: one more when something of the
        # workload grew during the warm-up (see _end_screen()).
        self._screen_at = self.screen
        self._warmup_grew = None
        if not tracemalloc.is_tracing():
            tracemalloc.start(self.nframe)
            self._started_tracing = True
        self._guard = _leakcore.TracingGuard()
        self._ownership = _leakcore.Ownership(self.harness_directories)
        start = _clock()
        self._freeze()
        self._timed("freeze", start)
        if _leakcore.live_totals_available():
            self._recorder = _leakcore.LiveRecorder()
        else:
            # No live totals: a snapshot per round, and no extension.
            self._recorder = _leakcore.Recorder(self.rounds)
        if self.screen and self.warmup and isinstance(
                self._recorder, _leakcore.LiveRecorder):
            # A reading before the warm-up, for the screen to know what
            # the warm-up grew (not a measured round).
            start = _clock()
            self._recorder.record(self._ownership)
            self._warmup_grew = False
            self._timed("totals", start)
        if self.warmup == 0:
            self._snapshot(-1)
        else:
            self._base_index = self.warmup - 1

    def _end_round(self, index):
        # (Every round, warm-up or measured, starts from emptied free
        # lists: see run() and _iterate().)
        if index >= self.warmup - 1:
            self._snapshot(index)

    def _snapshot(self, index):
        self._guard.check()
        start = _clock()
        if self.cleanup:
            clear_caches()
            if callable(self.cleanup):
                self.cleanup()
        start = self._timed("caches", start)
        # The finalizers that this collection runs (__del__, weakref
        # callbacks) are the workload's: it runs on the workload's call
        # line.  Automatic collections stay off while the checker works,
        # so that no finalizer runs under the checker's own lines.  The
        # free lists are emptied first, as at the start of each round, so
        # that every snapshot sees them alike (the first one too).
        _leakcore.flush_std_streams()
        _leakcore.clear_free_lists()
        _leakcore.call_workload(gc.collect)
        start = self._timed("collect", start)
        collecting = gc.isenabled()
        gc.disable()
        try:
            self._guard.check()
            if self.keep_snapshots:
                traces = tracemalloc._get_traces()
                is_workload = self._ownership.is_workload
                snapshot = tracemalloc.Snapshot(
                    [trace for trace in traces if is_workload(trace[2])],
                    tracemalloc.get_traceback_limit())
                del traces
                if self.first_snapshot is None:
                    self.first_snapshot = snapshot
                self.last_snapshot = snapshot
                del snapshot
            recorder = self._recorder
            if (isinstance(recorder, _leakcore.LiveRecorder)
                    and self._warmup_grew is not None
                    and index == self.warmup - 1):
                # The end of the warm-up, measured from before it.
                grew = (not recorder.record(self._ownership)
                        or bool(recorder.grown()))
                self._warmup_grew = grew
                recorder.rebase()
            elif isinstance(recorder, _leakcore.LiveRecorder):
                if not recorder.record(self._ownership):
                    # Call contexts renumbered: measure again from here.
                    if recorder.restarts > MAX_RESTARTS:
                        raise LeakCheckError(
                            f"tracemalloc renumbered its call contexts "
                            f"during {recorder.restarts} rounds of the "
                            f"leak check: no verdict")
                    self._base_index = index
                    if self.keep_snapshots:
                        self.first_snapshot = self.last_snapshot
                elif self.screen and recorder.measured == self._screen_at:
                    self._end_screen(recorder)
                elif (not self.extended and self.extend
                        and recorder.measured == self.rounds
                        and self._suspects(recorder)):
                    # Some site may leak: more rounds to tell.
                    self.extended = True
                    self._target = self.rounds + self.extend
            else:
                # The raw traces are dropped before the next round: only
                # the recorder's totals stay alive between rounds.
                traces = tracemalloc._get_traces()
                recorder.record(self._ownership, traces)
                del traces
            self._timed("totals", start)
            # Freed, the checker's objects (trace tuples, the changes of
            # the round) go to the free lists: the next round starts by
            # emptying them.
        finally:
            if collecting:
                gc.enable()

    def _end_screen(self, recorder):
        """The screen's verdict, after its measured rounds: when nothing
        of the workload grew in them, the check ends, clean; when
        something grew, the check goes on to its whole rounds.  A rerun
        that grew nothing after a warm-up that grew (a cache filled on the
        first call, or a leak on every other call whose measured call was
        one without) gets one more measured round first."""
        if recorder.grown():
            return                      # the whole rounds
        if (self._warmup_grew and self._screen_at == self.screen
                and self._screen_at + 1 < self.rounds):
            self._screen_at += 1
            return
        # Nothing of the workload grew: no site can leak.
        self.screened = True
        self._target = self._screen_at

    def _timed(self, kind, start):
        """Add the time since *start* to timings[*kind*]; return now."""
        now = _clock()
        self.timings[kind] = self.timings.get(kind, 0.0) + now - start
        return now

    def _freeze(self):
        # The objects that exist when the check starts (the harness's,
        # the modules', pytest's) go to the collector's permanent
        # generation until it ends: the collection before each snapshot
        # then walks only what was made since, and a round's cost does not
        # grow with the process's heap.  Not when the program froze
        # objects itself (it would be unfrozen with them).
        self._froze = False
        if self.freeze and gc.get_freeze_count() == 0:
            gc.freeze()
            self._froze = True

    # (filename, lineno) -> the location that ignore patterns match: the
    # one the report shows (the pytest plugin names a doctest's example
    # by its file and line).
    _locate = None

    def _ignored(self, filename, lineno):
        if self._locate is not None:
            filename, lineno = self._locate(filename, lineno)
        return _leakcore.ignore_pattern(filename, lineno, self.ignore)

    def _suspects(self, recorder):
        return [site for site in recorder.suspects(self.threshold)
                if self._ignored(site[0], site[1]) is None]

    def _measured_min_rounds(self):
        """min_rounds over the rounds measured: when the check added
        rounds, min_rounds scales with them (rounded up), so that
        min_rounds=rounds still means every measured round.  The
        default, 1, stays 1."""
        measured = self._recorder.measured
        if self.min_rounds <= 1 or measured <= self.rounds:
            return self.min_rounds
        return min(measured, -(-self.min_rounds * measured // self.rounds))

    def _stop_tracing(self):
        if getattr(self, '_froze', False):
            self._froze = False
            start = _clock()
            gc.unfreeze()
            self._timed("freeze", start)
        if self._started_tracing:
            self._started_tracing = False
            tracemalloc.stop()

    def _finish(self):
        self._guard.check()
        options = dict(warmup=self.warmup, threshold=self.threshold,
                       min_rounds=self._measured_min_rounds(),
                       traceback_limit=tracemalloc.get_traceback_limit(),
                       title=self.title)
        if isinstance(self._recorder, _leakcore.LiveRecorder):
            options.update(confirm=self.extended,
                           extended=self.extend if self.extended else 0)
        report = self._recorder.report(**options)
        if self.screened:
            # No site of the workload grew in the screen's runs: clean.
            report.sites = []
        if self.ignore:
            kept = []
            for site in report.sites:
                pattern = self._ignored(site.filename, site.lineno)
                if pattern is None:
                    kept.append(site)
                else:
                    report.ignored.append((pattern, site))
            report.sites = kept
        self._recorder = self._ownership = self._guard = None
        if report.sites and self.retention:
            # The search walks gc.get_objects(), which leaves out the
            # frozen objects: the containers that existed before the
            # check (a module's global dict or list) would not be seen.
            start = _clock()
            if self._froze:
                self._froze = False
                gc.unfreeze()
            start = self._timed("freeze", start)
            if callable(self.retention):
                self.retention(report)
            else:
                _find_retention(report.sites)
            self._timed("search", start)
        return report


# At most this many chains per leaking site (LeakSite.retention).
RETENTION_CHAINS = 3


def _find_retention(sites):
    """Set the *retention* of each of *sites* (LeakSite objects of a leak
    verdict) that is in domain 0, while tracing still holds their traces;
    None when the search cannot run (sampling mode) or fails."""
    from tracemalloc import retention
    if not tracemalloc.is_tracing() or tracemalloc.get_sample() is not None:
        return
    collecting = gc.isenabled()
    gc.disable()
    try:
        for site in sites:
            if site.domain != 0:
                continue
            try:
                site.retention = retention.site_retention(
                    site, max_chains=RETENTION_CHAINS)
            except Exception as exc:
                # The verdict stands; the report says that the chain is
                # unknown and why (LeakSite.retention_error).
                site.retention = None
                site.retention_error = (f"{type(exc).__name__}: "
                                        f"{exc}")[:200]
    finally:
        if collecting:
            gc.enable()


def _completing(func):
    """*func*, or a callable that runs the body of the coroutine function,
    generator function or asynchronous generator function *func* to its
    end (see LeakCheck.run())."""
    import inspect
    if inspect.iscoroutinefunction(func):
        return functools.partial(_run_coroutine, func)
    if inspect.isgeneratorfunction(func):
        return functools.partial(_exhaust, func)
    if inspect.isasyncgenfunction(func):
        return functools.partial(_run_coroutine, functools.partial(
            _exhaust_async, func))
    # Any other callable (an object with an async __call__, a lambda that
    # returns a coroutine) is known by what its call returns.
    return functools.partial(_completing_result, func)


def _completing_result(func):
    """Call *func()*; run to its end the awaitable, generator or
    asynchronous generator that the call returned, as for a coroutine
    function."""
    result = _leakcore.call_workload(func)
    if result is None:
        return None
    import inspect
    if inspect.iscoroutine(result):
        import asyncio
        return _leakcore.call_workload(asyncio.run, result)
    if inspect.isawaitable(result):
        import asyncio
        return _leakcore.call_workload(asyncio.run, _awaited(result))
    if inspect.isgenerator(result):
        return _leakcore.call_workload(_drain, result)
    if inspect.isasyncgen(result):
        import asyncio
        return _leakcore.call_workload(asyncio.run, _drain_async(result))
    return result


@_leakcore.calls_workload
async def _awaited(awaitable):
    return await awaitable


@_leakcore.calls_workload
def _drain(generator):
    for _ in generator:
        pass


@_leakcore.calls_workload
async def _drain_async(generator):
    async for _ in generator:
        pass


@_leakcore.calls_workload
def _run_coroutine(func):
    import asyncio
    return asyncio.run(func())


@_leakcore.calls_workload
def _exhaust(func):
    for _ in func():
        pass


@_leakcore.calls_workload
async def _exhaust_async(func):
    async for _ in func():
        pass


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
