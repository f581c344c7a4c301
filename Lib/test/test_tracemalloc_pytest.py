"""Tests of tracemalloc.pytest_plugin, the leak checker's pytest plugin.

pytest is not part of the standard library: these tests run Debian's
python3-pytest and python3-pytest-xdist (pure Python) on the fork, in child
processes, and skip, saying so, when they are not installed.

The main test is MixedFileTest: one file holding a leaking
unittest.TestCase method, a leaking test function and a leaking doctest,
next to clean tests that use monkeypatch, caplog, capsys, an exclusive file
in tmp_path, parametrize and a test class; exactly the three leaks must be
reported, each with its leaking line first, serially and under
pytest-xdist's -n 2.
"""

import functools
import os
import re
import subprocess
import sys
import sysconfig
import textwrap
import tracemalloc
import unittest

from test.support import os_helper

PYTEST_SITE = os.environ.get("TRACEMALLOC_TEST_PYTEST_PATH",
                             "/usr/lib/python3/dist-packages")
# The pure-Python packages that pytest and pytest-xdist need: the directory
# also holds compiled modules built for the system's Python, which are kept
# off the path.
PYTEST_PACKAGES = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging",
                   "attr", "attrs", "py.py", "py", "exceptiongroup", "tomli",
                   "xdist", "execnet")
# Their metadata too: pytest finds pytest-xdist's plugin by its entry point.
PYTEST_DISTRIBUTIONS = re.compile(
    r"(pytest|pluggy|iniconfig|packaging|attrs|exceptiongroup|tomli|"
    r"pytest_xdist|execnet)-[^-]+\.(dist|egg)-info$")



def _repository():
    """The fork's repository: this file is in its Lib/test, or in the
    Lib/test of its build tree, build/BASE/src."""
    lib_parent = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    for candidate in (lib_parent,
                      os.path.dirname(os.path.dirname(
                          os.path.dirname(lib_parent)))):
        if os.path.isfile(os.path.join(candidate, "Tools", "fork",
                                       "pin.sh")):
            return candidate
    return lib_parent


REPO = _repository()
ENTRY_POINT_SCRIPT = os.path.join(REPO, "Tools", "fork",
                                  "install-pytest-entry-point.sh")

# A site line of a leak report: FILE:LINE: size=..., count=... per round
SITE_LINE = re.compile(r"^(?P<file>\S.*?):(?P<line>\d+): size=\S+ \S+, "
                       r"count=\S+ per round")

SUMMARY_LINE = re.compile(r"tracemalloc: (?P<checked>\d+) checked, "
                          r"(?P<leaked>\d+) leaked, (?P<not_checked>\d+) "
                          r"not checked(?: \((?P<reasons>[^)]*)\))?")


def pytest_installed():
    return os.path.isdir(os.path.join(PYTEST_SITE, "_pytest"))


def xdist_installed():
    return os.path.isdir(os.path.join(PYTEST_SITE, "xdist"))


def make_pytest_site(directory):
    """Fill *directory* with links to pytest, pytest-xdist and their
    dependencies only; return it."""
    os.makedirs(directory, exist_ok=True)
    for name in os.listdir(PYTEST_SITE):
        if name in PYTEST_PACKAGES or PYTEST_DISTRIBUTIONS.match(name):
            os.symlink(os.path.join(PYTEST_SITE, name),
                       os.path.join(directory, name))
    return directory


class PytestHarness:
    """Mixin: run pytest on the fork in a temporary directory."""

    # Extra directories for PYTHONPATH, after pytest's.
    extra_path = ()
    # The environment of pytest's process, instead of this one's (None).
    environment = None

    def setUp(self):
        super().setUp()
        if not pytest_installed():
            self.skipTest(f"pytest is not installed (no _pytest in "
                          f"{PYTEST_SITE}; on Debian: apt-get install "
                          f"python3-pytest python3-pytest-xdist)")
        self.directory = self.enterContext(os_helper.temp_dir())
        self.site = make_pytest_site(os.path.join(self.directory, "site"))
        self.work = os.path.join(self.directory, "work")
        os.mkdir(self.work)

    def write(self, name, text):
        path = os.path.join(self.work, name)
        with open(path, "w", encoding="utf-8") as file:
            file.write(textwrap.dedent(text))
        return path

    def run_pytest(self, *args, plugin=True, path=(), cwd=None,
                   timeout=900, env=None):
        """Run pytest; return (returncode, output): stdout and stderr.
        *env*: more environment variables."""
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                   "--color=no"]
        if plugin:
            command += ["-p", "tracemalloc.pytest_plugin"]
        command += list(args)
        env = dict(os.environ if self.environment is None
                   else self.environment, **(env or {}))
        for name in ("PYTHONTRACEMALLOC", "PYTEST_ADDOPTS",
                     "PYTEST_PLUGINS", "PYTEST_XDIST_AUTO_NUM_WORKERS"):
            env.pop(name, None)
        env["PYTHONPATH"] = os.pathsep.join([*path, self.site,
                                             *self.extra_path])
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        process = subprocess.run(command, cwd=cwd or self.work, env=env,
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, timeout=timeout)
        return (process.returncode,
                process.stdout.decode("utf-8", "replace"))

    def summary(self, output):
        """The plugin's last line, as a dict; fail if it is missing."""
        matches = list(SUMMARY_LINE.finditer(output))
        self.assertEqual(len(matches), 1, output)
        match = matches[0]
        return {"checked": int(match["checked"]),
                "leaked": int(match["leaked"]),
                "not_checked": int(match["not_checked"]),
                "reasons": match["reasons"] or ""}

    def failures(self, output):
        """{test name: [(file, line) of each site line]} of the failure
        sections of pytest's output."""
        result = {}
        name = None
        for line in output.splitlines():
            header = re.match(r"^_{3,} (.+?) _{3,}$", line)
            if header:
                name = header[1]
                result[name] = []
                continue
            if line.startswith("=") or line.startswith("-" * 10):
                if not line.startswith("-" * 10):
                    name = None
                continue
            match = SITE_LINE.match(line)
            if match and name is not None:
                result[name].append((match["file"], int(match["line"])))
        return result


def marked_line(path, mark):
    """The line number of the line of *path* that ends with *mark*."""
    with open(path, encoding="utf-8") as file:
        for lineno, line in enumerate(file, 1):
            if line.rstrip().endswith(mark):
                return lineno
    raise ValueError(f"{mark!r} not found in {path}")


MIXED = '''\
"""A mixed test file: three leaks, and clean tests of every kind."""

import logging
import os
import unittest

import pytest

_kept = []


def leaky_helper():
    """A leaking doctest:

    >>> _kept.append(bytearray(3000))  # LEAK-DOCTEST
    >>> len(_kept) > 0
    True
    """


def clean_helper():
    """A clean doctest:

    >>> sorted({3, 1, 2})
    [1, 2, 3]
    """


class LeakyCase(unittest.TestCase):
    def setUp(self):
        self.resource = list(range(50))

    def tearDown(self):
        self.resource = None

    def test_leak(self):
        _kept.append(bytes(2000))  # LEAK-TESTCASE

    def test_clean(self):
        self.addCleanup(self.resource.clear)
        self.assertEqual(len(self.resource), 50)


def test_leak():
    _kept.append("x" * 2500 + str(len(_kept)))  # LEAK-FUNCTION


def test_monkeypatch(monkeypatch):
    monkeypatch.setattr(os, "sep", "/")
    monkeypatch.setenv("TRACEMALLOC_PYTEST_MIXED", "value" * 20)
    monkeypatch.setitem(os.environ, "TRACEMALLOC_PYTEST_OTHER", "1")
    assert os.environ["TRACEMALLOC_PYTEST_MIXED"].startswith("value")


def test_caplog(caplog):
    logging.getLogger("mixed").warning("hello %s", "world" * 10)
    assert "hello world" in caplog.text


def test_capsys(capsys):
    print("hello" * 100)
    assert capsys.readouterr().out.startswith("hello")


def test_exclusive_file(tmp_path):
    with open(tmp_path / "made-once", "x") as file:
        file.write("x" * 1000)


@pytest.mark.parametrize("size", [1, 10, 100])
def test_parametrized(size):
    assert len(list(range(size))) == size


class TestClassBased:
    def setup_method(self):
        self.data = list(range(100))

    def test_method(self):
        assert sorted(self.data, reverse=True)[0] == 99
'''

# The tests of MIXED: 4 leak-free tests of a kind, the 3 leaks, 2 doctests.
MIXED_LEAKS = {
    "LeakyCase.test_leak": "LEAK-TESTCASE",
    "test_leak": "LEAK-FUNCTION",
    "[doctest] test_mixed.leaky_helper": "LEAK-DOCTEST",
}
MIXED_TESTS = 13


class MixedFileTest(PytestHarness, unittest.TestCase):
    def setUp(self):
        super().setUp()
        self.path = self.write("test_mixed.py", MIXED)

    def check_mixed(self, output, returncode):
        self.assertEqual(returncode, 1, output)
        failures = self.failures(output)
        self.assertEqual(set(failures), set(MIXED_LEAKS), output)
        for name, mark in MIXED_LEAKS.items():
            with self.subTest(test=name):
                sites = failures[name]
                self.assertTrue(sites, output)
                filename, lineno = sites[0]
                self.assertEqual(os.path.basename(filename), "test_mixed.py",
                                 output)
                self.assertEqual(lineno, marked_line(self.path, mark),
                                 output)
        self.assertIn(f"3 failed, {MIXED_TESTS - 3} passed", output)
        self.assertEqual(self.summary(output),
                         {"checked": MIXED_TESTS, "leaked": 3,
                          "not_checked": 0, "reasons": ""})

    def test_serial(self):
        returncode, output = self.run_pytest(
            "--tracemalloc-leaks", "--doctest-modules", "test_mixed.py")
        self.check_mixed(output, returncode)

    def test_xdist(self):
        if not xdist_installed():
            self.skipTest(f"pytest-xdist is not installed (no xdist in "
                          f"{PYTEST_SITE}; on Debian: apt-get install "
                          f"python3-pytest-xdist)")
        returncode, output = self.run_pytest(
            "-n", "2", "--tracemalloc-leaks",
            "--doctest-modules", "test_mixed.py")
        self.assertIn("gw0 [13] / gw1 [13]", output)
        self.check_mixed(output, returncode)

    def test_without_the_option_nothing_is_checked(self):
        returncode, output = self.run_pytest("--doctest-modules",
                                             "test_mixed.py")
        # The doctest that leaks still passes when run once.
        self.assertEqual(returncode, 0, output)
        self.assertIn(f"{MIXED_TESTS} passed", output)
        self.assertNotIn("tracemalloc:", output)


SAME_VERDICT_CASES = """\
import unittest

_kept = []
_runs = {"count": 0}


class StateOnSelf(unittest.TestCase):
    # A fresh instance per round: what a round leaves on self is gone.
    def test_it(self):
        self.assertFalse(hasattr(self, "cache"))
        self.cache = {"key": bytes(200)}
        self.calls = [1]
        self.assertEqual(len(self.calls), 1)


class FixtureReleased(unittest.TestCase):
    def setUp(self):
        self.buffer = bytearray(20_000)
        self.addCleanup(setattr, self, "buffer", None)

    def test_it(self):
        self.buffer[0] = 1


class Leaks(unittest.TestCase):
    def test_it(self):
        _kept.append(bytes(1000))


class FailsInRunTwo(unittest.TestCase):
    def test_it(self):
        _runs["count"] += 1
        self.assertLess(_runs["count"], 2)
"""

SAME_VERDICT_EXPECTED = {"StateOnSelf": "clean", "FixtureReleased": "clean",
                         "Leaks": "leak", "FailsInRunTwo": "error"}


class SameVerdictTest(PytestHarness, unittest.TestCase):
    """The same test gets the same verdict through LeakCheckMixin, @no_leaks
    and the pytest plugin: each round after the first on a fresh TestCase
    instance (issue 31, item 4)."""

    def unittest_verdicts(self, style):
        import importlib
        from tracemalloc.testing import LeakCheckMixin, no_leaks
        name = f"same_verdict_{style}"
        self.write(f"{name}.py", SAME_VERDICT_CASES)
        sys.path.insert(0, self.work)
        try:
            module = importlib.import_module(name)
        finally:
            sys.path.remove(self.work)
            sys.modules.pop(name, None)
        verdicts = {}
        for case_name in SAME_VERDICT_EXPECTED:
            base = getattr(module, case_name)
            if style == "mixin":
                case = type(case_name, (LeakCheckMixin, base), {})
            else:
                case = type(case_name, (base,),
                            {"test_it": no_leaks(base.test_it)})
            result = unittest.TestResult()
            case("test_it").run(result)
            if result.wasSuccessful():
                verdicts[case_name] = "clean"
            elif (result.failures
                  and "allocation site" in result.failures[0][1]
                  and "leaked" in result.failures[0][1]):
                verdicts[case_name] = "leak"
            else:
                verdicts[case_name] = "error"
        return verdicts

    def pytest_verdicts(self):
        self.write("test_same_verdict.py", SAME_VERDICT_CASES)
        returncode, output = self.run_pytest("--tracemalloc-leaks", "-rA",
                                             "test_same_verdict.py")
        verdicts = {}
        for case_name in SAME_VERDICT_EXPECTED:
            nodeid = f"test_same_verdict.py::{case_name}::test_it"
            if f"PASSED {nodeid}" in output:
                verdicts[case_name] = "clean"
            elif (f"FAILED {nodeid}" in output
                  and f"tracemalloc: {nodeid}: 1 allocation site leaked"
                  in output):
                verdicts[case_name] = "leak"
            else:
                verdicts[case_name] = "error"
        return verdicts, output

    def test_mixin_decorator_and_plugin_agree(self):
        plugin, output = self.pytest_verdicts()
        self.assertEqual(plugin, SAME_VERDICT_EXPECTED, output)
        self.assertIn("failed in run 2", output)
        for style in ("mixin", "decorator"):
            with self.subTest(style=style):
                self.assertEqual(self.unittest_verdicts(style),
                                 SAME_VERDICT_EXPECTED)


class ItemKindsTest(PytestHarness, unittest.TestCase):
    """Each kind of item pytest collects, checked alone."""

    def test_marker_on_testcase_method(self):
        self.write("test_case.py", """\
            import unittest
            import pytest

            _kept = []

            class Case(unittest.TestCase):
                @pytest.mark.tracemalloc_leaks(rounds=4, extend=0)
                def test_leak(self):
                    _kept.append(bytes(1500))  # LEAK

                def test_unmarked(self):
                    _kept.append(bytes(1500))
            """)
        returncode, output = self.run_pytest("test_case.py")
        self.assertEqual(returncode, 1, output)
        self.assertEqual(list(self.failures(output)), ["Case.test_leak"],
                         output)
        self.assertIn("over 4 rounds", output)
        self.assertEqual(self.summary(output)["checked"], 1)

    def test_testcase_fixtures_run_every_round(self):
        # setUp, tearDown and the cleanups run around each round: the
        # counts below are those of 2 + 5 runs, and what setUp allocates
        # and tearDown drops is not a leak.
        self.write("test_case.py", """\
            import unittest
            import pytest

            calls = dict.fromkeys(["setUp", "test", "tearDown", "cleanup"],
                                  0)

            def called(name):
                calls[name] += 1

            class Case(unittest.TestCase):
                def setUp(self):
                    called("setUp")
                    self.buffer = bytearray(10000)
                    self.addCleanup(called, "cleanup")

                def tearDown(self):
                    called("tearDown")
                    del self.buffer

                def test_it(self):
                    called("test")

            @pytest.mark.no_tracemalloc_leaks
            def test_counts():
                assert calls == dict.fromkeys(calls, 7), calls
            """)
        returncode, output = self.run_pytest(
            "--tracemalloc-leaks", "--tracemalloc-warmup=2",
            "--tracemalloc-rounds=5", "--tracemalloc-extend=0",
            "--tracemalloc-screen=0", "test_case.py")
        self.assertEqual(returncode, 0, output)
        self.assertEqual(self.summary(output),
                         {"checked": 1, "leaked": 0, "not_checked": 1,
                          "reasons": "1 no_tracemalloc_leaks"})

    def test_doctest_glob(self):
        path = self.write("leaky.txt", """\
            A text file of examples:

            >>> import sys
            >>> kept = sys.modules.setdefault("_leaky_txt_kept", [])
            >>> kept.append(bytearray(2500))  # LEAK
            >>> 1 + 1
            2
            """)
        self.write("clean.txt", """\
            >>> ", ".join(sorted(["b", "a"]))
            'a, b'
            """)
        returncode, output = self.run_pytest(
            "--tracemalloc-leaks", "--doctest-glob=*.txt",
            "leaky.txt", "clean.txt")
        self.assertEqual(returncode, 1, output)
        failures = self.failures(output)
        self.assertEqual(list(failures), ["[doctest] leaky.txt"], output)
        filename, lineno = failures["[doctest] leaky.txt"][0]
        self.assertEqual((os.path.basename(filename), lineno),
                         ("leaky.txt", marked_line(path, "# LEAK")))
        self.assertEqual(self.summary(output)["checked"], 2)

    def test_doctest_site_ignored_and_reported_where_shown(self):
        # Issue 31 review (s38), finding F6: the JSON report names a
        # doctest's site as the failure message does (its file and line),
        # and --tracemalloc-ignore matches that location.
        import json
        path = self.write("leaky.txt", """\
            >>> import sys
            >>> kept = sys.modules.setdefault("_leaky_txt_kept", [])
            >>> kept.append(bytearray(2500))  # LEAK
            """)
        lineno = marked_line(path, "# LEAK")
        report = os.path.join(os.path.dirname(path), "report.json")
        returncode, output = self.run_pytest(
            "--tracemalloc-leaks", "--doctest-glob=*.txt",
            f"--tracemalloc-report={report}", "leaky.txt")
        self.assertEqual(returncode, 1, output)
        with open(report, encoding="utf-8") as file:
            data = json.load(file)
        site = data["tests"][0]["report"]["sites"][0]
        self.assertEqual((os.path.basename(site["filename"]), site["lineno"]),
                         ("leaky.txt", lineno))
        # Its traceback, most recent frame first, names it the same way.
        frame = site["traceback"][0]
        self.assertEqual((os.path.basename(frame[0]), frame[1]),
                         ("leaky.txt", lineno))
        for pattern in (f"leaky.txt:{lineno}", "leaky.txt:*", "leaky.txt"):
            with self.subTest(pattern=pattern):
                returncode, output = self.run_pytest(
                    "--tracemalloc-leaks", "--doctest-glob=*.txt",
                    "--tracemalloc-ignore", pattern, "leaky.txt")
                self.assertEqual(returncode, 0, output)
                self.assertIn("1 leaking site ignored", output)

    def test_module_marker_and_exemption(self):
        self.write("test_marked.py", """\
            import pytest

            pytestmark = pytest.mark.tracemalloc_leaks(rounds=3)
            _kept = []

            def test_leak():
                _kept.append(bytes(1200))  # LEAK

            @pytest.mark.no_tracemalloc_leaks
            def test_exempt():
                _kept.append(bytes(1200))

            @pytest.mark.skip(reason="not today")
            def test_skipped():
                pass

            @pytest.mark.xfail(reason="known bug")
            def test_xfailed():
                assert False
            """)
        returncode, output = self.run_pytest("-rs", "test_marked.py")
        self.assertEqual(returncode, 1, output)
        self.assertEqual(list(self.failures(output)), ["test_leak"], output)
        self.assertEqual(self.summary(output),
                         {"checked": 1, "leaked": 1, "not_checked": 3,
                          "reasons": "1 no_tracemalloc_leaks, 1 skipped, "
                                     "1 xfailed"})

    def test_kept_frames_are_the_tests_sites(self):
        # A test that keeps its frames (its own frame, or an exception
        # with its traceback) pins the frame objects of the code that
        # called it, pytest's and the plugin's: the plugin's are made on
        # lines of the tool, not reported; the test's own line is a site
        # (pytest's frames, and what their locals hold, are sites too).
        path = self.write("test_frames.py", """\
            import sys

            _kept = []

            def test_keeps_its_frame():
                _kept.append(sys._getframe())  # LEAK-FRAME

            def test_keeps_a_traceback():
                try:
                    raise ValueError("kept")  # LEAK-RAISE
                except ValueError as error:
                    _kept.append(error)
            """)
        returncode, output = self.run_pytest(
            "--tracemalloc-leaks", "--tracemalloc-full-report",
            "test_frames.py")
        self.assertEqual(returncode, 1, output)
        failures = self.failures(output)
        self.assertEqual(set(failures),
                         {"test_keeps_its_frame", "test_keeps_a_traceback"},
                         output)
        package = os.path.dirname(os.path.abspath(tracemalloc.__file__))
        for name, mark in (("test_keeps_its_frame", "LEAK-FRAME"),
                           ("test_keeps_a_traceback", "LEAK-RAISE")):
            with self.subTest(test=name):
                sites = failures[name]
                self.assertIn(
                    ("test_frames.py", marked_line(path, mark)),
                    [(os.path.basename(filename), lineno)
                     for filename, lineno in sites], output)
                self.assertEqual(
                    [site for site in sites
                     if os.path.dirname(os.path.abspath(site[0]))
                     == package], [], output)

    def test_stopping_tracing_gives_no_verdict(self):
        # The reports of a round that passed are dropped before the
        # snapshot that ends it; when that snapshot finds tracing stopped,
        # the test still gets passing reports, and no verdict.
        self.write("test_stop.py", """\
            import tracemalloc

            _kept = []

            def test_stops_tracing():
                _kept.append(bytes(1000))
                if len(_kept) == 4:
                    tracemalloc.stop()

            def test_after():
                pass
            """)
        returncode, output = self.run_pytest("--tracemalloc-leaks",
                                             "test_stop.py")
        self.assertEqual(returncode, 0, output)
        self.assertIn("2 passed", output)
        self.assertEqual(self.summary(output),
                         {"checked": 1, "leaked": 0, "not_checked": 1,
                          "reasons": "1 no verdict (tracing was stopped "
                                     "during the leak check: no verdict"})


class FixtureRoundsTest(PytestHarness, unittest.TestCase):
    def test_function_fixtures_fresh_each_round(self):
        self.write("conftest.py", """\
            import pytest

            events = []

            @pytest.fixture
            def per_test():
                events.append("set up")
                yield bytearray(5000)
                events.append("torn down")

            @pytest.fixture(scope="module")
            def per_module():
                events.append("module set up")
                yield
                events.append("module torn down")
            """)
        self.write("test_fixtures.py", """\
            import conftest

            def test_uses_both(per_test, per_module, tmp_path):
                assert not list(tmp_path.iterdir())
                (tmp_path / "file").write_text("x")

            def test_events():
                assert conftest.events.count("set up") == 7
                assert conftest.events.count("torn down") == 7
                assert conftest.events.count("module set up") == 1
                assert conftest.events.count("module torn down") == 0
            """)
        returncode, output = self.run_pytest(
            "test_fixtures.py::test_uses_both", "test_fixtures.py::test_events",
            "-k", "uses_both or events",
            "-o", "python_files=test_*.py",
            "--tracemalloc-leaks", "--tracemalloc-warmup=2",
            "--tracemalloc-rounds=5", "--tracemalloc-extend=0",
            "--tracemalloc-screen=0")
        self.assertEqual(returncode, 0, output)
        self.assertEqual(self.summary(output)["checked"], 2)

    def test_fixture_that_leaks_is_reported(self):
        self.write("test_leaky_fixture.py", """\
            import pytest

            _registry = []

            @pytest.fixture
            def registered():
                _registry.append(bytearray(1800))  # LEAK
                yield

            def test_uses_it(registered):
                pass
            """)
        path = os.path.join(self.work, "test_leaky_fixture.py")
        returncode, output = self.run_pytest("--tracemalloc-leaks",
                                             "test_leaky_fixture.py")
        self.assertEqual(returncode, 1, output)
        sites = self.failures(output)["test_uses_it"]
        self.assertEqual(sites[0][1], marked_line(path, "# LEAK"), output)

    def test_teardown_failing_in_a_later_round(self):
        # The rounds stop; the module fixture is still torn down before
        # the next module's test.
        self.write("test_a.py", """\
            import pytest

            events = []
            runs = []

            @pytest.fixture(scope="module")
            def per_module():
                yield
                events.append("module torn down")

            @pytest.fixture
            def fragile():
                yield
                runs.append(1)
                if len(runs) == 2:
                    raise RuntimeError("teardown fails in run 2")

            def test_it(per_module, fragile):
                pass
            """)
        self.write("test_b.py", """\
            import test_a

            def test_after():
                assert test_a.events == ["module torn down"]
            """)
        # Plain asserts: Debian's pytest 7.2 rewrites test_b's assert with
        # ast.Str, which warns from Python 3.12 on, and the summary line
        # would count those warnings.
        returncode, output = self.run_pytest(
            "--tracemalloc-leaks", "-p", "no:randomly", "--assert=plain",
            "test_a.py", "test_b.py")
        self.assertEqual(returncode, 1, output)
        self.assertIn("teardown fails in run 2", output)
        self.assertIn("2 passed, 1 error", output)
        self.assertNotIn("INTERNALERROR", output)
        self.assertEqual(self.summary(output),
                         {"checked": 1, "leaked": 0, "not_checked": 1,
                          "reasons": "1 failed in run 2"})

    def test_warnings_are_not_growth(self):
        # pytest records a test's warnings until it ends: those of the
        # rounds before the last are dropped, and the summary shows the
        # warnings of one run.
        self.write("test_warn.py", """\
            import warnings

            def test_deprecated():
                warnings.warn("this API is deprecated", DeprecationWarning)

            def test_user_warning():
                warnings.warn("careful" * 20)
            """)
        returncode, output = self.run_pytest("--tracemalloc-leaks",
                                             "test_warn.py")
        self.assertEqual(returncode, 0, output)
        self.assertIn("2 passed, 2 warnings", output)
        self.assertEqual(self.summary(output)["checked"], 2)
        returncode, output = self.run_pytest(
            "--tracemalloc-leaks", "-W", "error::DeprecationWarning",
            "test_warn.py")
        self.assertEqual(returncode, 1, output)
        self.assertIn("FAILED test_warn.py::test_deprecated - "
                      "DeprecationWarning", output)

    def test_not_repeatable_test_says_so(self):
        self.write("test_once.py", """\
            _runs = []

            def test_once():
                _runs.append(1)
                assert len(_runs) == 1
            """)
        returncode, output = self.run_pytest("--tracemalloc-leaks",
                                             "test_once.py")
        self.assertEqual(returncode, 1, output)
        self.assertIn("tracemalloc leak check", output)
        self.assertIn("passed 1 time, then failed in run 2", output)
        self.assertIn("@pytest.mark.no_tracemalloc_leaks", output)
        self.assertEqual(self.summary(output),
                         {"checked": 0, "leaked": 0, "not_checked": 1,
                          "reasons": "1 failed in run 2"})


class OptionsTest(PytestHarness, unittest.TestCase):
    LEAK = """\
        _kept = []

        def test_leak():
            _kept.append(bytes(3000))  # LEAK
        """

    def test_threshold_with_suffix(self):
        self.write("test_leak.py", self.LEAK)
        returncode, output = self.run_pytest(
            "--tracemalloc-leaks", "--tracemalloc-threshold", "1K",
            "test_leak.py")
        self.assertEqual(returncode, 1, output)
        returncode, output = self.run_pytest(
            "--tracemalloc-leaks", "--tracemalloc-threshold=64KiB",
            "test_leak.py")
        self.assertEqual(returncode, 0, output)
        self.assertEqual(self.summary(output)["leaked"], 0)
        returncode, output = self.run_pytest(
            "--tracemalloc-leaks", "--tracemalloc-threshold=1Q",
            "test_leak.py")
        self.assertEqual(returncode, 4, output)
        self.assertIn("must be a size in bytes", output)

    def test_clean_session_prints_the_summary(self):
        self.write("test_clean.py", """\
            def test_a():
                assert sorted([2, 1]) == [1, 2]

            def test_b():
                assert "".join(["a", "b"]) == "ab"
            """)
        returncode, output = self.run_pytest("--tracemalloc-leaks",
                                             "test_clean.py")
        self.assertEqual(returncode, 0, output)
        self.assertEqual(self.summary(output),
                         {"checked": 2, "leaked": 0, "not_checked": 0,
                          "reasons": ""})
        # The line comes just before pytest's own last line.
        lines = output.strip().splitlines()
        self.assertRegex(lines[-2], SUMMARY_LINE)
        self.assertIn("2 passed", lines[-1])

    def test_bad_marker_arguments_fail_the_test(self):
        self.write("test_bad.py", """\
            import pytest

            @pytest.mark.tracemalloc_leaks(rounds=0)
            def test_zero_rounds():
                pass

            @pytest.mark.tracemalloc_leaks(round=3)
            def test_misspelt():
                pass
            """)
        returncode, output = self.run_pytest("test_bad.py")
        self.assertEqual(returncode, 1, output)
        self.assertIn("rounds must be >= 1", output)
        self.assertIn("has no argument round", output)
        self.assertEqual(self.summary(output)["not_checked"], 2)

    def test_failure_message_is_short(self):
        # Six leaking sites deep in a call chain: the message shows the
        # top ones with a few frames each, and says how to get the rest.
        self.write("test_many.py", """\
            _kept = []

            def level3(size):
                _kept.append(bytearray(size))

            def level2(size):
                level3(size)

            def level1(size):
                level2(size)

            def test_many():
                level1(6000)
                _kept.append(bytearray(5000))
                _kept.append(bytearray(4000))
                _kept.append(bytearray(3000))
                _kept.append(bytearray(2000))
                _kept.append(bytearray(1000))
            """)
        returncode, output = self.run_pytest("--tracemalloc-leaks",
                                             "test_many.py")
        self.assertEqual(returncode, 1, output)
        start = output.index("tracemalloc: test_many.py::test_many:")
        end = output.index("\n", output.index("--tracemalloc-full-report",
                                              start))
        message = output[start:end].splitlines()
        self.assertLessEqual(len(message), 36, "\n".join(message))
        # The title counts every leaking site, not the 3 shown.
        self.assertIn("tracemalloc: test_many.py::test_many: 6 allocation "
                      "sites leaked", message[0])
        self.assertIn("3 other leaking sites", output)
        sites = self.failures(output)["test_many"]
        self.assertEqual(len(sites), 3)
        # The biggest site first, its traceback through the test's frames
        # only (no pytest or pluggy frame).
        self.assertEqual(sites[0][1], 4)
        self.assertNotIn("_pytest", output[start:end])
        self.assertNotIn("pluggy", output[start:end])

        returncode, output = self.run_pytest(
            "--tracemalloc-leaks", "--tracemalloc-full-report",
            "test_many.py")
        self.assertEqual(len(self.failures(output)["test_many"]), 6)
        self.assertIn("_pytest", output)


class SessionOutputTest(PytestHarness, unittest.TestCase):
    """The session's output fits a CI log (issue 31, item 5)."""

    LEAKY = """\
        import pytest

        _kept = []

        def keep(size):
            _kept.append(bytearray(size))      # the shared site

        @pytest.mark.parametrize("n", range(14))
        def test_shared(n):
            keep(1000 + n)

        def test_own():
            _kept.append(bytes(3000))          # its own site
        """

    def test_summary_by_site_and_capped(self):
        self.write("test_leaky.py", self.LEAKY)
        returncode, output = self.run_pytest("--tracemalloc-leaks",
                                             "test_leaky.py")
        self.assertEqual(returncode, 1, output)
        self.assertEqual(self.summary(output)["leaked"], 15)
        # Past 10 leaking tests, a failure message is its title and first
        # site only.
        self.assertEqual(output.count("(message cut: 10 leaking tests of "
                                      "this session were reported in full"),
                         5, output)
        section = output[output.index("tracemalloc: 15 leaking tests, by "
                                      "first leaking site"):]
        section = section[:section.index("short test summary info")]
        lines = section.splitlines()[1:]
        # One entry per site, the tests that share it named after it (3
        # of them, past the cap), not one line per test.
        sites = [line for line in lines if SITE_LINE.match(line)]
        self.assertEqual(len(sites), 2, section)
        self.assertIn("first site of 14 tests: test_leaky.py::"
                      "test_shared[0], test_leaky.py::test_shared[1], "
                      "test_leaky.py::test_shared[2] and 11 more", section)
        self.assertIn("first site of 1 test: test_leaky.py::test_own",
                      section)
        self.assertLess(len(lines), 10, section)

        # No cap: every message whole, every test named.
        returncode, output = self.run_pytest(
            "--tracemalloc-leaks", "--tracemalloc-max-reports=0",
            "test_leaky.py")
        self.assertNotIn("message cut", output)
        self.assertIn("test_leaky.py::test_shared[13]", output[
            output.index("by first leaking site"):])


# On 3.11, pytest's log capture makes every test grow a site in its
# screened run (its per-phase record list lands in another site from one
# run to the next, through the free list of lists): every test runs the
# whole rounds, and the screen saves nothing there (the docs' "The
# screen").  The tests of how many runs the screen saves need 3.12+.
screen_saves_runs = unittest.skipIf(
    sys.version_info < (3, 12),
    "on 3.11 the screen saves no run under pytest (pytest's log capture)")


class CheapGateTest(PytestHarness, unittest.TestCase):
    """The gate's cost: the screen, the bounded holder search, the cost in
    the session line, and what each of them must not change in the
    verdicts."""

    # A fixed environment: pytest writes PYTEST_CURRENT_TEST in
    # os.environ three times a run, and the run in which its table is
    # rebuilt (a step of about 2 KB, once in a session: that test fails
    # the screen and runs the whole rounds) depends on how many variables
    # the environment holds.
    environment = {"PATH": os.defpath, "LC_ALL": "C.UTF-8"}

    TESTS = """\
        import pytest

        _kept = []
        _calls = {"odd": 0, "even": 0}

        def keep(size):
            _kept.append(bytearray(size))      # the shared site

        def test_clean():
            [bytearray(1024) for _ in range(10)]

        def test_clean_fixture(tmp_path, monkeypatch, caplog):
            monkeypatch.setenv("X", "1")
            (tmp_path / "f").write_text("x")

        def test_leak_a():
            keep(1000)

        def test_leak_b():
            keep(2000)

        def test_odd_calls():
            # A leak on the first call, the third, the fifth...
            _calls["odd"] += 1
            if _calls["odd"] % 2:
                _kept.append(bytes(4000))

        def test_even_calls():
            _calls["even"] += 1
            if not _calls["even"] % 2:
                _kept.append(bytes(4000))
        """

    def run_json(self, *args):
        import json
        path = os.path.join(self.directory, "report.json")
        returncode, output = self.run_pytest(
            "--tracemalloc-leaks", f"--tracemalloc-report={path}", *args,
            "test_gate.py")
        with open(path, encoding="utf-8") as file:
            tests = json.load(file)["tests"]
        return returncode, output, {test["nodeid"].partition("::")[2]:
                                    (test["verdict"], test.get("runs"))
                                    for test in tests}

    @screen_saves_runs
    def test_screen(self):
        self.write("test_gate.py", self.TESTS)
        returncode, output, verdicts = self.run_json()
        self.assertEqual(returncode, 1, output)
        # Nothing of a clean test grew after its first run, which grew
        # (pytest's own first steps for the item): two more runs, and it
        # passes.  A leaking test runs the whole rounds, 1 + 4 + 8.
        self.assertEqual(verdicts["test_clean"], ("checked", 3), output)
        # pytest's function-scoped fixtures may make a step of pytest's
        # own in a later run (a new list of finalizers when one
        # finishes), which no rule excuses: then the whole rounds.
        self.assertIn(verdicts["test_clean_fixture"],
                      [("checked", 3), ("checked", 5)], output)
        for name in ("test_leak_a", "test_leak_b", "test_even_calls"):
            self.assertEqual(verdicts[name], ("leaked", 13), output)
        # A leak on every other call whose first measured run is one
        # without: the warm-up grew, so the screen runs once more.
        self.assertEqual(verdicts["test_odd_calls"], ("leaked", 13), output)
        self.assertRegex(output, r"; gate: \d+\.\dx the tests' own time")

        # Two measured runs in the screen: caught in either phase.
        returncode, output, verdicts = self.run_json("--tracemalloc-screen=2")
        self.assertEqual(verdicts["test_clean"], ("checked", 4), output)
        self.assertEqual(verdicts["test_odd_calls"], ("leaked", 13), output)
        self.assertEqual(verdicts["test_even_calls"], ("leaked", 13), output)

        # No screen: every checked test runs warmup + rounds times.
        returncode, output, verdicts = self.run_json("--tracemalloc-screen=0")
        self.assertEqual(verdicts["test_clean"], ("checked", 5), output)
        self.assertEqual(verdicts["test_odd_calls"], ("leaked", 13), output)

    def test_holder_search_per_test_and_budget(self):
        # Two tests leak at one line, each into a container of its own:
        # each failure shows its own holder, never the other test's.
        self.write("test_gate.py", """\
            def make():
                return bytearray(500)          # the site of both tests

            _a_list = []
            _b_registry = {}

            def test_a():
                _a_list.append(make())

            def test_b():
                _b_registry[len(_b_registry)] = make()
            """)
        returncode, output = self.run_pytest(
            "--tracemalloc-leaks", "test_gate.py")
        self.assertEqual(returncode, 1, output)
        section_a = output[output.index("_ test_a _"):
                           output.index("_ test_b _")]
        section_b = output[output.index("_ test_b _"):
                           output.index("leaking tests, by first")]
        self.assertIn("global _a_list (list)", section_a)
        self.assertNotIn("_b_registry", section_a)
        self.assertIn("global _b_registry (dict)", section_b)
        self.assertNotIn("_a_list", section_b)
        self.assertRegex(output, r"holder search \d+% of it")
        self.assertNotIn("skipped: time budget", output)

        # No budget: no search, and the messages, the session line and
        # the JSON report say so; a report without retention says
        # nothing was skipped.
        path = os.path.join(self.directory, "report.json")
        returncode, output = self.run_pytest(
            "--tracemalloc-leaks", "--tracemalloc-search-budget=0",
            f"--tracemalloc-report={path}", "test_gate.py")
        self.assertEqual(returncode, 1, output)
        self.assertNotIn("held by:", output)
        self.assertEqual(output.count(
            "holder search skipped: time budget\n"), 2, output)
        # With no search run, its share is the bookkeeping's: a few
        # percent of two tiny tests at most, whatever the machine's load.
        self.assertRegex(output, r"holder search [0-9]% of it \(2 sites "
                                 r"skipped: time budget\)")
        self.assertEqual(self.json_sites(path), [
            ("test_gate.py::test_a", None, "time budget"),
            ("test_gate.py::test_b", None, "time budget")])
        returncode, output = self.run_pytest(
            "--tracemalloc-leaks", "--tracemalloc-no-retention",
            f"--tracemalloc-report={path}", "test_gate.py")
        self.assertEqual(returncode, 1, output)
        self.assertEqual(self.json_sites(path), [
            ("test_gate.py::test_a", None, None),
            ("test_gate.py::test_b", None, None)])

    def json_sites(self, path):
        """(nodeid, retention, retention_skipped) of each leaking site of
        the JSON report at *path*."""
        import json
        with open(path, encoding="utf-8") as file:
            tests = json.load(file)["tests"]
        return [(test["nodeid"], site["retention"],
                 site["retention_skipped"])
                for test in tests if test["verdict"] == "leaked"
                for site in test["report"]["sites"]]

    LATE_LEAKS = """\
        _kept = []
        _calls = {"third": 0, "fourth": 0, "toggle": 0}
        _cache = {}

        def test_leak_from_third_call():
            _calls["third"] += 1
            if _calls["third"] >= 3:
                _kept.append(bytearray(300))

        def test_every_other_call_from_third():
            # Calls 3, 5, 7... leak: the first two do not.
            _calls["toggle"] += 1
            if _calls["toggle"] >= 3 and _calls["toggle"] % 2:
                _kept.append(bytearray(300))

        def test_leak_from_fourth_call_after_cache_fill():
            # The first call fills a cache: the screen runs twice more.
            _calls["fourth"] += 1
            if not _cache:
                _cache["table"] = [bytearray(100) for _ in range(4)]
            if _calls["fourth"] >= 4:
                _kept.append(bytearray(300))
        """

    @screen_saves_runs
    def test_screen_misses_late_leaks(self):
        # The screen's stated limit (the docs' "The screen"): a leak that
        # first grows after the screen's runs passes it; without the
        # screen the rounds see it.  Under pytest the first run of a test
        # always grows something (pytest's own first steps for the item),
        # so the screen of 1 measures the 2nd and the 3rd call: a leak
        # from the 4th call on passes it.
        self.write("test_gate.py", self.LATE_LEAKS)
        returncode, output, verdicts = self.run_json()
        self.assertEqual(returncode, 1, output)
        self.assertEqual(verdicts, {
            "test_leak_from_third_call": ("leaked", 13),
            "test_every_other_call_from_third": ("leaked", 13),
            "test_leak_from_fourth_call_after_cache_fill": ("checked", 3)},
            output)
        returncode, output, verdicts = self.run_json("--tracemalloc-screen=0")
        self.assertEqual(returncode, 1, output)
        self.assertEqual(verdicts, {
            "test_leak_from_third_call": ("leaked", 13),
            "test_every_other_call_from_third": ("leaked", 13),
            "test_leak_from_fourth_call_after_cache_fill": ("leaked", 13)},
            output)
        # A screen of 2 runs sees the 3rd call and, after a first call
        # that grew, the 4th.
        returncode, output, verdicts = self.run_json("--tracemalloc-screen=2")
        self.assertEqual(verdicts["test_leak_from_third_call"],
                         ("leaked", 13), output)
        self.assertEqual(verdicts["test_every_other_call_from_third"],
                         ("leaked", 13), output)
        self.assertEqual(
            verdicts["test_leak_from_fourth_call_after_cache_fill"],
            ("leaked", 13), output)

    def test_leaks_made_by_the_runners_code(self):
        # A leak whose every allocation has only pytest's, unittest's or
        # the standard library's frames, because the test registered a
        # builtin that the runner calls (a finalizer, a cleanup, a
        # weakref.finalize callback that the check's collection runs), is
        # the test's: no runner's growth is excused by the screen.
        self.write("test_gate.py", """\
            import functools
            import unittest
            import weakref

            _kept = []
            _next = [10**6]

            def _numbers():
                start = _next[0]
                _next[0] += 10
                return range(start, start + 10)

            def test_finalizer_keeps(request):
                request.addfinalizer(
                    functools.partial(_kept.extend, _numbers()))

            class T(unittest.TestCase):
                def test_cleanup_keeps(self):
                    self.addCleanup(_kept.extend, _numbers())

            class Node:
                pass

            def test_weakref_finalize_keeps():
                node = Node()
                node.self = node        # freed by the check's collection
                weakref.finalize(node, _kept.extend, _numbers())
            """)
        returncode, output, verdicts = self.run_json()
        self.assertEqual(returncode, 1, output)
        for name in ("test_finalizer_keeps", "T::test_cleanup_keeps",
                     "test_weakref_finalize_keeps"):
            self.assertEqual(verdicts[name], ("leaked", 13), output)

    def test_pytests_own_steps_are_not_leaks(self):
        # What a test adds to its item (a marker, a stash entry) and
        # pytest's per-item state are put back before each round: a
        # clean test that uses them passes the screen, whatever the order.
        self.write("test_gate.py", """\
            import pytest

            _key = pytest.StashKey()

            def test_add_marker(request):
                request.node.add_marker(pytest.mark.foo)

            def test_applymarker(request):
                request.applymarker(pytest.mark.bar("x" * 100))

            def test_stash(request):
                request.node.stash[_key] = "y" * 100

            def test_caplog(caplog):
                caplog.set_level(10)

            def test_plain():
                pass
            """)
        returncode, output, verdicts = self.run_json()
        self.assertEqual(returncode, 0, output)
        for name in ("test_add_marker", "test_applymarker", "test_stash",
                     "test_caplog", "test_plain"):
            verdict, runs = verdicts[name]
            self.assertEqual(verdict, "checked", output)
        if sys.version_info < (3, 12):
            return          # see screen_saves_runs
        # os.environ's table, which pytest's PYTEST_CURRENT_TEST makes
        # rebuild once in a session, is the only step that may send a
        # clean test to the whole rounds.
        self.assertLessEqual(
            sum(runs > 3 for _, runs in verdicts.values()), 1, output)

    def test_resource_warnings_of_the_collection(self):
        # With -W default (or -X dev), a file or an event loop left open
        # in a cycle is closed by the check's collection, with a
        # ResourceWarning whose source keeps it: caught as the round's,
        # not kept by pytest's list of the test's warnings in every
        # round; the last round's reach pytest.
        self.write("test_gate.py", """\
            import asyncio

            class Node:
                pass

            def test_unclosed_file_in_cycle():
                node = Node()
                node.self = node
                node.file = open(__file__, "rb")

            def test_unclosed_loop():
                loop = asyncio.new_event_loop()
                loop.self = loop
            """)
        returncode, output, verdicts = self.run_json("-W", "default")
        self.assertEqual(returncode, 0, output)
        self.assertEqual(verdicts["test_unclosed_file_in_cycle"][0],
                         "checked", output)
        self.assertEqual(verdicts["test_unclosed_loop"][0], "checked",
                         output)
        self.assertIn("ResourceWarning", output)
        self.assertRegex(output, r"\b2 passed, [23] warnings\b")

    def test_printing_with_output_not_captured(self):
        # With -s or --capture=tee-sys and the output a pipe (as in CI),
        # what a test prints waits in the stream's pending list until
        # 8 KiB: bounded, and flushed before each measurement.
        self.write("test_gate.py", """\
            def test_prints():
                print("line " + "p" * 300)

            def test_prints_small():
                print("short line")
            """)
        for capture in ("-s", "--capture=tee-sys"):
            with self.subTest(capture=capture):
                returncode, output, verdicts = self.run_json(capture)
                self.assertEqual(returncode, 0, output)
                for name in ("test_prints", "test_prints_small"):
                    self.assertEqual(verdicts[name][0], "checked", output)

    def test_what_the_test_keeps_of_pytests_api(self):
        # What a test keeps of pytest's own API (pytest.approx, marks) is
        # allocated in pytest's code, under the test's frame: the test's,
        # not the harness's, however small.
        self.write("test_gate.py", """\
            import pytest

            _expected = []
            _marks = []

            def test_uses_approx():
                assert 0.3 == pytest.approx(0.1 + 0.2)

            def test_keeps_approx():
                _expected.append(pytest.approx(0.1 + 0.2))
                assert 0.3 == _expected[-1]

            def test_keeps_marks():
                _marks.append(pytest.mark.slow)
            """)
        returncode, output, verdicts = self.run_json()
        self.assertEqual(returncode, 1, output)
        self.assertEqual(verdicts["test_uses_approx"][0], "checked", output)
        self.assertEqual(verdicts["test_keeps_approx"][0], "leaked", output)
        self.assertEqual(verdicts["test_keeps_marks"][0], "leaked", output)

    def test_test_file_in_the_standard_library_directory(self):
        # CPython's own tests lie in the standard library's directory: a
        # leak of theirs is theirs, not the harness's, though every frame
        # of the test is under that directory.  The interpreter runs with
        # a home of links to its standard library, the test file in a
        # directory of that home.
        import glob
        home = os.path.join(self.directory, "home")
        stdlib = os.path.dirname(os.__file__)
        lib = os.path.join(home, "lib", os.path.basename(stdlib))
        if not os.path.basename(stdlib).startswith("python"):
            # A build tree: its Lib, and its build directory of
            # extension modules and _sysconfigdata as lib-dynload.
            lib = os.path.join(home, "lib",
                               f"python{sys.version_info[0]}."
                               f"{sys.version_info[1]}")
        os.makedirs(lib)
        for name in os.listdir(stdlib):
            os.symlink(os.path.join(stdlib, name), os.path.join(lib, name))
        if not os.path.exists(os.path.join(lib, "lib-dynload")):
            built = [entry for entry in sys.path
                     if glob.glob(os.path.join(entry, "_sysconfigdata*"))]
            self.assertTrue(built, sys.path)
            os.symlink(built[0], os.path.join(lib, "lib-dynload"))
        tests = os.path.join(lib, "tm_stdlib_tests")
        os.mkdir(tests)
        with open(os.path.join(tests, "test_in_stdlib.py"), "w",
                  encoding="utf-8") as file:
            file.write(textwrap.dedent("""\
                _kept = []

                def test_leaks_every_call():
                    _kept.append(bytearray(300))

                def test_clean():
                    bytearray(300)
                """))
        # A base class's setUp in a helper module beside the test file
        # (as Lib/test's mixins): its leak is the test's too.
        with open(os.path.join(tests, "tm_stdlib_helpers.py"), "w",
                  encoding="utf-8") as file:
            file.write(textwrap.dedent("""\
                import unittest

                _kept = []

                class ResourceMixin(unittest.TestCase):
                    def setUp(self):
                        _kept.append(bytearray(200))
                """))
        with open(os.path.join(tests, "test_mixin_in_stdlib.py"), "w",
                  encoding="utf-8") as file:
            file.write(textwrap.dedent("""\
                from tm_stdlib_helpers import ResourceMixin

                class T(ResourceMixin):
                    def test_uses_resource(self):
                        pass
                """))
        returncode, output = self.run_pytest(
            "--tracemalloc-leaks", "-rA", "test_in_stdlib.py",
            "test_mixin_in_stdlib.py", cwd=tests, env={"PYTHONHOME": home})
        self.assertIn("FAILED test_mixin_in_stdlib.py::T::test_uses_resource",
                      output)
        self.assertIn("FAILED test_in_stdlib.py::test_leaks_every_call",
                      output)
        self.assertIn("PASSED test_in_stdlib.py::test_clean", output)
        self.assertRegex(output, r"test_in_stdlib\.py:4: size=")

    def test_cost_breakdown(self):
        self.write("test_gate.py", self.TESTS)
        returncode, output = self.run_pytest(
            "-v", "--tracemalloc-leaks", "-k", "clean", "test_gate.py")
        self.assertEqual(returncode, 0, output)
        self.assertRegex(output, r"tracemalloc: gate cost [\d.]+ s: first "
                                 r"runs [\d.]+ s, other runs' bodies")

    def test_search_budget_option(self):
        self.write("test_ok.py", "def test_ok():\n    pass\n")
        returncode, output = self.run_pytest(
            "--tracemalloc-leaks", "--tracemalloc-search-budget=-1",
            "test_ok.py")
        self.assertEqual(returncode, 4, output)
        self.assertIn("must be a number of seconds", output)


class IgnoreAndJSONTest(PytestHarness, unittest.TestCase):
    """Known leaks written down once, counted (issue 31 item 7), and the
    results as JSON (item 8)."""

    FILES = {
        "pkg/__init__.py": "",
        "pkg/cache.py": """\
            _cache = []

            def remember(value):
                _cache.append(bytes(value))    # a known leak
            """,
        "test_known.py": """\
            import pytest
            from pkg import cache

            _kept = []

            def test_known():
                cache.remember(1000)

            def test_new():
                _kept.append(bytes(2000))      # a new leak

            @pytest.mark.tracemalloc_leaks(ignore=["*test_known.py:*"])
            def test_marked():
                _kept.append(bytes(3000))
            """,
    }

    def setUp(self):
        super().setUp()
        os.mkdir(os.path.join(self.work, "pkg"))
        for name, text in self.FILES.items():
            self.write(name, text)

    def test_ignore_option_marker_and_pyproject(self):
        returncode, output = self.run_pytest(
            "--tracemalloc-leaks", "--tracemalloc-ignore", "pkg/cache.py:*",
            "test_known.py")
        self.assertEqual(returncode, 1, output)
        self.assertEqual(self.summary(output)["leaked"], 1, output)
        self.assertIn("FAILED test_known.py::test_new", output)
        # Counted in the session line, each pattern with its sites.
        self.assertIn("; 2 leaking sites ignored (*test_known.py:*: 1, "
                      "pkg/cache.py:*: 1)", output)
        # Without the option, the known leak fails its test.
        returncode, output = self.run_pytest("--tracemalloc-leaks",
                                             "test_known.py")
        self.assertEqual(self.summary(output)["leaked"], 2, output)
        # The same pattern, written down once in pyproject.toml.
        self.write("pyproject.toml", """\
            [tool.tracemalloc]
            ignore = ["pkg/cache.py:*"]
            """)
        returncode, output = self.run_pytest("--tracemalloc-leaks",
                                             "test_known.py")
        self.assertEqual(self.summary(output)["leaked"], 1, output)
        self.assertIn("pkg/cache.py:*: 1", output)
        self.write("pyproject.toml", """\
            [tool.tracemalloc]
            ignore = "pkg/cache.py:*"
            """)
        returncode, output = self.run_pytest("--tracemalloc-leaks",
                                             "test_known.py")
        self.assertNotEqual(returncode, 0, output)
        self.assertIn("ignore must be a list of patterns", output)

    def test_json_report(self):
        import json
        path = os.path.join(self.directory, "report.json")
        returncode, output = self.run_pytest(
            "--tracemalloc-leaks", f"--tracemalloc-report={path}",
            "--tracemalloc-ignore", "pkg/cache.py:*", "test_known.py")
        self.assertEqual(returncode, 1, output)
        with open(path, encoding="utf-8") as file:
            data = json.load(file)
        self.assertEqual(data["schema"], "tracemalloc-pytest-report")
        self.assertEqual(data["version"], 1)
        self.assertEqual(data["summary"]["checked"], 3)
        self.assertEqual(data["summary"]["leaked"], 1)
        self.assertEqual(data["summary"]["ignored"],
                         {"pkg/cache.py:*": 1, "*test_known.py:*": 1})
        tests = {test["nodeid"]: test for test in data["tests"]}
        new = tests["test_known.py::test_new"]
        self.assertEqual(new["verdict"], "leaked")
        self.assertEqual(new["runs"], new["report"]["warmup"]
                         + new["report"]["rounds"])
        site = new["report"]["sites"][0]
        self.assertEqual((os.path.basename(site["filename"]),
                          site["lineno"]), ("test_known.py", 10))
        self.assertEqual(len(site["sizes"]), new["report"]["rounds"])
        self.assertGreaterEqual(min(site["sizes"]), 2000)
        self.assertEqual(site["traceback"][0][1], 10)   # most recent first
        known = tests["test_known.py::test_known"]
        self.assertEqual(known["verdict"], "checked")
        self.assertEqual(known["report"]["ignored"][0]["pattern"],
                         "pkg/cache.py:*")
        self.assertIn("JSON report written to", output)


class EntryPointTest(PytestHarness, unittest.TestCase):
    """The dist-info that `make install` writes makes pytest load the
    plugin without -p (Tools/fork/install-pytest-entry-point.sh)."""

    def setUp(self):
        super().setUp()
        self.plugins = os.path.join(self.directory, "plugins")
        subprocess.run(["bash", ENTRY_POINT_SCRIPT, self.plugins],
                       check=True, stdout=subprocess.DEVNULL)

    def test_loaded_without_p(self):
        self.write("test_marked.py", """\
            import pytest

            _kept = []

            @pytest.mark.tracemalloc_leaks
            def test_leak():
                _kept.append(bytes(1000))
            """)
        returncode, output = self.run_pytest(
            "--strict-markers", "test_marked.py", plugin=False,
            path=[self.plugins])
        self.assertEqual(returncode, 1, output)
        self.assertEqual(self.summary(output)["leaked"], 1)
        returncode, output = self.run_pytest(
            "--strict-markers", "--tracemalloc-leaks", "test_marked.py",
            plugin=False, path=[self.plugins])
        self.assertEqual(returncode, 1, output)
        # With -p as well, the plugin is registered once.
        returncode, output = self.run_pytest(
            "--strict-markers", "test_marked.py", path=[self.plugins])
        self.assertEqual(returncode, 1, output)
        self.assertEqual(self.summary(output)["leaked"], 1)

    def test_without_entry_point_marker_is_unknown(self):
        # What the entry point fixes: without the plugin, --strict-markers
        # refuses the marker.
        self.write("test_marked.py", """\
            import pytest

            @pytest.mark.tracemalloc_leaks
            def test_it():
                pass
            """)
        returncode, output = self.run_pytest(
            "--strict-markers", "test_marked.py", plugin=False)
        self.assertNotEqual(returncode, 0, output)
        self.assertIn("'tracemalloc_leaks' not found in `markers`", output)

    def test_unmarked_session_is_silent(self):
        self.write("test_plain.py", """\
            def test_it():
                pass
            """)
        returncode, output = self.run_pytest(
            "test_plain.py", plugin=False, path=[self.plugins])
        self.assertEqual(returncode, 0, output)
        self.assertIn("plugins: tracemalloc-fork", output)
        self.assertNotIn("tracemalloc:", output)


if __name__ == "__main__":
    unittest.main()
