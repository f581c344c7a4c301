"""Wall-time cost of pytest --tracemalloc-leaks on real projects' whole suites.

    ./python Tools/bench/pytest_leakcheck.py [--repeat 3] [--project NAME]
        [--baseline-lib DIR] [--no-xdist] [--verbose]

For each project of SUITES whose Debian source is cached or can be fetched
(Tools/fork/fetch-debian-source.sh; a project that cannot be had is
skipped, saying so), runs its whole test suite with pytest (Debian's
python3-pytest on the fork): plainly, with --tracemalloc-leaks, and with
--tracemalloc-leaks -n 2 (pytest-xdist, when installed), --repeat times
each, the kinds interleaved, and prints the median wall times and their
ratios.  A suite with a planted leak (PLANTED: a wrapper that keeps 4 KiB
per call of a function that many of its tests call) is measured the same
way: the gate's cost when many tests leak.  With --baseline-lib DIR (a
directory holding another copy of the tracemalloc package, e.g. an older
commit's, `git archive COMMIT Lib/tracemalloc`), the checked run of that
copy is measured too: before and after.

The plugin's session line gives the checked tests, the runs per checked
test and the gate's own estimate ("gate: N.Nx the tests' own time"); with
--verbose, the cost breakdown of each checked run (pytest -v) is printed.
The table ends with the date and the machine's load average.  A
benchmark, not a test: it asserts nothing.
"""

import argparse
import datetime
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SESSION = re.compile(r"tracemalloc: (?P<checked>\d+) checked, "
                     r"(?P<leaked>\d+) leaked, .*?"
                     r"(?:; (?P<runs>[\d.]+) runs per checked test)?"
                     r"(?:; gate: (?P<gate>[\d.]+)x[^-]*)? -*$", re.MULTILINE)
COST = re.compile(r"^tracemalloc: gate cost .*$", re.MULTILINE)


class Suite:
    def __init__(self, name, package, tests, *, path=(), extra=(),
                 plant=None, needs=()):
        self.name = name
        self.package = package      # Debian source package
        self.tests = list(tests)    # pytest arguments, in the source
        self.path = list(path)      # relative to the source, on PYTHONPATH
        self.extra = list(extra)
        self.plant = plant          # (file, text appended to it)
        self.needs = list(needs)    # other Debian sources: (package, path)


def _planted(function):
    return textwrap.dedent(f"""

        # Planted by Tools/bench/pytest_leakcheck.py: a leak in {function}().
        _planted_kept = []
        _planted_original = {function}


        def {function}(*args, **kwargs):
            _planted_kept.append(bytearray(4096))
            return _planted_original(*args, **kwargs)
        """)


SUITES = [
    # Debian source packages (fetched into the cache).
    Suite("toolz", "toolz", ["toolz/tests"]),
    # Many leaking tests: a leak planted in a function that about a
    # third of the suite's tests call.
    Suite("click, planted leak", "repo:click", ["tests"], path=["src"],
          extra=["--ignore", "tests/test_deprecations.py"],
          plant=("src/click/formatting.py", _planted("wrap_text"))),
    Suite("sortedcontainers", "sortedcontainers",
          ["tests", "--doctest-modules", "sortedcontainers"]),
    Suite("python-jmespath", "python-jmespath", ["tests"],
          extra=["--deselect", "tests/test_parser.py::TestParserCaching"]),
    Suite("python-toml", "python-toml", ["tests/test_api.py"],
          extra=["--deselect", "tests/test_api.py::test_valid_tests",
                 "--deselect", "tests/test_api.py::test_invalid_tests"]),
    Suite("jinja2", "jinja2", ["tests"], path=["src"],
          needs=[("markupsafe", "src")]),
    # Repositories: a checkout of each in $TRACEMALLOC_FORK_CACHE/repos/
    # (the name after "repo:"), made by whoever runs the benchmark.
    # Without the projects' installed metadata: markdown's extensions by
    # entry point name fail (those tests run once, unchecked), click's
    # version test is left out.
    Suite("markdown", "repo:markdown", ["tests"],
          extra=["--ignore", "tests/test_apis.py", "--ignore",
                 "tests/test_syntax/extensions/test_md_in_html.py"]),
    Suite("click", "repo:click", ["tests"], path=["src"],
          extra=["--ignore", "tests/test_deprecations.py"]),
    Suite("simplejson", "repo:simplejson", ["simplejson/tests"]),
    Suite("asgiref", "repo:asgiref", ["tests"],
          extra=["-p", "pytest_asyncio.plugin", "--ignore",
                 "tests/test_server.py"]),
    Suite("markupsafe", "repo:markupsafe", ["tests"], path=["src"]),
    Suite("more-itertools", "repo:more-itertools", ["tests"]),
]

CACHE = os.environ.get("TRACEMALLOC_FORK_CACHE", os.path.join(
    os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
    "tracemalloc-fork"))
# Installed with pytest, put on the path of the runs that need them.
PLUGINS = ("pytest_asyncio",)


def fetch(package):
    if package.startswith("repo:"):
        directory = os.path.join(CACHE, "repos", package[5:])
        if not os.path.isdir(directory):
            return None, f"no checkout in {directory}"
        return directory, None
    process = subprocess.run(
        ["bash", os.path.join(REPO, "Tools", "fork",
                              "fetch-debian-source.sh"), package],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    directory = process.stdout.strip()
    if process.returncode or not os.path.isdir(directory):
        return None, (process.stderr.strip().splitlines() or ["?"])[-1]
    return directory, None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--project", action="append", default=[],
                        help="suite name (default: all)")
    parser.add_argument("--baseline-lib", default=None,
                        help="a directory holding another tracemalloc "
                             "package: its checked run is measured too")
    parser.add_argument("--baseline-repeat", type=int, default=None,
                        help="run the baseline in the first N repeats "
                             "only (default: all)")
    parser.add_argument("--no-baseline", action="append", default=[],
                        metavar="NAME",
                        help="no baseline run for this suite (one whose "
                             "baseline takes too long)")
    parser.add_argument("--no-xdist", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()

    sys.path.insert(0, os.path.join(REPO, "Lib"))
    from test import test_tracemalloc_pytest as harness

    if not harness.pytest_installed():
        sys.exit(f"pytest is not installed (no _pytest in "
                 f"{harness.PYTEST_SITE})")
    xdist = harness.xdist_installed() and not args.no_xdist
    kinds = [("plain", [], None), ("gate", ["--tracemalloc-leaks"], None)]
    if xdist:
        kinds.append(("gate -n 2", ["--tracemalloc-leaks", "-n", "2"], None))
    if args.baseline_lib:
        kinds.append(("before", ["--tracemalloc-leaks"], args.baseline_lib))
    rows = []
    loads = []
    with tempfile.TemporaryDirectory() as directory:
        site = harness.make_pytest_site(os.path.join(directory, "site"))
        for name in PLUGINS:
            target = os.path.join(harness.PYTEST_SITE, name)
            if os.path.isdir(target):
                os.symlink(target, os.path.join(site, name))
        for suite in SUITES:
            if args.project and suite.name not in args.project:
                continue
            cached, error = fetch(suite.package)
            if cached is None:
                print(f"{suite.name}: the Debian source {suite.package} "
                      f"could not be fetched ({error}): skipped",
                      file=sys.stderr)
                continue
            needed = []
            for package, sub in suite.needs:
                other, error = fetch(package)
                if other is None:
                    break
                needed.append(os.path.join(other, sub))
            else:
                other = True
            if other is None:
                print(f"{suite.name}: needs {package}, which could not be "
                      f"fetched: skipped", file=sys.stderr)
                continue
            source = os.path.join(directory, suite.name.replace(" ", "_")
                                  .replace(",", ""))
            shutil.copytree(cached, source,
                            ignore=shutil.ignore_patterns(".fetched"))
            if suite.plant:
                with open(os.path.join(source, suite.plant[0]), "a",
                          encoding="utf-8") as file:
                    file.write(suite.plant[1])
            times = {name: [] for name, _, _ in kinds}
            info = {}
            for repeat in range(args.repeat):
                for name, extra, lib in kinds:
                    if lib and ((args.baseline_repeat is not None
                                 and repeat >= args.baseline_repeat)
                                or suite.name in args.no_baseline):
                        continue
                    path = [os.path.join(source, sub) for sub in suite.path]
                    path += [source, *needed, site]
                    if lib:
                        path.insert(0, lib)
                    env = dict(os.environ,
                               PYTHONPATH=os.pathsep.join(path),
                               PYTHONDONTWRITEBYTECODE="1")
                    for variable in ("PYTHONTRACEMALLOC", "PYTEST_ADDOPTS"):
                        env.pop(variable, None)
                    # Plain asserts: pytest 7's assertion rewriting warns
                    # on Python 3.12+, which the projects that turn
                    # warnings into errors take for a collection error.
                    command = [sys.executable, "-m", "pytest", "-q", "-p",
                               "no:cacheprovider", "--assert=plain", "-p",
                               "tracemalloc.pytest_plugin", *extra,
                               *suite.extra, *suite.tests]
                    if args.verbose and name == "gate":
                        # -q -v -v: pytest's verbosity 1, the cost line.
                        command[4:4] = ["-v", "-v"]
                    loads.append(os.getloadavg()[0])
                    start = time.perf_counter()
                    process = subprocess.run(
                        command, cwd=source, env=env,
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                        text=True)
                    times[name].append(time.perf_counter() - start)
                    match = SESSION.search(process.stdout)
                    if match and name == "gate":
                        info.update(match.groupdict())
                        cost = COST.search(process.stdout)
                        if cost and args.verbose:
                            print(f"{suite.name}: {cost[0]}",
                                  file=sys.stderr)
                    elif name == "plain":
                        tail = process.stdout.strip().splitlines()[-1:]
                        info["plain_line"] = tail[0] if tail else ""
            medians = {name: statistics.median(values)
                       for name, values in times.items() if values}
            rows.append((suite.name, medians, info))
            print(f"{suite.name}: " + ", ".join(
                f"{name} {value:.2f}s" for name, value in medians.items())
                + f" ({info.get('plain_line', '')})", file=sys.stderr)
    names = [name for name, _, _ in kinds if name != "plain"]
    print()
    print("| suite | checked | leaked | runs per test | plain (s) | "
          + " | ".join(f"{name} (s)" for name in names)
          + " | " + " | ".join(f"{name} factor" for name in names)
          + " | gate's own estimate |")
    print("|:---|---:|---:|---:|---:|"
          + "---:|" * (2 * len(names)) + "---:|")
    for name, medians, info in rows:
        plain = medians["plain"]
        print(f"| {name} | {info.get('checked', '-')} | "
              f"{info.get('leaked', '-')} | {info.get('runs') or '-'} | "
              f"{plain:.2f} | "
              + " | ".join(f"{medians[kind]:.2f}" if kind in medians
                           else "-" for kind in names)
              + " | " + " | ".join(f"{medians[kind] / plain:.1f}x"
                                   if kind in medians else "-"
                                   for kind in names)
              + f" | {info.get('gate') or '-'}x |")
    now = datetime.datetime.now(datetime.timezone.utc)
    load = statistics.median(loads) if loads else 0.0
    if args.baseline_lib and args.baseline_repeat is not None:
        print(f"\nbefore: {args.baseline_repeat} run(s) of --baseline-lib "
              f"{args.baseline_lib}")
    print(f"\n{now:%Y-%m-%d %H:%M} UTC; median of {args.repeat} runs each, "
          f"the kinds interleaved; load average (1 min) median "
          f"{load:.1f}, range {min(loads or [0]):.1f}-{max(loads or [0]):.1f}"
          f", {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
