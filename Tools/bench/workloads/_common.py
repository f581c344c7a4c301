"""Shared driver for the benchmark workloads.

Every workload is a standalone program::

    python workloads/NAME.py [--n N] [--scale F] [--verbose]

It calls ``run(n)`` once and times only that call with
``time.perf_counter`` (interpreter start-up and imports are excluded).  The
last line of stdout is a JSON object that the runner parses::

    {"workload": ..., "n": ..., "seconds": ..., "check": ...,
     "tracing": bool, "traceback_limit": int, "sample": int or None, ...}

``check`` is a deterministic digest of the work done, so the runner can tell
that every configuration computed the same thing.  ``tracing`` and
``traceback_limit`` are read from the builtin ``_tracemalloc`` module after
the timed section, which proves that ``-X tracemalloc=N`` really applied;
``sample`` is ``tracemalloc.get_sample()`` (None when tracing is exact or
off, and on an interpreter without sampling), which proves that ``-X
tracemalloc_sample`` did, and ``samples`` the number of sampled blocks
still live then.
``--verbose`` also prints a human-readable line to stderr, including
``tracemalloc.is_tracing()`` and the traced memory.
"""

import argparse
import json
import sys
import time


def main(name, run, default_n, doc=None):
    parser = argparse.ArgumentParser(prog=name, description=doc)
    parser.add_argument("--n", type=int, default=default_n,
                        help="size knob (default %(default)s)")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiply the size knob by this factor")
    parser.add_argument("--verbose", action="store_true",
                        help="print tracemalloc status to stderr")
    args = parser.parse_args()
    n = max(1, int(round(args.n * args.scale)))

    t0 = time.perf_counter()
    check = run(n)
    seconds = time.perf_counter() - t0

    import _tracemalloc
    out = {
        "workload": name,
        "n": n,
        "seconds": seconds,
        "check": check if isinstance(check, (int, str)) else repr(check),
        "tracing": bool(_tracemalloc.is_tracing()),
        "traceback_limit": _tracemalloc.get_traceback_limit(),
        "sample": None,
    }
    get_sample = getattr(_tracemalloc, "get_sample", None)
    if get_sample is not None:
        out["sample"] = get_sample()
    if out["sample"] is not None:
        # Only sampled blocks have traces: a short list.
        out["samples"] = len(_tracemalloc._get_traces())
    if out["tracing"]:
        current, peak = _tracemalloc.get_traced_memory()
        out["traced_current"] = current
        out["traced_peak"] = peak
    if args.verbose:
        import tracemalloc
        print(f"[{name}] n={n} {seconds:.3f}s "
              f"tracemalloc.is_tracing()={tracemalloc.is_tracing()} "
              f"traceback_limit={tracemalloc.get_traceback_limit()} "
              f"sample={out['sample']} "
              f"traced(current, peak)={tracemalloc.get_traced_memory()}",
              file=sys.stderr)
    sys.stdout.flush()
    print(json.dumps(out))
    return out


def digest(*values):
    """Small, stable digest of ints/strings (independent of hash seeds)."""
    h = 1469598103934665603
    for v in values:
        for ch in str(v).encode():
            h = ((h ^ ch) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h
