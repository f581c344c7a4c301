#!/usr/bin/env python3
"""Long-running benchmark: engine memory while live data stays constant and
call paths keep changing.

A service that is left traced for hours keeps a constant amount of live data
while the paths it allocates on keep changing.  The child keeps a fixed set
of live objects and then runs ROUNDS rounds of three shapes, each with a new
seed, so that most call paths of a round were never seen before:

* ``exp_recursion``: ``f(n)`` calls ``f(n - 1)`` twice and allocates at
  every call (2**(n+1) - 1 calls, every one on its own call path), with n
  varying from round to round;
* ``random_tree``: a tree of random shape is built, walked recursively
  (allocating at every node, the path depending on the shape) and dropped;
* ``deep_diverge``: stacks about DEEP frames deep that take one of several
  call sites at each of the first levels near the root, so that the deep
  parts below differ only by their root.

After every round the child records ``tracemalloc.get_tracemalloc_memory()``
and ``get_traced_memory()``; at the end it counts the live traces.  The
runner reports engine memory over the rounds (it must stay flat once warm),
and engine bytes per live trace against pristine's at the same N.

Standalone:  python3 Tools/bench/longrun.py --pristine P --fork F [--quick]
Child mode (internal): python -X tracemalloc=N longrun.py --child --rounds R
"""

import argparse
import json
import os
import sys

ROUNDS = 100
QUICK_ROUNDS = 20
LIVE_OBJECTS = 20_000
DEEP = 120
FRAMES = (1, 25)


# ---------------------------------------------------------------- child side

def exp_recursion(n):
    x = [n]
    if n:
        exp_recursion(n - 1)
        exp_recursion(n - 1)
    return x


def build_tree(rng, size):
    # A random-shape tree as nested lists: every node picks a random
    # existing node as its parent.
    nodes = [[]]
    for _ in range(size - 1):
        child = []
        nodes[rng.randrange(len(nodes))].append(child)
        nodes.append(child)
    return nodes[0]


def walk(node, depth):
    # One allocation per node, on a path that follows the tree's shape.
    label = (depth, len(node))
    total = 1
    for child in node:
        if len(child) % 2:
            total += walk_odd(child, depth + 1)
        else:
            total += walk(child, depth + 1)
    del label
    return total


def walk_odd(node, depth):
    label = [depth]
    total = 1
    for child in node:
        if len(child) % 3 == 0:
            total += walk(child, depth + 1)
        else:
            total += walk_odd(child, depth + 1)
    del label
    return total


def descend(k):
    # The deep part below the diverging root: a plain chain, allocating at
    # every level.
    x = (k, k)
    if k:
        descend(k - 1)
    return x


def root_a(path, level):
    x = [level]
    return diverge(path, level + 1) if level < len(path) else descend(DEEP)


def root_b(path, level):
    x = {level: None}
    return diverge(path, level + 1) if level < len(path) else descend(DEEP)


def root_c(path, level):
    x = [level, level]
    return diverge(path, level + 1) if level < len(path) else descend(DEEP)


def diverge(path, level):
    which = path[level - 1]
    if which == 0:
        return root_a(path, level)
    if which == 1:
        return root_b(path, level)
    return root_c(path, level)


def one_round(r):
    import random
    rng = random.Random(1000 + r)
    exp_recursion(9 + r % 5)
    walk(build_tree(rng, 1500), 0)
    for _ in range(12):
        path = [rng.randrange(3) for _ in range(6)]
        diverge(path, 1)


def child(rounds):
    import gc
    import _tracemalloc
    import tracemalloc

    live = [object() for _ in range(LIVE_OBJECTS)]
    live += [[i] for i in range(LIVE_OBJECTS // 4)]
    gc.collect()
    tracing = _tracemalloc.is_tracing()
    series = []
    traced = []
    for r in range(rounds):
        one_round(r)
        series.append(tracemalloc.get_tracemalloc_memory())
        traced.append(tracemalloc.get_traced_memory()[0])
    traces = len(_tracemalloc._get_traces())
    print(json.dumps({
        "tracing": bool(tracing),
        "traceback_limit": _tracemalloc.get_traceback_limit(),
        "rounds": rounds,
        "engine_memory": series,
        "traced_memory": traced,
        "traces": traces,
        "live_objects": len(live),
    }))


# --------------------------------------------------------------- runner side

def run_longrun_suite(pythons, quick, timeout, progress):
    import time
    import benchlib
    from benchlib import config_label
    rounds = QUICK_ROUNDS if quick else ROUNDS
    configs = [(side, n) for n in FRAMES for side in ("fork", "pristine")]
    progress.total = len(configs)
    progress.line(f"long-running suite: {rounds} rounds x {len(configs)} configs "
                  f"({LIVE_OBJECTS + LIVE_OBJECTS // 4:,} live objects, "
                  f"changing call paths)")
    out = {"rounds": rounds, "live_objects": LIVE_OBJECTS + LIVE_OBJECTS // 4,
           "deep": DEEP, "frames": list(FRAMES), "results": {}}
    me = os.path.abspath(__file__)
    for side, frames in configs:
        label = config_label(side, frames)
        cmd = benchlib.python_cmd(pythons[side], frames) + [
            me, "--child", "--rounds", str(rounds)]
        t0 = time.monotonic()
        try:
            data, _ = benchlib.run_child(cmd, timeout)
            problem = benchlib.check_tracing(data, frames)
            if problem:
                raise benchlib.ChildError(problem)
            data["seconds"] = time.monotonic() - t0
            out["results"][label] = data
            s = data["engine_memory"]
            msg = (f"engine memory {benchlib.human_bytes(s[0])} -> "
                   f"{benchlib.human_bytes(s[-1])} (max "
                   f"{benchlib.human_bytes(max(s))}), {data['traces']:,} traces, "
                   f"{data['seconds']:.1f}s")
        except benchlib.ChildError as exc:
            out["results"][label] = {"error": str(exc)}
            msg = "ERR"
        progress.advance()
        progress.line(f"longrun {label:<13} {msg}")
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--rounds", type=int, default=ROUNDS, help=argparse.SUPPRESS)
    if "--child" in (sys.argv[1:] if argv is None else argv):
        args = p.parse_args(argv)
        child(args.rounds)
        return 0
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import benchlib
    benchlib.add_suite_options(p)
    args = p.parse_args(argv)
    return benchlib.run_suite_standalone(p, args, "longrun", run_longrun_suite)


if __name__ == "__main__":
    sys.exit(main())
