#!/usr/bin/env python3
"""Benchmark runner: the tracemalloc fork against pristine CPython of its base.

    python3 Tools/bench/run.py --pristine PATH --fork PATH [options]

Suites (``--suites``, default ``time``):

time     every workload in workloads/ under seven configurations --
         pristine off, pristine N=1, pristine N=25, fork off, fork N=1,
         fork N=25 (tracing via ``-X tracemalloc=N``) and fork sampled
         (``-X tracemalloc=25 -X tracemalloc_sample=512KiB``) --
         interleaved round-robin inside every repetition.  The timed
         section is measured inside the child.
memory   tracemalloc bookkeeping bytes per live block and peak-RSS overhead
         at 10^4..10^7 live blocks (memory.py).
scaling  ns per traced allocation as live blocks grow and as the stack
         deepens (scaling.py).
instructions
         callgrind instruction counts per allocation+free pair, untraced
         and traced, on micro-loops (instructions.py; needs valgrind).
longrun  engine memory over rounds of changing call paths with constant
         live data (longrun.py).
snapshots
         take_snapshot/dump/load/statistics/compare_to at 10^4..10^6 live
         traces of 30-frame tracebacks (snapshots.py).
retention
         the retention paths' search at 10^5 and 10^6 live objects
         (retention.py).
allocations
         allocation profiles (start(..., allocations=True)) beside plain
         sampled and exact tracing: callgrind instructions of a subset of
         the workloads, and engine memory over changing call paths
         (allocations.py).
native   native tracing (issue 32) off, exact, sampled, with and without
         native frames, on native-heavy workloads (callgrind), and the
         engine's bytes per native trace (native_workloads.py).

Every run saves its raw data to results/latest-{full,quick}.json.  With
``--results`` it also writes RESULTS.md and the README.md summary (``make
bench`` does this); ``report.py`` regenerates them from the saved data.

Runs under any Python 3.11 (only the standard library is used); the
children run under the two interpreters given.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import CONFIGS, config_label  # noqa: E402

WORKLOAD_DIR = os.path.join(benchlib.BENCH_DIR, "workloads")

# bench-quick's subset: one of each broad kind, ordered cheap-to-expensive.
QUICK_WORKLOADS = ["objects_dict", "float_nbody", "strings", "json_roundtrip",
                   "recursion_deep", "buffers"]

# A traced configuration whose first measurement is this many times slower
# than pristine off is run in only --slow-reps of the repetitions (spread
# evenly, still interleaved with the others).  "off" configurations are cheap
# and always run in every repetition.
SLOW_RATIO = 3.0

# Every suite, in the order a run executes them.
ALL_SUITES = ["time", "memory", "scaling", "instructions", "longrun", "snapshots",
              "retention", "allocations", "native"]


def discover_workloads():
    names = []
    for fn in sorted(os.listdir(WORKLOAD_DIR)):
        if fn.endswith(".py") and not fn.startswith("_"):
            names.append(fn[:-3])
    return names


def spread_reps(reps, k):
    """k repetition indices spread evenly over range(reps), always incl. 0."""
    if k >= reps:
        return set(range(reps))
    if k <= 1:
        return {0}
    return {round(i * (reps - 1) / (k - 1)) for i in range(k)}


def run_time_suite(pythons, names, reps, slow_reps, scale, timeout, progress, stat="median"):
    labels = [config_label(*c) for c in CONFIGS]
    results = {n: {l: {"times": [], "error": None, "mismatch": None, "checks": []}
                   for l in labels} for n in names}
    reference = {}           # workload -> check value of the first pristine-off run
    first_ratio = {}         # (workload, label) -> ratio in rep 0
    thinned = spread_reps(reps, slow_reps)
    walls = {}               # (workload, label) -> wall seconds of its rep-0 child

    def runs_left(name, label, after_rep):
        # How many more times (after `after_rep`) this cell will run.
        slow = not label.endswith(" off") and first_ratio.get((name, label), 0) >= SLOW_RATIO
        return sum(1 for r in range(after_rep + 1, reps) if not slow or r in thinned)

    def eta(rep, wi):
        # Projected seconds left, from the rep-0 wall times of each cell;
        # workloads not yet seen count as the average of those seen.
        seen = [n for n in names if any((n, l) in walls for l in labels)]
        if not seen:
            return None
        cost = {n: sum(walls.get((n, l), 0) * runs_left(n, l, rep if names.index(n) <= wi else rep - 1)
                       for l in labels) for n in seen}
        if rep == 0:
            full = {n: sum(walls.get((n, l), 0) * (1 + runs_left(n, l, 0)) for l in labels) for n in seen}
            avg = sum(full.values()) / len(full)
            return sum(cost.values()) + avg * (len(names) - len(seen))
        return sum(cost.values())

    for rep in range(reps):
        for wi, name in enumerate(names):
            script = os.path.join(WORKLOAD_DIR, name + ".py")
            # Rotate the starting configuration every repetition and workload
            # so that no configuration always runs first (or after a
            # particular other one).
            shift = (rep + wi) % len(CONFIGS)
            order = CONFIGS[shift:] + CONFIGS[:shift]
            line = []
            for side, frames, sample in order:
                label = config_label(side, frames, sample)
                cell = results[name][label]
                if rep and frames and first_ratio.get((name, label), 0) >= SLOW_RATIO \
                        and rep not in thinned:
                    continue
                if cell["error"] and not cell["times"]:
                    continue  # it failed before; do not waste time on it
                cmd = benchlib.python_cmd(pythons[side], frames, sample) + [
                    script, "--scale", repr(scale), "--verbose"]
                started = time.monotonic()
                try:
                    data, err = benchlib.run_child(cmd, timeout)
                except benchlib.ChildError as exc:
                    cell["error"] = str(exc)
                    line.append(f"{label}=ERR")
                    continue
                problem = benchlib.check_tracing(data, frames, sample)
                if problem:
                    cell["error"] = problem
                    line.append(f"{label}=BAD")
                    continue
                if rep == 0:
                    walls[(name, label)] = time.monotonic() - started
                cell["times"].append(data["seconds"])
                cell["checks"].append(data["check"])
                cell["n"] = data["n"]
                if sample is not None:
                    cell.setdefault("samples", []).append(data.get("samples"))
                if name not in reference and label == "pristine off":
                    reference[name] = data["check"]
                line.append(f"{label}={data['seconds']:.3f}")
            # ratios of rep 0 decide which configurations are thinned
            if rep == 0:
                base = results[name]["pristine off"]["times"]
                for label in labels:
                    t = results[name][label]["times"]
                    if base and t:
                        first_ratio[(name, label)] = t[0] / base[0]
            progress.line(f"time rep {rep + 1}/{reps} {name:<19} " + " ".join(line),
                          eta=eta(rep, wi))
    # checks: every configuration must compute what pristine off computed
    for name in names:
        ref = reference.get(name)
        for label in labels:
            cell = results[name][label]
            bad = [c for c in cell["checks"] if ref is not None and c != ref]
            if bad:
                cell["mismatch"] = f"check {bad[0]!r} != {ref!r}"
    return {
        "reps": reps,
        "slow_reps": slow_reps,
        "slow_ratio": SLOW_RATIO,
        "scale": scale,
        "stat": stat,
        "workloads": names,
        "configs": labels,
        # label -> the -X tracemalloc_sample value of a sampled configuration
        "samples": {config_label(*c): c[2] for c in CONFIGS if c[2] is not None},
        "results": results,
    }


def binary_stamps(pythons):
    """(path, size, mtime) of the binary behind each interpreter."""
    import instructions
    stamps = {}
    for side, path in pythons.items():
        exe = instructions.real_executable(path)
        try:
            st = os.stat(exe)
            stamps[side] = [exe, st.st_size, st.st_mtime]
        except OSError:
            stamps[side] = [exe, None, None]
    return stamps


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pristine", required=True, help="pristine interpreter of the fork's base")
    p.add_argument("--fork", required=True, help="the fork's interpreter")
    p.add_argument("--quick", action="store_true",
                   help="a few-minute subset (fewer workloads, reps and sizes)")
    p.add_argument("--reps", type=int, help="repetitions (default 7, quick 3)")
    p.add_argument("--slow-reps", type=int,
                   help=f"repetitions for configurations >= {SLOW_RATIO}x slower than "
                        "pristine off (default 2, quick 1)")
    p.add_argument("--only", help="comma-separated workload names (time suite)")
    p.add_argument("--scale", type=float, default=1.0,
                   help="multiply every workload's size knob (default 1.0)")
    p.add_argument("--stat", choices=("median", "min"), default="median",
                   help="statistic over the repetitions of a cell (default median)")
    p.add_argument("--suites", default="time",
                   help="comma-separated: " + ",".join(ALL_SUITES) + " (default: time)")
    p.add_argument("--full", metavar="SUITES", default="",
                   help="with --quick: comma-separated suites to run at full size "
                        "anyway (e.g. instructions,longrun,snapshots)")
    p.add_argument("--note", default="",
                   help="a sentence for RESULTS.md about this run (e.g. why it is quick)")
    p.add_argument("--json", metavar="OUT", help="also write the raw results here")
    p.add_argument("--results", action="store_true",
                   help="write RESULTS.md and the README.md summary afterwards")
    p.add_argument("--timeout", type=float, default=900,
                   help="seconds allowed for one child process (default 900)")
    p.add_argument("--list", action="store_true", help="list the workloads and exit")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    benchlib.exit_on_sigterm()
    all_names = discover_workloads()
    if args.list:
        for n in all_names:
            print(n + ("  (quick)" if n in QUICK_WORKLOADS else ""))
        return 0
    pythons = {"pristine": os.path.abspath(args.pristine), "fork": os.path.abspath(args.fork)}
    for side, path in pythons.items():
        if not os.access(path, os.X_OK):
            print(f"run.py: --{side} {path} is not executable", file=sys.stderr)
            return 2
    suites = [s.strip() for s in args.suites.split(",") if s.strip()]
    full = [s.strip() for s in args.full.split(",") if s.strip()]
    unknown = (set(suites) | set(full)) - set(ALL_SUITES)
    if unknown:
        print(f"run.py: unknown suite(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        missing = [n for n in names if n not in all_names]
        if missing:
            print(f"run.py: unknown workload(s): {', '.join(missing)}; "
                  f"have: {', '.join(all_names)}", file=sys.stderr)
            return 2
    else:
        names = QUICK_WORKLOADS if args.quick and "time" not in full else all_names
    quick = {suite: args.quick and suite not in full for suite in ALL_SUITES}
    reps = args.reps or (3 if quick["time"] else 7)
    slow_reps = args.slow_reps or (1 if quick["time"] else 2)
    kind = "quick" if args.quick else "full"
    if args.only or args.reps or args.scale != 1.0 or args.slow_reps or args.stat != "median" \
            or set(suites) != set(ALL_SUITES):
        # Not the whole suite: must not replace the saved full run.
        kind = "custom" if not args.quick else "quick"

    same = os.path.realpath(pythons["pristine"]) == os.path.realpath(pythons["fork"])
    binaries_before = binary_stamps(pythons)
    meta = {
        "date": benchlib.now_utc(),
        "commit": benchlib.git_commit(),
        "machine": benchlib.machine_info(),
        "pristine": {"path": pythons["pristine"], "info": benchlib.interpreter_info(pythons["pristine"])},
        "fork": {"path": pythons["fork"], "info": benchlib.interpreter_info(pythons["fork"])},
        "same_interpreter": same,
        "argv": sys.argv[1:] if argv is None else argv,
        "suites": suites,
        # suites run at full size in a --quick run
        "full_suites": [s for s in suites if args.quick and s in full],
        "note": args.note,
    }
    if same:
        print("run.py: NOTE: --pristine and --fork are the same interpreter "
              "(harness check; ratios should be ~1)", file=sys.stderr)
    for side in ("pristine", "fork"):
        info = meta[side]["info"]
        print(f"run.py: {side}: {pythons[side]} (Python {info.get('version', '?')})", file=sys.stderr)
    data = {"kind": kind, "meta": meta}
    t0 = time.monotonic()
    progress = benchlib.Progress()
    import report

    if "time" in suites:
        progress.line(f"time suite: {len(names)} workloads x {len(CONFIGS)} configs x {reps} reps "
                      f"(slow configs: {slow_reps} reps)")
        data["time"] = run_time_suite(pythons, names, reps, slow_reps, args.scale,
                                      args.timeout, progress, args.stat)
        print(report.all_text_tables({"time": data["time"]}), flush=True)
    if "memory" in suites:
        import memory
        progress = benchlib.Progress()
        data["memory"] = memory.run_memory_suite(pythons, quick["memory"], args.timeout, progress)
        print(report.all_text_tables({"memory": data["memory"]}), flush=True)
    if "scaling" in suites:
        import scaling
        progress = benchlib.Progress()
        data["scaling"] = scaling.run_scaling_suite(pythons, quick["scaling"], args.timeout, progress)
        print(report.all_text_tables({"scaling": data["scaling"]}), flush=True)

    for key, module, func in (("instructions", "instructions", "run_instructions_suite"),
                              ("longrun", "longrun", "run_longrun_suite"),
                              ("snapshots", "snapshots", "run_snapshot_suite"),
                              ("retention", "retention", "run_bench_suite"),
                              ("allocations", "allocations", "run_bench_suite"),
                              ("native", "native_workloads", "run_bench_suite")):
        if key in suites:
            progress = benchlib.Progress()
            suite = getattr(__import__(module), func)
            data[key] = suite(pythons, quick[key], args.timeout, progress)
            print(report.all_text_tables({key: data[key]}), flush=True)

    meta["duration_s"] = time.monotonic() - t0
    # Other people's builds can replace an interpreter during a long run:
    # say so, since the run then measured two different builds.
    changed = [side for side, stamp in binary_stamps(pythons).items()
               if stamp != binaries_before[side]]
    if changed:
        meta["rebuilt_during_run"] = changed
        print(f"run.py: WARNING: rebuilt during the run: {', '.join(changed)}",
              file=sys.stderr)
    os.makedirs(benchlib.RESULTS_DIR, exist_ok=True)
    latest = os.path.join(benchlib.RESULTS_DIR, f"latest-{kind}.json")
    for path in [latest] + ([args.json] if args.json else []):
        with open(path, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        print(f"saved {path}", file=sys.stderr)
    print(f"run.py: done in {benchlib.fmt_duration(meta['duration_s'])}", file=sys.stderr)
    if args.results:
        report.write_outputs(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
