#!/usr/bin/env python3
"""Snapshot benchmark: the cost of tracemalloc's Python API on big
snapshots, fork vs pristine, on the same program.

The child starts tracing with ``tracemalloc.start(30)`` (so that the
interpreter's start-up allocations are not traced) and keeps TRACES objects
allocated at the bottom of 30-frame stacks (a chain that branches between
two functions at every level, so that the snapshot holds many distinct
tracebacks; the objects come from a few lines of each of them).  It then
times, with ``time.perf_counter`` and only through the public API:

* ``take_snapshot()``;
* ``Snapshot.dump()`` to a temporary file, the file's size, and
  ``Snapshot.load()``;
* ``statistics()`` by ``lineno``, ``filename`` and ``traceback``, and by
  ``lineno`` and ``filename`` with ``cumulative=True``;
* ``compare_to()`` by ``lineno`` and ``traceback``, after a tenth of the
  objects were freed and others allocated elsewhere, against a second
  snapshot taken then (taking it is timed too, with the first one held).

An operation is repeated while its timings add up to less than a second
(at most REPEAT times) and the best timing is kept.  One child per size and
interpreter, the two interleaved (the side that starts alternates).

Upstream's API is pure Python that runs traced here, 30 frames per
allocation, so on pristine some operations take minutes from 10^5 traces
on.  The runner predicts each operation's time at the next size from the
previous size (linear growth) and skips it when the prediction exceeds the
cap (OP_CAP: 100 s, quick 20 s); the table says which were skipped.

Standalone:  python3 Tools/bench/snapshots.py --pristine P --fork F [--quick]
Child mode (internal): python snapshots.py --child --traces T
"""

import argparse
import json
import os
import sys

SIZES = [10 ** 4, 10 ** 5, 10 ** 6]
QUICK_SIZES = [10 ** 4, 10 ** 5]
FRAMES = 30
DEPTH = 27          # chain frames above the allocating leaf
LEAVES = 1024       # distinct paths taken through the chain
REPEAT = 3
OP_CAP = 100.0
QUICK_OP_CAP = 20.0

OPERATIONS = [
    "take_snapshot", "dump", "load",
    "statistics lineno", "statistics filename", "statistics traceback",
    "statistics lineno cumulative", "statistics filename cumulative",
    "take_snapshot (2nd, 1st held)", "compare_to lineno",
    "compare_to traceback",
]


# ---------------------------------------------------------------- child side

def _leaf(count, keep):
    # Three allocating lines, so that 'lineno' has more than one per path.
    third = count // 3
    keep.extend([object() for _ in range(third)])
    keep.extend([object() for _ in range(third)])
    keep.extend([object() for _ in range(count - 2 * third)])


def _left(bits, level, count, keep):
    if level == DEPTH:
        return _leaf(count, keep)
    if (bits >> level) & 1:
        return _right(bits, level + 1, count, keep)
    return _left(bits, level + 1, count, keep)


def _right(bits, level, count, keep):
    if level == DEPTH:
        return _leaf(count, keep)
    if (bits >> level) & 1:
        return _right(bits, level + 1, count, keep)
    return _left(bits, level + 1, count, keep)


def _bits(i):
    # Spread the leaves over the whole depth (a multiplicative hash).
    return (i * 2654435761) & ((1 << DEPTH) - 1)


def _churn(keep, seed):
    # Free a tenth of the objects, allocate as many on other paths.
    freed = len(keep) // 10
    del keep[::10]
    more = []
    for i in range(64):
        _left(_bits(i + seed), 0, freed // 64, more)
    keep.extend(more)


def _best(repeat, func):
    import time
    best = None
    result = None
    spent = 0.0
    for _ in range(repeat):
        result = None
        t0 = time.perf_counter()
        result = func()
        t = time.perf_counter() - t0
        best = t if best is None or t < best else best
        spent += t
        if spent >= 1.0:
            break
    return best, result


def child(traces, skip):
    import gc
    import tempfile
    import _tracemalloc
    import tracemalloc

    repeat = REPEAT
    tracemalloc.start(FRAMES)
    keep = []
    per_leaf = max(3, -(-traces // LEAVES))
    for i in range(LEAVES):
        _left(_bits(i), 0, per_leaf, keep)
        if len(keep) >= traces:
            break
    gc.collect()
    times = {}
    out = {"tracing": bool(_tracemalloc.is_tracing()),
           "traceback_limit": _tracemalloc.get_traceback_limit(),
           "objects": len(keep), "repeat": repeat, "times": times}

    times["take_snapshot"], snap = _best(repeat, tracemalloc.take_snapshot)
    out["traces"] = len(snap.traces)
    fd, path = tempfile.mkstemp(prefix="bench-snapshot-", suffix=".pickle")
    os.close(fd)
    try:
        times["dump"], _ = _best(repeat, lambda: snap.dump(path))
        out["file_bytes"] = os.path.getsize(path)
        times["load"], loaded = _best(repeat, lambda: tracemalloc.Snapshot.load(path))
        out["loaded_traces"] = len(loaded.traces)
        del loaded
    finally:
        os.unlink(path)
    for key, cumulative in (("lineno", False), ("filename", False),
                            ("traceback", False), ("lineno", True),
                            ("filename", True)):
        name = f"statistics {key}" + (" cumulative" if cumulative else "")
        if name in skip:
            continue
        times[name], stats = _best(
            repeat, lambda: snap.statistics(key, cumulative=cumulative))
        out.setdefault("groups", {})[name] = len(stats)
        del stats
    _churn(keep, 7)
    gc.collect()
    times["take_snapshot (2nd, 1st held)"], snap2 = _best(
        1, tracemalloc.take_snapshot)
    out["traces_2nd"] = len(snap2.traces)
    for key in ("lineno", "traceback"):
        name = f"compare_to {key}"
        if name in skip:
            continue
        times[name], diff = _best(repeat, lambda: snap2.compare_to(snap, key))
        out.setdefault("groups", {})[name] = len(diff)
        del diff
    print(json.dumps(out))


# --------------------------------------------------------------- runner side

# Operations that can be skipped (the others are needed by what follows).
SKIPPABLE = [op for op in OPERATIONS if op.startswith(("statistics", "compare_to"))]


def run_snapshot_suite(pythons, quick, timeout, progress, op_cap=None):
    import time
    import benchlib
    sizes = QUICK_SIZES if quick else SIZES
    op_cap = op_cap or (QUICK_OP_CAP if quick else OP_CAP)
    last = {"fork": None, "pristine": None}   # the previous size's record
    progress.total = len(sizes) * 2
    progress.line(f"snapshot suite: {', '.join(f'{s:,}' for s in sizes)} live traces, "
                  f"{FRAMES}-frame tracebacks, fork and pristine interleaved")
    out = {"sizes": sizes, "frames": FRAMES, "operations": OPERATIONS,
           "leaves": LEAVES, "op_cap": op_cap, "results": []}
    me = os.path.abspath(__file__)
    for i, size in enumerate(sizes):
        sides = ("fork", "pristine") if i % 2 == 0 else ("pristine", "fork")
        for side in sides:
            skip = {}
            prev = last[side]
            # Linear in the number of traces, counting those of the
            # interpreter's start-up (about 20,000 at 30 frames) too.
            factor = 1.0
            if prev is not None:
                base = max(0, prev["traces"] - prev["objects"])
                factor = (size + base) / max(1, prev["traces"])
            for op in SKIPPABLE:
                if prev is None:
                    continue
                if op in prev.get("skipped", {}):
                    skip[op] = prev["skipped"][op] * factor
                elif op in prev.get("times", {}):
                    guess = prev["times"][op] * factor
                    if guess > op_cap:
                        skip[op] = guess
            cmd = benchlib.python_cmd(pythons[side], 0) + [
                me, "--child", "--traces", str(size), "--skip", ",".join(skip)]
            rec = {"side": side, "size": size, "skipped": skip}
            t0 = time.monotonic()
            try:
                data, _ = benchlib.run_child(cmd, timeout)
                problem = benchlib.check_tracing(data, FRAMES)
                if problem:
                    raise benchlib.ChildError(problem)
                rec.update(data)
                msg = (f"{data['traces']:,} traces, take {data['times']['take_snapshot']:.3f}s, "
                       f"dump {data['times']['dump']:.3f}s, "
                       f"{benchlib.human_bytes(data['file_bytes'])}")
            except benchlib.ChildError as exc:
                rec["error"] = str(exc)
                msg = "ERR"
            rec["wall"] = time.monotonic() - t0
            out["results"].append(rec)
            if not rec.get("error"):
                last[side] = rec
            progress.advance()
            progress.line(f"snapshots {size:>9,} {side:<8} {msg} ({rec['wall']:.0f}s)")
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--traces", type=int, default=10 ** 4, help=argparse.SUPPRESS)
    p.add_argument("--skip", default="", help=argparse.SUPPRESS)
    if "--child" in (sys.argv[1:] if argv is None else argv):
        args = p.parse_args(argv)
        child(args.traces, set(filter(None, args.skip.split(","))))
        return 0
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import benchlib
    benchlib.add_suite_options(p)
    args = p.parse_args(argv)
    return benchlib.run_suite_standalone(p, args, "snapshots", run_snapshot_suite)


if __name__ == "__main__":
    sys.exit(main())
