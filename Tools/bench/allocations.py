#!/usr/bin/env python3
"""Allocation profiles' and labels' cost (issue 33): ``tracemalloc.start(
nframe, sample=..., allocations=True)`` and ``tracemalloc.label()`` beside
plain tracing, measured side by side in one run.

Two parts:

* **Instructions**: a representative subset of the time suite's
  workloads under ``valgrind --tool=callgrind`` (noise-free, as the
  instructions suite), each at two sizes (``--scale`` 0.05 and 0.15) with
  the difference of the two totals kept, so that start-up, imports and
  set-up cancel out (as ``workload_instructions.py``).  Configurations:
  pristine off, fork off, fork sampled (N=25 at the default 512 KiB),
  fork sampled + allocations, fork sampled + labels, fork N=25 (exact),
  fork N=25 + allocations and fork N=25 + labels.  There is no
  command-line option for allocation totals, so every configuration runs
  the workload through this file's launcher (``--launch``), which calls
  ``tracemalloc.start(25, sample=..., allocations=...)`` (nothing for the
  off ones) and then runs the workload script with ``runpy``; each
  child's tracing state is checked as the time suite checks it, plus
  ``is_tracing_allocations()``.  The labels configurations enter and
  leave a label before the workload (so that every frame link looks at
  the context from then on), call ``label_tasks()`` (every asyncio task is
  labelled) and set ``BENCH_LABELS=1``, which makes
  ``requests_labelled`` run each request in a label of its own.
* **Engine memory**: ``tracemalloc.get_tracemalloc_memory()`` while the
  call paths keep changing: ``exact_recursion(n)`` of
  ``Lib/test/test_tracemalloc_hardening.py`` (each call allocates a list
  and calls itself twice from two lines, so every call of the tree is a
  call path of its own: 2^(n+1) - 1 of them) for n = 10 .. 16 in turn,
  with no ``clear_traces()`` in between, then once more after
  ``clear_traces()``.  Fork N=25 and sampled, each without and with
  ``allocations=True``.  Exact mode with allocations keeps every path that
  allocated (the documented cost); without them, or sampling, the engine
  keeps only the paths that live (or sampled) blocks name.

Standalone:  python3 Tools/bench/allocations.py --pristine P --fork F
             [--quick] [--json OUT]
Child modes (internal):
    python allocations.py --launch FRAMES SAMPLE ALLOCATIONS SCRIPT ARGS...
    python allocations.py --memory-child FRAMES SAMPLE ALLOCATIONS
(SAMPLE "-" for exact; ALLOCATIONS 0 or 1.)
"""

import argparse
import gc
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS_DIR = os.path.join(HERE, "workloads")

SAMPLE = "512KiB"   # benchlib.SAMPLE_DEFAULT (not imported: the child side
                    # runs under the measured interpreters)
FRAMES = 25
# (label, side, frames, sample, allocations, labels)
CONFIGS = [
    ("pristine off", "pristine", 0, None, False, False),
    ("fork off", "fork", 0, None, False, False),
    ("fork sampled", "fork", FRAMES, SAMPLE, False, False),
    ("fork sampled + allocations", "fork", FRAMES, SAMPLE, True, False),
    ("fork sampled + labels", "fork", FRAMES, SAMPLE, False, True),
    ("fork N=25", "fork", FRAMES, None, False, False),
    ("fork N=25 + allocations", "fork", FRAMES, None, True, False),
    ("fork N=25 + labels", "fork", FRAMES, None, False, True),
]
MEMORY_CONFIGS = [c for c in CONFIGS if c[1] == "fork" and c[2] and not c[5]]
# One of each broad kind: instances, free-list reuse (a float reused at
# its own line adds to the totals), strings, a parser, deep recursion
# (many call paths), generators (a frame per call).
# requests_labelled: a label per request in the labels configurations;
# asyncio_coroutines: every task labelled (label_tasks()).
WORKLOADS = ["objects_dict", "float_nbody", "strings", "json_roundtrip",
             "recursion_deep", "generators", "requests_labelled",
             "asyncio_coroutines"]
QUICK_WORKLOADS = ["objects_dict", "float_nbody", "recursion_deep",
                   "requests_labelled"]
SCALES = (0.05, 0.15)
ROUNDS = list(range(10, 17))
QUICK_ROUNDS = list(range(10, 15))


# ---------------------------------------------------------------- child side

def _start(frames, sample, allocations):
    import tracemalloc
    if frames:
        kwargs = {}
        if sample is not None:
            kwargs["sample"] = sample
        if allocations:
            kwargs["allocations"] = True
        tracemalloc.start(frames, **kwargs)


def _tracing_allocations():
    import tracemalloc
    probe = getattr(tracemalloc, "is_tracing_allocations", None)
    return bool(probe()) if probe is not None else None


def _use_labels():
    """Labels in use from now on: a label entered and left, new asyncio
    tasks labelled, and the workloads told (BENCH_LABELS)."""
    import tracemalloc
    with tracemalloc.label(bench="labels"):
        pass
    tracemalloc.label_tasks()
    os.environ["BENCH_LABELS"] = "1"


def launch(frames, sample, allocations, labels, script, args):
    """Start tracing as asked, run SCRIPT as __main__ with ARGS, and print
    the workload's JSON line with "allocations" added."""
    import io
    import runpy
    _start(frames, sample, allocations)
    if labels:
        _use_labels()
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    sys.argv = [script] + list(args)
    captured = io.StringIO()
    stdout, sys.stdout = sys.stdout, captured
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        sys.stdout = stdout
    data = json.loads(captured.getvalue().strip().splitlines()[-1])
    data["allocations"] = _tracing_allocations()
    import tracemalloc
    probe = getattr(tracemalloc, "is_labelling_tasks", None)
    data["labels"] = bool(probe()) if probe is not None else None
    print(json.dumps(data))


def exact_recursion(n):
    x = [n]
    if n:
        exact_recursion(n - 1)
        exact_recursion(n - 1)


def memory_child(frames, sample, allocations, rounds):
    import tracemalloc
    try:
        import _testtracemalloc
        stats = _testtracemalloc.engine_stats
    except (ImportError, AttributeError):
        stats = None

    def reading(what):
        gc.collect()
        row = {"round": what, "engine": tracemalloc.get_tracemalloc_memory(),
               "traced": tracemalloc.get_traced_memory()[0]}
        if stats is not None:
            row["nodes"] = stats().get("nodes")
        return row

    _start(frames, sample, allocations)
    readings = [reading("start")]
    for n in rounds:
        exact_recursion(n)
        readings.append(reading(n))
    tracemalloc.clear_traces()
    readings.append(reading("clear_traces()"))
    print(json.dumps({"tracing": tracemalloc.is_tracing(),
                      "traceback_limit": tracemalloc.get_traceback_limit(),
                      "sample": tracemalloc.get_sample(),
                      "allocations": _tracing_allocations(),
                      "readings": readings}))


# --------------------------------------------------------------- runner side

def _check(data, frames, sample, allocations, labels=False):
    import benchlib
    problem = benchlib.check_tracing(data, frames, sample)
    if problem:
        return problem
    if frames and data.get("allocations") is not bool(allocations):
        return (f"is_tracing_allocations() was {data.get('allocations')!r}, "
                f"not {bool(allocations)}")
    # None: an interpreter without labels (pristine)
    got = data.get("labels")
    if (got is None and labels) or (got is not None
                                     and got is not bool(labels)):
        return f"is_labelling_tasks() was {got!r}, not {bool(labels)}"
    return None


def launch_cmd(python, frames, sample, allocations, labels, script, args):
    return [python, "-s", os.path.abspath(__file__), "--launch", str(frames),
            sample or "-", str(int(bool(allocations))),
            str(int(bool(labels))), script] + list(args)


def callgrind_total(cmd, config, outdir, timeout):
    """Instructions of one whole run of CMD under callgrind, with the
    child's tracing state checked."""
    import benchlib
    import subprocess
    import tempfile
    label, _, frames, sample, allocations, labels = config
    fd, out = tempfile.mkstemp(prefix="cg.", dir=outdir)
    os.close(fd)
    proc = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out]
                          + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=timeout, env=benchlib.child_env(),
                          stdin=subprocess.DEVNULL)
    try:
        if proc.returncode != 0:
            raise RuntimeError(f"{label}: {' '.join(cmd)} failed:\n"
                               + proc.stderr.decode(errors="replace")[-2000:])
        try:
            data = json.loads(proc.stdout.decode().strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise RuntimeError(f"{label}: no JSON result line from {' '.join(cmd)}")
        problem = _check(data, frames, sample, allocations, labels)
        if problem:
            raise RuntimeError(f"{label}: {problem}")
        total = None
        with open(out) as f:
            for line in f:
                if line.startswith(("summary:", "totals:")):
                    total = int(line.split()[1])
        if total is None:
            raise RuntimeError(f"{label}: no instruction total in callgrind's output")
        return total, data.get("check")
    finally:
        os.unlink(out)


def run_instructions(pythons, names, timeout, progress, jobs=2):
    """{workload: {label: instructions of the extra work}}, and errors."""
    import concurrent.futures
    import shutil
    import tempfile
    from instructions import real_executable
    exes = {side: real_executable(path) for side, path in pythons.items()}
    runs = [(name, config, scale) for name in names for config in CONFIGS
            for scale in SCALES]
    totals, checks, errors = {}, {}, []
    outdir = tempfile.mkdtemp(prefix="bench-alloc-callgrind-")
    try:
        with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
            futures = {}
            for name, config, scale in runs:
                script = os.path.join(WORKLOADS_DIR, name + ".py")
                cmd = launch_cmd(exes[config[1]], config[2], config[3], config[4],
                                 config[5], script, ["--scale", str(scale)])
                futures[ex.submit(callgrind_total, cmd, config, outdir, timeout)] = \
                    (name, config[0], scale)
            done = 0
            for future in concurrent.futures.as_completed(futures):
                name, label, scale = futures[future]
                done += 1
                try:
                    totals[(name, label, scale)], checks[(name, label, scale)] = \
                        future.result()
                except Exception as exc:  # noqa: BLE001 -- reported, not raised
                    errors.append(f"{name} {label} scale {scale}: {exc}")
                progress(f"allocations: callgrind {done}/{len(runs)} "
                         f"{name} {label} scale {scale}")
    finally:
        shutil.rmtree(outdir, ignore_errors=True)
    results = {}
    s1, s2 = SCALES
    for name in names:
        row = {}
        for label, *_ in CONFIGS:
            a, b = totals.get((name, label, s1)), totals.get((name, label, s2))
            if a is not None and b is not None:
                row[label] = b - a
            ref = checks.get((name, "pristine off", s2))
            if ref is not None and checks.get((name, label, s2)) not in (None, ref):
                errors.append(f"{name} {label}: check {checks[(name, label, s2)]!r} "
                              f"!= pristine off's {ref!r}")
        results[name] = row
    return results, errors


def run_memory(fork, rounds, timeout):
    import benchlib
    results, errors = {}, []
    for label, _, frames, sample, allocations, _labels in MEMORY_CONFIGS:
        cmd = [fork, "-s", os.path.abspath(__file__), "--memory-child", str(frames),
               sample or "-", str(int(allocations)), "--rounds",
               ",".join(map(str, rounds))]
        try:
            data, _ = benchlib.run_child(cmd, timeout)
        except benchlib.ChildError as exc:
            errors.append(f"memory {label}: {exc}")
            continue
        problem = _check(data, frames, sample, allocations)
        if problem:
            errors.append(f"memory {label}: {problem}")
            continue
        results[label] = data["readings"]
    return results, errors


def run_bench_suite(pythons, quick, timeout, progress):
    """The suite of ``run.py --suites allocations`` (``make bench``)."""
    import shutil
    names = QUICK_WORKLOADS if quick else WORKLOADS
    rounds = QUICK_ROUNDS if quick else ROUNDS
    errors = []
    if shutil.which("valgrind"):
        instructions, errors = run_instructions(pythons, names, timeout,
                                                progress.line)
    else:
        instructions = {}
        errors.append("valgrind not found: no instruction counts")
    progress.line("allocations: engine memory over changing call paths")
    memory, memory_errors = run_memory(pythons["fork"], rounds, timeout)
    return {"quick": quick, "workloads": names, "scales": list(SCALES),
            "configs": [c[0] for c in CONFIGS], "frames": FRAMES, "sample": SAMPLE,
            "instructions": instructions, "rounds": rounds, "memory": memory,
            "errors": errors + memory_errors}


# ------------------------------------------------------------------- report

def _geomean(values):
    values = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def _ratio(x):
    return "n/a" if x is None else f"{x:.3f}x"


# (column, numerator, denominator)
RATIOS = [
    ("fork off / pristine off", "fork off", "pristine off"),
    ("sampled / fork off", "fork sampled", "fork off"),
    ("sampled + alloc. / fork off", "fork sampled + allocations", "fork off"),
    ("N=25 / fork off", "fork N=25", "fork off"),
    ("N=25 + alloc. / fork off", "fork N=25 + allocations", "fork off"),
    ("alloc. cost, sampled", "fork sampled + allocations", "fork sampled"),
    ("alloc. cost, N=25", "fork N=25 + allocations", "fork N=25"),
    ("labels cost, sampled", "fork sampled + labels", "fork sampled"),
    ("labels cost, N=25", "fork N=25 + labels", "fork N=25"),
]


def instruction_rows(data):
    """(header, rows): ratios of instructions per workload, geometric mean
    last."""
    header = ["workload", "fork off (M instr.)"] + [c for c, _, _ in RATIOS]
    rows, columns = [], {c: [] for c, _, _ in RATIOS}
    for name in data["workloads"]:
        counts = data["instructions"].get(name, {})
        off = counts.get("fork off")
        row = [name, "n/a" if off is None else f"{off / 1e6:,.1f}"]
        for column, num, den in RATIOS:
            a, b = counts.get(num), counts.get(den)
            value = a / b if a and b and a > 0 and b > 0 else None
            if value is not None:
                columns[column].append(value)
            row.append(_ratio(value))
        rows.append(row)
    rows.append(["geometric mean", ""] + [_ratio(_geomean(columns[c])) for c, _, _ in RATIOS])
    return header, rows


def _mib(n):
    return f"{n / 2 ** 20:.2f} MiB"


def memory_rows(data):
    """(header, rows): engine memory after each round, per configuration."""
    labels = [c[0] for c in MEMORY_CONFIGS if c[0] in data["memory"]]
    header = ["after", "call paths so far"] + labels
    rows = []
    readings = {label: data["memory"][label] for label in labels}
    if not labels:
        return header, rows
    for i, first in enumerate(readings[labels[0]]):
        what = first["round"]
        if isinstance(what, int):
            # a round's paths include the smaller rounds' (prefixes)
            name, paths = f"exact_recursion({what})", f"{2 ** (what + 1) - 1:,}"
        else:
            name, paths = what, ""
        cells = []
        for label in labels:
            r = readings[label][i]
            cell = _mib(r["engine"])
            if r.get("nodes") is not None:
                cell += f" ({r['nodes']:,} nodes)"
            cells.append(cell)
        rows.append([name, paths] + cells)
    return header, rows


def _md(header, rows):
    lines = ["| " + " | ".join(header) + " |",
             "|:---|" + "---:|" * (len(header) - 1)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def intro(data):
    quick = " (quick)" if data.get("quick") else ""
    when = data.get("measured")
    if when:
        # rows merged into a run of the other suites: say when they were taken
        quick += f" (measured {when['date']}, commit `{when['commit']}`)"
    return (f"Allocation profiles and labels (issue 33){quick}: what "
            f"`tracemalloc.start({data['frames']}, sample=..., allocations=True)` and labels "
            f"cost beside the same tracing without them, measured side by side in one "
            f"run.  The labels configurations enter and leave a label before the "
            f"workload (every frame link then looks at the context), label every "
            f"asyncio task (`label_tasks()`), and run each request of "
            f"`requests_labelled` in a label of its own (a label switch per request); "
            f"*labels cost* is the configuration with labels over the same one "
            f"without.  Instructions "
            f"(callgrind, the difference of two runs at `--scale` "
            f"{data['scales'][0]} and {data['scales'][1]}, so start-up cancels): every "
            f"configuration runs the workload through `allocations.py --launch`, which "
            f"starts tracing with `tracemalloc.start()` (sampled: `sample=\"{data['sample']}\"`, "
            f"the default interval; N=25: exact); *alloc. cost* is the configuration with "
            f"allocations over the same one without.  Cache misses do not count in "
            f"instructions.")


def memory_intro(data):
    return ("Engine memory (`get_tracemalloc_memory()` after `gc.collect()`, with "
            "call-context tree nodes from `_testtracemalloc.engine_stats()`) while "
            "the call paths keep changing: `exact_recursion(n)` of "
            "`Lib/test/test_tracemalloc_hardening.py` (2^(n+1) - 1 calls, each its own "
            "call path, each allocating a list that dies with its frame; a round's paths "
            "include the smaller rounds') for n = "
            f"{data['rounds'][0]} .. {data['rounds'][-1]} in one process, no "
            "`clear_traces()` in between, then after `clear_traces()`.  Exact tracing "
            "with `allocations=True` keeps every path that allocated; without it, or "
            "sampled, only the paths that live or sampled blocks name.")


def markdown(data):
    """The suite's section of RESULTS.md (without its title)."""
    lines = [intro(data), ""]
    if data.get("instructions"):
        lines += [_md(*instruction_rows(data)), ""]
    if data.get("memory"):
        lines += [memory_intro(data), "", _md(*memory_rows(data)), ""]
    if data.get("errors"):
        lines += ["Problems:", ""] + [f"- {e}" for e in data["errors"]] + [""]
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--launch":
        frames, sample, allocations, labels, script = argv[1:6]
        launch(int(frames), None if sample == "-" else sample, allocations == "1",
               labels == "1", script, argv[6:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pristine")
    parser.add_argument("--fork", default="./python")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--memory-child", nargs=3, metavar=("FRAMES", "SAMPLE", "ALLOC"))
    parser.add_argument("--rounds", default=",".join(map(str, ROUNDS)))
    args = parser.parse_args(argv)
    if args.memory_child:
        frames, sample, allocations = args.memory_child
        memory_child(int(frames), None if sample == "-" else sample, allocations == "1",
                     [int(n) for n in args.rounds.split(",")])
        return 0
    sys.path.insert(0, HERE)
    import benchlib
    if not args.pristine:
        parser.error("--pristine is required")
    pythons = {"pristine": os.path.abspath(args.pristine),
               "fork": os.path.abspath(args.fork)}
    data = run_bench_suite(pythons, args.quick, args.timeout, benchlib.Progress())
    print(markdown(data))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"allocations": data}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
