"""The fork's test command (`make test`).

Runs, each test module in its own interpreter process (two at a time by
default), and counts individual test cases:

1. conformance: upstream's Lib/test/test_tracemalloc.py, unmodified, under
   every allocator the base offers (ALLOCATORS: PYTHONMALLOC=...);
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
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

CONFORMANCE = ["test.test_tracemalloc"]

# Modules whose work is bounded but can be long, and the factor of
# --timeout they get: the differential fuzzer shrinks a mismatching seed by
# running its program again on the fork and on pristine many times (a seed
# whose pristine run timed out took it to 14 minutes), so that the failure
# it reports is readable rather than a timeout.
SLOW_MODULES = {"test.test_tracemalloc_differential": 2}

OURS = [
    "test.test_tracemalloc_module",
    "test.test_tracemalloc_engine",
    "test.test_tracemalloc_hardening",
    "test.test_tracemalloc_peak",
    "test.test_tracemalloc_threads",
    "test.test_tracemalloc_extensions",
    "test.test_tracemalloc_edgecases",
    "test.test_tracemalloc_subinterp",
    "test.test_tracemalloc_sampling",
    "test.test_tracemalloc_sampledsound",  # sampled peaks, comparisons
    "test.test_tracemalloc_soundness",  # engine soundness
    "test.test_tracemalloc_clisound",  # the CLI's refusals
    "test.test_tracemalloc_leaksound",  # the leak checker's verdicts
    "test.test_tracemalloc_differential",  # skips w/o pristine
    "test.test_tracemalloc_leanpath",  # the lean paths' guard, both paths
    "test.test_tracemalloc_verdicts",  # the verdict matrix
    "test.test_tracemalloc_freelistsound",  # key tables re-traced on reuse
    "test_fork_tools",          # Tools/fork/tests
    "test_untraced_path",       # Tools/fork/tests
    "test_instruction_budgets", # Tools/fork/tests (callgrind)
    "test_bench_tools",         # Tools/fork/tests
    "test_python_link",
    "test.test_tracemalloc_stress",
    "test.test_tracemalloc_badinput",
    "test.test_tracemalloc_fuzz_corpus",
    "test.test_tracemalloc_html",   # skips without chromium/chromedriver
    "test.test_tracemalloc_cli",
    "test.test_tracemalloc_pprof",  # each reader skips when missing
    "test.test_tracemalloc_attach",  # readers skip when missing
    "test.test_tracemalloc_allocations",  # allocation profiles
    "test.test_tracemalloc_labels",  # context labels
    "test.test_tracemalloc_dumpover",  # the dump threshold
    "test.test_tracemalloc_leaks",  # pytest part skips without python3-pytest
    "test.test_tracemalloc_pytest",  # skips without python3-pytest(-xdist)
    "test.test_tracemalloc_pytestsound",  # skips likewise
    "test.test_tracemalloc_budgets",  # budgets, junitxml; skips likewise
    "test.test_tracemalloc_retention",  # oracle skips w/o objgraph
    "test.test_tracemalloc_dist",   # make test makes dist
    "test_patch_deletions",     # Tools/fork/tests
    "test.test_tracemalloc_parity",  # skips without the base's pristine
    "test.test_tracemalloc_abi",    # 3.13 only; skips without pristine
    "test.test_tracemalloc_native",  # native memory
    "test.test_tracemalloc_nativeframes",  # C frames
]

# `make test-real-suites` (--only real-suites): the pytest plugin on slices
# of real projects' test suites; minutes, not part of `make test`.
REAL_SUITES = ["test.test_tracemalloc_realsuites"]

# `make shared-test` (--only shared): a build with --enable-shared, whose
# libpython defines the native interposers instead of the executable: the
# conformance suite under every allocator, and what depends on where the
# interposers are.
SHARED = ["test.test_tracemalloc_module", "test.test_tracemalloc_native",
          "test.test_tracemalloc_nativeframes"]

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
    # 3.13's checks that tracemalloc's public callables have signatures:
    # the package exposes no helper it imports.
    "test.test_inspect",
]

# PYTHONMALLOC values each base offers in a default build, under which
# conformance runs upstream's test_tracemalloc (pymalloc: the default).
ALLOCATORS = {
    (3, 11): ("pymalloc", "malloc", "debug"),
    (3, 13): ("pymalloc", "malloc", "debug", "pymalloc_debug", "mimalloc",
              "mimalloc_debug"),
}

# Tests whose upstream expectation the fork changes on purpose, with why;
# per base, each checked against that base's pristine build.
FRAME_FIELD = ("patch 0002 appends the call-context cache to "
               "_PyInterpreterFrame: frame and generator objects are 16 "
               "bytes larger (pristine passes it)")
KNOWN_DIFFERENCES = {
    (3, 11): {"test.test_sys.SizeofTest.test_objecttypes": FRAME_FIELD},
    (3, 13): {"test.test_sys.SizeofTest.test_objecttypes": FRAME_FIELD},
}

# Our tests that a bug of the base's own interpreter fails, with the
# upstream issue; each reproduced on the base's pristine build.
MAKE_FUNCTION_OOM = ("gh-122752: 3.13's MAKE_FUNCTION releases the code "
                     "object twice when PyFunction_New() fails, and the "
                     "failure sweep fails it (pristine 3.13.15 crashes the "
                     "same way on a failed def)")
BASE_BUGS = {
    (3, 11): {},
    (3, 13): {f"test.test_tracemalloc_stress.StressTest.test_nomemory_{op}":
              MAKE_FUNCTION_OOM
              for op in ("statistics", "compare_to", "dump", "load")},
}

# Tests excluded from the PYTHONTRACEMALLOC=25 run only: each starts a child
# interpreter that must run with tracemalloc off and checks its output, but
# the child inherits PYTHONTRACEMALLOC.  Pristine fails them the same way
# under that variable.
CHILD_EXPECTS_TRACING_OFF = ("its child process inherits PYTHONTRACEMALLOC "
                             "and expects tracing off (pristine {} fails "
                             "it the same way)")


def _debug_hook_tests(module, classes, base):
    return {f"{module}.{cls}.{name}": CHILD_EXPECTS_TRACING_OFF.format(base)
            for cls in classes
            for name in ("test_api_misuse", "test_buffer_overflow")}


TRACED_EXCLUSIONS = {
    (3, 11): {
        "test.test_warnings.PyWarningsDisplayTests.test_tracemalloc":
            CHILD_EXPECTS_TRACING_OFF.format("3.11.2"),
        **_debug_hook_tests("test.test_capi.test_misc",
                            ("PyMemDebugTests", "PyMemMallocDebugTests",
                             "PyMemPymallocDebugTests"), "3.11.2"),
    },
    (3, 13): {
        "test.test_warnings.PyWarningsDisplayTests.test_tracemalloc":
            CHILD_EXPECTS_TRACING_OFF.format("3.13.15"),
        # 3.13 moved these tests to test_capi.test_mem and added mimalloc.
        **_debug_hook_tests("test.test_capi.test_mem",
                            ("PyMemDebugTests", "PyMemMallocDebugTests",
                             "PyMemPymallocDebugTests",
                             "PyMemMimallocDebugTests"), "3.13.15"),
    },
}


def base_of(python):
    """(major, minor) of the interpreter *python*: the base under test."""
    out = subprocess.run([python, "-c", "import sys; "
                          "print(*sys.version_info[:2])"],
                         stdout=subprocess.PIPE, text=True, check=True)
    return tuple(map(int, out.stdout.split()))


def parity_note():
    """Which pristine build the parity test compares with, or why it
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
    # The stdlib's regression tests make fixed names in their working
    # directory (test_warnings' 'tempcwd'): the plain and the traced run of
    # the same module, two at a time, each get a directory of their own.
    workdir = REPO
    cleanup = None
    if label.startswith("regression"):
        cleanup = tempfile.TemporaryDirectory(prefix="run_tests-")
        workdir = cleanup.name
    try:
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              timeout=timeout, cwd=workdir)
        out, err, rc = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        # TimeoutExpired keeps the output as bytes, even with text=True.
        out = exc.stdout or ""
        err = exc.stderr or ""
        if isinstance(out, bytes):
            out = out.decode(errors="replace")
        if isinstance(err, bytes):
            err = err.decode(errors="replace")
        err += f"\nTIMEOUT after {timeout}s"
        rc = -1
    finally:
        if cleanup is not None:
            cleanup.cleanup()
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
                                           "regression", "real-suites",
                                           "shared"],
                        help="run one group only (real-suites, shared: "
                             "only so)")
    args = parser.parse_args()

    base = base_of(args.python)
    if base not in ALLOCATORS:
        parser.error(f"{args.python} is Python {base}: no base of the fork")
    known_differences = {**KNOWN_DIFFERENCES[base], **BASE_BUGS[base]}
    traced_exclusions = TRACED_EXCLUSIONS[base]
    # Tests of signal delivery (test_threading's interrupt_main(),
    # test_generators' raise(SIGINT)) need Python's own SIGINT handler,
    # which an interpreter installs only when SIGINT is not ignored at
    # its start; a shell ignores it in jobs started with `&`.  A handler
    # here becomes the default action in the children.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)

    runs = []
    if args.only in (None, "conformance", "shared"):
        for alloc in ALLOCATORS[base]:
            env = {} if alloc == "pymalloc" else {"PYTHONMALLOC": alloc}
            for m in CONFORMANCE:
                runs.append((f"conformance[{alloc}]", m, env))
    if args.only in (None, "ours"):
        for m in OURS:
            runs.append(("fork", m, {}))
        for m in OURS_TRACED:
            runs.append(("fork[PYTHONTRACEMALLOC=25]", m,
                         {"PYTHONTRACEMALLOC": "25"}))
    if args.only == "shared":
        for m in SHARED:
            runs.append(("shared", m, {}))
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
    for test_id, why in known_differences.items():
        print(f"  excluded {test_id}: {why}")
    for test_id, why in traced_exclusions.items():
        print(f"  excluded under PYTHONTRACEMALLOC=25 {test_id}: {why}")
    totals = {"passed": 0, "failed": 0, "skipped": 0}
    failures = []
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = []
        for label, module, env in runs:
            excluded = dict(known_differences)
            if "PYTHONTRACEMALLOC" in env:
                excluded.update(traced_exclusions)
            skips = {t for t in excluded if t.startswith(module + ".")}
            timeout = args.timeout * SLOW_MODULES.get(module, 1)
            futures.append(pool.submit(run_one, args.python, label, module,
                                       env, timeout, skips))
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
