#!/usr/bin/env python3
"""Instructions executed by each timed workload, measured with callgrind.

The time suite's ratios move by tens of percent between repetitions on a
shared 2-core machine; instruction counts do not.  This runs every workload
of ``workloads/`` under ``valgrind --tool=callgrind`` at two sizes
(``--scale`` S1 and S2) and keeps the difference of the two totals: the
instructions of the extra work, with interpreter start-up, imports and the
workload's set-up cancelled out.  Configurations: pristine off, fork off,
fork N=1 and, with ``--n25``, fork N=25.

Printed per workload: fork off / pristine off (what the fork adds untraced)
and fork N=1 / fork off (what tracing adds, same build), and their
geometric means.  A workload whose difference is not positive, or whose
fork-off / pristine-off ratio is outside 0.5-2 (the two sizes did not do
proportional work: one-time costs such as a first compilation landed in
one of them), is marked *unstable* and left out of the means.  Not part
of ``make bench`` (about 10 minutes on 2 cores); instructions are not
time: cache misses do not count, so the time suite stays the measure of
record.

    python3 Tools/bench/workload_instructions.py --pristine P --fork F \\
        [--only NAME,...] [--scales 0.05,0.15] [--n25] [--jobs 2] [--json OUT]
"""

import argparse
import concurrent.futures
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS_DIR = os.path.join(HERE, "workloads")


def workload_names():
    return sorted(name[:-3] for name in os.listdir(WORKLOADS_DIR)
                  if name.endswith(".py") and not name.startswith("_"))


def callgrind_total(python, xopts, name, scale, outdir, timeout):
    """Instructions of one whole run of workload NAME at SCALE."""
    out = os.path.join(outdir, f"cg.{os.getpid()}.{name}.{abs(hash((python, tuple(xopts), scale)))}")
    cmd = (["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
            python, "-s"] + xopts
           + [os.path.join(WORKLOADS_DIR, name + ".py"), "--scale", str(scale)])
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{name} at scale {scale} under {python} "
                           f"{' '.join(xopts)} failed:\n"
                           + proc.stderr.decode(errors="replace")[-2000:])
    total = None
    with open(out) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                total = int(line.split()[1])
    os.unlink(out)
    if total is None:
        raise RuntimeError(f"no instruction total in callgrind's output for {name}")
    return total


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pristine", required=True, help="pristine 3.11.2 python")
    p.add_argument("--fork", required=True, help="the fork's python")
    p.add_argument("--only", help="comma-separated workload names")
    p.add_argument("--scales", default="0.05,0.15",
                   help="the two --scale values (default %(default)s)")
    p.add_argument("--n25", action="store_true", help="also fork N=25")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--json", metavar="OUT", help="write the raw counts here")
    args = p.parse_args(argv)

    if not shutil.which("valgrind"):
        print("workload_instructions: valgrind not found", file=sys.stderr)
        return 2
    sys.path.insert(0, HERE)
    from instructions import real_executable
    pristine = real_executable(args.pristine)
    fork = real_executable(args.fork)
    try:
        s1, s2 = (float(x) for x in args.scales.split(","))
    except ValueError:
        p.error("--scales takes two numbers, e.g. 0.05,0.15")
    if not 0 < s1 < s2:
        p.error("--scales: 0 < S1 < S2")
    names = workload_names()
    if args.only:
        wanted = args.only.split(",")
        unknown = sorted(set(wanted) - set(names))
        if unknown:
            p.error(f"unknown workloads: {', '.join(unknown)} "
                    f"(known: {', '.join(names)})")
        names = [n for n in names if n in wanted]
    configs = [("pristine off", pristine, []), ("fork off", fork, []),
               ("fork N=1", fork, ["-X", "tracemalloc=1"])]
    if args.n25:
        configs.append(("fork N=25", fork, ["-X", "tracemalloc=25"]))

    jobs = [(name, label, python, xopts, scale)
            for name in names for label, python, xopts in configs
            for scale in (s1, s2)]
    counts = {}
    outdir = tempfile.mkdtemp(prefix="bench-wl-callgrind-")
    print(f"[workload_instructions] {len(jobs)} callgrind runs, "
          f"{args.jobs} at a time", file=sys.stderr, flush=True)
    try:
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
            futures = {ex.submit(callgrind_total, python, xopts, name, scale,
                                 outdir, args.timeout): (name, label, scale)
                       for name, label, python, xopts, scale in jobs}
            for done, fut in enumerate(
                    concurrent.futures.as_completed(futures), 1):
                name, label, scale = futures[fut]
                counts.setdefault(name, {}).setdefault(label, {})[scale] = fut.result()
                print(f"[workload_instructions] {done}/{len(jobs)} "
                      f"{name} {label} scale {scale}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(outdir, ignore_errors=True)

    work = {name: {label: c[s2] - c[s1] for label, c in per.items()}
            for name, per in counts.items()}
    labels = [label for label, _, _ in configs]
    header = (f"{'workload':22s} {'fork off/pristine off':>22s} "
              + " ".join(f"{lab + '/fork off':>18s}" for lab in labels[2:]))
    print(header)
    logs = {lab: [] for lab in labels[1:]}
    for name in names:
        w = work[name]
        stable = all(w[lab] > 0 for lab in labels)
        off = w["fork off"] / w["pristine off"] if stable else float("nan")
        stable = stable and 0.5 <= off <= 2
        cells = [f"{off:21.3f}x" if off == off else f"{'-':>22s}"] + [f"{w[lab] / w['fork off']:17.3f}x"
                                     if w["fork off"] > 0 else f"{'-':>18s}"
                                     for lab in labels[2:]]
        print(f"{name:22s} " + " ".join(cells)
              + ("" if stable else "  unstable (left out)"))
        if stable:
            logs["fork off"].append(math.log(off))
            for lab in labels[2:]:
                logs[lab].append(math.log(w[lab] / w["fork off"]))
    if logs["fork off"]:
        cells = [f"{math.exp(sum(logs['fork off']) / len(logs['fork off'])):21.3f}x"]
        cells += [f"{math.exp(sum(logs[lab]) / len(logs[lab])):17.3f}x"
                  for lab in labels[2:]]
        print(f"{'geometric mean':22s} " + " ".join(cells))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"scales": [s1, s2], "counts": counts, "work": work}, f,
                      indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
