"""The leak checker's verdict matrix (issue 29, item 3.2).

Every cell of Lib/test/tracemalloc_verdict_table.py -- an entry point, a
kind of target, what the target does -- is run here and its verdict and
exit status compared with the table's.  The cells of one entry point run
in one child process (one pytest session, one regrtest run, one unittest
run); only the CLI runs one process per cell.  The table is also the one
that Doc/library/tracemalloc.rst shows: DocTableTest checks that the doc's
table is Tools/fork/verdict_table.py's rendering of the data.

A cell marked known wrong in the table must still give the wrong answer
recorded there; it is reported as KNOWN WRONG on standard error, and the
test fails once it is right, so that the table is updated with the fix.

TRACEMALLOC_VERDICT_PATH, when set, goes first on the children's
PYTHONPATH (to run the matrix against another copy of the tracemalloc
package, e.g. an older commit's).
"""

import json
import os
import re
import subprocess
import sys
import textwrap
import tracemalloc
import unittest

from test import tracemalloc_verdict_table as table
from test.support import os_helper

try:
    from test.test_tracemalloc_pytest import (
        make_pytest_site, pytest_installed, xdist_installed, REPO)
except ImportError:         # pragma: no cover
    raise unittest.SkipTest("test_tracemalloc_pytest is missing")

LIB_DIRECTORY = os.path.dirname(os.path.dirname(
    os.path.abspath(tracemalloc.__file__)))
WARMUP = 1
ROUNDS = 4
TIMEOUT = 300

LEAK = "_kept.extend(bytearray(1024) for _ in range(10))"
CLEAN = "[bytearray(1024) for _ in range(10)]"
RAISE = "raise ValueError('boom')"
BODY = {"leaks": LEAK, "clean": CLEAN, "raises": RAISE}
# The clean targets that use the package (issue 43, items 1 and 2): a leak
# check of their own, work under a label with a new value per call.  Each
# module of cells defines _clean_work() and _request_ids (USES_PACKAGE).
NESTED_CHECK = (f"leaks.assert_no_leaks(_clean_work, warmup={WARMUP}, "
                f"rounds={ROUNDS})")
LABELLED = "with tracemalloc.label(request=str(next(_request_ids))):"
USES_PACKAGE = (f"import itertools\nimport tracemalloc\n"
                f"from tracemalloc import leaks\n\n"
                f"_request_ids = itertools.count()\n\n\n"
                f"def _clean_work():\n    {CLEAN}\n\n\n")


def package_body(kind, indent):
    """The body of a "nested check" or "labelled" target, its lines after
    the first indented by *indent* spaces; None for the other kinds."""
    if kind == "nested check":
        return NESTED_CHECK
    if kind == "labelled":
        return f"{LABELLED}\n{' ' * (indent + 4)}{CLEAN}"
    return None


def cells_of(entry):
    return [(index, row) for index, row in enumerate(table.CELLS)
            if row[0] == entry]


def child_env(*path):
    env = dict(os.environ)
    for name in ("PYTHONTRACEMALLOC", "PYTEST_ADDOPTS", "PYTEST_PLUGINS",
                 "PYTEST_XDIST_AUTO_NUM_WORKERS", "PYTHONPATH"):
        env.pop(name, None)
    paths = list(path) + [LIB_DIRECTORY]
    first = os.environ.get("TRACEMALLOC_VERDICT_PATH")
    if first:
        paths.insert(0, first)
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run(command, cwd, env):
    process = subprocess.run(command, cwd=cwd, env=env,
                             stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, timeout=TIMEOUT)
    return process.returncode, process.stdout.decode("utf-8", "replace")


def indent(code, level):
    return textwrap.indent(textwrap.dedent(code), "    " * level)


# --------------------------------------------------------------------------
# Targets: the code of each cell.

def callable_source(index, kind, outcome):
    """Module-level code defining target_{index} for check() and the CLI."""
    name = f"target_{index}"
    body = BODY[outcome]
    if package_body(kind, 4) is not None:
        return f"def {name}():\n    {package_body(kind, 4)}\n"
    if kind == "function":
        return f"def {name}():\n    {body}\n"
    if kind == "coroutine function":
        return (f"async def {name}():\n    await asyncio.sleep(0)\n"
                f"    {body}\n")
    if kind == "generator function":
        return f"def {name}():\n    yield 1\n    {body}\n    yield 2\n"
    if kind == "C callable":
        if outcome == "leaks":
            return (f"_buffer_{index} = bytearray()\n"
                    f"{name} = functools.partial(_buffer_{index}.extend, "
                    f"bytes(10240))\n")
        if outcome == "clean":
            return f"{name} = functools.partial(bytearray, 10240)\n"
        return f"{name} = functools.partial(int, 'not a number')\n"
    raise ValueError(kind)


CALLABLE_HEADER = ("import asyncio\nimport functools\n" + USES_PACKAGE
                   + "_kept = []\n\n")


def testcase_source(index, kind, outcome, decorate, base):
    """A TestCase class Test{index} with one test, test_cell."""
    body = BODY[outcome].replace(RAISE, "self.fail('boom')")
    if package_body(kind, 8) is not None:
        body = package_body(kind, 8)
    decorators = []
    if decorate:
        decorators.append(decorate)
    prefix = ""
    bases = base
    method = "def"
    if kind == "async test method":
        bases = base.replace("unittest.TestCase",
                             "unittest.IsolatedAsyncioTestCase")
        method = "async def"
        body = f"await asyncio.sleep(0)\n        {body}"
    if kind == "subTest":
        body = (f"for i in range(3):\n"
                f"            with self.subTest(i=i):\n"
                f"                if i == 1:\n"
                f"                    {body}\n"
                f"                else:\n"
                f"                    {CLEAN}")
    if kind == "expectedFailure":
        decorators.insert(0, "unittest.expectedFailure")
    if kind == "skip":
        decorators.insert(0, "unittest.skip('not today')")
    if kind == "setUpClass":
        prefix = ("    @classmethod\n    def setUpClass(cls):\n"
                  "        cls.kept = []\n\n"
                  "    @classmethod\n    def tearDownClass(cls):\n"
                  "        del cls.kept\n\n")
        body = body.replace("_kept.", "self.kept.")
    lines = [f"class Test{index}({bases}):\n", prefix]
    for decorator in decorators:
        lines.append(f"    @{decorator}\n")
    lines.append(f"    {method} test_cell(self):\n        {body}\n\n\n")
    return "".join(lines)


TESTCASE_HEADER = ("import asyncio\nimport unittest\n"
                   "from tracemalloc.testing import LeakCheckMixin, "
                   "no_leaks\n" + USES_PACKAGE + "_kept = []\n\n\n")


def pytest_source(index, kind, outcome):
    """pytest code of the cell *index*, as (file suffix, code): each test's
    name holds K{index}."""
    body = BODY[outcome]
    name = f"test_k{index}"
    if kind == "test function":
        return "main", f"def {name}():\n    {body}\n\n\n"
    if kind == "parametrize":
        return "main", (f"@pytest.mark.parametrize('n', [1])\n"
                        f"def {name}(n):\n    {body}\n\n\n")
    if kind == "doctest":
        statement = body.replace("_kept", "KEPT")
        if outcome == "clean":
            statement = "_ = " + statement
        return "main", (f"def doc_k{index}():\n"
                        f"    '''\n    >>> {statement}\n    '''\n\n\n")
    if kind.startswith("xfail") or kind.startswith("xpass"):
        strict = "True" if kind.endswith("strict") else "False"
        return "main", (f"@pytest.mark.xfail(strict={strict})\n"
                        f"def {name}():\n    {body}\n\n\n")
    if kind == "pytest.skip":
        return "main", f"def {name}():\n    pytest.skip('no')\n    {body}\n\n\n"
    if kind == "function fixture":
        return "main", (f"@pytest.fixture\ndef fixture_k{index}():\n"
                        f"    {body}\n    yield\n\n\n"
                        f"def {name}(fixture_k{index}):\n    pass\n\n\n")
    scope = kind.split()[0]
    if scope in ("class", "module", "session"):
        # The test keeps its memory in the fixture (leaks) or not (clean);
        # it is the fixture's last user, whose last round tears it down.
        body = body.replace("_kept", "kept")
        test = (f"def {name}(self, kept_{scope}):\n    kept = kept_{scope}\n"
                f"    {body}\n")
        if scope == "class":
            return "main", (f"class TestK{index}:\n"
                            f"    @pytest.fixture(scope='class')\n"
                            f"    def kept_class(self):\n"
                            f"        kept = []\n        yield kept\n"
                            f"        kept.clear()\n\n"
                            + indent(test, 1) + "\n\n")
        test = test.replace("(self, ", "(")
        # a module of its own for a module-scoped fixture; one module for
        # the session-scoped one, run last (see run_pytest)
        return (f"module_k{index}" if scope == "module" else scope,
                test + "\n\n")
    # unittest.TestCase cells, as pytest collects them
    return "main", testcase_source(index, kind, outcome, None,
                                   "unittest.TestCase").replace(
        f"class Test{index}(", f"class TestK{index}(")


PYTEST_HEADER = ("import asyncio\nimport unittest\nimport pytest\n"
                 + USES_PACKAGE + "_kept = []\nKEPT = []\n\n\n")

SCOPED_FIXTURE = """\
import pytest


@pytest.fixture(scope={scope!r})
def kept_{scope}():
    kept = []
    yield kept
    kept.clear()


"""

CONFTEST = """\
import json

_REPORTS = {}


def pytest_runtest_logreport(report):
    _REPORTS.setdefault(report.nodeid, []).append(
        [report.when, report.outcome, hasattr(report, "wasxfail"),
         str(report.longrepr) if report.longrepr else ""])


def pytest_sessionfinish(session):
    if hasattr(session.config, "workerinput"):
        return
    with open("reports.json", "w") as file:
        json.dump(_REPORTS, file)
"""

CELL_ID = re.compile(r"[kK](\d+)(?!\d)")


def pytest_verdict(reports):
    """(verdict, exit) of one test from its reports: [when, outcome,
    wasxfail, text] each."""
    failed = [r for r in reports if r[1] == "failed"]
    counted = [r for r in failed if not r[2]]
    status = "1" if counted else "0"
    if failed:
        leak = any("leaked" in r[3] and "allocation site" in r[3]
                   for r in failed)
        verdict = "leak" if leak else "error"
        if not counted and not leak:
            verdict = "skipped"
    elif any(r[1] == "skipped" for r in reports):
        verdict = "skipped"
    else:
        verdict = "clean"
    calls = [r for r in reports if r[0] == "call" and r[1] == "failed"]
    if len(calls) > 1:
        verdict += f" x{len(calls)}"
    return verdict, status


# --------------------------------------------------------------------------
# unittest's result, recorded per test (a subTest counts for its test).

UNITTEST_DRIVER = """\
import json, sys, unittest
from tracemalloc.leaks import LeakError

class Result(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.cells = {}

    def _add(self, test, what, err=None):
        test = getattr(test, "test_case", test)
        name = type(test).__name__
        leak = err is not None and issubclass(err[0], LeakError)
        self.cells.setdefault(name, []).append([what, leak])

    def addSuccess(self, test):
        super().addSuccess(test)
        self._add(test, "success")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._add(test, "failure", err)

    def addError(self, test, err):
        super().addError(test, err)
        self._add(test, "failure", err)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._add(test, "skip")

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._add(test, "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._add(test, "unexpected success")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            self._add(test, "failure", err)

import cells
suite = unittest.defaultTestLoader.loadTestsFromModule(cells)
result = Result()
suite.run(result)
print("CELLS=" + json.dumps(result.cells))
"""


def unittest_verdict(events):
    failures = [e for e in events if e[0] == "failure"]
    kinds = {e[0] for e in events}
    if failures:
        verdict = "leak" if any(e[1] for e in failures) else "error"
        if len(failures) > 1:
            verdict += f" x{len(failures)}"
        return verdict, "1"
    if "unexpected success" in kinds:
        return "error", "1"
    if kinds & {"skip", "expected failure"}:
        return "skipped", "0"
    return "clean", "0"


# --------------------------------------------------------------------------

class MatrixTest(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.directory = self.enterContext(os_helper.temp_dir())

    def write(self, name, text):
        path = os.path.join(self.directory, name)
        with open(path, "w", encoding="utf-8") as file:
            file.write(text)
        return path

    def compare(self, entry, observed, output=""):
        """Compare the observed (verdict, exit) of each cell of *entry*."""
        mismatches = []
        known = []
        for index, row in cells_of(entry):
            _, kind, outcome, verdict, status, wrong = row
            got = observed.get(index, ("missing", "?"))
            label = f"{entry} | {kind} | {outcome}"
            if wrong is not None:
                item, wrong_verdict, wrong_status = wrong
                if tuple(got) == (wrong_verdict, wrong_status):
                    known.append(f"KNOWN WRONG (issue 29 item {item}): "
                                 f"{label}: gives {wrong_verdict}/"
                                 f"{wrong_status}, right is {verdict}/"
                                 f"{status}")
                else:
                    mismatches.append(
                        f"{label}: known wrong (item {item}) as "
                        f"{wrong_verdict}/{wrong_status}, now gives "
                        f"{got[0]}/{got[1]} (right: {verdict}/{status}): "
                        f"update the table")
            elif tuple(got) != (verdict, status):
                mismatches.append(f"{label}: expected {verdict}/{status}, "
                                  f"got {got[0]}/{got[1]}")
        for line in known:
            print(line, file=sys.stderr, flush=True)
        if mismatches:
            self.fail(f"{len(mismatches)} cell(s) of {entry} wrong:\n"
                      + "\n".join(mismatches)
                      + ("\n\n--- output ---\n" + output[-6000:]
                         if output else ""))

    # check() ---------------------------------------------------------------

    def test_check(self):
        entry = "check()"
        source = [CALLABLE_HEADER]
        for index, (_, kind, outcome, *_) in cells_of(entry):
            source.append(callable_source(index, kind, outcome))
        self.write("cells.py", "\n".join(source))
        driver = textwrap.dedent(f"""\
            import json
            import cells
            from tracemalloc import leaks
            result = {{}}
            for index in {[i for i, _ in cells_of(entry)]!r}:
                target = getattr(cells, f"target_{{index}}")
                try:
                    report = leaks.check(target, warmup={WARMUP},
                                         rounds={ROUNDS})
                except Exception as exc:
                    result[index] = ["error", "-"]
                else:
                    result[index] = ["leak" if report else "clean", "-"]
            print("CELLS=" + json.dumps(result))
            """)
        rc, output = run([sys.executable, "-c", driver], self.directory,
                         child_env(self.directory))
        self.compare(entry, self.parse(output), output)

    def parse(self, output):
        for line in output.splitlines():
            if line.startswith("CELLS="):
                return {int(k): tuple(v)
                        for k, v in json.loads(line[6:]).items()}
        self.fail(f"no result:\n{output[-6000:]}")

    # CLI -------------------------------------------------------------------

    def test_cli(self):
        entry = "CLI"
        source = [CALLABLE_HEADER]
        for index, (_, kind, outcome, *_) in cells_of(entry):
            if kind == "script":
                self.write(f"script_{index}.py",
                           "import cells\n"
                           + BODY[outcome].replace("_kept", "cells._kept")
                           + "\n")
            else:
                source.append(callable_source(index, kind, outcome))
        self.write("cells.py", "\n".join(source))
        observed = {}
        outputs = []
        env = child_env(self.directory)
        for index, (_, kind, outcome, *_) in cells_of(entry):
            target = (f"script_{index}.py" if kind == "script"
                      else f"cells:target_{index}")
            rc, output = run([sys.executable, "-m", "tracemalloc", "leaks",
                              "-q", "--warmup", str(WARMUP), "--rounds",
                              str(ROUNDS), target], self.directory, env)
            verdict = {0: "clean", 1: "leak"}.get(rc, "error")
            if rc == 1 and "leaked" not in output:
                verdict = "error"
            observed[index] = (verdict, str(rc))
            outputs.append(f"[{target}] rc={rc}\n{output}")
        self.compare(entry, observed, "\n".join(outputs))

    # unittest --------------------------------------------------------------

    def run_unittest(self, entry, decorate, base, header=TESTCASE_HEADER):
        source = [header]
        for index, (_, kind, outcome, *_) in cells_of(entry):
            source.append(testcase_source(index, kind, outcome, decorate,
                                          base))
        self.write("cells.py", "".join(source))
        rc, output = run([sys.executable, "-c", UNITTEST_DRIVER],
                         self.directory, child_env(self.directory))
        observed = {}
        events = {}
        for line in output.splitlines():
            if line.startswith("CELLS="):
                events = json.loads(line[6:])
        if not events:
            self.fail(f"no result:\n{output[-6000:]}")
        for index, _ in cells_of(entry):
            observed[index] = unittest_verdict(events.get(f"Test{index}",
                                                          []))
        self.compare(entry, observed, output)

    def test_no_leaks(self):
        self.run_unittest("@no_leaks",
                          f"no_leaks(warmup={WARMUP}, rounds={ROUNDS})",
                          "unittest.TestCase")

    def test_mixin(self):
        source = (f"class Mixin(LeakCheckMixin):\n"
                  f"    leak_check_warmup = {WARMUP}\n"
                  f"    leak_check_rounds = {ROUNDS}\n\n\n")
        self.run_unittest("LeakCheckMixin", None, "Mixin, unittest.TestCase",
                          TESTCASE_HEADER + source)

    # pytest ----------------------------------------------------------------

    def run_pytest(self, entry, *options):
        if not pytest_installed():
            self.skipTest("pytest is not installed (on Debian: apt-get "
                          "install python3-pytest python3-pytest-xdist)")
        site = make_pytest_site(os.path.join(self.directory, "site"))
        files = {"main": [PYTEST_HEADER]}
        for index, (_, kind, outcome, *_) in cells_of(entry):
            suffix, code = pytest_source(index, kind, outcome)
            files.setdefault(suffix, [])
            files[suffix].append(code)
        work = os.path.join(self.directory, "work")
        os.mkdir(work)
        self.write("work/conftest.py", CONFTEST)
        self.write("work/test_a_main.py", "".join(files.pop("main")))
        for suffix, parts in files.items():
            scope = suffix.split("_")[0]
            if scope == "session":
                # Last in the session, the leaking test last of all: the
                # last user of the session-scoped fixture.
                name = "test_z_session.py"
                parts = sorted(parts, key=lambda code: "kept.extend" in code)
            else:
                name = f"test_b_{suffix}.py"
            self.write(f"work/{name}",
                       SCOPED_FIXTURE.format(scope=scope) + "".join(parts))
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                   "--color=no", "-p", "tracemalloc.pytest_plugin",
                   "--tracemalloc-leaks", "--doctest-modules",
                   "--tracemalloc-warmup", str(WARMUP),
                   "--tracemalloc-rounds", str(ROUNDS), "-q", *options]
        rc, output = run(command, work, child_env(site))
        reports_path = os.path.join(work, "reports.json")
        if not os.path.exists(reports_path):
            self.fail(f"pytest wrote no reports (exit {rc}):\n"
                      f"{output[-6000:]}")
        with open(reports_path) as file:
            reports = json.load(file)
        per_cell = {}
        for nodeid, items in reports.items():
            match = CELL_ID.search(nodeid.split("::", 1)[-1])
            if match:
                per_cell.setdefault(int(match.group(1)), []).extend(items)
        observed = {index: pytest_verdict(items)
                    for index, items in per_cell.items()}
        # The session's own exit status: 1 when some cell's is.
        expected_rc = 1 if any(status == "1" for index, status in
                               (((i, o[1]) for i, o in observed.items())))\
            else 0
        self.compare(entry, observed, output)
        self.assertEqual(rc, expected_rc, output[-6000:])

    def test_pytest(self):
        self.run_pytest("pytest")

    def test_pytest_xdist(self):
        if not xdist_installed():
            self.skipTest("pytest-xdist is not installed")
        self.run_pytest("pytest -n 2", "-n", "2")

    # regrtest --------------------------------------------------------------

    def test_regrtest(self):
        entry = "regrtest -R"
        names = []
        for index, (_, kind, outcome, *_) in cells_of(entry):
            name = f"test_rk{index}"
            names.append(name)
            self.write(f"{name}.py", TESTCASE_HEADER + testcase_source(
                index, kind, outcome, None, "unittest.TestCase")
                + "def tearDownModule():\n"
                  "    asyncio.set_event_loop_policy(None)\n")
        rc, output = run([sys.executable, "-X", "tracemalloc=25", "-m",
                          "test", "--testdir", self.directory, "-R", "2:3",
                          *names], self.directory,
                         child_env(self.directory))
        observed = {}
        for index, _ in cells_of(entry):
            name = f"test_rk{index}"
            if re.search(rf"^{name} leaked \[", output, re.M):
                observed[index] = ("leak", "2")
            elif re.search(rf"\b{name} failed\b", output) or \
                    re.search(rf"^{name} crashed", output, re.M):
                observed[index] = ("error", "2")
            elif re.search(rf"\b{name} skipped\b", output):
                observed[index] = ("skipped", "0")
            else:
                observed[index] = ("clean", "0")
        self.compare(entry, observed, output)


# --------------------------------------------------------------------------

class DocTableTest(unittest.TestCase):
    def test_doc_shows_the_table(self):
        tool = os.path.join(REPO, "Tools", "fork", "verdict_table.py")
        doc = os.path.join(REPO, "Doc", "library", "tracemalloc.rst")
        if not (os.path.exists(tool) and os.path.exists(doc)):
            self.skipTest("not in the fork's source tree")
        sys.path.insert(0, os.path.dirname(tool))
        try:
            import verdict_table
        finally:
            sys.path.remove(os.path.dirname(tool))
        with open(doc, encoding="utf-8") as file:
            text = file.read()
        self.assertEqual(verdict_table.extract(text),
                         verdict_table.render(table.CELLS),
                         "the doc's verdict table differs from "
                         "Lib/test/tracemalloc_verdict_table.py: run "
                         "Tools/fork/verdict_table.py --update")


if __name__ == "__main__":
    unittest.main()
