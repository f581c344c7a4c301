#!/usr/bin/env python3
"""Scaling benchmark: cost of one traced allocation as the number of live
blocks grows (10^3 -> 10^7) and as the Python stack deepens (1 -> 500
frames), fork vs pristine, at N=1 and N=25.

One child process per configuration and repetition runs both sweeps:

* depth sweep: a recursive chain of ``depth`` frames, with the timed loop at
  its bottom (few live blocks);
* live sweep: the live list is grown step by step to each size, and the
  timed loop runs at a shallow depth.

The timed loop allocates one ``object()`` and frees one per iteration: it
stores into a ring of slots visited in a fixed shuffled order, so the block
freed is an old one at an unpredictable address, as in real programs.  Each
timing runs enough passes over the ring to last about ``--target-ms`` (at
most ``--iters`` allocations); the child reports the best of ``--repeat``
timings in ns per iteration, and the runner reports traced minus untraced
of the same interpreter.

Standalone:  python3 Tools/bench/scaling.py --pristine P --fork F [--quick]
Child mode (internal): python -c LAUNCHER DIR --live=... --depths=... ...
"""

import argparse
import json
import os
import sys


# ---------------------------------------------------------------- child side
#
# Kept as small module-level functions, started by LAUNCHER (below): upstream
# tracemalloc computes the line number of every captured frame by scanning
# its code object's line table, so big functions on the stack would inflate
# its N=25 cost (and the time to grow 10^7 live blocks) for reasons
# unrelated to what is measured.

def _permutation(ring):
    # Fixed pseudo-random permutation (xorshift; no `random` import).
    perm = list(range(ring))
    x = 2463534242
    for i in range(ring - 1, 0, -1):
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        j = x % (i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def _passes(k, slots, perm, perf):
    # k passes over the ring: one allocation and one free per iteration.
    obj = object
    t0 = perf()
    for _ in range(k):
        for j in perm:
            slots[j] = obj()
    return perf() - t0


def _timed(p):
    # Calibrate to ~target_s per timing (at least one pass over the ring, at
    # most max_iters allocations), then the best of `repeat` timings.
    slots, perm, perf = p["slots"], p["perm"], p["perf"]
    ring = len(perm)
    one = min(_passes(1, slots, perm, perf), _passes(1, slots, perm, perf))
    k = max(1, min(p["max_iters"] // ring, int(p["target_s"] / max(one, 1e-9))))
    best = min(_passes(k, slots, perm, perf) for _ in range(p["repeat"]))
    return best / (k * ring) * 1e9


def _descend(d, p):
    if d > 1:
        return _descend(d - 1, p)
    return _timed(p)


def _grow(live, target):
    obj = object
    for _ in range(target - len(live)):
        live.append(obj())


def _stack_depth():
    f = sys._getframe(1)
    n = 0
    while f is not None:
        n += 1
        f = f.f_back
    return n


def child(lives, depths, depth_live, max_iters, repeat, ring, target_s):
    import time
    import _tracemalloc
    sys.setrecursionlimit(max(sys.getrecursionlimit(), max(depths) + 200))
    perm = _permutation(ring)
    p = {"slots": [None] * ring, "perm": perm, "perf": time.perf_counter,
         "max_iters": max_iters, "target_s": target_s, "repeat": repeat}
    _timed(p)  # warm up: fill the ring, settle the allocator
    live = []
    _grow(live, depth_live)
    depth_ns = {d: _descend(d, p) for d in depths}
    live_ns = {}
    for target in lives:
        _grow(live, target)
        live_ns[target] = _timed(p)
    print(json.dumps({
        "tracing": bool(_tracemalloc.is_tracing()),
        "traceback_limit": _tracemalloc.get_traceback_limit(),
        "depth": depth_ns,
        "live": live_ns,
        "base_depth": _stack_depth(),
    }))


def _child_main(argv):
    # Fast path for the child: no argparse, a shallow stack.
    opts = dict(a.split("=", 1) for a in argv if a.startswith("--") and "=" in a)
    ints = lambda k: [int(x) for x in opts[k].split(",") if x]
    child(ints("--live"), ints("--depths"), int(opts["--depth-live"]),
          int(opts["--iters"]), int(opts["--repeat"]), int(opts["--ring"]),
          float(opts["--target-ms"]) / 1000)


# --------------------------------------------------------------- runner side

FULL = dict(live=[10 ** 3, 10 ** 4, 10 ** 5, 10 ** 6, 10 ** 7],
            depths=[1, 10, 50, 100, 250, 500], reps=3)
QUICK = dict(live=[10 ** 3, 10 ** 4, 10 ** 5, 10 ** 6],
             depths=[1, 100, 500], reps=3)
ITERS = 200_000          # at most this many allocations per timing
TARGET_MS = 20           # aim for timings this long
REPEAT = 5
RING = 1000
DEPTH_LIVE = 1000
FRAMES = [1, 25]
# The child is started from a one-line -c program rather than as a script:
# a script's <module> frame sits under every allocation, and upstream
# tracemalloc's line-number lookup for it costs microseconds, which would
# swamp the per-allocation cost this suite is after (and triple its time).
LAUNCHER = ("import sys; sys.path.insert(0, sys.argv[1]); import scaling; "
            "scaling._child_main(sys.argv[2:])")


def run_scaling_suite(pythons, quick, timeout, progress):
    import benchlib
    p = QUICK if quick else FULL
    configs = [(side, f) for side in ("pristine", "fork") for f in [0] + FRAMES]
    reps = p["reps"]
    progress.total = reps * len(configs)
    progress.line(f"scaling suite: {len(configs)} configs x {reps} reps; live blocks "
                  f"{p['live'][0]:,}..{p['live'][-1]:,}, depth {p['depths'][0]}..{p['depths'][-1]}")
    here = os.path.dirname(os.path.abspath(__file__))
    runs = []
    base_depth = None
    for rep in range(reps):
        shift = rep % len(configs)
        for side, frames in configs[shift:] + configs[:shift]:
            cmd = benchlib.python_cmd(pythons[side], frames) + [
                "-c", LAUNCHER, here,
                "--live=" + ",".join(map(str, p["live"])),
                "--depths=" + ",".join(map(str, p["depths"])),
                f"--depth-live={DEPTH_LIVE}", f"--iters={ITERS}", f"--target-ms={TARGET_MS}",
                f"--repeat={REPEAT}", f"--ring={RING}"]
            rec = {"side": side, "frames": frames, "rep": rep}
            label = benchlib.config_label(side, frames)
            try:
                data, _ = benchlib.run_child(cmd, timeout)
                problem = benchlib.check_tracing(data, frames)
                if problem:
                    rec["error"] = problem
                else:
                    rec["live"] = {int(k): v for k, v in data["live"].items()}
                    rec["depth"] = {int(k): v for k, v in data["depth"].items()}
                    base_depth = data["base_depth"]
            except benchlib.ChildError as exc:
                rec["error"] = str(exc)
            runs.append(rec)
            progress.advance()
            if rec.get("error"):
                progress.line(f"scaling rep {rep + 1}/{reps} {label:<13} ERROR: "
                              f"{rec['error'].splitlines()[0]}")
            else:
                lv, dp = rec["live"], rec["depth"]
                progress.line(
                    f"scaling rep {rep + 1}/{reps} {label:<13} ns/iter: live "
                    + " ".join(f"{benchlib_pow(k)}={lv[k]:.0f}" for k in p["live"])
                    + "; depth " + " ".join(f"{k}={dp[k]:.0f}" for k in p["depths"]))
    return {"live": p["live"], "depths": p["depths"], "reps": reps, "frames": FRAMES,
            "iters": ITERS, "target_ms": TARGET_MS, "repeat": REPEAT,
            "ring": RING, "depth_live": DEPTH_LIVE, "base_depth": base_depth,
            "runs": runs}


def benchlib_pow(n):
    e = len(str(n)) - 1
    return f"1e{e}" if 10 ** e == n else str(n)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import benchlib
    benchlib.add_suite_options(ap)
    args = ap.parse_args(argv)
    return benchlib.run_suite_standalone(ap, args, "scaling", run_scaling_suite)

if __name__ == "__main__":
    sys.exit(main())
