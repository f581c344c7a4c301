"""The lean paths of exact tracing and their guard word.

The hooks of the mem and obj domains take a lean path (the allocator, the
engine lock, the node, the store) while one guard word says that nothing
the general path tests per call can differ: exact mode, one GIL, no native
frames on every trace (Doc/internals/tracemalloc-engine.rst, "The lean
paths").  These tests check that the word follows each of its inputs, and
that the lean and the general paths give the same traces, peak and
allocation totals: the same program runs with the lean paths and with
_TRACEMALLOC_GENERAL_PATH=1, which keeps them off.
"""

import json
import os
import subprocess
import sys
import textwrap
import unittest

from test import support
from test.support import import_helper, os_helper

_testtracemalloc = import_helper.import_module('_testtracemalloc')
import tracemalloc


def lean():
    return _testtracemalloc.engine_stats()["lean"]


class GuardWordTest(unittest.TestCase):

    def setUp(self):
        if tracemalloc.is_tracing():
            self.skipTest("tracing already (PYTHONTRACEMALLOC)")
        if os.environ.get("_TRACEMALLOC_GENERAL_PATH"):
            self.skipTest("the lean paths are forced off here")
        self.addCleanup(tracemalloc.stop)

    def test_exact_mode(self):
        self.assertEqual(lean(), 0)
        tracemalloc.start(1)
        self.assertEqual(lean(), 1)
        tracemalloc.clear_traces()
        self.assertEqual(lean(), 1)
        tracemalloc.stop()
        self.assertEqual(lean(), 0)
        tracemalloc.start(25, allocations=True)
        self.assertEqual(lean(), 1)

    def test_sampling_mode(self):
        tracemalloc.start(1, sample=4096)
        self.assertEqual(lean(), 0)
        tracemalloc.clear_traces()
        self.assertEqual(lean(), 0)

    def test_native_frames_of_every_trace(self):
        try:
            tracemalloc.start(3, native=True, native_frames="all")
        except (RuntimeError, OSError, TypeError, ValueError) as exc:
            self.skipTest(f"no native frames here: {exc}")
        self.assertEqual(lean(), 0)
        tracemalloc.stop()
        try:
            tracemalloc.start(3, native=True, native_frames=True)
        except (RuntimeError, OSError, TypeError, ValueError) as exc:
            self.skipTest(f"no native frames here: {exc}")
        # Native frames of native traces only: the Python domains' hooks
        # are untouched.
        self.assertEqual(lean(), 1)

    @support.requires_subprocess()
    def test_forced_off(self):
        out = subprocess.run(
            [sys.executable, "-X", "tracemalloc", "-c",
             "import _testtracemalloc; "
             "print(_testtracemalloc.engine_stats()['lean'])"],
            env=dict(os.environ, _TRACEMALLOC_GENERAL_PATH="1"),
            capture_output=True, text=True, check=True)
        self.assertEqual(out.stdout.split(), ["0"])

    @support.requires_subprocess()
    def test_started_at_startup(self):
        # Python's own swaps of the raw allocator during start-up leave
        # the hooks' fast slot lookups and the lean paths on.
        for option in (["-X", "tracemalloc"], ["-X", "tracemalloc=25"]):
            with self.subTest(option=option):
                out = subprocess.run(
                    [sys.executable, *option, "-c",
                     "import _testtracemalloc; "
                     "s = _testtracemalloc.engine_stats(); "
                     "print(s['lean'], s['blocks_exact'])"],
                    capture_output=True, text=True, check=True)
                self.assertEqual(out.stdout.split(), ["1", "1"])

    @support.requires_subprocess()
    def test_interpreter_with_its_own_gil(self):
        try:
            import _interpreters
        except ImportError:
            self.skipTest("no interpreter with a GIL of its own (3.13+)")
        code = textwrap.dedent("""
            import tracemalloc, _interpreters, _testtracemalloc
            tracemalloc.start(1)
            before = _testtracemalloc.engine_stats()['lean']
            interp = _interpreters.create(_interpreters.new_config('isolated'))
            after = _testtracemalloc.engine_stats()['lean']
            _interpreters.destroy(interp)
            tracemalloc.stop(); tracemalloc.start(1)
            print(before, after, _testtracemalloc.engine_stats()['lean'])
        """)
        out = subprocess.run([sys.executable, "-c", code],
                             capture_output=True, text=True, check=True)
        # Never on again once an interpreter had a GIL of its own.
        self.assertEqual(out.stdout.split(), ["1", "0", "0"])


# A deterministic program that meets every lean path: pool and large
# blocks, calloc, realloc, free-list reuse on one line and across lines,
# calls, generators, a traced block freed, a peak, and a user allocator
# installed while tracing (its blocks leave the pool-slot fast lookup).
PROGRAM = textwrap.dedent("""
    import json, sys, tracemalloc, _testtracemalloc
    tracemalloc.start(int(sys.argv[1]), allocations=sys.argv[2] == "1")

    def make(n):
        return [object() for _ in range(n)]

    def floats(n):
        a, b = 1.5, 2.25
        out = []
        for i in range(n):
            x = a * b + i
            y = a + b * i
            out.append(x if i % 3 else y)
        return out

    def gen(n):
        for i in range(n):
            yield float(i) * 0.5

    keep = []
    keep.append(make(300))
    keep.append(floats(500))
    keep.append(list(gen(400)))
    keep.append([bytes(600 + i) for i in range(50)])
    keep.append(bytearray(10000))
    grow = bytearray(10)
    for i in range(200):
        grow += b"x" * 37
    keep.append(grow)
    keep.append({i: str(i) for i in range(300)})
    temp = [bytes(1000) for _ in range(500)]
    del temp
    keep.append(_testtracemalloc.raw_backed_allocation(100))
    keep.append(tuple(range(100)))
    snap = tracemalloc.take_snapshot()
    peak = tracemalloc.take_snapshot(peak=True)
    def rows(s):
        return sorted([list(map(str, st.traceback)), st.size, st.count]
                      for st in s.statistics("traceback")
                      if st.traceback[0].filename == __file__)
    out = {"traces": rows(snap), "peak": rows(peak)}
    if sys.argv[2] == "1":
        out["allocated"] = rows(tracemalloc.take_snapshot(allocated=True))
    print(json.dumps(out))
""")


@support.requires_subprocess()
class SameAnswersTest(unittest.TestCase):
    """The lean paths and the general path give the same answers."""

    def run_program(self, general, nframe, allocations, allocator=None):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("PYTHON")
               and k != "_TRACEMALLOC_GENERAL_PATH"}
        # The same string hashes in both runs: dicts and sets resize alike.
        env["PYTHONHASHSEED"] = "0"
        if general:
            env["_TRACEMALLOC_GENERAL_PATH"] = "1"
        if allocator:
            env["PYTHONMALLOC"] = allocator
        with open(os_helper.TESTFN, "w") as f:
            f.write(PROGRAM)
        self.addCleanup(os_helper.unlink, os_helper.TESTFN)
        proc = subprocess.run(
            [sys.executable, os_helper.TESTFN, str(nframe),
             "1" if allocations else "0"],
            env=env, capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return json.loads(proc.stdout)

    def check(self, nframe, allocations, allocator=None):
        lean = self.run_program(False, nframe, allocations, allocator)
        general = self.run_program(True, nframe, allocations, allocator)
        self.assertTrue(lean["traces"])
        self.assertEqual(lean, general)

    def test_exact_one_frame(self):
        self.check(1, False)

    def test_exact_many_frames_with_allocations(self):
        self.check(25, True)

    def test_allocators(self):
        for allocator in ("malloc", "debug"):
            with self.subTest(allocator=allocator):
                self.check(5, False, allocator)


if __name__ == "__main__":
    unittest.main()
