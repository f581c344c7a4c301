"""The tracemalloc side of regrtest's -R option (python -m test -R W:R).

With tracing on (``./python -X tracemalloc=25 -m test -R 3:3 test_x``), the
fork's Lib/test/libregrtest/refleak.py (patch 0006) asks a RefleakTracer
for a snapshot after each run of the test, and when its verdict is that the
test leaked, prints the allocation sites whose memory grew in every tracked
run, with their lines and tracebacks.  regrtest's verdict itself is left as
it is: between runs, the tracer holds no memory block that regrtest counts
(see RefleakTracer).

On a release build, which has no sys.gettotalrefcount(), -R is accepted when
tracing is on: it then checks memory blocks and file descriptors only.
"""

import gc
import marshal
import os
import sys

import tracemalloc
from tracemalloc import Traceback, leaks


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
    state of its leak check is packed into one bytes object (big enough to
    bypass pymalloc, whose blocks regrtest counts) with marshal, every
    object of the check is freed, and a full collection empties the free
    lists that they went to.
    """

    # The LeakCheck attributes that live from one round to the next.
    _STATE = ('_previous_sites', '_changes', '_measured', '_round_sizes',
              '_round_counts', '_first_totals', '_last_totals')

    def __init__(self, test_name, warmups, runs):
        self.active = tracemalloc.is_tracing()
        self.test_name = test_name
        self.warmups = warmups
        self.runs = runs
        self._index = 0
        self._state = None
        self._report = None
        if self.active:
            check = self._new_check()
            check._begin()
            self._freeze(check)
            # What a first snapshot allocates for good (the engine's and
            # the interpreter's one-time caches) must not count in a run.
            leaks._workload_totals(leaks._Ownership(),
                                   tracemalloc._get_traces(), {})
            del check
            gc.collect()

    def _new_check(self):
        check = leaks.LeakCheck(warmup=self.warmups, rounds=self.runs,
                                min_rounds=self.runs, cleanup=False,
                                title=self.test_name)
        # regrtest collected the garbage just before.
        check._collect_garbage = False
        return check

    def _freeze(self, check):
        self._state = marshal.dumps(tuple(getattr(check, name)
                                          for name in self._STATE))

    def _thaw(self):
        check = self._new_check()
        check._ownership = leaks._Ownership()
        check._canonical = {}
        for name, value in zip(self._STATE, marshal.loads(self._state)):
            setattr(check, name, value)
        return check

    def snapshot(self):
        """Take a snapshot; call it after each run, after regrtest's cleanup
        and garbage collection, and before regrtest reads its counts.
        Return the number of memory blocks and of references that the
        tracer holds between runs: (0, 0), as it holds none (see the
        class)."""
        if self.active:
            check = self._thaw()
            check._end_round(self._index)
            self._index += 1
            self._freeze(check)
            del check
            gc.collect()
        return 0, 0

    def report(self, file=None):
        """Print the sites that grew in every tracked run (call once, when
        regrtest found a leak); return the LeakReport."""
        if not self.active:
            return None
        if self._report is None:
            self._report = self._thaw()._finish()
            self._state = None
            self._trim_harness_frames(self._report)
        print(self._report.format(), file=file or sys.stderr, flush=True)
        return self._report

    @staticmethod
    def _trim_harness_frames(report):
        # The test's own frames end where the harness's begin (unittest
        # calling the test method): the rest is the same for every
        # allocation of the test.
        directories = _harness_directories()
        for site in report.sites:
            frames = tuple(reversed(site.traceback._frames))  # most recent
            end = 1                                           # first
            while (end < len(frames)
                   and os.path.dirname(frames[end][0]) not in directories):
                end += 1
            site.traceback = Traceback(frames[:end])
