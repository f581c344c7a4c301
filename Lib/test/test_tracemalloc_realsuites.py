"""The leak checker on the test suites of real projects.

Debian source packages of small pure-Python projects, fetched once with
`apt-get source` (Tools/fork/fetch-debian-source.sh: a private apt state
directory, the machine's apt configuration untouched) and cached in
~/.cache/tracemalloc-fork/debian-src.  For each project:

* a slice of its own test suite, run by pytest with --tracemalloc-leaks,
  reports no leak: every test in it is checked, none leaks, none is left
  unchecked, except the exclusions listed with their cause in PROJECTS;
* a copy of the project with a leak planted in one of its functions (a
  wrapper that keeps 4 KiB per call) has the planted line reported first by
  pytest on the tests that call the function, by the command line
  (``python -m tracemalloc leaks module:func``) and, for the projects whose
  tests are unittest.TestCase classes, by tracemalloc.testing's
  LeakCheckMixin.

The projects: toolz, sortedcontainers (and its doctests), python-jmespath
(unittest.TestCase classes), python-toml, python-boltons and more-itertools
(unittest.TestCase classes).  A project whose source cannot be fetched is
skipped, saying so: the archive mirror of the fork's machines serves the
source of the first four, not that of the last two.

The slices keep the run short (each checked test runs 7 times, with a
snapshot of the process after 6 of them); Tools/bench/pytest_leakcheck.py
measures what the check costs on the same slices.  The tests skip, saying
so, when pytest or a project's source is not available (no network on the
first run).  `make test-real-suites` runs this file alone.
"""

import os
import re
import shutil
import subprocess
import sys
import textwrap
import unittest

from test.support import os_helper
from test.test_tracemalloc_pytest import (PytestHarness, REPO, SITE_LINE,
                                          marked_line, xdist_installed)

FETCH_SCRIPT = os.path.join(REPO, "Tools", "fork", "fetch-debian-source.sh")
PLANTED_MARK = "# PLANTED LEAK"
# --tracemalloc-max-reports of the planted runs: python-jmespath's 17
# leaking tests go past it.
MAX_REPORTS = 5


class Project:
    def __init__(self, package, *, tests, style, plant_file, plant,
                 planted_tests, cli_target, cli_module="", unittest_case=None,
                 exclusions=None, extra_args=(), doctests=()):
        self.package = package          # the Debian source package
        self.tests = tests              # pytest arguments: the slice
        # pytest arguments of a slice of doctests (a run of their own).
        self.doctests = doctests
        self.style = style
        self.plant_file = plant_file    # relative to the source root
        self.plant = plant              # appended to plant_file
        self.planted_tests = planted_tests   # pytest arguments
        self.cli_target = cli_target    # module:function for the CLI
        self.cli_module = cli_module    # the module of cli_target, if new
        self.unittest_case = unittest_case  # "module:Class" for the mixin
        # {pytest node id: why it leaks or is left out}; deselected in the
        # clean run.
        self.exclusions = exclusions or {}
        self.extra_args = extra_args


def _wrapper(function):
    return textwrap.dedent(f"""

        # Planted by test_tracemalloc_realsuites: a leak in {function}().
        _planted_kept = []
        _planted_original = {function}


        def {function}(*args, **kwargs):
            _planted_kept.append(bytearray(4096))  {PLANTED_MARK}
            return _planted_original(*args, **kwargs)
        """)


def _method_wrapper(owner, method, parameter):
    return textwrap.dedent(f"""

        # Planted by test_tracemalloc_realsuites: a leak in
        # {owner}.{method}().
        _planted_kept = []
        _planted_original = {owner}.{method}


        def _planted_{method}(self, {parameter}):
            _planted_kept.append(bytearray(4096))  {PLANTED_MARK}
            return _planted_original(self, {parameter})


        {owner}.{method} = _planted_{method}
        """)


PROJECTS = [
    Project(
        "toolz",
        style="pytest functions",
        tests=["toolz/tests/test_itertoolz.py",
               "toolz/tests/test_dicttoolz.py",
               "toolz/tests/test_recipes.py"],
        plant_file="toolz/itertoolz.py",
        plant=_wrapper("unique"),
        planted_tests=["toolz/tests/test_itertoolz.py", "-k", "unique"],
        cli_target="toolz.tests.test_itertoolz:test_unique"),
    Project(
        "sortedcontainers",
        style="pytest functions and doctests (--doctest-modules)",
        tests=["tests/test_coverage_sortedlist.py",
               "tests/test_coverage_sortedset.py"],
        doctests=["--doctest-modules", "sortedcontainers/sortedset.py"],
        plant_file="sortedcontainers/sortedlist.py",
        plant=_method_wrapper("SortedList", "add", "value"),
        planted_tests=["tests/test_coverage_sortedlist.py", "-k", "add"],
        cli_target="tests.test_coverage_sortedlist:test_add"),
    Project(
        "python-jmespath",
        style="unittest.TestCase classes",
        tests=["tests/test_parser.py"],
        exclusions={
            "tests/test_parser.py::TestParserCaching::"
            "test_compile_lots_of_expressions":
                "fills jmespath's parser cache, which is bounded (128 "
                "expressions, random eviction when full): its level rises "
                "over the 5 rounds and the verdict reports it; not a leak",
            "tests/test_parser.py::TestParserCaching::"
            "test_thread_safety_of_cache":
                "the same bounded parser cache, filled from threads",
        },
        plant_file="jmespath/parser.py",
        plant=_method_wrapper("Parser", "parse", "expression"),
        planted_tests=["tests/test_parser.py", "-k", "TestParser and not "
                       "Caching and not Wildcards and not Merged"],
        cli_target="planted_driver:search",
        cli_module=textwrap.dedent("""\
            import jmespath

            def search():
                jmespath.search("a.b[0].c", {"a": {"b": [{"c": 1}]}})
            """),
        unittest_case="tests.test_parser:TestParser"),
    Project(
        "python-toml",
        style="pytest functions",
        tests=["tests/test_api.py"],
        exclusions={
            "tests/test_api.py::test_valid_tests":
                "needs the toml-test corpus, a git submodule that the "
                "source package does not ship",
            "tests/test_api.py::test_invalid_tests":
                "needs the toml-test corpus, a git submodule that the "
                "source package does not ship",
            "tests/test_api.py::test_numpy_floats":
                "skips without numpy, which is not on the fork's path",
            "tests/test_api.py::test_numpy_ints":
                "skips without numpy, which is not on the fork's path",
        },
        plant_file="toml/decoder.py",
        plant=_wrapper("loads"),
        planted_tests=["tests/test_api.py", "-k",
                       "dict_decoder or inline_dict or ordered"],
        cli_target="tests.test_api:test_dict_decoder"),
    Project(
        "python-boltons",
        style="pytest functions with fixtures (monkeypatch, tmp_path)",
        tests=["tests/test_fileutils.py", "tests/test_strutils.py",
               "tests/test_iterutils.py"],
        plant_file="boltons/strutils.py",
        plant=_wrapper("slugify"),
        planted_tests=["tests/test_strutils.py", "-k", "slugify"],
        cli_target="tests.test_strutils:test_slugify"),
    Project(
        "more-itertools",
        style="unittest.TestCase classes",
        tests=["tests/test_recipes.py"],
        plant_file="more_itertools/recipes.py",
        plant=_wrapper("take"),
        planted_tests=["tests/test_recipes.py", "-k", "Take"],
        cli_target="planted_driver:take",
        cli_module=textwrap.dedent("""\
            import more_itertools

            def take():
                more_itertools.take(3, range(10))
            """),
        unittest_case="tests.test_recipes:TakeTests"),
]


def fetch(package):
    """The directory of *package*'s cached source; skip the test when it
    cannot be had."""
    process = subprocess.run(["bash", FETCH_SCRIPT, package],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    directory = process.stdout.strip()
    if process.returncode or not os.path.isdir(directory):
        raise unittest.SkipTest(
            f"the Debian source package {package} could not be fetched "
            f"(Tools/fork/fetch-debian-source.sh: "
            f"{process.stderr.strip().splitlines()[-1:]})")
    return directory


class RealSuiteTest(PytestHarness):
    project = None

    def setUp(self):
        super().setUp()
        source = fetch(self.project.package)
        self.source = os.path.join(self.directory, "source")
        shutil.copytree(source, self.source,
                        ignore=shutil.ignore_patterns(".fetched"))

    def pytest_in_source(self, *args, **kwargs):
        return self.run_pytest("-p", "no:randomly", *self.project.extra_args,
                               *args, cwd=self.source, path=[self.source],
                               **kwargs)

    def python_in_source(self, *args):
        """This interpreter with *args*, in the project's source, with the
        project and its site directory on the path; output merged."""
        return subprocess.run(
            [sys.executable, *args], cwd=self.source,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(
                [self.source, self.site])})

    def test_clean_suite_has_no_leak(self):
        project = self.project
        deselect = []
        for nodeid in project.exclusions:
            deselect += ["--deselect", nodeid]
        runs = [[*deselect, *project.tests]]
        if project.doctests:
            runs.append(list(project.doctests))
        checked = 0
        for arguments in runs:
            returncode, output = self.pytest_in_source(
                "-q", "--tracemalloc-leaks", *arguments)
            summary = self.summary(output)
            self.assertEqual(returncode, 0, output)
            self.assertEqual(summary["leaked"], 0, output)
            # Every test was checked: none skipped, none failed in a round.
            self.assertEqual(summary["not_checked"], 0, output)
            checked += summary["checked"]
        self.assertGreater(checked, 10)
        # run_tests.py shows the ITERATIONS lines: how much was exercised.
        print(f"ITERATIONS real suite {project.package}: {checked} tests "
              f"checked, none leaked ({len(project.exclusions)} excluded)")

    def plant(self):
        project = self.project
        path = os.path.join(self.source, project.plant_file)
        with open(path, "a", encoding="utf-8") as file:
            file.write(project.plant)
        if project.cli_module:
            module, _, _ = project.cli_target.partition(":")
            with open(os.path.join(self.source, module + ".py"), "w",
                      encoding="utf-8") as file:
                file.write(project.cli_module)
        return path, marked_line(path, PLANTED_MARK)

    def assertPlantedFirst(self, output, path, lineno):
        sites = [line for line in output.splitlines()
                 if SITE_LINE.match(line)]
        self.assertTrue(sites, output)
        match = SITE_LINE.match(sites[0])
        self.assertEqual(
            (os.path.realpath(match["file"]), int(match["line"])),
            (os.path.realpath(path), lineno), output)

    def assertHeldBy(self, output, count=None):
        # The chain that holds the planted leak's bytearrays: the plant
        # module's global list (issue 30, item 5).
        module = os.path.splitext(self.project.plant_file)[0]
        chain = (f"held by: module {module.replace('/', '.')} \u2192 "
                 f"global _planted_kept (list)")
        found = [line for line in output.splitlines() if chain in line]
        self.assertTrue(found, f"no {chain!r} in:\n{output}")
        if count is not None:
            self.assertEqual(len(found), count, output)

    def test_planted_leak_pytest(self):
        self.check_planted_leak_pytest()

    def test_planted_leak_pytest_xdist(self):
        # The same under pytest-xdist: the workers' verdicts, the same
        # failures and chains in the controller's output.
        if not xdist_installed():
            self.skipTest("pytest-xdist is not installed")
        self.check_planted_leak_pytest("-n", "2", workers=2)

    def check_planted_leak_pytest(self, *options, workers=1):
        path, lineno = self.plant()
        returncode, output = self.pytest_in_source(
            "--tracemalloc-leaks", f"--tracemalloc-max-reports={MAX_REPORTS}",
            *options, *self.project.planted_tests)
        self.assertEqual(returncode, 1, output)
        failures = self.failures(output)
        self.assertTrue(failures, output)
        for name, sites in failures.items():
            with self.subTest(test=name):
                self.assertTrue(sites, output)
                self.assertEqual(
                    (os.path.realpath(sites[0][0]), sites[0][1]),
                    (os.path.realpath(path), lineno), output)
        summary = self.summary(output)
        self.assertEqual(summary["leaked"], len(failures), output)
        # One chain per failure reported in full (a failure message shows
        # one; past MAX_REPORTS failures, the session summarises by site).
        # Under xdist each worker counts its own leaking tests (a known
        # limit: the cap is per worker).
        self.assertHeldBy(output)
        chains = output.count("held by: ")
        self.assertGreaterEqual(chains, min(len(failures), MAX_REPORTS),
                                output)
        self.assertLessEqual(chains, min(len(failures),
                                         MAX_REPORTS * workers), output)

    def test_planted_leak_cli(self):
        path, lineno = self.plant()
        process = self.python_in_source("-m", "tracemalloc", "leaks",
                                        self.project.cli_target)
        self.assertEqual(process.returncode, 1, process.stdout)
        self.assertPlantedFirst(process.stdout, path, lineno)
        self.assertHeldBy(process.stdout)

    def test_planted_leak_unittest_mixin(self):
        if self.project.unittest_case is None:
            self.skipTest(f"{self.project.package}'s tests are not "
                          f"unittest.TestCase classes")
        path, lineno = self.plant()
        module, _, name = self.project.unittest_case.partition(":")
        script = textwrap.dedent(f"""\
            import sys
            import unittest
            from tracemalloc.testing import LeakCheckMixin
            from {module} import {name} as Case

            class Checked(LeakCheckMixin, Case):
                pass

            suite = unittest.defaultTestLoader.loadTestsFromTestCase(Checked)
            result = unittest.TextTestRunner(verbosity=2).run(suite)
            sys.exit(0 if result.wasSuccessful() else 1)
            """)
        process = self.python_in_source("-c", script)
        self.assertEqual(process.returncode, 1, process.stdout)
        self.assertPlantedFirst(process.stdout, path, lineno)
        self.assertHeldBy(process.stdout)


    def test_mixin_agrees_with_plugin(self):
        # The clean class, through LeakCheckMixin and through the plugin:
        # the same verdict for each of its tests (issue 31, item 4).
        project = self.project
        if project.unittest_case is None:
            self.skipTest(f"{project.package}'s tests are not "
                          f"unittest.TestCase classes")
        module, _, name = project.unittest_case.partition(":")
        path = module.replace(".", "/") + ".py"
        excluded = {nodeid.rpartition("::")[2]
                    for nodeid in project.exclusions
                    if nodeid.startswith(f"{path}::{name}::")}
        deselect = []
        for nodeid in project.exclusions:
            deselect += ["--deselect", nodeid]
        returncode, output = self.pytest_in_source(
            "-rA", "--tracemalloc-leaks", *deselect, f"{path}::{name}")
        plugin = {}
        for line in output.splitlines():
            match = re.match(rf"(PASSED|FAILED|ERROR) {re.escape(path)}::"
                             rf"{name}::(\w+)", line)
            if match:
                plugin[match[2]] = match[1] == "PASSED"
        self.assertTrue(plugin, output)
        script = textwrap.dedent(f"""\
            import sys
            import unittest
            from tracemalloc.testing import LeakCheckMixin
            from {module} import {name} as Case

            class Checked(LeakCheckMixin, Case):
                pass

            suite = unittest.TestSuite(
                Checked(test) for test in
                unittest.defaultTestLoader.getTestCaseNames(Checked)
                if test not in {sorted(excluded)!r})
            result = unittest.TextTestRunner(verbosity=2).run(suite)
            sys.exit(0 if result.wasSuccessful() else 1)
            """)
        process = self.python_in_source("-c", script)
        mixin = {}
        for line in process.stdout.splitlines():
            match = re.match(r"(\w+) \(.*\) \.\.\. (\w+)", line)
            if match:
                mixin[match[1]] = match[2] == "ok"
        self.assertEqual(mixin, plugin, process.stdout + output)


def _test_class(project):
    name = "Test_" + project.package.replace("-", "_")
    doc = f"{project.package}: {project.style}."
    return type(name, (RealSuiteTest, unittest.TestCase),
                {"project": project, "__doc__": doc})


for _project in PROJECTS:
    _class = _test_class(_project)
    globals()[_class.__name__] = _class
del _project, _class


if __name__ == "__main__":
    unittest.main()
