#!/usr/bin/env python3
"""Instruction counts per allocation+free pair, measured with callgrind.

Wall time on a shared 2-core machine is noisy; the number of instructions
executed is not.  Each micro-workload is a loop whose every iteration
allocates one block and frees the one allocated by the previous iteration.
One child process per configuration runs all of them under
``valgrind --tool=callgrind``, with collection switched on only inside
``exec()`` (``--toggle-collect=builtin_exec``) and a dump after each
``exec()`` returns, so that every dump holds the instructions of one loop
and nothing else: interpreter start-up, imports and the children's
bookkeeping are not counted.

Every workload is run three times in its process: a warm-up with SMALL
iterations (fills free lists, caches, the call-context tree), then SMALL
again and BIG.  The figure is ``(Ir(BIG) - Ir(SMALL)) / (BIG - SMALL)``:
instructions per iteration, with the fixed cost of ``exec()``, of the
function calls and of the loop set-up subtracted.  The loop runs at the
bottom of a recursive chain of DEPTH frames, so that N=25 captures 25.

Configurations: pristine off, pristine N=1 (reference), fork off, fork N=1,
fork N=25, and the fork sampling (``-X tracemalloc=25 -X
tracemalloc_sample=...``) at the default interval, 512 KiB, and at 1 GiB.
Derived: the fork's untraced cost against pristine's (``fork off - pristine
off``, the untraced path's overhead per pair), the cost of tracing a pair
(``N=k - off`` of the same build), and the cost of a pair that is not
sampled (``sampled 1GiB - fork off``): a loop allocates a few MB at most,
so at 1 GiB the chance that any of its pairs is sampled is under 1% and
every pair takes the non-sampled path.  At 512 KiB a loop of 16-byte
blocks has a sampled pair every ~32,000 iterations on average, whose cost
is spread over the others: that column is the amortised cost, not the
non-sampled pair's.  The raw domain is reached through ctypes; the ctypes
call overhead is removed by subtracting a control loop that makes the
same calls to a libc function that does not allocate.

Standalone:  python3 Tools/bench/instructions.py --pristine P --fork F [--quick]
Where a loop's instructions go, per iteration and per function (two
callgrind runs, 10 and --big iterations, subtracted function by function):
    python3 Tools/bench/instructions.py --profile small_object \
        --python ./python [--frames 1] [--big 200000] [--top 25]
Child mode (internal): python instructions.py --child --small S --big B ...
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

DEPTH = 30

# name -> (what it exercises, set-up lines, loop body).  The loop is
#     for _ in repeat(None, n): <body>
# (itertools.repeat allocates nothing per iteration, unlike range() beyond
# the small-int cache).
WORKLOADS = {
    "empty_loop": (
        "no allocation (x = a): the loop's own cost",
        "a = 1.5",
        "x = a"),
    "float_reuse": (
        "x = a * b: a float from the free list, the previous one back to it",
        "a = 1.5; b = 2.25",
        "x = a * b"),
    "float_lines": (
        "x = a * b; y = a + b on two lines: each line's float re-traced at "
        "another node than its last one (nbody's case)",
        "a = 1.5; b = 2.25",
        "x = a * b\n        y = a + b"),
    "generator_resume": (
        "x = next(g): a generator resumed, its float re-traced",
        "g = _floats()",
        "x = next(g)"),
    "small_object": (
        "x = new(): object(), a 16-byte pymalloc block",
        "new = object",
        "x = new()"),
    "frame_call": (
        "x = make(): a Python call (a new frame) that returns object()",
        "make = _make",
        "x = make()"),
    "bytes_600": (
        "x = b600 + b1: a 601-byte bytes, above pymalloc's limit (malloc)",
        "b600 = bytes(600); b1 = b'x'",
        "x = b600 + b1"),
    "raw_ctypes": (
        "p = PyMem_RawMalloc(64); PyMem_RawFree(p), through ctypes",
        "rm = _raw_malloc; rf = _raw_free",
        "p = rm(64); rf(p)"),
    "native_ctypes": (
        "p = malloc(64); free(p) of the process (the fork's interposers, "
        "native tracing off), through ctypes",
        "nm = _native_malloc; nf = _native_free",
        "p = nm(64); nf(p)"),
    "raw_control": (
        "the same ctypes calls to labs(), which does not allocate",
        "cv = _labs_vp; cn = _labs_none; big = _BIG",
        "p = cv(big); cn(p)"),
}
QUICK_WORKLOADS = ["empty_loop", "float_reuse", "small_object", "frame_call",
                   "raw_ctypes", "native_ctypes", "raw_control"]

# Derived rows: name -> (workload, control workload or None).
PAIRS = [
    ("float_reuse", "float_reuse", None),
    ("small_object", "small_object", None),
    ("frame_call", "frame_call", None),
    ("bytes_600", "bytes_600", None),
    ("raw (ctypes - control)", "raw_ctypes", "raw_control"),
    ("native (ctypes - control)", "native_ctypes", "raw_control"),
    ("empty_loop", "empty_loop", None),
]

# (side, frames, sample): sample is the -X tracemalloc_sample value, None
# for exact tracing; "512KiB" is benchlib.SAMPLE_DEFAULT (labelled "fork
# sampled"), written out so that the child need not import benchlib.
NON_SAMPLED = "1GiB"
CONFIGS = [("pristine", 0, None), ("pristine", 1, None), ("fork", 0, None),
           ("fork", 1, None), ("fork", 25, None), ("fork", 25, "512KiB"),
           ("fork", 25, NON_SAMPLED)]

SMALL, BIG = 2000, 10000
QUICK_SMALL, QUICK_BIG = 1000, 5000
# Heap layouts each loop is measured under (the median is reported).
LAYOUTS = 3
QUICK_LAYOUTS = 2

# Budgets in instructions per pair, printed next to the measurements with
# met / NOT met and never asserted; kept in sync with Tools/bench/README.md.
# They are the project's time targets restated per pair: untraced at most 1%
# (at least 2 instructions) and traced at most 20% above pristine off's
# instructions for the same loop.  The raw pair is the exception: 20% of a
# bare malloc+free (about 19 instructions) is not a meaningful bar for a
# pair that must enter and leave a hash table, so its traced budget is 100.
# name -> (untraced: fork off - pristine off, traced: fork N=k - fork off)
BUDGETS = {
    "float_reuse": (2, 40),
    "small_object": (5, 110),
    "frame_call": (8, 170),
    "bytes_600": (7, 150),
    "raw (ctypes - control)": (2, 100),
    # Issue 32: native tracing off costs the interposers' branch; traced
    # here means the Python domains' tracing (native tracing stays off).
    "native (ctypes - control)": (2, 100),
    "empty_loop": (0.5, 0.5),
}
# Issue 22's budget for what a pair that is not sampled adds over untraced
# (fork sampled at NON_SAMPLED - fork off), in instructions per pair; a
# loop that allocates nothing must get nothing added.
SAMPLING_BUDGET = 10
SAMPLING_BUDGETS = {name: SAMPLING_BUDGET for name in BUDGETS}
SAMPLING_BUDGETS["empty_loop"] = 0.5


# ---------------------------------------------------------------- child side

LOOP_TEMPLATE = """
def _loop(n):
    {setup}
    for _ in repeat(None, n):
        {body}

def _deep(k, n):
    if k:
        return _deep(k - 1, n)
    return _loop(n)

_deep({depth}, N)
"""


def _make():
    return object()


def _floats():
    a = 1.5
    b = 2.25
    while True:
        yield a * b


def _layout_padding(j):
    # Live blocks that shift where the measured loop's blocks land: the
    # fork's traced cost depends on addresses (its tables are keyed by
    # them), so each loop is measured under a few heap layouts.
    return ([object() for _ in range(29 * j)]
            + [bytes(40) for _ in range(13 * j)]
            + [bytes(600 + 8 * j) for _ in range(5 * j)])


def child(names, small, big, layouts=1):
    # Everything is imported and built before the first measured exec():
    # an import inside a measured loop would run exec() itself.
    import ctypes
    import itertools
    import _tracemalloc

    proto_vp = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t)
    proto_none = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)

    def address(func):
        return ctypes.cast(func, ctypes.c_void_p).value

    libc = ctypes.CDLL(None)
    namespace_base = {
        "repeat": itertools.repeat,
        "_make": _make,
        "_floats": _floats,
        "_raw_malloc": proto_vp(address(ctypes.pythonapi.PyMem_RawMalloc)),
        "_raw_free": proto_none(address(ctypes.pythonapi.PyMem_RawFree)),
        # CDLL(None): the process's malloc(), the fork's interposers
        "_native_malloc": proto_vp(address(libc.malloc)),
        "_native_free": proto_none(address(libc.free)),
        "_labs_vp": proto_vp(address(libc.labs)),
        "_labs_none": proto_none(address(libc.labs)),
        # a pointer-sized value: its int is as big as a heap address's
        "_BIG": 0x7f12_3456_7890,
    }
    codes = []
    for name in names:
        _, setup, body = WORKLOADS[name]
        src = LOOP_TEMPLATE.format(setup=setup, body=body, depth=DEPTH)
        codes.append((name, compile(src, f"<{name}>", "exec")))
    # One dump per exec(): for each loop and layout, warm-up, small, big --
    # in this order.
    for name, code in codes:
        for j in range(layouts):
            pad = _layout_padding(j)
            for n in (small, small, big):
                exec(code, dict(namespace_base, N=n))
            del pad
    print(json.dumps({
        "names": names, "small": small, "big": big, "layouts": layouts,
        "tracing": bool(_tracemalloc.is_tracing()),
        "traceback_limit": _tracemalloc.get_traceback_limit(),
        "sample": (_tracemalloc.get_sample()
                   if hasattr(_tracemalloc, "get_sample") else None),
    }))


# --------------------------------------------------------------- runner side

def real_executable(python, timeout=60):
    """The ELF binary behind `python` (./python is a shell script that
    execs the build tree's interpreter, and valgrind must see the
    interpreter itself)."""
    import subprocess
    import benchlib
    out = subprocess.run([python, "-c", "import sys; print(sys.executable)"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         env=benchlib.child_env(), timeout=timeout)
    path = out.stdout.decode().strip()
    return path if path and os.access(path, os.X_OK) else python


def read_dumps(outdir, base):
    """Instruction totals of the dumps base.1, base.2, ... in order."""
    totals = []
    names = [f for f in os.listdir(outdir) if f.startswith(base + ".")]
    for fn in sorted(names, key=lambda f: int(f.rsplit(".", 1)[1])):
        with open(os.path.join(outdir, fn)) as f:
            for line in f:
                if line.startswith("totals:") or line.startswith("summary:"):
                    totals.append(int(line.split()[1]))
                    break
    return totals


def measure(python, frames, names, small, big, timeout, valgrind, layouts=1,
            sample=None):
    import benchlib
    outdir = tempfile.mkdtemp(prefix="bench-callgrind-")
    try:
        base = "cg.out"
        cmd = [valgrind, "--tool=callgrind", "--collect-atstart=no",
               "--toggle-collect=builtin_exec", "--dump-after=builtin_exec",
               f"--callgrind-out-file={os.path.join(outdir, base)}",
               ] + benchlib.python_cmd(python, frames, sample) + [
               os.path.abspath(__file__), "--child", "--small", str(small),
               "--big", str(big), "--names", ",".join(names),
               "--layouts", str(layouts)]
        data, _ = benchlib.run_child(cmd, timeout)
        problem = benchlib.check_tracing(data, frames, sample)
        if problem:
            raise benchlib.ChildError(problem)
        totals = read_dumps(outdir, base)
    finally:
        shutil.rmtree(outdir, ignore_errors=True)
    # Imports (and interpreter start-up) run exec() too: ours are the last
    # 3 * layouts * len(names) dumps.
    want = 3 * layouts * len(names)
    ours = totals[-want:]
    if len(ours) != want:
        raise benchlib.ChildError(f"expected {want} callgrind dumps, "
                                  f"found {len(totals)}")
    per = {}
    for i, name in enumerate(names):
        values = []
        for j in range(layouts):
            k = 3 * (i * layouts + j)
            warm, lo, hi = ours[k: k + 3]
            values.append((hi - lo) / (big - small))
        per[name] = {"per_iter": benchlib.median(values), "layouts": values,
                     "min": min(values), "max": max(values)}
    return per


def run_instructions_suite(pythons, quick, timeout, progress):
    import benchlib
    from benchlib import config_label
    valgrind = shutil.which("valgrind")
    names = QUICK_WORKLOADS if quick else list(WORKLOADS)
    small, big = (QUICK_SMALL, QUICK_BIG) if quick else (SMALL, BIG)
    layouts = QUICK_LAYOUTS if quick else LAYOUTS
    out = {"workloads": names, "small": small, "big": big, "depth": DEPTH,
           "layouts": layouts,
           "configs": [config_label(*c) for c in CONFIGS], "results": {},
           "samples": {config_label(*c): c[2] for c in CONFIGS if c[2]},
           "non_sampled": config_label("fork", 25, NON_SAMPLED),
           "errors": {},
           "descriptions": {n: WORKLOADS[n][0] for n in names}}
    if not valgrind:
        out["errors"]["all"] = ("valgrind not found (apt-get install valgrind); "
                                "instruction counts skipped")
        progress.line("instructions: " + out["errors"]["all"])
        return out
    exe = {side: real_executable(p) for side, p in pythons.items()}
    progress.total = len(CONFIGS)
    progress.line(f"instructions suite: {len(names)} loops x {len(CONFIGS)} "
                  f"configs x {layouts} heap layouts under callgrind ({small} "
                  f"and {big} iterations)")
    for side, frames, sample in CONFIGS:
        label = config_label(side, frames, sample)
        try:
            out["results"][label] = measure(exe[side], frames, names, small,
                                            big, timeout, valgrind, layouts,
                                            sample)
            msg = " ".join(f"{n}={v['per_iter']:.1f}"
                           for n, v in out["results"][label].items())
        except benchlib.ChildError as exc:
            out["errors"][label] = str(exc)
            msg = "ERR"
        progress.advance()
        progress.line(f"instructions {label:<13} {msg}")
    return out


def profile(loop, python, frames, big, top, sample=None):
    """Print where one loop's instructions go, per iteration."""
    valgrind = shutil.which("valgrind")
    if not valgrind:
        print("instructions: valgrind not found", file=sys.stderr)
        return 2
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import benchlib
    exe = real_executable(python)
    outdir = tempfile.mkdtemp(prefix="bench-callgrind-")
    costs = []
    try:
        for n in (10, big):
            path = os.path.join(outdir, f"cg.{n}")
            cmd = [valgrind, "--tool=callgrind", "--collect-atstart=no",
                   "--toggle-collect=builtin_exec", f"--callgrind-out-file={path}",
                   ] + benchlib.python_cmd(exe, frames, sample) + [
                   os.path.abspath(__file__), "--child", "--small", "10",
                   "--big", str(n), "--names", loop]
            benchlib.run_child(cmd, 1800)
            costs.append(benchlib.parse_callgrind(path)[0])
    finally:
        shutil.rmtree(outdir, ignore_errors=True)
    base, work = costs
    iters = big - 10
    diff = {fn: (work.get(fn, 0) - base.get(fn, 0)) / iters
            for fn in set(base) | set(work)}
    total = sum(diff.values())
    mode = f"-X tracemalloc={frames}" if frames else "untraced"
    if sample:
        mode += f" -X tracemalloc_sample={sample}"
    print(f"{loop} under {exe} {mode}: {total:,.1f} instructions per iteration")
    rows = sorted(diff.items(), key=lambda kv: -abs(kv[1]))[:top]
    for fn, v in rows:
        if abs(v) >= 0.5:
            print(f"{v:10.1f}  {fn}")
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--small", type=int, default=SMALL, help=argparse.SUPPRESS)
    p.add_argument("--big", type=int, default=BIG, help=argparse.SUPPRESS)
    p.add_argument("--names", default=",".join(WORKLOADS), help=argparse.SUPPRESS)
    p.add_argument("--layouts", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--profile", metavar="LOOP", choices=list(WORKLOADS),
                   help="print where LOOP's instructions go, per function")
    p.add_argument("--python", help="with --profile: the interpreter")
    p.add_argument("--frames", type=int, default=1,
                   help="with --profile: -X tracemalloc=FRAMES (0: untraced)")
    p.add_argument("--top", type=int, default=25, help="with --profile: rows")
    p.add_argument("--sample", metavar="SIZE",
                   help="with --profile: -X tracemalloc_sample=SIZE (sampling mode)")
    if "--child" in (sys.argv[1:] if argv is None else argv):
        args = p.parse_args(argv)
        child(args.names.split(","), args.small, args.big, args.layouts)
        return 0
    if "--profile" in (sys.argv[1:] if argv is None else argv):
        args, _ = p.parse_known_args(argv)
        big = args.big if args.big != BIG else 200_000
        return profile(args.profile, args.python or "./python", args.frames,
                       big, args.top, args.sample)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import benchlib
    benchlib.add_suite_options(p)
    args = p.parse_args(argv)
    return benchlib.run_suite_standalone(p, args, "instructions",
                                         run_instructions_suite)


if __name__ == "__main__":
    sys.exit(main())
