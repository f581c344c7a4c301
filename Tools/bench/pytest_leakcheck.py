"""Wall-time cost of pytest --tracemalloc-leaks on real test suites.

    ./python Tools/bench/pytest_leakcheck.py [--repeat 3] [--project NAME]

For each project of Lib/test/test_tracemalloc_realsuites.py whose Debian
source is cached or can be fetched, runs the same slice of its test suite
with pytest, plainly and with --tracemalloc-leaks (Debian's python3-pytest
on the fork), --repeat times each, interleaved, and prints the median wall
times and their ratio: what leak checking every test costs.  From the
plugin's session line it also reads how many tests were checked and how
many times each ran on average (the adaptive rounds), and prints the cost
per checked test beyond the plain run, and the factor divided by the runs
per test (1.0: a checked run costs no more than running each test that
many times).  A benchmark, not a test: it asserts nothing.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# The plugin's session line; "runs per checked test" since issue 31.
SESSION = re.compile(r"tracemalloc: (?P<checked>\d+) checked, .*?"
                     r"(?:; (?P<runs>[\d.]+) runs per checked test)?"
                     r" -*$", re.MULTILINE)
REPO = os.path.dirname(os.path.dirname(HERE))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--project", action="append", default=[],
                        help="Debian source package (default: all)")
    args = parser.parse_args()

    from test import test_tracemalloc_pytest as harness
    from test import test_tracemalloc_realsuites as realsuites

    if not harness.pytest_installed():
        sys.exit(f"pytest is not installed (no _pytest in "
                 f"{harness.PYTEST_SITE})")
    rows = []
    with tempfile.TemporaryDirectory() as directory:
        site = harness.make_pytest_site(os.path.join(directory, "site"))
        for project in realsuites.PROJECTS:
            if args.project and project.package not in args.project:
                continue
            process = subprocess.run(
                ["bash", realsuites.FETCH_SCRIPT, project.package],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            if process.returncode:
                print(f"{project.package}: source not available, skipped",
                      file=sys.stderr)
                continue
            source = os.path.join(directory, project.package)
            shutil.copytree(process.stdout.strip(), source)
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(
                [source, site]), PYTHONDONTWRITEBYTECODE="1")
            env.pop("PYTHONTRACEMALLOC", None)
            base = [sys.executable, "-m", "pytest", "-q", "-p",
                    "no:cacheprovider", "-p", "tracemalloc.pytest_plugin",
                    *project.extra_args]
            deselect = []
            for nodeid in project.exclusions:
                deselect += ["--deselect", nodeid]
            times = {"plain": [], "checked": []}
            tests = runs = 0
            for _ in range(args.repeat):
                for kind, extra in (("plain", []),
                                    ("checked", ["--tracemalloc-leaks"])):
                    start = time.perf_counter()
                    process = subprocess.run(
                        base + extra + deselect + project.tests,
                        cwd=source, env=env, stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL, text=True)
                    times[kind].append(time.perf_counter() - start)
                    match = SESSION.search(process.stdout)
                    if kind == "checked" and match:
                        tests = int(match["checked"])
                        runs = float(match["runs"] or 0)
            plain = statistics.median(times["plain"])
            checked = statistics.median(times["checked"])
            rows.append((project.package, plain, checked, tests, runs))
            print(f"{project.package}: plain {plain:.2f}s, "
                  f"--tracemalloc-leaks {checked:.2f}s, "
                  f"x{checked / plain:.1f}", file=sys.stderr)
    print()
    print("| project | tests | plain run (s) | --tracemalloc-leaks (s) | "
          "factor | runs per test | factor / runs | extra ms per test |")
    print("|:---|---:|---:|---:|---:|---:|---:|---:|")
    for package, plain, checked, tests, runs in rows:
        per_test = ((checked - plain) / tests * 1000) if tests else 0
        ratio = (f"{checked / plain / runs:.2f}" if runs else "-")
        runs_text = f"{runs:.1f}" if runs else "-"
        print(f"| {package} | {tests} | {plain:.2f} | {checked:.2f} | "
              f"{checked / plain:.1f}x | {runs_text} | {ratio} | "
              f"{per_test:.1f} |")
    print(f"\nmedian of {args.repeat} runs each, interleaved; the same "
          f"slices as Lib/test/test_tracemalloc_realsuites.py")


if __name__ == "__main__":
    main()
