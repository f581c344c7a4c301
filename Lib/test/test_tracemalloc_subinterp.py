"""Tracing while subinterpreters run on several threads at once.

Since PEP 684 (CPython 3.12) an interpreter may have a GIL of its own
(`_interpreters.create()` makes such "isolated" interpreters by default,
with their own pymalloc state too), so several threads can each hold a GIL
at the same time.  The engine gives its fast side to the main GIL's holder
only; the threads of isolated interpreters enter as callers without the GIL
and keep their blocks in the table (Doc/internals/tracemalloc-bases.rst).

Each scenario runs in a child process (the lock's mode is per process),
allocates in several interpreters on several threads at once while the
main interpreter allocates too, then checks what a user checks (the
statistics of the snapshot name the right lines with the right counts)
and what only the engine's test module can see (check_consistency(): every
trace where it must be, the totals equal to the traces).  The child prints
an `ITERATIONS {json}` line with its counts; the run's output shows them.
3.11 has no per-interpreter GIL: there the legacy subinterpreters of
`_xxsubinterpreters` (which share the GIL) run the same scenarios.
"""

import json
import os
import subprocess
import sys
import textwrap
import unittest

from test import support
from test.support import import_helper

import_helper.import_module('_testtracemalloc')
import_helper.import_module('_tracemalloc')
try:
    import _interpreters as interpreters_module
    OWN_GIL = True
except ImportError:
    interpreters_module = import_helper.import_module('_xxsubinterpreters')
    OWN_GIL = False

# The children's common part: start tracing, run CODE in NINTERP new
# interpreters, each on a thread of its own, while the main interpreter
# allocates; report.
CHILD_PRELUDE = textwrap.dedent("""
    import json, sys, threading, time, tracemalloc
    KEPT_LINE = 7
    import _testtracemalloc
    try:
        import _interpreters as interpreters
        def create(kind):
            return interpreters.create(interpreters.new_config(kind))
        def run(interp, code):
            interpreters.exec(interp, code)
    except ImportError:
        import _xxsubinterpreters as interpreters
        def create(kind):
            return interpreters.create()
        def run(interp, code):
            interpreters.run_string(interp, code)
    counts = {}
    def in_parallel(interps, code, main_work):
        errors = []
        def target(interp):
            try:
                run(interp, code)
            except BaseException as exc:
                errors.append(repr(exc))
        threads = [threading.Thread(target=target, args=(i,))
                   for i in interps]
        for t in threads:
            t.start()
        main_work()
        for t in threads:
            t.join()
        if errors:
            raise AssertionError(errors)
    KEPT_SIZE = sys.getsizeof(bytes(1000))
    def count_kept(snapshot):
        # The kept bytes objects: their line (the list's own array grows
        # on that line too), their size.
        return sum(1 for t in snapshot.traces
                   if t.traceback[-1].filename == "<string>"
                   and t.traceback[-1].lineno == KEPT_LINE
                   and t.size == KEPT_SIZE)
""")

# Run in each interpreter: ROUNDS rounds that allocate and free objects of
# many sizes (dicts, lists, str, bytes of 600 bytes, past pymalloc's
# limit), keeping KEEP bytes objects of 1000 bytes alive, all made on the
# line marked KEPT (line 7 of this string).
SUB_CODE = """\
keep = []
def work(rounds):
    for i in range(rounds):
        d = {{str(j): [j] * 3 for j in range(20)}}
        b = bytes(600) + bytes(i % 50)
        s = 'x' * (i % 300)
        if i % {every} == 0: keep.append(bytes(1000))
work({rounds})
"""
KEPT_LINE = 7


class SubinterpreterStressTest(unittest.TestCase):

    def run_child(self, body):
        code = CHILD_PRELUDE + textwrap.dedent(body) + textwrap.dedent("""
            print("ITERATIONS " + json.dumps(counts), flush=True)
        """)
        env = dict(os.environ)
        env.pop("PYTHONTRACEMALLOC", None)
        proc = subprocess.run(
            [sys.executable, "-X", "faulthandler", "-c", code],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env, timeout=support.LONG_TIMEOUT)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertNotIn("Fatal Python error", proc.stderr)
        counts = None
        for line in proc.stdout.splitlines():
            if line.startswith("ITERATIONS "):
                counts = json.loads(line[len("ITERATIONS "):])
        self.assertIsNotNone(counts, proc.stdout + proc.stderr)
        name = self.id().rsplit('.', 1)[-1]
        summary = ", ".join(f"{k}={v}" for k, v in counts.items())
        print(f"ITERATIONS {name}: {summary}", flush=True)
        return counts

    def test_interpreters_allocate_in_parallel(self):
        # Three interpreters on three threads and the main interpreter
        # allocate at once; the kept blocks are found at their line, with
        # the exact count, and the store is consistent before and after the
        # interpreters are destroyed.
        rounds, every, ninterp = 20000, 10, 3
        counts = self.run_child(f"""
            tracemalloc.start(5)
            interps = [create('isolated') for _ in range({ninterp})]
            code = {SUB_CODE!r}.format(rounds={rounds}, every={every})
            main_keep = []
            def main_work():
                for i in range({rounds}):
                    main_keep.append({{str(j): j for j in range(5)}})
                    if len(main_keep) > 1000:
                        del main_keep[:500]
            t0 = time.perf_counter()
            in_parallel(interps, code, main_work)
            counts['seconds'] = round(time.perf_counter() - t0, 2)
            counts['interpreters'] = {ninterp}
            counts['rounds_each'] = {rounds}
            counts['traces_checked'] = _testtracemalloc.check_consistency()
            snapshot = tracemalloc.take_snapshot()
            counts['kept_count'] = count_kept(snapshot)
            counts['asymmetric_after'] = (
                _testtracemalloc.engine_stats()['asymmetric'])
            for interp in interps:
                interpreters.destroy(interp)
            counts['traces_after_destroy'] = (
                _testtracemalloc.check_consistency())
            tracemalloc.stop()
        """)
        expected = ninterp * (rounds // every)
        self.assertEqual(counts['kept_count'], expected)
        self.assertGreater(counts['traces_checked'], expected)
        if OWN_GIL:
            # The first allocation of an isolated interpreter turned the
            # lock symmetric (a system call per allocation otherwise).
            self.assertEqual(counts['asymmetric_after'], 0)

    def test_start_stop_while_interpreters_allocate(self):
        # stop(), start() and clear_traces() race the interpreters'
        # allocations: no trace may outlive the tables, nor one be added
        # to tables being freed.
        counts = self.run_child("""
            tracemalloc.start(3)
            interps = [create('isolated') for _ in range(2)]
            code = {!r}.format(rounds=15000, every=100)
            ops = 0
            def main_work():
                global ops
                deadline = time.monotonic() + 1.5
                while time.monotonic() < deadline:
                    tracemalloc.stop()
                    tracemalloc.start(3)
                    junk = [bytes(100) for _ in range(50)]
                    tracemalloc.clear_traces()
                    ops += 1
                    _testtracemalloc.check_consistency()
            in_parallel(interps, code, main_work)
            counts['control_operations'] = ops
            counts['traces_checked'] = _testtracemalloc.check_consistency()
            for interp in interps:
                interpreters.destroy(interp)
            _testtracemalloc.check_consistency()
            tracemalloc.stop()
        """.replace('{!r}', repr(SUB_CODE)))
        self.assertGreater(counts['control_operations'], 0)

    def test_shared_gil_interpreter_takes_the_fast_side(self):
        # A subinterpreter that shares the main GIL ('legacy') is the GIL
        # holder while it runs: none of its allocations go through the
        # lock's side for callers without the GIL.
        counts = self.run_child(f"""
            tracemalloc.start(1)
            interp = create('legacy')
            code = {SUB_CODE!r}.format(rounds=2000, every=10)
            before = _testtracemalloc.foreign_entries()
            in_parallel([interp], code, lambda: None)
            counts['foreign_entries'] = (
                _testtracemalloc.foreign_entries() - before)
            counts['traces_checked'] = _testtracemalloc.check_consistency()
            counts['kept_count'] = count_kept(tracemalloc.take_snapshot())
            interpreters.destroy(interp)
            tracemalloc.stop()
        """)
        self.assertEqual(counts['kept_count'], 200)
        # Thread start-up and exit allocate with the raw domain, without
        # the GIL: a few entries, not one per allocation.
        self.assertLess(counts['foreign_entries'], 100)


if __name__ == "__main__":
    unittest.main()
