#!/usr/bin/env python3
"""Retention benchmark: the cost of tracemalloc.retention's search (issue
30) at 10^5 and 10^6 live objects.

The child builds a heap of LIVE objects reachable from a module's globals
(a dict of lists of small instances, each holding a bytes object: half of
the objects are GC objects, half are not) and times, with
``time.perf_counter``, ``retention_paths()`` (the C search and the Python
layer that names the steps) on:

* ``1000 targets``: a thousand of the bytes objects, scattered over the
  heap (a leak report's sample);
* ``all targets``: every object of the heap (LIVE targets);
* ``C-held``: a thousand objects that only a C static holds (through
  ``_testtracemalloc.keep_in_static()``), which makes the search run its
  second phase over ``gc.get_objects()``;
* ``site (traced)``: in a second child, whose heap was built with
  ``tracemalloc.start(1)``, ``site_retention()`` of the line that
  allocated a thousand leaked objects (finding the site's objects among
  the LIVE ones, then the search).

Each search runs REPEAT (3) times; the best time and the largest peak
are kept.  Memory: the search allocates with malloc(), untraced, so it is
measured as the process's peak RSS during the search less its RSS before
(``/proc/self/clear_refs`` resets the peak first; Linux).

Side by side, on the same heap and interpreter: objgraph's
``find_backref_chain()`` for ONE of the targets (Debian's python3-objgraph,
when installed), the tool a user would otherwise reach for.

Standalone:  python3 Tools/bench/retention.py --fork ./python [--quick]
             [--json OUT]
Child mode (internal): python retention.py --child --live N
                       [--traced | --case CASE]
"""

import argparse
import json
import os
import subprocess
import sys

SIZES = [10 ** 5, 10 ** 6]
QUICK_SIZES = [10 ** 5]
OBJGRAPH = "/usr/lib/python3/dist-packages/objgraph.py"
SAMPLE = 1000
REPEAT = 3          # the best time of REPEAT searches is kept
CASES = ["1000 targets", "all targets", "C-held", "site (traced)"]


# ---------------------------------------------------------------- child side

def _rss_kib(field):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
        return True
    except OSError:
        return False


def _measure(func, repeat=REPEAT):
    """FUNC's result, its best time of REPEAT and its largest peak."""
    import time
    best = extra = None
    for _ in range(repeat):
        result = None
        resettable = _reset_peak()
        before = _rss_kib("VmRSS")
        start = time.perf_counter()
        result = func()
        elapsed = time.perf_counter() - start
        peak = _rss_kib("VmHWM") if resettable else None
        if peak is not None:
            extra = max(extra or 0, max(0, peak - before) * 1024)
        best = elapsed if best is None else min(best, elapsed)
    return result, best, extra


class Item:
    __slots__ = ("data",)

    def __init__(self, data):
        self.data = data


def _leaked_buffer():
    return bytearray(100)


def child_traced(live):
    import gc
    import tracemalloc
    import types
    from tracemalloc import retention

    tracemalloc.start(1)
    gc.collect()
    gc.disable()
    module = types.ModuleType("bench_heap")
    sys.modules["bench_heap"] = module
    pairs = (live - SAMPLE) // 2
    module.HEAP = {f"k{start}": [Item(b"%d" % i) for i in
                                 range(start, min(start + 100, pairs))]
                   for start in range(0, pairs, 100)}
    module.LEAK = [_leaked_buffer() for _ in range(SAMPLE)]
    site = (__file__, _leaked_buffer.__code__.co_firstlineno + 1)
    result, seconds, memory = _measure(
        lambda: retention.site_retention(site))
    assert result.count == SAMPLE, result
    print(json.dumps({"live": live, "rows": {"site (traced)":
                                             (seconds, memory)},
                      "counts": {"site (traced)": SAMPLE}}))


def child(live, case):
    """Build the heap, then time CASE (one of CASES, or 'objgraph'): one
    case per process, so that each peak starts from the heap alone."""
    import gc
    import types
    from tracemalloc import retention

    gc.collect()
    gc.disable()
    module = types.ModuleType("bench_heap")
    sys.modules["bench_heap"] = module
    # LIVE objects: LIVE/2 instances, LIVE/2 bytes, in lists of 100.
    pairs = live // 2
    heap = {}
    for start in range(0, pairs, 100):
        heap[f"k{start}"] = [Item(b"%d" % i)
                             for i in range(start, min(start + 100, pairs))]
    module.HEAP = heap
    lists = list(heap.values())
    step = max(1, pairs // SAMPLE)
    sample = [lists[i // 100][i % 100].data for i in range(0, pairs, step)]
    sample = sample[:SAMPLE]
    row = count = objgraph_seconds = None

    if case == "1000 targets":
        result, seconds, memory = _measure(
            lambda: retention.retention_paths(sample))
        assert result.reached == len(sample), result
        row, count = (seconds, memory), len(sample)
    elif case == "all targets":
        everything = [item for items in lists for item in items]
        everything += [item.data for item in everything]
        result, seconds, memory = _measure(
            lambda: retention.retention_paths(everything))
        assert result.reached == len(everything), result
        row, count = (seconds, memory), len(everything)
    elif case == "C-held":
        try:
            import _testtracemalloc
        except ImportError:
            _testtracemalloc = None
        if _testtracemalloc is not None:
            held = [Item(None) for _ in range(SAMPLE)]
            _testtracemalloc.keep_in_static(held)
            targets = list(held)
            del held
            result, seconds, memory = _measure(
                lambda: retention.retention_paths(targets))
            assert result.chains[0].kind == "no-referrer", result
            row, count = (seconds, memory), len(targets)
            _testtracemalloc.keep_in_static(None)
    elif case == "objgraph" and os.path.exists(OBJGRAPH):
        import importlib.util
        import time
        spec = importlib.util.spec_from_file_location("objgraph", OBJGRAPH)
        objgraph = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(objgraph)
        target = sample[0]
        start = time.perf_counter()
        chain = objgraph.find_backref_chain(
            target, lambda obj: obj is module, extra_ignore=(id(sample),))
        objgraph_seconds = time.perf_counter() - start
        assert len(chain) > 1
    del lists
    print(json.dumps({"live": live, "gc_objects": len(gc.get_objects()),
                      "row": row, "count": count,
                      "objgraph_one": objgraph_seconds}))


# --------------------------------------------------------------- runner side

def _child(fork, args, timeout):
    out = subprocess.run(
        [fork, os.path.abspath(__file__), "--child"] + args,
        capture_output=True, text=True, timeout=timeout, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_retention_suite(fork, quick=False, timeout=900, progress=None):
    """Rows for the table: one child per size and case."""
    results = []
    for live in (QUICK_SIZES if quick else SIZES):
        if progress:
            progress(f"retention: {live} live objects")
        result = {"live": live, "rows": {}, "counts": {}}
        for case in CASES + ["objgraph"]:
            if case == "site (traced)":
                data = _child(fork, ["--traced", "--live", str(live)],
                              timeout)
                data["row"] = data["rows"][case]
                data["count"] = data["counts"][case]
            else:
                data = _child(fork, ["--live", str(live), "--case", case],
                              timeout)
            if case == "objgraph":
                result["objgraph_one"] = data["objgraph_one"]
                result["gc_objects"] = data["gc_objects"]
            elif data["row"] is not None:
                result["rows"][case] = data["row"]
                result["counts"][case] = data["count"]
        results.append(result)
    return results


def run_bench_suite(pythons, quick, timeout, progress):
    """The suite of ``run.py --suites retention`` (``make bench``): the
    fork's rows only; pristine has no retention search."""
    results = run_retention_suite(pythons["fork"], quick, timeout,
                                  progress=progress.line)
    return {"results": results, "quick": quick, "sample": SAMPLE,
            "repeat": REPEAT}


def intro(data):
    return (f"Retention paths (issue 30): the search of "
            f"tracemalloc.retention on a heap of N live objects reachable "
            f"from a module's globals, half of them GC objects; best of "
            f"{data['repeat']} searches, peak memory as the process's RSS "
            f"high-water mark over its RSS before (the search allocates "
            f"untraced, with malloc); objgraph's find_backref_chain() for "
            f"one target on the same heap, for scale.")


def _format_memory(value):
    if value is None:
        return "n/a"
    return f"{value / 2 ** 20:.1f} MiB"


def table(results):
    lines = ["| live objects (GC) | case | targets | time | peak memory "
             "| objgraph, 1 target |",
             "| ---: | --- | ---: | ---: | ---: | ---: |"]
    for result in results:
        objgraph = result["objgraph_one"]
        objgraph = "n/a" if objgraph is None else f"{objgraph:.3f} s"
        for case in CASES:
            if case not in result["rows"]:
                continue
            seconds, memory = result["rows"][case]
            lines.append(
                f"| {result['live']:,} ({result['gc_objects']:,}) | {case} | "
                f"{result['counts'][case]:,} | {seconds:.3f} s | "
                f"{_format_memory(memory)} | {objgraph} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fork", default="./python")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json")
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--live", type=int)
    parser.add_argument("--traced", action="store_true")
    parser.add_argument("--case", default="1000 targets")
    args = parser.parse_args(argv)
    if args.child:
        if args.traced:
            child_traced(args.live)
        else:
            child(args.live, args.case)
        return 0
    results = run_retention_suite(args.fork, args.quick,
                                  progress=lambda m: print(m,
                                                           file=sys.stderr))
    print(table(results))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
