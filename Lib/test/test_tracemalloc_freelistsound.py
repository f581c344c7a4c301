"""Soundness of the traces of memory reused from free lists.

A dictionary's key table comes from a free list of its own
(new_keys_object()): taken from there it is re-traced at the line that
takes it, as the dict itself is.  It used to keep the traceback of its
first allocation, so that a leak of small dicts was also reported at
whatever line had freed a dict last (under pytest, the plugin's own report
code).

The objects of the tracer's own work (a snapshot's, the other exports',
what the retention search makes) are not traced, but once dropped they
are on the free lists: the program's objects taken from there later are
traced at the program's line, as after no snapshot.  They used to stay
untraced, so that a program that took its own snapshots measured fewer
tuples than it made (ExportsFreeListTest).
"""

import gc
import json
import os
import subprocess
import sys
import unittest

import tracemalloc
from test.support import os_helper, script_helper
from test.test_tracemalloc_pytest import PytestHarness, marked_line


def line_of(source, mark):
    """The line number (from 1) of the line of SOURCE ending with MARK."""
    for lineno, line in enumerate(source.splitlines(), 1):
        if line.rstrip().endswith(mark):
            return lineno
    raise ValueError(mark)


class DictKeysFreeListTest(unittest.TestCase):
    """A key table taken from its free list is traced where it is taken."""

    def setUp(self):
        if tracemalloc.is_tracing():
            self.skipTest("tracemalloc is already tracing")

    def test_key_table_retraced(self):
        # gc.collect() empties the free lists: the first table below is a
        # new block, traced at its line; freed, it goes to the key tables'
        # free list, and the second dict takes it from there.
        gc.collect()
        tracemalloc.start(1)
        try:
            first = {}; first["a"] = 1      # FIRST
            del first
            second = {}; second["b"] = 2    # SECOND
            snapshot = tracemalloc.take_snapshot()
        finally:
            tracemalloc.stop()
        with open(__file__, encoding="utf-8") as file:
            source = file.read()
        first_line = line_of(source, "# FIRST")
        second_line = line_of(source, "# SECOND")
        counts = {}
        for trace in snapshot.traces:
            frame = trace.traceback[0]
            if frame.filename == __file__:
                counts[frame.lineno] = counts.get(frame.lineno, 0) + 1
        # The dict object and its table, both reused.
        self.assertEqual(counts.get(second_line), 2, counts)
        self.assertNotIn(first_line, counts)
        del second


# A loop that makes and drops a small dict, then keeps another: the kept
# dict's key table is the dropped one's, from the free list.
DICT_LEAK = """\
KEEP = []

def work():
    for i in range(20):
        scratch = {"x": i}      # SCRATCH
        del scratch
        KEEP.append({"a": i})   # KEPT
"""


class DictLeakSiteTest(unittest.TestCase):
    """The leak of small dicts is reported at the line that keeps them,
    under every entry point: leaks.check(), the CLI, the pytest gate."""

    def setUp(self):
        if tracemalloc.is_tracing():
            self.skipTest("tracemalloc is already tracing")

    def test_leaks_check(self):
        from tracemalloc import leaks
        namespace = {"__name__": "leakapp_dicts"}
        exec(compile(DICT_LEAK, "<dicts>", "exec"), namespace)
        report = leaks.check(namespace["work"], retention=False)
        tracemalloc.stop()
        lines = {site.lineno for site in report.sites
                 if site.filename == "<dicts>"}
        self.assertEqual(lines, {line_of(DICT_LEAK, "# KEPT")},
                         report.format())

    def test_cli(self):
        directory = self.enterContext(os_helper.temp_dir())
        with open(os.path.join(directory, "dictleak.py"), "w",
                  encoding="utf-8") as file:
            file.write(DICT_LEAK)
        res = script_helper.assert_python_failure(
            "-m", "tracemalloc", "leaks", "-q", "--no-retention",
            "dictleak:work", __cwd=directory)
        report = res.err.decode()
        path = os.path.join(directory, "dictleak.py")
        self.assertIn(f"{path}:{line_of(DICT_LEAK, '# KEPT')}:", report)
        self.assertNotIn(f"{path}:{line_of(DICT_LEAK, '# SCRATCH')}:",
                         report)


class DictLeakPytestTest(PytestHarness, unittest.TestCase):
    """Under the pytest gate, the dicts a test leaks are its own line's:
    the plugin's report code frees dicts between rounds, whose key tables
    the test's next dicts take."""

    def test_pytest_gate(self):
        path = self.write("test_dictleak.py", """\
            KEEP = []

            def test_leak():
                for i in range(20):
                    KEEP.append({"a": i})   # KEPT
            """)
        code, output = self.run_pytest("-p", "no:randomly",
                                       "--tracemalloc-leaks",
                                       "test_dictleak.py")
        self.assertEqual(code, 1, output)
        sites = self.failures(output).get("test_leak")
        self.assertTrue(sites, output)
        self.assertEqual(sites[0], (path, marked_line(path, "# KEPT")),
                         output)
        self.assertEqual({file for file, _ in sites}, {path}, output)


# The program: the free lists full of its own traced objects, then an
# export (argv[1]), dropped; then the same objects made again on one line.
# Prints, per kind, how many of the objects made after the export have no
# traceback, and the traces of that line.
AFTER_EXPORT = """
import gc, json, sys, tracemalloc
EXPORT = sys.argv[1]
A = object()
ROWS = 1000
KINDS = ("tuple1", "tuple2", "tuple3", "tuple4", "float", "dict", "list")

def row(i):
    return ((A,), (A, A), (A, A, A), (A, A, A, A), i + 0.5, {"k": A}, [A])

ROW = row.__code__.co_firstlineno + 1
# Call paths enough for a snapshot to take a free list's worth of the
# tuples of each size it makes.
source = ("def many():\\n    keep = []\\n"
          + "    keep.append([0])\\n" * 1500 + "    return keep\\n")
namespace = {}
exec(compile(source, "<many>", "exec"), namespace)

def export():
    import _tracemalloc
    if EXPORT == "take_snapshot":
        snapshot = tracemalloc.take_snapshot()
    elif EXPORT == "threads":
        snapshot = tracemalloc.take_snapshot(threads=True)
    elif EXPORT == "peak":
        snapshot = tracemalloc.take_snapshot(peak=True)
    elif EXPORT == "labels":
        snapshot = tracemalloc.take_snapshot(labels=True)
    elif EXPORT == "get_traces":
        snapshot = _tracemalloc._get_traces()
    elif EXPORT == "statistics":
        snapshot = tracemalloc.take_snapshot()
        snapshot.statistics("traceback")
        snapshot.compare_to(snapshot, "lineno")
    elif EXPORT == "live_totals":
        _tracemalloc._live_totals_diff(None)
    elif EXPORT == "untraced_call":
        # what the retention search runs under: every kind made untraced
        _tracemalloc._untraced_call(lambda: [row(i) for i in range(ROWS)])
    elif EXPORT != "none":
        raise ValueError(EXPORT)

gc.collect()
tracemalloc.start(1)
held = namespace["many"]()
junk = [row(i) for i in range(ROWS)]
del junk
export()
made = [row(i) for i in range(ROWS)]
untraced = {kind: sum(tracemalloc.get_object_traceback(r[k]) is None
                      for r in made)
            for k, kind in enumerate(KINDS)}
count = size = 0
for trace in tracemalloc.take_snapshot().traces:
    frame = trace.traceback[0]
    if frame.filename == "<string>" and frame.lineno == ROW:
        count += 1
        size += trace.size
result = {"untraced": untraced, "line": [count, size]}
if EXPORT != "none":
    import _testtracemalloc
    _testtracemalloc.check_consistency()
    result["retraced"] = _testtracemalloc.engine_stats().get("export_retraced", 0)
print(json.dumps(result))
"""

EXPORTS = ("take_snapshot", "threads", "peak", "labels", "get_traces",
           "statistics", "live_totals", "untraced_call")


def run_after_export(python, export):
    proc = subprocess.run([python, "-I", "-c", AFTER_EXPORT, export],
                          capture_output=True, text=True)
    if proc.returncode:
        raise AssertionError(f"{python} {export}: exit {proc.returncode}\n"
                             f"{proc.stderr}")
    return json.loads(proc.stdout)


class ExportsFreeListTest(unittest.TestCase):
    """Objects taken from the free lists after the tracer dropped its own
    (a snapshot's, an export's) are traced at the program's line.  Found by
    the differential fuzzer (exact seeds 125, 131, 132, 179), then worked
    around by emptying the free lists after each snapshot; the engine now
    keeps the exports' blocks apart from the traces, and traces them when
    the program reuses them."""

    def setUp(self):
        self.control = run_after_export(sys.executable, "none")

    def test_control(self):
        # Without an export: every object of the line traced, ten blocks
        # a row (seven objects, the dict's key table, the list's items,
        # and the row's tuple of seven).
        self.assertEqual(set(self.control["untraced"].values()), {0},
                         self.control)
        self.assertEqual(self.control["line"][0], 10 * 1000, self.control)

    def test_reused_after_export(self):
        for export in EXPORTS:
            with self.subTest(export=export):
                result = run_after_export(sys.executable, export)
                # Each object made after the export is traced...
                self.assertEqual(result["untraced"],
                                 self.control["untraced"], result)
                # ...and the line holds what it holds without the export.
                self.assertEqual(result["line"], self.control["line"],
                                 result)
                # Objects of the export's were taken back (the program's
                # own, taken by the export, are among them).
                self.assertGreater(result["retraced"], 0, result)

    def test_against_pristine(self):
        # The line after a snapshot holds what upstream's holds after no
        # snapshot (upstream's own snapshot leaves its trace tuples
        # untraced on the free list: after one, its line holds 1000 fewer).
        from test.test_tracemalloc_parity import find_pristine
        pristine, why = find_pristine()
        if pristine is None:
            self.skipTest(why)
        upstream = run_after_export(pristine, "none")
        self.assertEqual(upstream, self.control)
        for export in ("take_snapshot", "get_traces"):
            with self.subTest(export=export):
                result = run_after_export(sys.executable, export)
                self.assertEqual(result["line"], upstream["line"], result)


# The export adds nothing to the traced totals: its objects are not the
# program's memory.  A snapshot of many traces, held, and reported.
EXPORT_TOTALS = """
import gc, json, tracemalloc, _tracemalloc, _testtracemalloc
gc.collect()
tracemalloc.start(1)
keep = [[i] for i in range(20000)]
before = tracemalloc.get_traced_memory()[0]
tracemalloc.reset_peak()
raw = _tracemalloc._get_traces()
current, peak = tracemalloc.get_traced_memory()
traced = sum(t[1] for t in _tracemalloc._get_traces())
hidden = _testtracemalloc.engine_stats().get("export_blocks", 0)
_testtracemalloc.check_consistency()
print(json.dumps([before, current, peak, traced, hidden, len(raw)]))
"""


class ExportTotalsTest(unittest.TestCase):
    """The exports' blocks are in no total: get_traced_memory(), its peak,
    the traces."""

    def test_not_counted(self):
        res = script_helper.assert_python_ok("-c", EXPORT_TOTALS)
        before, current, peak, traced, hidden, ntraces = json.loads(res.out)
        self.assertGreaterEqual(ntraces, 20000)
        # The raw export made a tuple or more per trace, all kept apart.
        self.assertGreaterEqual(hidden, ntraces)
        # Traced memory only lost what the export took from the program's
        # free lists, and the peak did not move, but for the few ints that
        # hold the measures (32 bytes each): the export's own blocks, a
        # tuple or more per trace, would be a megabyte.
        self.assertLessEqual(current, before + 256)
        self.assertLessEqual(peak, before + 256)
        # Nor is the held export in the traces (the second export's
        # traces add up to what the first measured, but for the objects
        # made in between).
        self.assertLess(abs(traced - current), 1024)


if __name__ == "__main__":
    unittest.main()
