#!/usr/bin/env python3
"""Instructions executed by each timed workload, measured with callgrind.

The time suite's ratios move by tens of percent between repetitions on a
shared 2-core machine; instruction counts do not.  This runs every workload
of ``workloads/`` under ``valgrind --tool=callgrind`` at two sizes
(``--scale`` S1 and S2) and keeps the difference of the two totals: the
instructions of the extra work, with interpreter start-up, imports and the
workload's set-up cancelled out.  Configurations: pristine off, fork off,
fork N=1, with ``--n25`` fork N=25, and with ``--sampled`` fork sampled
(``-X tracemalloc=25 -X tracemalloc_sample=512KiB``, issue 22), printed
against fork off and against pristine off.  Each child's tracing state is
checked as the time suite checks it (tracing, traceback limit, sampling
interval).

Printed per workload: fork off / pristine off (what the fork adds untraced)
and fork N=1 / fork off (what tracing adds, same build), and their
geometric means.  A workload whose difference is not positive, or whose
fork-off / pristine-off ratio is outside 0.5-2 (the two sizes did not do
proportional work: one-time costs such as a first compilation landed in
one of them), is marked *unstable* and left out of the means.  Not part
of ``make bench`` (about 10 minutes on 2 cores); instructions are not
time: cache misses do not count, so the time suite stays the measure of
record.

With ``--breakdown``, the fork's runs also keep callgrind's instructions
per function and its call counts, and a second table splits what tracing
adds to each workload (fork N=1 minus fork off, function by function, the
two sizes subtracted as above) into the engine's steps (``STEPS``): the
allocation and free hooks, the re-trace of objects reused from free
lists, call sites met for the first time (the slow path that finds or
makes a call-context node), the table of blocks outside pymalloc's pools,
the pools' slot arrays, the peak's totals, compaction, other engine code,
and the rest of the interpreter.  Each is given in percent of fork off's
instructions, so that a row sums to the workload's traced overhead; a
third table gives the hooks' call counts and the instructions per call.

    python3 Tools/bench/workload_instructions.py --pristine P --fork F \\
        [--only NAME,...] [--scales 0.05,0.15] [--n25] [--sampled] [--jobs 2]
        [--json OUT] [--breakdown]
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


# The engine's steps, for --breakdown: step -> the functions whose own
# instructions (callgrind's "self" cost, inlined callees included) it
# counts.  A function of the engine's files that is in no list is "other
# engine"; anything else is "interpreter" (the eval loop, the allocators,
# whatever tracing changes in the rest of the program).
STEPS = [
    ("alloc hooks", ("_PyTraceMalloc_Malloc", "_PyTraceMalloc_Calloc",
                     "_PyTraceMalloc_Realloc", "traced_result", "trace_add",
                     "trace_add_slow", "fresh_block_pooled")),
    ("free hook", ("_PyTraceMalloc_Free", "trace_remove", "remember_removed",
                   "fresh_forget")),
    ("re-trace", ("_PyTraceMalloc_NewReference", "retrace_object",
                  "object_block")),
    ("new sites", ("table_fill", "site_node", "table_get", "map_get",
                   "map_build", "maps_grow", "tables_resize", "line_decoded",
                   "current_node_unlinked", "peak_reserve",
                   "peak_node_created",
                   "current_node_slow", "_PyTraceMalloc_CurrentNode_unlocked",
                   "skip_incomplete", "thread_root", "node_intern",
                   "node_hash",
                   "node_reserve", "node_index_grow", "node_index_rebuild",
                   "string_intern", "string_hash", "string_index_grow",
                   "string_index_rebuild", "dirty_reserve", "code_epoch_slot",
                   "_PyCode_CheckLineNumber", "PyCode_Addr2Line",
                   "_PyCode_InitAddressRange", "_PyLineTable_NextAddressRange",
                   "_PyLineTable_PreviousAddressRange")),
    ("table", ("store_add_table", "store_remove_table", "table_grow",
               "table_delete", "table_find", "table_probe",
               "table_empty_entry", "table_place")),
    ("pool slots", ("_PyTraceMalloc_PoolSlot", "pool_traces_create",
                    "pool_traces_free", "pool_traces_lookup",
                    "pool_cache_clear", "_PyTraceMalloc_ArenaFreed")),
    ("peak totals", ("peak_commit", "peak_before_decrease", "peak_account",
                     "peak_account_add", "peak_account_remove",
                     "peak_account_move",
                     "cct_peak_commit", "cct_peak_before_decrease",
                     "cct_account_add", "cct_account_remove",
                     "cct_account_move", "mark_dirty", "domain_totals",
                     "domain_totals_alloc", "domain_totals_rebuild",
                     "domain_totals_rebuild_into", "node_totals")),
    ("compaction", ("compact_tree", "compact_if_due", "compact_schedule",
                    "engine_recount_memory", "tree_free_unused",
                    "tree_memory", "framecache_memory", "peak_memory",
                    "string_index_fill", "node_index_fill", "peak_renumber",
                    "peak_for_each_node",
                    "cct_compact", "cct_maybe_compact", "compact_mark",
                    "compact_rewrite", "cct_schedule_compaction",
                    "cct_recount_memory", "string_index_rehash_in_place",
                    "node_index_rehash_in_place", "cache_clear")),
]
# The engine's files; tracemalloc_cct.c (split into tree, framecache, peak
# and compact) and the old function names above stay for older profiles.
ENGINE_FILES = ("tracemalloc.c", "tracemalloc_memory.c", "tracemalloc_lock.c",
                "tracemalloc_hooks.c", "tracemalloc_store.c",
                "tracemalloc_tree.c", "tracemalloc_framecache.c",
                "tracemalloc_peak.c", "tracemalloc_compact.c",
                "tracemalloc_engine.h", "tracemalloc_cct.c",
                "obmalloc_tracemalloc.h")
# The hooks whose calls are counted, and the step whose cost they carry.
COUNTED_CALLS = [
    ("allocations", ("_PyTraceMalloc_Malloc", "_PyTraceMalloc_Calloc",
                     "_PyTraceMalloc_Realloc"), "alloc hooks"),
    ("frees", ("_PyTraceMalloc_Free",), "free hook"),
    ("re-traces", ("_PyTraceMalloc_NewReference",), "re-trace"),
]


def engine_functions(files):
    """The functions defined in the engine's files, from the FILES mapping
    of benchlib.parse_callgrind()."""
    return {fn for fn, fl in files.items() if fl in ENGINE_FILES}


def step_of(name, engine):
    for step, functions in STEPS:
        if name in functions:
            return step
    return "other engine" if name in engine else "interpreter"


def step_names():
    return [step for step, _ in STEPS] + ["other engine", "interpreter"]


def workload_names():
    return sorted(name[:-3] for name in os.listdir(WORKLOADS_DIR)
                  if name.endswith(".py") and not name.startswith("_"))


def callgrind_total(python, frames, sample, name, scale, outdir, timeout,
                    breakdown=False):
    """Instructions of one whole run of workload NAME at SCALE under
    `-X tracemalloc=FRAMES` (0: off) and `-X tracemalloc_sample=SAMPLE`
    (None: exact); with BREAKDOWN, (total, self instructions per function,
    calls per function, engine function names)."""
    import benchlib
    out = os.path.join(outdir, f"cg.{os.getpid()}.{name}.{abs(hash((python, frames, sample, scale)))}")
    cmd = (["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
           + benchlib.python_cmd(python, frames, sample)
           + [os.path.join(WORKLOADS_DIR, name + ".py"), "--scale", str(scale)])
    proc = subprocess.run(cmd, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout,
                          env=benchlib.child_env())
    mode = " ".join(benchlib.python_cmd(python, frames, sample)[2:])
    if proc.returncode != 0:
        raise RuntimeError(f"{name} at scale {scale} under {python} "
                           f"{mode} failed:\n"
                           + proc.stderr.decode(errors="replace")[-2000:])
    try:
        data = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise RuntimeError(f"{name} at scale {scale} under {python} {mode}: "
                           f"no JSON result line")
    problem = benchlib.check_tracing(data, frames, sample)
    if problem:
        raise RuntimeError(f"{name} at scale {scale} under {python} {mode}: {problem}")
    total = None
    with open(out) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                total = int(line.split()[1])
    details = None
    if breakdown:
        cost, calls, files = benchlib.parse_callgrind(out)
        details = (cost, calls, engine_functions(files))
    os.unlink(out)
    if total is None:
        raise RuntimeError(f"no instruction total in callgrind's output for {name}")
    return (total,) + details if breakdown else total


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pristine", required=True, help="pristine python of the fork's base")
    p.add_argument("--fork", required=True, help="the fork's python")
    p.add_argument("--only", help="comma-separated workload names")
    p.add_argument("--scales", default="0.05,0.15",
                   help="the two --scale values (default %(default)s)")
    p.add_argument("--n25", action="store_true", help="also fork N=25")
    p.add_argument("--sampled", action="store_true",
                   help="also fork sampled (N=25, sampling at 512KiB)")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--json", metavar="OUT", help="write the raw counts here")
    p.add_argument("--breakdown", action="store_true",
                   help="also split what tracing adds into the engine's "
                        "steps (fork off and fork N=1, per function)")
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
    import benchlib
    configs = [("pristine off", pristine, 0, None), ("fork off", fork, 0, None),
               ("fork N=1", fork, 1, None)]
    if args.n25:
        configs.append(("fork N=25", fork, 25, None))
    if args.sampled:
        configs.append((benchlib.config_label("fork", 25, benchlib.SAMPLE_DEFAULT),
                        fork, 25, benchlib.SAMPLE_DEFAULT))

    jobs = [(name, label, python, frames, sample, scale)
            for name in names for label, python, frames, sample in configs
            for scale in (s1, s2)]
    counts = {}
    details = {}
    outdir = tempfile.mkdtemp(prefix="bench-wl-callgrind-")
    print(f"[workload_instructions] {len(jobs)} callgrind runs, "
          f"{args.jobs} at a time", file=sys.stderr, flush=True)
    try:
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
            futures = {ex.submit(callgrind_total, python, frames, sample, name,
                                 scale, outdir, args.timeout,
                                 args.breakdown and label in BREAKDOWN_CONFIGS):
                       (name, label, scale)
                       for name, label, python, frames, sample, scale in jobs}
            for done, fut in enumerate(
                    concurrent.futures.as_completed(futures), 1):
                name, label, scale = futures[fut]
                result = fut.result()
                if isinstance(result, tuple):
                    details.setdefault(name, {}).setdefault(label, {})[scale] = result[1:]
                    result = result[0]
                counts.setdefault(name, {}).setdefault(label, {})[scale] = result
                print(f"[workload_instructions] {done}/{len(jobs)} "
                      f"{name} {label} scale {scale}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(outdir, ignore_errors=True)

    work = {name: {label: c[s2] - c[s1] for label, c in per.items()}
            for name, per in counts.items()}
    labels = [label for label, _, _, _ in configs]
    # The sampled configuration's targets are against pristine off.
    against_pristine = [lab for lab in labels[2:] if "sampled" in lab]
    header = (f"{'workload':22s} {'fork off/pristine off':>22s} "
              + " ".join(f"{lab + '/fork off':>18s}" for lab in labels[2:])
              + "".join(f" {lab + '/pristine off':>26s}" for lab in against_pristine))
    print(header)
    logs = {lab: [] for lab in labels[1:]}
    logs_pristine = {lab: [] for lab in against_pristine}
    unstable = set()
    for name in names:
        w = work[name]
        stable = all(w[lab] > 0 for lab in labels)
        off = w["fork off"] / w["pristine off"] if stable else float("nan")
        stable = stable and 0.5 <= off <= 2
        cells = [f"{off:21.3f}x" if off == off else f"{'-':>22s}"] + [f"{w[lab] / w['fork off']:17.3f}x"
                                     if w["fork off"] > 0 else f"{'-':>18s}"
                                     for lab in labels[2:]]
        cells += [f"{w[lab] / w['pristine off']:25.3f}x"
                  if w["pristine off"] > 0 else f"{'-':>26s}"
                  for lab in against_pristine]
        print(f"{name:22s} " + " ".join(cells)
              + ("" if stable else "  unstable (left out)"))
        if not stable:
            unstable.add(name)
        if stable:
            logs["fork off"].append(math.log(off))
            for lab in labels[2:]:
                logs[lab].append(math.log(w[lab] / w["fork off"]))
            for lab in against_pristine:
                logs_pristine[lab].append(math.log(w[lab] / w["pristine off"]))
    if logs["fork off"]:
        cells = [f"{math.exp(sum(logs['fork off']) / len(logs['fork off'])):21.3f}x"]
        cells += [f"{math.exp(sum(logs[lab]) / len(logs[lab])):17.3f}x"
                  for lab in labels[2:]]
        cells += [f"{math.exp(sum(v) / len(v)):25.3f}x" for v in logs_pristine.values()]
        print(f"{'geometric mean':22s} " + " ".join(cells))
    steps = None
    if args.breakdown:
        steps = breakdown(details, work, names, s1, s2)
        print_breakdown(steps, [n for n in names if n not in unstable])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"scales": [s1, s2], "counts": counts, "work": work,
                       "steps": steps}, f, indent=1, sort_keys=True)
    return 0


BREAKDOWN_CONFIGS = ("fork off", "fork N=1")


def breakdown(details, work, names, s1, s2):
    """Per workload: instructions tracing adds per step (N=1 minus off,
    each the difference of the two sizes), and the hooks' call counts."""
    result = {}
    for name in names:
        per = details[name]
        engine = set()
        delta = {}
        for label, sign in (("fork N=1", 1), ("fork off", -1)):
            (cost1, _, eng1), (cost2, _, eng2) = per[label][s1], per[label][s2]
            engine |= eng1 | eng2
            for fn in set(cost1) | set(cost2):
                delta[fn] = delta.get(fn, 0) + sign * (cost2.get(fn, 0)
                                                      - cost1.get(fn, 0))
        by_step = dict.fromkeys(step_names(), 0)
        for fn, d in delta.items():
            by_step[step_of(fn, engine)] += d
        calls1, calls2 = per["fork N=1"][s1][1], per["fork N=1"][s2][1]
        counted = {what: sum(calls2.get(fn, 0) - calls1.get(fn, 0)
                             for fn in functions)
                   for what, functions, _ in COUNTED_CALLS}
        result[name] = {"fork off": work[name]["fork off"],
                        "steps": by_step, "calls": counted}
    return result


def print_breakdown(steps, names):
    cols = step_names()
    print()
    print("What tracing adds, by step: fork N=1 - fork off, in % of fork "
          "off's instructions")
    short = {"alloc hooks": "alloc", "free hook": "free",
             "re-trace": "retrace", "new sites": "sites", "table": "table",
             "pool slots": "pools", "peak totals": "peak",
             "compaction": "compact", "other engine": "engine",
             "interpreter": "interp"}
    print(f"{'workload':22s} {'total':>7s} "
          + " ".join(f"{short[c]:>7s}" for c in cols))
    for name in names:
        off = steps[name]["fork off"]
        if off <= 0:
            continue
        by_step = steps[name]["steps"]
        total = sum(by_step.values())
        print(f"{name:22s} {100 * total / off:6.1f}% "
              + " ".join(f"{100 * by_step[c] / off:6.1f}%" for c in cols))
    print()
    print("Hook calls per 1,000 fork-off instructions, and the instructions "
          "of their step per call")
    print(f"{'workload':22s} "
          + " ".join(f"{what:>12s} {'instr/call':>10s}"
                     for what, _, _ in COUNTED_CALLS))
    for name in names:
        off = steps[name]["fork off"]
        if off <= 0:
            continue
        cells = []
        for what, _, step in COUNTED_CALLS:
            n = steps[name]["calls"][what]
            per_call = steps[name]["steps"][step] / n if n > 0 else float("nan")
            cells.append(f"{1000 * n / off:12.2f} {per_call:10.1f}")
        print(f"{name:22s} " + " ".join(cells))


if __name__ == "__main__":
    sys.exit(main())
