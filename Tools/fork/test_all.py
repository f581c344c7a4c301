"""`make test-all`: CPython's complete regression suite, three ways.

Runs `python -m test -j2` (regrtest) in three configurations, one after
the other on the same machine, and prints a comparison table (test modules
run, failed, skipped, wall time):

  fork            the fork, tracing off
  fork-traced     the fork with PYTHONTRACEMALLOC=25
  pristine        pristine CPython 3.11.2 (`make bench-pristine`), untraced

then the differences that matter: modules failing under tracing that pass
on pristine untraced, and modules failing on the fork untraced that pass on
pristine.

Children that must run untraced.  A few upstream tests start a child
interpreter and check its output as if tracing were off; under
PYTHONTRACEMALLOC the child inherits the variable and they fail on pristine
3.11 the same way (run_tests.py's TRACED_EXCLUSIONS lists them).  In the
traced configuration those modules (CHILD_MUST_RUN_UNTRACED below) are run
by a second regrtest with `-X tracemalloc=25` instead of the variable:
regrtest passes -X options on to its worker processes (through
test.support.args_from_interpreter_flags()), so the tests themselves run
traced, while the children they start get the environment upstream meant.

The logs and a JSON summary go to build/test-all/; the table is also
written to build/test-all/summary.md.  The full suite takes about an hour
per configuration on two cores; `--tests "test_gc test_zlib"` (make
test-all TESTS="...") runs a subset.  With `--chunk N` the modules are run
N at a time, each chunk in the three configurations before the next one,
and the summary is rewritten after every chunk: a run stopped half way
still compares the three configurations on the same modules.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from run_tests import TRACED_EXCLUSIONS    # noqa: E402

TRACED_ENV = {"PYTHONTRACEMALLOC": "25"}
TRACED_OPTION = ["-X", "tracemalloc=25"]

# Upstream modules with a test whose child must run untraced: run with
# -X tracemalloc=25 (the worker is traced, the test's children are not).
# test_embed too: its embedded interpreters initialize Python again after
# Py_Finalize(), which 3.11 refuses when PYTHONTRACEMALLOC is set ("the
# tracemalloc module has been unloaded"; pristine fails, and one test
# hangs there).
CHILD_MUST_RUN_UNTRACED = sorted({name.split(".")[1]
                                  for name in TRACED_EXCLUSIONS}
                                 | {"test_embed"})

# Test cases that cannot run on the machines we use, in any
# configuration (passed to every regrtest as --ignore patterns):
# - ThreadedVSOCKSocketStreamTest: these VMs have a VSOCK device that
#   accepts a bind but no connection; run in a regrtest worker, setUp()
#   then waits in accept() until the 20-minute timeout kills test_socket
#   (pristine untraced too), alone it fails at once.
ENVIRONMENT_IGNORES = [
    "test.test_socket.ThreadedVSOCKSocketStreamTest.*",
]

# regrtest's summary: "N tests OK.", "N tests failed:" and a list of
# names indented by four spaces, and so on.
SECTIONS = {
    "ok": re.compile(r"^(?:All )?(\d+) tests? OK\.$"),
    "failed": re.compile(r"^(\d+) tests? failed:$"),
    "skipped": re.compile(r"^(\d+) tests? skipped:$"),
    "env_changed": re.compile(
        r"^(\d+) tests? altered the execution environment:$"),
    "omitted": re.compile(r"^(\d+) tests? omitted:$"),
    "rerun": re.compile(r"^(\d+) re-run tests?:$"),
    "no_tests": re.compile(r"^(\d+) tests? run no tests:$"),
}


def parse_summary(output):
    """{section: sorted names} from regrtest's output ("ok" has a count
    only: regrtest does not list the passing modules)."""
    result = {name: [] for name in SECTIONS}
    result["ok_count"] = 0
    current = None
    for line in output.splitlines():
        stripped = line.strip()
        for name, pattern in SECTIONS.items():
            match = pattern.match(stripped)
            if match:
                if name == "ok":
                    result["ok_count"] = int(match.group(1))
                    current = None
                else:
                    current = name
                break
        else:
            if current and line.startswith("    ") and stripped:
                result[current].extend(stripped.split())
            elif not stripped and current and result[current]:
                current = None
    for name in SECTIONS:
        result[name] = sorted(set(result[name]))
    return result


def regrtest(python, label, logdir, env_extra, options, tests, excluded,
             jobs, timeout):
    """Run one regrtest; return (summary, seconds, log path)."""
    env = dict(os.environ)
    for name in ("PYTHONTRACEMALLOC", "PYTHONMALLOC", "PYTHONPATH",
                 "PYTHONHOME"):
        env.pop(name, None)
    env.update(env_extra)
    cmd = [python, *options, "-m", "test", f"-j{jobs}",
           f"--timeout={timeout}"]
    for pattern in ENVIRONMENT_IGNORES:
        cmd += ["--ignore", pattern]
    if tests:
        cmd += [t for t in tests if t not in excluded]
    elif excluded:
        # -x: the names given are the modules NOT to run.
        cmd += ["-x", *excluded]
    log = os.path.join(logdir, f"{label}.log")
    shown = " ".join(f"{k}={v}" for k, v in env_extra.items())
    print(f"test-all: {label}: {shown} {' '.join(cmd)}", flush=True)
    print(f"test-all:   log: {log}", flush=True)
    start = time.monotonic()
    with open(log, "w") as f:
        proc = subprocess.run(cmd, env=env, stdout=f,
                              stderr=subprocess.STDOUT, cwd=logdir)
    seconds = time.monotonic() - start
    with open(log, errors="replace") as f:
        summary = parse_summary(f.read())
    summary["returncode"] = proc.returncode
    return summary, seconds


def merge(first, second):
    result = {}
    for key in first:
        if isinstance(first[key], list):
            result[key] = sorted(set(first[key]) | set(second[key]))
        elif key == "returncode":
            result[key] = first[key] or second[key]
        else:
            result[key] = first[key] + second[key]
    return result


def run_configuration(name, python, logdir, tests, jobs, timeout,
                      label=None):
    label = label or name
    if name == "fork-traced":
        # Everything traced through the variable, except the modules whose
        # children must run untraced: traced through -X instead.
        selected = ([t for t in tests if t in CHILD_MUST_RUN_UNTRACED]
                    if tests else CHILD_MUST_RUN_UNTRACED)
        rest = [t for t in tests if t not in CHILD_MUST_RUN_UNTRACED]
        if tests and not rest:
            summary, seconds = parse_summary(""), 0.0
            summary["returncode"] = 0
        else:
            summary, seconds = regrtest(python, label, logdir, TRACED_ENV,
                                        [], tests, CHILD_MUST_RUN_UNTRACED,
                                        jobs, timeout)
        if selected:
            extra, extra_seconds = regrtest(
                python, label + "-x-option", logdir, {}, TRACED_OPTION,
                selected, [], jobs, timeout)
            summary = merge(summary, extra)
            seconds += extra_seconds
        return summary, seconds
    return regrtest(python, label, logdir, {}, [], tests, [], jobs, timeout)


def modules_run(summary):
    return summary["ok_count"] + len(summary["failed"]) + \
        len(summary["env_changed"]) + len(summary["no_tests"])


def commits_text(meta):
    """"commit `abc`", or which chunks each commit ran after --resume."""
    commits = meta.get("commits") or {}
    if len(set(commits.values())) <= 1:
        return f"commit `{meta['commit']}`"
    ranges = []
    for number in sorted(commits, key=int):
        commit = commits[number]
        if ranges and ranges[-1][0] == commit:
            ranges[-1][2] = number
        else:
            ranges.append([commit, number, number])
    return "commits " + ", ".join(
        f"`{c}` (chunk{'s' if a != b else ''} "
        f"{a if a == b else f'{a}-{b}'})" for c, a, b in ranges)


def table(results, meta):
    lines = [f"`make test-all` ({meta['date']}, {commits_text(meta)}, "
             f"{meta['machine']}; {meta['selection']}):", "",
             "| configuration | modules run | failed | skipped | "
             "env changed | wall time |",
             "|:---|---:|---:|---:|---:|---:|"]
    pristine_seconds = results.get("pristine", {}).get("seconds")
    for name, result in results.items():
        summary = result["summary"]
        wall = f"{result['seconds'] / 60:.1f} min"
        if pristine_seconds and name != "pristine":
            wall += f" ({result['seconds'] / pristine_seconds:.2f}x)"
        lines.append(f"| {name} | {modules_run(summary)} | "
                     f"{len(summary['failed'])} | "
                     f"{len(summary['skipped'])} | "
                     f"{len(summary['env_changed'])} | {wall} |")
    lines.append("")
    for name, result in results.items():
        failed = result["summary"]["failed"]
        if failed:
            lines.append(f"- {name} failed: {', '.join(failed)}")
    if "pristine" in results:
        pristine_failed = set(results["pristine"]["summary"]["failed"])
        for name in ("fork", "fork-traced"):
            if name in results:
                only = sorted(set(results[name]["summary"]["failed"])
                              - pristine_failed)
                lines.append(f"- failing on {name} but not on pristine: "
                             f"{', '.join(only) or 'none'}")
    return "\n".join(lines) + "\n"


def suite_modules(python):
    """Upstream's test modules, as regrtest lists them."""
    proc = subprocess.run([python, "-m", "test", "--list-tests"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          text=True, check=True)
    return proc.stdout.split()


def accumulate(results, name, summary, seconds):
    if name in results:
        summary = merge(results[name]["summary"], summary)
        seconds += results[name]["seconds"]
    results[name] = {"summary": summary, "seconds": round(seconds, 1)}


def write_summary(output, results, meta):
    text = table(results, meta)
    with open(os.path.join(output, "summary.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    with open(os.path.join(output, "summary.md"), "w") as f:
        f.write(text)
    return text


def resume(output, chunk, configs, meta, chunks):
    """(chunks already done, results, meta) from a stopped chunked run.

    The earlier run must have used the same chunk size and
    configurations; its results are kept, and meta records which commit
    ran which chunk."""
    path = os.path.join(output, "summary.json")
    if not os.path.exists(path):
        print(f"test-all: nothing to resume in {output}; starting over",
              flush=True)
        return 0, {}, meta
    with open(path) as f:
        saved = json.load(f)
    old = saved["meta"]
    if old.get("chunk", chunk) != chunk or \
            sorted(saved["results"]) != sorted(configs):
        sys.exit(f"test-all: {path} comes from another chunk size or "
                 f"set of configurations; remove it or drop --resume")
    done = old.get("chunks_done")
    if done is None:
        # Written before chunks_done existed: "chunks 1-N of M: ...".
        match = re.match(r"chunks 1-(\d+) of", old.get("selection", ""))
        if not match:
            sys.exit(f"test-all: cannot tell how far {path} got")
        done = int(match.group(1))
    commits = old.get("commits") or {str(n): old["commit"]
                                     for n in range(1, done + 1)}
    new_meta = dict(old, commits=commits, chunk=chunk, chunks_done=done,
                    commit=meta["commit"])
    new_meta["date"] = f"{old['date']} to {meta['date']}"
    print(f"test-all: resuming after chunk {done} of {len(chunks)}",
          flush=True)
    return done, saved["results"], new_meta


def git_commit():
    proc = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                          stdout=subprocess.PIPE, text=True)
    return proc.stdout.strip() or "unknown"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fork", default=os.path.join(REPO, "python"))
    parser.add_argument("--pristine", help="pristine 3.11.2 interpreter")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=1200,
                        help="per test module, seconds (regrtest kills it)")
    parser.add_argument("--tests", default="",
                        help="space-separated test modules (default: all)")
    parser.add_argument("--configs", default="fork,fork-traced,pristine")
    parser.add_argument("--chunk", type=int, default=0,
                        help="run the modules N at a time, all "
                             "configurations per chunk")
    parser.add_argument("--output", default=os.path.join(REPO, "build",
                                                         "test-all"))
    parser.add_argument("--resume", action="store_true",
                        help="with --chunk: keep the chunks that the "
                             "output directory's summary.json already "
                             "has, and run the rest")
    args = parser.parse_args()
    if args.resume and not args.chunk:
        parser.error("--resume needs --chunk")

    tests = args.tests.split()
    configs = [c for c in args.configs.split(",") if c]
    pythons = {"fork": args.fork, "fork-traced": args.fork,
               "pristine": args.pristine}
    for name in configs:
        if name not in pythons:
            parser.error(f"unknown configuration {name!r}")
        if not pythons[name] or not os.access(pythons[name], os.X_OK):
            parser.error(f"{name}: no interpreter ({pythons[name]!r}); for "
                         f"pristine, pass --pristine (make bench-pristine)")
    os.makedirs(args.output, exist_ok=True)
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": git_commit(),
        "machine": f"{os.cpu_count()} cores, -j{args.jobs}",
        "selection": (f"modules: {' '.join(tests)}" if tests
                      else "the complete suite"),
    }
    print(f"test-all: configurations {', '.join(configs)}; "
          f"{meta['selection']}", flush=True)
    if "fork-traced" in configs:
        print(f"test-all: traced through -X tracemalloc=25 instead of the "
              f"variable (their children must run untraced): "
              f"{', '.join(CHILD_MUST_RUN_UNTRACED)}", flush=True)
    results = {}
    if args.chunk:
        # Upstream's suite as pristine lists it (the fork's own modules
        # are make test's business).
        modules = tests or suite_modules(pythons["pristine"] or args.fork)
        chunks = [modules[i:i + args.chunk]
                  for i in range(0, len(modules), args.chunk)]
    else:
        chunks = [tests]
    done = 0
    if args.resume:
        done, results, meta = resume(args.output, args.chunk, configs,
                                     meta, chunks)
    for number, chunk in enumerate(chunks, 1):
        if number <= done:
            continue
        for name in configs:
            label = f"{name}-{number}" if args.chunk else name
            summary, seconds = run_configuration(
                name, os.path.abspath(pythons[name]), args.output, chunk,
                args.jobs, args.timeout, label)
            accumulate(results, name, summary, seconds)
            print(f"test-all: {label}: {modules_run(summary)} modules run, "
                  f"{len(summary['failed'])} failed, "
                  f"{len(summary['skipped'])} skipped, {seconds / 60:.1f} "
                  f"min", flush=True)
        if args.chunk:
            meta["selection"] = (f"chunks 1-{number} of {len(chunks)}: "
                                 f"{sum(map(len, chunks[:number]))} of "
                                 f"{len(modules)} modules")
            meta["chunk"] = args.chunk
            meta["chunks_done"] = number
            meta.setdefault("commits", {})[str(number)] = meta["commit"]
            write_summary(args.output, results, meta)
    text = write_summary(args.output, results, meta)
    print()
    print(text, end="")
    failing_traced = set()
    if "fork-traced" in results and "pristine" in results:
        failing_traced = (set(results["fork-traced"]["summary"]["failed"])
                          - set(results["pristine"]["summary"]["failed"]))
    return 1 if failing_traced else 0


if __name__ == "__main__":
    sys.exit(main())
