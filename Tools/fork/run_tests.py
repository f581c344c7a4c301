"""The fork's test command (`make test`).

Runs, each test module in its own interpreter process (two at a time by
default), and counts individual test cases:

1. conformance: upstream's Lib/test/test_tracemalloc.py, unmodified, under
   pymalloc, PYTHONMALLOC=malloc and PYTHONMALLOC=debug;
2. the fork's own tests (new files beside it, and Tools/fork/tests);
3. a regression subset of the stdlib suite chosen for what the engine
   touches, once plainly and once with PYTHONTRACEMALLOC=25.

The last line is `N passed, N failed, N skipped`; the exit status is
non-zero when anything failed.
"""

import argparse
import concurrent.futures
import importlib.util
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

CONFORMANCE = ["test.test_tracemalloc"]

OURS = [
    "test.test_tracemalloc_module",
    "test.test_tracemalloc_engine",
    "test.test_tracemalloc_hardening",
    "test.test_tracemalloc_peak",
    "test.test_tracemalloc_threads",
    "test.test_tracemalloc_extensions",
    "test.test_tracemalloc_edgecases",
    "test_fork_tools",          # Tools/fork/tests
    "test_untraced_path",       # Tools/fork/tests
    "test_bench_tools",         # Tools/fork/tests
    "test_python_link",
    "test.test_tracemalloc_stress",
    "test.test_tracemalloc_badinput",
    "test.test_tracemalloc_fuzz_corpus",
    "test.test_tracemalloc_html",   # skips without chromium/chromedriver
    "test.test_tracemalloc_cli",
    "test.test_tracemalloc_leaks",  # pytest part skips without python3-pytest
    "test.test_tracemalloc_pytest",  # skips without python3-pytest(-xdist)
    "test_patch_deletions",     # Tools/fork/tests
    "test.test_tracemalloc_parity",  # skips without pristine 3.11.2
    "test.test_tracemalloc_abi",    # 3.13 only; skips without pristine
]

# `make test-real-suites` (--only real-suites): the pytest plugin on slices
# of real projects' test suites; minutes, not part of `make test`.
REAL_SUITES = ["test.test_tracemalloc_realsuites"]

# Our tests that must also pass with tracing on from startup, the way users
# run their suites (their child processes inherit PYTHONTRACEMALLOC).
OURS_TRACED = [
    "test.test_tracemalloc_module",
]

REGRESSION = [
    "test.test_gc",
    "test.test_threading",
    "test.test_thread",
    "test.test_threading_local",
    "test.test_generators",
    "test.test_coroutines",
    "test.test_asyncgen",
    "test.test_contextlib",
    "test.test_sys",
    "test.test_sys_settrace",
    "test.test_frame",
    "test.test_code",
    "test.test_traceback",
    "test.test_exceptions",
    "test.test_weakref",
    "test.test_finalization",
    "test.test_faulthandler",
    "test.test_warnings",
    "test.test_capi",
    "test.test_fork1",
    "test.test_list",
    "test.test_dict",
    "test.test_float",
    "test.test_genexps",
    "test.test_scope",
]

# Tests whose upstream expectation the fork changes on purpose, with why.
KNOWN_DIFFERENCES = {
    "test.test_sys.SizeofTest.test_objecttypes":
        "patch 0002 appends the call-context cache to _PyInterpreterFrame: "
        "frame and generator objects are 8 bytes larger",
}

# Tests excluded from the PYTHONTRACEMALLOC=25 run only: each starts a child
# interpreter that must run with tracemalloc off and checks its output, but
# the child inherits PYTHONTRACEMALLOC.  Pristine 3.11 fails them the same
# way under that variable.
CHILD_EXPECTS_TRACING_OFF = "its child process inherits PYTHONTRACEMALLOC " \
    "and expects tracing off (pristine 3.11 fails it the same way)"
TRACED_EXCLUSIONS = {
    "test.test_warnings.PyWarningsDisplayTests.test_tracemalloc":
        CHILD_EXPECTS_TRACING_OFF,
    **{f"test.test_capi.test_misc.{cls}.{name}": CHILD_EXPECTS_TRACING_OFF
       for cls in ("PyMemDebugTests", "PyMemMallocDebugTests",
                   "PyMemPymallocDebugTests")
       for name in ("test_api_misuse", "test_buffer_overflow")},
}


def parity_note():
    """Which pristine 3.11.2 the parity test compares with, or why it
    skips."""
    path = os.path.join(REPO, "Lib", "test", "test_tracemalloc_parity.py")
    spec = importlib.util.spec_from_file_location("_parity_probe", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    pristine, why = module.find_pristine()
    if pristine is None and os.environ.get(module.PRISTINE_ENV):
        return f"test_tracemalloc_parity cannot compare (fails): {why}"
    if pristine is None:
        return f"test_tracemalloc_parity SKIPPED: {why}"
    return f"test_tracemalloc_parity compares with {pristine}"


def run_one(python, label, module, env_extra, timeout, skips):
    env = dict(os.environ)
    env.pop("PYTHONTRACEMALLOC", None)
    env.pop("PYTHONMALLOC", None)
    env.update(env_extra)
    env["PYTHONPATH"] = HERE + os.pathsep + os.path.join(HERE, "tests")
    cmd = [python, "-X", "faulthandler", "-m", "unittest_driver", module,
           json.dumps(sorted(skips))]
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              timeout=timeout, cwd=REPO)
        out, err, rc = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout or ""
        err = (exc.stderr or "") + f"\nTIMEOUT after {timeout}s"
        rc = -1
        if isinstance(out, bytes):
            out = out.decode(errors="replace")
        if isinstance(err, bytes):
            err = err.decode(errors="replace")
    elapsed = time.monotonic() - start
    counts = None
    for line in out.splitlines():
        if line.startswith("COUNTS "):
            counts = json.loads(line[len("COUNTS "):])
    if counts is None:
        # Crashed or never got to count: the whole module is one failure.
        counts = {"passed": 0, "failed": 1, "skipped": 0, "excluded": 0}
        err += f"\n(process exited with status {rc} before reporting)"
    elif rc != 0 and counts["failed"] == 0:
        counts["failed"] = 1
        err += f"\n(process exited with status {rc})"
    # Stress and bad-input tests say how much they exercised.
    notes = [line for line in out.splitlines()
             if line.startswith("ITERATIONS ")]
    return label, module, counts, err, elapsed, notes


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=os.path.join(REPO, "python"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=900)
    parser.add_argument("--only", choices=["conformance", "ours",
                                           "regression", "real-suites"],
                        help="run one group only (real-suites: only so)")
    args = parser.parse_args()

    runs = []
    if args.only in (None, "conformance"):
        for alloc in ("pymalloc", "malloc", "debug"):
            env = {} if alloc == "pymalloc" else {"PYTHONMALLOC": alloc}
            for m in CONFORMANCE:
                runs.append((f"conformance[{alloc}]", m, env))
    if args.only in (None, "ours"):
        for m in OURS:
            runs.append(("fork", m, {}))
        for m in OURS_TRACED:
            runs.append(("fork[PYTHONTRACEMALLOC=25]", m,
                         {"PYTHONTRACEMALLOC": "25"}))
    if args.only == "real-suites":
        for m in REAL_SUITES:
            runs.append(("real-suites", m, {}))
    if args.only in (None, "regression"):
        for m in REGRESSION:
            runs.append(("regression[plain]", m, {}))
            runs.append(("regression[PYTHONTRACEMALLOC=25]", m,
                         {"PYTHONTRACEMALLOC": "25"}))

    print(f"running {len(runs)} test modules with {args.python}, "
          f"{args.jobs} at a time", flush=True)
    if any(module == "test.test_tracemalloc_parity" for _, module, _ in runs):
        print(f"  {parity_note()}")
    for test_id, why in KNOWN_DIFFERENCES.items():
        print(f"  excluded {test_id}: {why}")
    for test_id, why in TRACED_EXCLUSIONS.items():
        print(f"  excluded under PYTHONTRACEMALLOC=25 {test_id}: {why}")
    totals = {"passed": 0, "failed": 0, "skipped": 0}
    failures = []
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = []
        for label, module, env in runs:
            excluded = dict(KNOWN_DIFFERENCES)
            if "PYTHONTRACEMALLOC" in env:
                excluded.update(TRACED_EXCLUSIONS)
            skips = {t for t in excluded if t.startswith(module + ".")}
            futures.append(pool.submit(run_one, args.python, label, module,
                                       env, args.timeout, skips))
        for n, fut in enumerate(concurrent.futures.as_completed(futures), 1):
            label, module, counts, err, elapsed, notes = fut.result()
            for k in totals:
                totals[k] += counts[k]
            status = "FAIL" if counts["failed"] else "ok"
            print(f"[{n:3}/{len(runs)}] {status:4} {label:34} {module:34} "
                  f"{counts['passed']:4} passed {counts['failed']:3} failed "
                  f"{counts['skipped']:3} skipped  {elapsed:6.1f}s",
                  flush=True)
            for note in notes:
                print(f"        {note}", flush=True)
            if counts["failed"]:
                failures.append((label, module, err))
    for label, module, err in failures:
        print(f"\n===== {label} {module} =====")
        tail = err.strip().splitlines()[-60:]
        print("\n".join(tail))
    print(f"\ntotal time {time.monotonic() - start:.0f}s")
    print(f"{totals['passed']} passed, {totals['failed']} failed, "
          f"{totals['skipped']} skipped")
    return 1 if totals["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
