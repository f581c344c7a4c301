#!/usr/bin/env python3
"""Memory benchmark: tracemalloc bookkeeping per live traced block.

For 10^4, 10^5, 10^6 and 10^7 live small blocks (``object()`` instances,
16 bytes each, kept in a list) and for each interpreter, one child runs
untraced and one under ``-X tracemalloc=1``.  Reported:

* ``get_tracemalloc_memory() / number of traces``  (bytes per trace)
* marginal growth of ``get_tracemalloc_memory()`` per added block
* (peak RSS traced - peak RSS untraced) / blocks   (bytes per block)
* the same for the growth of the current RSS across the allocation, which
  leaves out tracemalloc's cost for the interpreter's start-up allocations

The fork also runs per size in sampling mode (``-X tracemalloc=1 -X
tracemalloc_sample=512KiB``, the default interval, and at 1KiB, where the
samples are many), where only sampled blocks have a trace: its engine
memory, its number of samples (``len(tracemalloc.take_snapshot().traces)``)
and bytes per sample (engine memory / samples, and the growth per sample
added), beside exact mode's bytes per live block.

Standalone:  python3 Tools/bench/memory.py --pristine P --fork F [--quick]
Child mode (internal): python memory.py --child --blocks K
"""

import argparse
import json
import os
import sys


# ---------------------------------------------------------------- child side

def _rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def child(blocks, count_limit):
    import resource
    import time
    import _tracemalloc

    # Imported in every configuration so that traced and untraced children
    # carry the same modules.
    import tracemalloc

    tracing = _tracemalloc.is_tracing()
    get_sample = getattr(_tracemalloc, "get_sample", None)
    sample = get_sample() if get_sample is not None else None
    traces_before = 0
    tm_before = 0
    if tracing:
        # Sampled: only the samples have traces, and the snapshot is the
        # public way to count them.
        traces_before = (len(tracemalloc._get_traces()) if sample is None
                         else len(tracemalloc.take_snapshot().traces))
        tm_before = tracemalloc.get_tracemalloc_memory()
    rss_before = _rss_kib()
    t0 = time.perf_counter()
    keep = [object() for _ in range(blocks)]
    alloc_s = time.perf_counter() - t0
    out = {
        "blocks": blocks,
        "tracing": bool(tracing),
        "traceback_limit": _tracemalloc.get_traceback_limit(),
        "sample": sample,
        "alloc_seconds": alloc_s,
        "rss_before_kib": rss_before,
        "rss_kib": _rss_kib(),
        "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "traces_before": traces_before,
        "tm_memory_before": tm_before,
    }
    if tracing:
        out["tm_memory"] = tracemalloc.get_tracemalloc_memory()
        out["traced_current"], out["traced_peak"] = tracemalloc.get_traced_memory()
        # Counting the traces exactly builds a list of all of them, which
        # for millions of blocks costs time and memory; peak RSS has been
        # read already.  Above the limit the count is computed: what was
        # there before, plus one per object, plus the list's buffer.
        if sample is not None:
            out["traces"] = len(tracemalloc.take_snapshot().traces)
            out["traces_exact"] = True
        elif blocks <= count_limit:
            out["traces"] = len(tracemalloc._get_traces())
            out["traces_exact"] = True
        else:
            out["traces"] = traces_before + blocks + 1
            out["traces_exact"] = False
    del keep
    print(json.dumps(out))


# --------------------------------------------------------------- runner side

SIZES = [10 ** 4, 10 ** 5, 10 ** 6, 10 ** 7]
QUICK_SIZES = [10 ** 4, 10 ** 5, 10 ** 6]
FRAMES = 1
COUNT_LIMIT = 10 ** 6
# The sampling mode's intervals: the default, and one small enough that
# the samples outgrow the engine's preallocated table, so that the bytes
# a sample adds show (at the default interval a few dozen samples fit in
# it and bytes per sample is the fixed memory divided among them).  The
# memory does not depend on the traceback limit (the call-context tree is
# the same), so they run at FRAMES like the exact column.
SAMPLES = ["512KiB", "1KiB"]


def run_memory_suite(pythons, quick, timeout, progress):
    import benchlib
    sizes = QUICK_SIZES if quick else SIZES
    configs = [("pristine", 0, None), ("pristine", FRAMES, None), ("fork", 0, None),
               ("fork", FRAMES, None)] + [("fork", FRAMES, s) for s in SAMPLES]
    progress.total = len(sizes)
    progress.line(f"memory suite: {len(sizes)} sizes x {len(configs)} configs "
                  f"(object() blocks, -X tracemalloc={FRAMES}; sampled: "
                  f"-X tracemalloc_sample={' and '.join(SAMPLES)})")
    results = []
    me = os.path.abspath(__file__)
    for i, size in enumerate(sizes):
        # alternate the starting side per size
        order = configs if i % 2 == 0 else configs[2:] + configs[:2]
        line = []
        for side, frames, sample in order:
            label = benchlib.config_label(side, frames, sample)
            cmd = benchlib.python_cmd(pythons[side], frames, sample) + [
                me, "--child", "--blocks", str(size), "--count-limit", str(COUNT_LIMIT)]
            rec = {"side": side, "frames": frames, "blocks": size}
            try:
                data, _ = benchlib.run_child(cmd, timeout)
                problem = benchlib.check_tracing(data, frames, sample)
                if problem:
                    rec["error"] = problem
                else:
                    rec.update(data)
            except benchlib.ChildError as exc:
                rec["error"] = str(exc)
            # A sampled record is told apart by its interval, kept even
            # when the child failed.
            rec["sample"] = sample
            results.append(rec)
            if rec.get("error"):
                line.append(f"{label}=ERR")
            elif sample is not None:
                line.append(f"{label}: engine "
                            f"{benchlib.human_bytes(rec['tm_memory'])}, "
                            f"{rec['traces']} samples")
            else:
                line.append(f"{label}: peak "
                            f"{rec['peak_rss_kib'] / 1024:.0f} MiB, {rec['alloc_seconds']:.2f}s")
        progress.advance()
        progress.line(f"memory {size:>9,} blocks: " + "; ".join(line))
    return {"sizes": sizes, "frames": FRAMES, "object": "object()", "results": results,
            "count_limit": COUNT_LIMIT, "samples": SAMPLES}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--blocks", type=int, default=10 ** 5, help=argparse.SUPPRESS)
    p.add_argument("--count-limit", type=int, default=COUNT_LIMIT, help=argparse.SUPPRESS)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import benchlib
    benchlib.add_suite_options(p)
    args = p.parse_args(argv)
    if args.child:
        child(args.blocks, args.count_limit)
        return 0
    return benchlib.run_suite_standalone(p, args, "memory", run_memory_suite)

if __name__ == "__main__":
    sys.exit(main())
