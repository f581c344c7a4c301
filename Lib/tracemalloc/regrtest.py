"""The tracemalloc side of regrtest's -R option (python -m test -R W:R).

With tracing on (``./python -X tracemalloc=25 -m test -R 3:3 test_x``), the
fork's Lib/test/libregrtest/refleak.py (patch 0006) asks a RefleakTracer
for a snapshot after each run of the test, and when its verdict is that the
test leaked, prints the allocation sites whose memory grew in every tracked
run, with their lines and tracebacks.  Between runs, the tracer holds no
memory block that regrtest counts (see RefleakTracer), so regrtest's own
verdict is left as it is; when that verdict is no leak, a site whose memory
grew in every tracked run still fails the test (leak_message()).

On a release build, which has no sys.gettotalrefcount(), -R is accepted when
tracing is on: it then checks memory blocks and file descriptors only.
"""

import gc
import os
import sys

import tracemalloc
from tracemalloc import _leakcore


def _harness_directories():
    """Directories of the code that runs a test: regrtest, test.support
    and unittest."""
    import unittest
    directories = {os.path.dirname(unittest.__file__)}
    for name in ('test.libregrtest', 'test.support'):
        module = sys.modules.get(name)
        if module is not None:
            directories.add(os.path.dirname(module.__file__))
    return directories


class RefleakTracer:
    """Snapshots of the traced memory after each run of a -R test.

    Inactive (every method does nothing) when tracing is off.

    regrtest counts memory blocks and references between runs, so the
    tracer must not hold any between runs either: after each snapshot, the
    state of its recorder (tracemalloc._leakcore.Recorder) is packed into
    one bytes object (big enough to bypass pymalloc, whose blocks regrtest
    counts) by Recorder.dumps(), every other object of the check is freed,
    and a full collection empties the free lists that they went to.  The
    only other object it keeps is the marker of a TracingGuard, allocated
    outside pymalloc too and kept from the first run to the last.
    """

    def __init__(self, test_name, warmups, runs):
        self.active = tracemalloc.is_tracing()
        self.test_name = test_name
        self.warmups = warmups
        self.runs = runs
        self._index = 0
        self._state = None
        self._report = None
        self._guard = None
        self._no_sites = None       # why the sites cannot be told
        if self.active:
            try:
                self._guard = _leakcore.TracingGuard()
            except _leakcore.LeakCheckError as exc:
                # Sampling: regrtest's counts still work (self.active lets
                # -R run on a release build), but the sites need exact
                # tracing.
                self._no_sites = str(exc)
                print(f"tracemalloc: {test_name}: no allocation sites: "
                      f"{exc}", file=sys.stderr, flush=True)
                return
            recorder = _leakcore.Recorder(runs)
            if warmups == 0:
                # The base is the memory before the first run.
                recorder.record(_leakcore.Ownership(),
                                tracemalloc._get_traces())
            else:
                # What a first snapshot allocates for good (the engine's
                # and the interpreter's one-time caches) must not count in
                # a run.
                _leakcore.workload_totals(_leakcore.Ownership(),
                                          tracemalloc._get_traces(), {})
            self._state = recorder.dumps()
            del recorder
            gc.collect()

    def snapshot(self):
        """Take a snapshot; call it after each run, after regrtest's cleanup
        and garbage collection, and before regrtest reads its counts.
        Return the number of memory blocks and of references that the
        tracer holds between runs: (0, 0), as it holds none (see the
        class).

        When the test stopped, cleared or restarted tracing, the tracer
        cannot tell the sites: it turns inactive, and report() says why.
        regrtest's own verdict does not depend on it.

        First, tracing or not, the package's own caches of label sets
        are emptied, as regrtest's cleanup empties the stdlib's: a test
        that labels each call with a new value (a request id, a task's
        name) fills them, and regrtest would count a leak."""
        labels = sys.modules.get('tracemalloc._labels')
        if labels is not None:
            labels._clear_caches()
        if self.active and self._no_sites is None:
            try:
                self._guard.check()
            except _leakcore.LeakCheckError as exc:
                self.active = False
                self._no_sites = str(exc)
                self._guard = self._state = None
                return 0, 0
            # The snapshots after the warm-up runs but the last are not
            # recorded: the one after the last warm-up run is the base.
            if self._index >= self.warmups - 1:
                recorder = _leakcore.Recorder.loads(self._state)
                recorder.record(_leakcore.Ownership(),
                                tracemalloc._get_traces())
                self._state = recorder.dumps()
                del recorder
                gc.collect()
            self._index += 1
        return 0, 0

    def _leak_report(self):
        """The LeakReport of the tracked runs (computed once), or None."""
        if self._report is None and self.active and not self._no_sites:
            recorder = _leakcore.Recorder.loads(self._state)
            self._state = None
            # regrtest's leak is growth in every run: so are its sites.
            self._report = recorder.report(
                warmup=self.warmups, threshold=1, min_rounds=self.runs,
                traceback_limit=tracemalloc.get_traceback_limit(),
                title=self.test_name,
                directories=_harness_directories())
            if self._report:
                # A leak: what holds each site's objects, while their
                # traces are still there (LeakSite.retention).
                from tracemalloc import leaks
                leaks._find_retention(self._report.sites)
        return self._report

    def leak_message(self):
        """When some allocation site's memory grew in every tracked run,
        the line regrtest prints for a leak, in regrtest's own form
        ("TEST leaked [...] traced bytes at N allocation sites"); else
        None.  Call it after the last run, and only when regrtest's own
        counts found no leak: the counts of all memory blocks can miss a
        site that grows in every run while other blocks come and go (on
        3.11, an IsolatedAsyncioTestCase frees blocks of its event loop in
        every other run).

        Only with 3 tracked runs or more (growth in each of one or two
        runs is what a cache filling or a lazy import gives too), and only
        on 3.11: from 3.12 on, the strings that a test interns are
        immortal and new in each run by design, and regrtest's own count
        leaves them out, which the sites cannot (test_traceback grew so)."""
        if self.runs < 3 or sys.version_info >= (3, 12):
            return None
        report = self._leak_report()
        if not report:
            return None
        sizes = [sum(column) for column
                 in zip(*(site.sizes for site in report.sites))]
        sites = len(report.sites)
        return (f"{self.test_name} leaked {sizes} traced bytes "
                f"at {sites} allocation site{'' if sites == 1 else 's'}, "
                f"sum={sum(sizes)} (tracemalloc)")

    def report(self, file=None):
        """Print the sites that grew in every tracked run (call once, when
        regrtest found a leak); return the LeakReport (None when the tracer
        is inactive, or turned inactive: then it says why)."""
        if self._no_sites:
            print(f"tracemalloc: {self.test_name}: no allocation sites: "
                  f"{self._no_sites}", file=file or sys.stderr, flush=True)
            return None
        report = self._leak_report()
        if report is None:
            return None
        print(report.format(), file=file or sys.stderr, flush=True)
        return report
