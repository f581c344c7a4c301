"""Soundness of tracemalloc.pytest_plugin's verdicts (issue 29, items 2.2
and 2.3), each case run serially and under pytest-xdist's -n 2.

* 2.2: a leak into a fixture of a wider scope (class, module, session)
  is found when the leaking test is the fixture's last user, although
  the fixture is torn down after that test; the fixture is still torn
  down once, when pytest would tear it down.
* 2.3: a leaking non-strict XPASS fails the run as any failure does
  (exit status 1, -x stops, --junitxml records a failure); a strict XPASS
  and an xfail that leaks keep pytest's own outcome.

Like test_tracemalloc_pytest, these tests run Debian's python3-pytest and
python3-pytest-xdist on the fork in child processes, and skip when they
are not installed.
"""

import os
import unittest
import xml.etree.ElementTree as ElementTree

from test.test_tracemalloc_pytest import (PYTEST_SITE, PytestHarness,
                                          marked_line, xdist_installed)


class Harness(PytestHarness):
    # Each case is run serially (xdist=False) and under -n 2.
    def run_case(self, xdist, *args):
        if xdist:
            if not xdist_installed():
                self.skipTest(f"pytest-xdist is not installed (no xdist in "
                              f"{PYTEST_SITE}; on Debian: apt-get install "
                              f"python3-pytest-xdist)")
            args = ("-n", "2", *args)
        return self.run_pytest("-p", "no:randomly", "--assert=plain", *args)

    def junit(self, path):
        """{test name: outcome} of a junitxml file: 'failure', 'error',
        'skipped' or 'passed' (an error in teardown next to a passed
        call counts as 'error')."""
        tree = ElementTree.parse(path)
        outcomes = {}
        for case in tree.iter("testcase"):
            kinds = [child.tag for child in case
                     if child.tag in ("failure", "error", "skipped")]
            outcome = kinds[0] if kinds else "passed"
            if "error" in kinds:
                outcome = "error"
            outcomes[case.get("name")] = outcome
        return outcomes


# Three leaks, each into a fixture of a wider scope whose last user is the
# leaking test, and clean tests that use fixtures of each scope.  Each
# fixture writes "setup NAME" and "teardown NAME" to events.txt.
SCOPED_CONFTEST = '''\
import os

import pytest

EVENTS = os.path.join(os.path.dirname(__file__), "events.txt")


def event(text):
    with open(EVENTS, "a", encoding="utf-8") as file:
        file.write(f"{os.getpid()} {text}\\n")


class Holder:
    def __init__(self):
        self.items = []


def holder(name):
    event(f"setup {name}")
    kept = Holder()
    yield kept
    kept.items.clear()
    event(f"teardown {name}")


@pytest.fixture(scope="session")
def session_holder():
    yield from holder("session")


@pytest.fixture(scope="module")
def module_holder():
    yield from holder("module")


@pytest.fixture(scope="class")
def class_holder():
    yield from holder("class")


@pytest.fixture(scope="module")
def clean_module_holder():
    yield from holder("clean-module")
'''

SCOPED_TESTS = {
    "test_class.py": '''\
class TestLeaksIntoClassFixture:
    def test_first(self, class_holder):
        assert class_holder.items == []

    def test_leak(self, class_holder):
        class_holder.items.append(bytearray(3000))  # LEAK-CLASS
''',
    "test_module.py": '''\
def test_first(module_holder):
    assert isinstance(module_holder.items, list)


def test_module_leak(module_holder):
    module_holder.items.append(bytearray(3000))  # LEAK-MODULE
''',
    "test_session.py": '''\
def test_session_leak(session_holder):
    session_holder.items.append(bytearray(3000))  # LEAK-SESSION
''',
    "test_clean.py": '''\
def test_first(clean_module_holder):
    clean_module_holder.items.append(bytearray(3000))
    clean_module_holder.items.pop()


def test_last(clean_module_holder):
    # Uses its fixture without keeping anything in it.
    clean_module_holder.items.append(bytearray(3000))
    clean_module_holder.items.clear()
''',
}

SCOPED_LEAKS = {
    "TestLeaksIntoClassFixture.test_leak": ("test_class.py", "LEAK-CLASS"),
    "test_module_leak": ("test_module.py", "LEAK-MODULE"),
    "test_session_leak": ("test_session.py", "LEAK-SESSION"),
}


class ScopedFixtureLeakTest(Harness, unittest.TestCase):
    """Item 2.2."""

    def setUp(self):
        super().setUp()
        self.write("conftest.py", SCOPED_CONFTEST)
        for name, text in SCOPED_TESTS.items():
            self.write(name, text)

    def events(self):
        """[(pid, event)] of events.txt, in order."""
        path = os.path.join(self.work, "events.txt")
        with open(path, encoding="utf-8") as file:
            return [tuple(line.split(" ", 1)) for line in file.read()
                    .splitlines()]

    def check_scoped(self, xdist):
        returncode, output = self.run_case(
            xdist, "--tracemalloc-leaks", "-rf",
            *sorted(SCOPED_TESTS))
        self.assertEqual(returncode, 1, output)
        leaked = {line.split()[1] for line in output.splitlines()
                  if line.startswith("FAILED ")}
        expected = {"test_class.py::TestLeaksIntoClassFixture::test_leak",
                    "test_module.py::test_module_leak",
                    "test_session.py::test_session_leak"}
        self.assertEqual(leaked, expected, output)
        failures = self.failures(output)
        self.assertEqual(set(failures), set(SCOPED_LEAKS), output)
        for name, (filename, mark) in SCOPED_LEAKS.items():
            with self.subTest(test=name):
                # The first site of the failure is the leaking line.
                site = failures[name][0]
                self.assertEqual(
                    (os.path.basename(site[0]), site[1]),
                    (filename, marked_line(os.path.join(self.work,
                                                        filename), mark)),
                    output)
        self.assertIn("3 failed, 4 passed", output)
        self.assertEqual(self.summary(output),
                         {"checked": 7, "leaked": 3, "not_checked": 0,
                          "reasons": ""})
        # Each fixture instance is set up once and torn down once, by the
        # process that set it up (in order: no teardown before its setup).
        events = self.events()
        open_fixtures = {}
        for pid, text in events:
            kind, name = text.split(" ", 1)
            key = (pid, name)
            if kind == "setup":
                self.assertNotIn(key, open_fixtures, events)
                open_fixtures[key] = True
            else:
                self.assertIn(key, open_fixtures, events)
                del open_fixtures[key]
        self.assertEqual(open_fixtures, {}, events)
        names = [text.split(" ", 1)[1] for _, text in events]
        for name in ("class", "module", "session", "clean-module"):
            self.assertIn(name, names, events)
        if not xdist:
            # One process, files in order: each fixture set up once.
            self.assertEqual(len(events), 8, events)

    def test_serial(self):
        self.check_scoped(xdist=False)

    def test_xdist(self):
        self.check_scoped(xdist=True)

    def check_torn_down_before_next_module(self, xdist):
        # The module fixture of test_module.py is torn down when the last
        # check of that module ends, before any test of the next module:
        # not only at the end of the session.
        self.write("test_zz_after.py", '''\
import conftest


def test_after():
    with open(conftest.EVENTS, encoding="utf-8") as file:
        events = [line.split(" ", 1)[1] for line in file.read()
                  .splitlines()]
    assert "teardown module" in events, events
''')
        returncode, output = self.run_case(
            xdist, "--tracemalloc-leaks", "test_module.py",
            "test_zz_after.py")
        self.assertEqual(returncode, 1, output)
        self.assertIn("1 failed, 2 passed", output)
        self.assertEqual(self.summary(output)["leaked"], 1)

    def test_torn_down_before_next_module_serial(self):
        # Serial only: under -n 2 the two files may run in two workers,
        # in any order (check_scoped checks the teardowns there).
        self.check_torn_down_before_next_module(xdist=False)

    def check_wider_teardown_error(self, xdist):
        # An error in the teardown of a wider fixture, after the rounds,
        # is the test's teardown error, as without the check.
        self.write("test_bad_teardown.py", '''\
import pytest


@pytest.fixture(scope="module")
def fragile():
    yield []
    raise RuntimeError("module fixture teardown fails")


def test_it(fragile):
    fragile.append(1)
    fragile.pop()
''')
        returncode, output = self.run_case(
            xdist, "--tracemalloc-leaks", "--junitxml=out.xml",
            "test_bad_teardown.py")
        self.assertEqual(returncode, 1, output)
        self.assertIn("module fixture teardown fails", output)
        self.assertIn("1 passed, 1 error", output)
        self.assertNotIn("INTERNALERROR", output)
        self.assertEqual(self.summary(output),
                         {"checked": 1, "leaked": 0, "not_checked": 0,
                          "reasons": ""})
        self.assertEqual(self.junit(os.path.join(self.work, "out.xml")),
                         {"test_it": "error"})

    def test_wider_teardown_error_serial(self):
        self.check_wider_teardown_error(xdist=False)

    def test_wider_teardown_error_xdist(self):
        self.check_wider_teardown_error(xdist=True)


XFAIL_TESTS = '''\
import pytest

_kept = []


@pytest.mark.xfail(reason="known to fail")
def test_xpass_leaks():
    _kept.append(bytearray(3000))  # LEAK-XPASS


@pytest.mark.xfail(reason="known to fail")
def test_xpass_clean():
    assert sorted([2, 1]) == [1, 2]


@pytest.mark.xfail(reason="known to fail", strict=True)
def test_strict_xpass_leaks():
    _kept.append(bytearray(3000))


@pytest.mark.xfail(reason="known to fail")
def test_xfail_leaks():
    _kept.append(bytearray(3000))
    assert False


@pytest.mark.xfail(reason="known to fail", strict=True)
def test_strict_xfail_leaks():
    _kept.append(bytearray(3000))
    assert False
'''

# What each test gives: its junitxml outcome, and its verdict.
XFAIL_OUTCOMES = {
    "test_xpass_leaks": "failure",         # the leak: a failure
    "test_xpass_clean": "passed",          # XPASS, checked, clean
    "test_strict_xpass_leaks": "failure",  # XPASS(strict), not checked
    "test_xfail_leaks": "skipped",         # xfailed, not checked
    "test_strict_xfail_leaks": "skipped",  # xfailed, not checked
}


class XpassLeakTest(Harness, unittest.TestCase):
    """Item 2.3."""

    def setUp(self):
        super().setUp()
        self.path = self.write("test_xfail.py", XFAIL_TESTS)

    def check_outcomes(self, xdist):
        returncode, output = self.run_case(
            xdist, "--tracemalloc-leaks", "-rfxX", "--junitxml=out.xml",
            "test_xfail.py")
        self.assertEqual(returncode, 1, output)
        self.assertIn("2 failed, 2 xfailed, 1 xpassed", output)
        failed = {line.split()[1] for line in output.splitlines()
                  if line.startswith("FAILED ")}
        self.assertEqual(failed,
                         {"test_xfail.py::test_xpass_leaks",
                          "test_xfail.py::test_strict_xpass_leaks"}, output)
        sites = self.failures(output)["test_xpass_leaks"]
        self.assertEqual(sites[0][1], marked_line(self.path, "LEAK-XPASS"),
                         output)
        self.assertIn("XPASS test_xfail.py::test_xpass_clean", output)
        self.assertEqual(self.summary(output),
                         {"checked": 2, "leaked": 1, "not_checked": 3,
                          "reasons": "2 xfailed, 1 failed"})
        self.assertEqual(self.junit(os.path.join(self.work, "out.xml")),
                         XFAIL_OUTCOMES)

    def test_outcomes_serial(self):
        self.check_outcomes(xdist=False)

    def test_outcomes_xdist(self):
        self.check_outcomes(xdist=True)

    def check_leak_alone(self, xdist):
        # The leaking XPASS alone: its failure is the run's exit status.
        returncode, output = self.run_case(
            xdist, "--tracemalloc-leaks", "--junitxml=out.xml",
            "test_xfail.py::test_xpass_leaks",
            "test_xfail.py::test_xpass_clean")
        self.assertEqual(returncode, 1, output)
        self.assertIn("1 failed, 1 xpassed", output)
        self.assertEqual(self.junit(os.path.join(self.work, "out.xml")),
                         {"test_xpass_leaks": "failure",
                          "test_xpass_clean": "passed"})

    def test_leak_alone_serial(self):
        self.check_leak_alone(xdist=False)

    def test_leak_alone_xdist(self):
        self.check_leak_alone(xdist=True)

    def check_exitfirst(self, xdist):
        self.write("test_then.py", '''\
def test_a():
    pass


def test_b():
    pass


def test_c():
    pass
''')
        returncode, output = self.run_case(
            xdist, "--tracemalloc-leaks", "-x",
            "test_xfail.py::test_xpass_leaks", "test_then.py")
        # The exit status and the stop of an ordinary failure under -x
        # (pytest-xdist reports its stop as an interruption).
        self.write("test_fails.py", '''\
def test_fails():
    assert False
''')
        plain_returncode, plain_output = self.run_case(
            xdist, "-x", "test_fails.py", "test_then.py")
        self.assertEqual(plain_returncode, 1 if not xdist else 2,
                         plain_output)
        self.assertEqual(returncode, plain_returncode, output)
        self.assertIn("stopping after 1 failures", output)
        if not xdist:
            # The tests after the failure are not run.
            self.assertIn("1 failed in", output)
            self.assertNotIn("passed", output.splitlines()[-1])

    def test_exitfirst_serial(self):
        self.check_exitfirst(xdist=False)

    def test_exitfirst_xdist(self):
        self.check_exitfirst(xdist=True)


# Review of issue 29, finding 4: a checked test that starts while tracing
# samples aborted the session with INTERNALERROR.
SAMPLING_TESTS = """\
import tracemalloc

KEEP = []


def test_starts_sampling():
    tracemalloc.stop()
    tracemalloc.start(1, sample=4096)


def test_leaks():
    KEEP.append(bytearray(5000))


def test_clean():
    pass
"""

SAMPLING_MARKED_TESTS = """\
import pytest


@pytest.mark.tracemalloc_leaks
def test_marked():
    pass


def test_other():
    pass
"""

SAMPLING_REASON = "the leak check needs exact tracing"


class SamplingTest(Harness, unittest.TestCase):
    """Under sampling the check says that it needs exact tracing: a usage
    error for --tracemalloc-leaks in a sampling process, and a "not
    checked" verdict for a test that starts while tracing samples."""

    def run_sampling(self, xdist, *args):
        from test.support import os_helper
        with os_helper.EnvironmentVarGuard() as env:
            env["PYTHONTRACEMALLOCSAMPLE"] = "4096"
            return self.run_case(xdist, *args)

    def test_test_starts_sampling(self):
        # Serial only: the tests after the one that starts sampling must
        # run in its process.  Tracing is on from the start (as with -X
        # tracemalloc), so the first check does not stop it at its end.
        self.write("conftest.py", "import tracemalloc\n"
                                  "tracemalloc.start(1)\n")
        self.write("test_sampling.py", SAMPLING_TESTS)
        returncode, output = self.run_case(
            False, "--tracemalloc-leaks", "test_sampling.py")
        self.assertNotIn("INTERNALERROR", output)
        self.assertEqual(returncode, 0, output)
        self.assertIn("3 passed", output)
        self.assertIn(SAMPLING_REASON, output)
        self.assertIn("3 not checked", output)

    def test_sampling_process_usage_error(self):
        self.write("test_sampling.py", SAMPLING_TESTS)
        returncode, output = self.run_sampling(
            False, "--tracemalloc-leaks", "test_sampling.py")
        self.assertNotIn("INTERNALERROR", output)
        self.assertEqual(returncode, 4, output)
        self.assertIn("--tracemalloc-leaks needs exact tracing", output)

    def test_sampling_process_marked_test_not_checked(self):
        self.write("test_marked.py", SAMPLING_MARKED_TESTS)
        returncode, output = self.run_sampling(False, "test_marked.py")
        self.assertNotIn("INTERNALERROR", output)
        self.assertEqual(returncode, 0, output)
        self.assertIn("2 passed", output)
        self.assertIn("1 not checked", output)
        self.assertIn(SAMPLING_REASON, output)


# Review of issue 29, finding 6: bad option and marker values crashed.
BAD_NFRAME_MARKER_TESTS = """\
import pytest


@pytest.mark.tracemalloc_leaks(nframe=0)
def test_bad_nframe():
    pass


def test_after():
    pass
"""


class OptionValidationTest(Harness, unittest.TestCase):
    """A bad --tracemalloc-threshold or --tracemalloc-nframe is a usage
    error (exit 4), a bad nframe of the marker that test's error; not an
    OverflowError traceback or an INTERNALERROR."""

    def setUp(self):
        super().setUp()
        self.write("test_ok.py", "def test_ok():\n    pass\n")

    def assert_usage_error(self, option, value):
        returncode, output = self.run_case(
            False, "--tracemalloc-leaks", option, value, "test_ok.py")
        self.assertNotIn("INTERNALERROR", output)
        self.assertNotIn("Traceback", output)
        self.assertEqual(returncode, 4, output)
        self.assertIn(f"error: argument {option}", output)

    def test_threshold_too_large(self):
        self.assert_usage_error("--tracemalloc-threshold", "9" * 400)

    def test_nframe_zero(self):
        self.assert_usage_error("--tracemalloc-nframe", "0")

    def test_nframe_negative(self):
        self.assert_usage_error("--tracemalloc-nframe", "-1")

    def test_nframe_too_large(self):
        self.assert_usage_error("--tracemalloc-nframe", "70000")

    def test_counts_and_ignore(self):
        # Issue 31 review (s38), finding F8: a bad count or an empty
        # pattern is a usage error naming the option, not every test
        # erroring at setup, blamed on a marker.
        for option, value in (("--tracemalloc-rounds", "0"),
                              ("--tracemalloc-rounds", "x"),
                              ("--tracemalloc-warmup", "-1"),
                              ("--tracemalloc-extend", "-1"),
                              ("--tracemalloc-ignore", "")):
            with self.subTest(option=option, value=value):
                self.assert_usage_error(option, value)

    def test_marker_nframe_zero(self):
        self.write("test_marker.py", BAD_NFRAME_MARKER_TESTS)
        returncode, output = self.run_case(False, "-rE", "test_marker.py")
        self.assertNotIn("INTERNALERROR", output)
        self.assertEqual(returncode, 1, output)
        self.assertIn("1 passed, 1 error", output)
        self.assertIn("nframe must be between 1 and 65535", output)


if __name__ == "__main__":
    unittest.main()
