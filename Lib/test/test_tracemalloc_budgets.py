"""Tests of the memory budgets (issue 31, item 6) and of the junitxml
properties of the pytest plugin (issue 31, item 8): the marker
@pytest.mark.tracemalloc_limit, the option --tracemalloc-limit, the
unittest decorator tracemalloc.testing.memory_limit() and ``python -m
tracemalloc run --fail-over-peak``.

pytest runs in child processes, as in test_tracemalloc_pytest (Debian's
python3-pytest; the tests skip when it is missing).
"""

import os
import re
import subprocess
import sys
import tracemalloc
import unittest
import xml.etree.ElementTree as ElementTree

from test.test_tracemalloc_pytest import (PytestHarness, xdist_installed)
from tracemalloc import _budget, testing

# This tracemalloc's Lib directory: the children import the same package.
LIB = os.path.dirname(os.path.dirname(os.path.abspath(tracemalloc.__file__)))

BUDGETS = """\
    import pytest

    @pytest.mark.tracemalloc_limit("1 MB")
    def test_over():
        data = bytearray(3_000_000)   # OVER
        del data

    @pytest.mark.tracemalloc_limit("20 MB")
    def test_under():
        data = bytearray(3_000_000)
        del data

    def test_default():
        data = bytearray(3_000_000)   # DEFAULT
        del data

    def test_small():
        data = bytearray(1000)

    @pytest.mark.tracemalloc_limit(None)
    def test_unlimited():
        data = bytearray(3_000_000)
        del data
"""

HEADLINE = re.compile(r"tracemalloc: the peak memory of (?P<test>\S+) "
                      r"(?P<verb>was|is estimated at) \S+ \S+ \((?P<peak>["
                      r"\d,]+) B\), over its limit of \S+ \S+ \((?P<limit>"
                      r"[\d,]+) B\)")


class PytestBudgetTests(PytestHarness, unittest.TestCase):

    def setUp(self):
        super().setUp()
        self.path = self.write("test_budgets.py", BUDGETS)

    def run_budgets(self, *args):
        xml = os.path.join(self.work, "out.xml")
        code, output = self.run_pytest("-rA", f"--junitxml={xml}", *args,
                                       path=(LIB,), timeout=300)
        tree = ElementTree.parse(xml)
        cases = {}
        for case in tree.iter("testcase"):
            properties = {p.get("name"): p.get("value")
                          for p in case.iter("property")}
            failed = case.find("failure") is not None
            cases[case.get("name")] = (failed, properties)
        return code, output, cases

    def check_outcomes(self, output, cases, default):
        failed = {name for name, (fail, _) in cases.items() if fail}
        expected = {"test_over"} | ({"test_default"} if default else set())
        self.assertEqual(failed, expected, output)
        headlines = {m["test"]: m for m in HEADLINE.finditer(output)}
        self.assertEqual(set(headlines),
                         {f"test_budgets.py::{name}" for name in expected},
                         output)
        over = headlines["test_budgets.py::test_over"]
        self.assertEqual(over["limit"], "1,000,000")
        self.assertGreaterEqual(int(over["peak"].replace(",", "")),
                                3_000_000)
        self.assertEqual(over["verb"], "was", output)
        # The top site of the peak snapshot is the test's own line.
        line = BUDGETS.splitlines().index(
            "        data = bytearray(3_000_000)   # OVER") + 1
        self.assertRegex(output, re.escape(f"{self.path}:{line}: size=")
                         + r"2\d\d\d KiB")
        # The peaks as junitxml properties.
        props = cases["test_over"][1]
        self.assertEqual(props["tracemalloc_limit"], "1000000")
        self.assertEqual(props["tracemalloc_peak_over_limit"], "True")
        self.assertGreaterEqual(int(props["tracemalloc_peak"]), 3_000_000)
        self.assertEqual(cases["test_under"][1]["tracemalloc_peak_over_limit"],
                         "False")
        self.assertNotIn("tracemalloc_peak", cases["test_unlimited"][1])
        if default:
            self.assertEqual(cases["test_small"][1]["tracemalloc_limit"],
                             "2000000")
        else:
            self.assertNotIn("tracemalloc_peak", cases["test_small"][1])

    def test_marker_only(self):
        code, output, cases = self.run_budgets()
        self.assertEqual(code, 1, output)
        self.check_outcomes(output, cases, default=False)

    def test_default_and_marker_override(self):
        code, output, cases = self.run_budgets("--tracemalloc-limit=2MB")
        self.assertEqual(code, 1, output)
        # test_under (marker 20 MB) passes despite the 2 MB default,
        # test_unlimited (marker None) too.
        self.check_outcomes(output, cases, default=True)

    def test_with_leak_check(self):
        code, output, cases = self.run_budgets("--tracemalloc-limit=2MB",
                                               "--tracemalloc-leaks")
        self.assertEqual(code, 1, output)
        self.check_outcomes(output, cases, default=True)
        # The leak verdicts are unchanged, and are junitxml properties.
        self.assertEqual(self.summary(output)["checked"], 5, output)
        self.assertEqual(self.summary(output)["leaked"], 0, output)
        for name, (_, props) in cases.items():
            self.assertEqual(props.get("tracemalloc_verdict"), "checked",
                             (name, props))
            self.assertTrue(int(props["tracemalloc_runs"]) > 1, props)

    def test_leaking_and_over_budget(self):
        # Both verdicts: the leak report is the failure, the budget's
        # message a section of the same report.
        self.write("test_both.py", """\
            import pytest
            kept = []

            @pytest.mark.tracemalloc_limit("1 MB")
            def test_both():
                data = bytearray(3_000_000)
                del data
                kept.append(bytes(50_000))   # LEAK
        """)
        code, output = self.run_pytest("-rA", "--tracemalloc-leaks",
                                       "test_both.py", path=(LIB,),
                                       timeout=300)
        self.assertEqual(code, 1, output)
        self.assertEqual(self.summary(output)["leaked"], 1, output)
        self.assertRegex(output, r"test_both.py:8: size=\S+ \S+, count=")
        self.assertEqual(
            [m["test"] for m in HEADLINE.finditer(output)],
            ["test_both.py::test_both"], output)

    def test_xdist(self):
        if not xdist_installed():
            self.skipTest("pytest-xdist is not installed")
        code, output, cases = self.run_budgets("-n", "2",
                                               "--tracemalloc-limit=2MB",
                                               "--tracemalloc-leaks")
        self.assertEqual(code, 1, output)
        self.check_outcomes(output, cases, default=True)
        for name, (_, props) in cases.items():
            names = [n for n in props]
            self.assertEqual(props.get("tracemalloc_verdict"), "checked")
            self.assertEqual(names.count("tracemalloc_verdict"), 1)

    def test_bad_option(self):
        for size in ("24 XB", "-1", "lots"):
            with self.subTest(size=size):
                code, output = self.run_pytest(
                    f"--tracemalloc-limit={size}", path=(LIB,))
                self.assertEqual(code, 4, output)
                self.assertIn("--tracemalloc-limit", output)
                self.assertNotIn("Traceback", output)

    def test_bad_marker(self):
        self.write("test_bad.py", """\
            import pytest

            @pytest.mark.tracemalloc_limit("24 XB")
            def test_bad():
                pass
        """)
        code, output = self.run_pytest("test_bad.py", path=(LIB,))
        self.assertEqual(code, 1, output)
        self.assertIn("1 error", output)
        self.assertIn("not '24 XB'", output)

    def test_sampling_says_estimate(self):
        env = dict(os.environ)
        for name in ("PYTHONTRACEMALLOC", "PYTEST_ADDOPTS", "PYTEST_PLUGINS"):
            env.pop(name, None)
        env["PYTHONPATH"] = os.pathsep.join([LIB, self.site])
        process = subprocess.run(
            [sys.executable, "-X", "tracemalloc_sample=4096", "-m", "pytest",
             "-p", "no:cacheprovider", "--color=no",
             "-p", "tracemalloc.pytest_plugin", "test_budgets.py"],
            cwd=self.work, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, timeout=300)
        output = process.stdout.decode("utf-8", "replace")
        if "tracemalloc_sample" in output and "Fatal" in output:
            self.skipTest("no -X tracemalloc_sample in this build")
        self.assertEqual(process.returncode, 1, output)
        headlines = list(HEADLINE.finditer(output))
        self.assertEqual([m["test"] for m in headlines],
                         ["test_budgets.py::test_over"], output)
        self.assertEqual(headlines[0]["verb"], "is estimated at")
        self.assertIn("an estimate: tracemalloc is sampling", output)


class UnittestBudgetTests(unittest.TestCase):

    def run_case(self, case):
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(case)
        result = unittest.TestResult()
        suite.run(result)
        return result

    def test_over_and_under(self):
        class Case(unittest.TestCase):
            @testing.memory_limit("1 MB")
            def test_over(self):
                data = bytearray(3_000_000)
                del data

            @testing.memory_limit(20_000_000)
            def test_under(self):
                data = bytearray(3_000_000)
                del data

        result = self.run_case(Case)
        self.assertEqual(result.testsRun, 2)
        self.assertEqual(len(result.failures), 1, result.failures)
        test, message = result.failures[0]
        self.assertIn("test_over", test.id())
        self.assertRegex(message, r"over its limit of \S+ \S+ "
                                  r"\(1,000,000 B\)")
        self.assertIn(f"{__file__}:", message)
        self.assertFalse(result.errors)

    def test_class_decorator(self):
        @testing.memory_limit("1MB")
        class Case(unittest.TestCase):
            def test_a(self):
                data = bytearray(2_000_000)
                del data

            def test_b(self):
                pass

        result = self.run_case(Case)
        self.assertEqual([t.id().rsplit(".", 1)[1]
                          for t, _ in result.failures], ["test_a"])

    def test_class_decorator_limits_inherited_tests(self):
        # Issue 43, item 5: a class budget also limits the tests that the
        # class inherits (the pytest marker on the class does); the base
        # class keeps its own budget, and a subclass's class budget
        # replaces a decorated base class's.
        class Base(unittest.TestCase):
            def test_inherited(self):
                data = bytearray(10_000_000)
                del data

        @testing.memory_limit("1 MB")
        class Limited(Base):
            def test_own(self):
                pass

        @testing.memory_limit("1 MB")
        class LimitedBase(unittest.TestCase):
            def test_big(self):
                data = bytearray(10_000_000)
                del data

        @testing.memory_limit("20 MB")
        class Wider(LimitedBase):
            pass

        def failed(case):
            result = self.run_case(case)
            self.assertFalse(result.errors)
            return [t.id().rsplit(".", 1)[1] for t, _ in result.failures]

        self.assertEqual(failed(Limited), ["test_inherited"])
        self.assertEqual(failed(Base), [])
        self.assertEqual(failed(LimitedBase), ["test_big"])
        self.assertEqual(failed(Wider), [])

    def test_async_methods(self):
        # Issue 31 review (s38), finding F2: on an async test method of an
        # IsolatedAsyncioTestCase (decorated, or its class), the body runs
        # on the test's loop and its peak is judged.
        ran = []

        class Method(unittest.IsolatedAsyncioTestCase):
            @testing.memory_limit("1 MB")
            async def test_over(self):
                ran.append("method")
                data = bytearray(3_000_000)
                del data

            @testing.memory_limit("20 MB")
            async def test_under(self):
                ran.append("under")
                data = bytearray(3_000_000)
                del data

        @testing.memory_limit("1 MB")
        class Class(unittest.IsolatedAsyncioTestCase):
            async def test_over(self):
                ran.append("class")
                data = bytearray(3_000_000)
                del data

        for case in (Method, Class):
            with self.subTest(case=case.__name__):
                result = self.run_case(case)
                self.assertFalse(result.errors)
                self.assertEqual([t.id().rsplit(".", 1)[1]
                                  for t, _ in result.failures], ["test_over"])
                self.assertRegex(result.failures[0][1],
                                 r"over its limit of \S+ \S+ "
                                 r"\(1,000,000 B\)")
        self.assertEqual(sorted(ran), ["class", "method", "under"])

    def test_bad_sizes(self):
        for size in ("24 XB", -1, "-1MB", None, 1.5, "inf"):
            with self.subTest(size=size):
                with self.assertRaises(ValueError):
                    testing.memory_limit(size)

    def test_parse_size(self):
        self.assertEqual(_budget.parse_size("24 MB"), 24_000_000)
        self.assertEqual(_budget.parse_size("1KiB"), 1024)
        self.assertEqual(_budget.parse_size("1.5k"), 1536)
        self.assertEqual(_budget.parse_size(7), 7)


class RunFailOverPeakTests(unittest.TestCase):

    def run_cli(self, *args):
        import tempfile
        directory = self.enterContext(tempfile.TemporaryDirectory())
        script = os.path.join(directory, "script.py")
        with open(script, "w", encoding="utf-8") as file:
            file.write("data = bytearray(5_000_000)\ndel data\n")
        env = dict(os.environ, PYTHONPATH=LIB)
        env.pop("PYTHONTRACEMALLOC", None)
        process = subprocess.run(
            [sys.executable, "-m", "tracemalloc", "run", *args, script],
            env=env, capture_output=True, text=True, timeout=120)
        return process.returncode, process.stderr

    def test_over(self):
        code, output = self.run_cli("--fail-over-peak", "1MB")
        self.assertEqual(code, 3, output)
        self.assertRegex(output, r"the peak memory of \S+script.py was .* "
                                 r"over its limit of .*\(1,000,000 B\)")
        self.assertRegex(output, r"#1: \S*script.py:1: size=4\d\d\d KiB")

    def test_under(self):
        code, output = self.run_cli("--fail-over-peak", "20 MB")
        self.assertEqual(code, 0, output)
        self.assertIn("within its limit of", output)

    def test_bad_size(self):
        for size in ("24 XB", "-1"):
            with self.subTest(size=size):
                code, output = self.run_cli(f"--fail-over-peak={size}")
                self.assertEqual(code, 2, output)
                self.assertIn("--fail-over-peak", output)
                self.assertNotIn("Traceback", output)


if __name__ == "__main__":
    unittest.main()
