"""Soundness of the traces of memory reused from free lists.

A dictionary's key table comes from a free list of its own
(new_keys_object()): taken from there it is re-traced at the line that
takes it, as the dict itself is.  It used to keep the traceback of its
first allocation, so that a leak of small dicts was also reported at
whatever line had freed a dict last (under pytest, the plugin's own report
code).
"""

import gc
import os
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


if __name__ == "__main__":
    unittest.main()
