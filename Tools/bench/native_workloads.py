#!/usr/bin/env python3
"""What native tracing costs on native-heavy workloads (issue 32, item 3),
in instructions counted by callgrind, against pristine in the same run.

Each configuration is one child process under ``valgrind
--tool=callgrind`` that runs every workload once through ``exec()``, with
collection on only inside ``exec()`` and a dump after each, so that a
dump holds one workload and nothing else (the modules are imported
before).  Configurations: pristine untraced; the fork untraced; the fork
tracing the Python domains only (exact, N=1); the fork tracing native
memory too (exact); the same two sampled at 512 KiB; native tracing
with native frames (the C stack of each native block, issue 32 item 4),
exact and sampled.  Reported: each
workload's instructions, and each configuration's ratio to pristine
untraced (geometric mean over the workloads).

When memray has been built against the pristine interpreter
(``Tools/bench/memray_build.sh``), pristine under ``memray.Tracker`` runs
beside them: memray's defaults, ``native_traces=True`` (``memray run
--native``) and ``trace_python_allocators=True`` (``memray run
--trace-python-allocators``), each workload in a Tracker of its own whose
capture file's size is reported too.  The built package is found through
``MEMRAY_PYTHONPATH`` or in the cache (``memray-*-VERSION/site``, VERSION
the pristine's); without it the suite says so in one line and goes on.

    python3 Tools/bench/native_workloads.py --pristine P --fork F [--json OUT]

Also the ``native`` suite of ``Tools/bench/run.py`` (``make bench``), which
adds the engine's bytes per native trace with and without native frames.
"""

import argparse
import glob
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

WORKLOADS = {
    "sqlite_grow": (
        "sqlite3 in-memory database growing by 3,000 rows of 200 bytes",
        "con = sqlite3.connect(':memory:')\n"
        "con.execute('CREATE TABLE t (a INTEGER, b TEXT)')\n"
        "for i in range(3000):\n"
        "    con.execute('INSERT INTO t VALUES (?, ?)', (i, 'x' * 200))\n"
        "con.close()\n"),
    "zlib_stream": (
        "zlib compressobj/decompressobj over 1 MiB in 16 KiB chunks",
        "c = zlib.compressobj(6)\n"
        "out = [c.compress(DATA[i:i + 16384]) for i in range(0, len(DATA), 16384)]\n"
        "out.append(c.flush())\n"
        "d = zlib.decompressobj()\n"
        "back = d.decompress(b''.join(out)) + d.flush()\n"
        "assert back == DATA\n"),
    "bz2_stream": (
        "bz2 compress and decompress 256 KiB",
        "back = bz2.decompress(bz2.compress(DATA[:262144]))\n"),
    "json_roundtrip": (
        "json dumps/loads of 5,000 small records",
        "text = json.dumps([{'id': i, 'name': 'n%d' % i, 'tags': ['a', 'b']}"
        " for i in range(5000)])\n"
        "back = json.loads(text)\n"),
    "c_malloc_loop": (
        "malloc(256)/free() of the process 20,000 times from C code called "
        "through ctypes (the extension's malloc() in a loop)",
        "for _ in range(20000):\n"
        "    nf(nm(256))\n"),
}

CONFIGS = [
    ("pristine off", "pristine", []),
    ("fork off", "fork", []),
    ("fork N=1", "fork", ["-X", "tracemalloc=1"]),
    ("fork N=1 native", "fork", ["-X", "tracemalloc=1",
                                 "-X", "tracemalloc_native"]),
    ("fork sampled", "fork", ["-X", "tracemalloc=1",
                              "-X", "tracemalloc_sample=512KiB"]),
    ("fork sampled native", "fork", ["-X", "tracemalloc=1",
                                     "-X", "tracemalloc_sample=512KiB",
                                     "-X", "tracemalloc_native"]),
    ("fork N=1 native frames", "fork", ["-X", "tracemalloc=1",
                                        "-X", "tracemalloc_native=frames"]),
    ("fork sampled native frames", "fork", [
        "-X", "tracemalloc=1", "-X", "tracemalloc_sample=512KiB",
        "-X", "tracemalloc_native=frames"]),
]

# bench-quick's subset
QUICK_WORKLOADS = ["sqlite_grow", "c_malloc_loop"]

# Pristine under memray (when built): label and memray.Tracker() arguments.
# memray hooks the PLT entries of the loaded libraries (malloc, mmap, ...),
# so it sees neither pymalloc's small blocks (unless
# trace_python_allocators) nor a malloc() called through a pointer that
# dlsym() gave (ctypes, as in c_malloc_loop).
MEMRAY_CONFIGS = [
    ("memray default", {}),
    ("memray --native", {"native_traces": True}),
    ("memray --trace-python-allocators", {"trace_python_allocators": True}),
]

MEMRAY_BUILD_HINT = ("Tools/bench/memray_build.sh MEMRAY_SRC, or make "
                     "bench-memray MEMRAY_SRC=... (see Tools/bench/README.md)")

CHILD = r"""
import bz2, ctypes, json, sqlite3, sys, zlib
names = sys.argv[1].split(",")
libc = ctypes.CDLL(None)
nm = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t)(
    ctypes.cast(libc.malloc, ctypes.c_void_p).value)
nf = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)(
    ctypes.cast(libc.free, ctypes.c_void_p).value)
DATA = b"".join(b"%08d some text that compresses " % i for i in range(30000))
DATA = DATA[:1 << 20]
codes = [compile(src, name, "exec") for name, src in
         ((n, WORKLOADS[n]) for n in names)]
if len(sys.argv) > 2:
    # Under memray: one Tracker and capture file per workload; memray's
    # own work outside exec() (start, stop, compressing the file) is not
    # counted, nor is its background thread's (callgrind toggles
    # collection per thread).
    import os
    site, options, capture_dir = sys.argv[2:5]
    sys.path.insert(0, site)
    import memray
    options = json.loads(options)
    captures = {}
for name, code in zip(names, codes):
    globs = {"sqlite3": sqlite3, "zlib": zlib, "bz2": bz2, "json": json,
             "nm": nm, "nf": nf, "DATA": DATA}
    if len(sys.argv) > 2:
        path = os.path.join(capture_dir, name + ".bin")
        with memray.Tracker(path, **options):
            exec(code, globs)
        captures[name] = {
            "bytes": os.path.getsize(path),
            "allocations": memray.FileReader(path).metadata.total_allocations}
    else:
        exec(code, globs)
if len(sys.argv) > 2:
    print(json.dumps(captures))
"""


def measure(python, args, names, valgrind, memray=None):
    """Instructions of each workload in NAMES, run by PYTHON with ARGS.
    With MEMRAY=(site, Tracker options), each workload runs under
    memray.Tracker and the result is (instructions, captures), captures
    giving each workload's capture file size and allocations recorded."""
    outdir = tempfile.mkdtemp(prefix="native-callgrind-")
    try:
        base = os.path.join(outdir, "cg.out")
        src = ("WORKLOADS = " + repr({n: WORKLOADS[n][1] for n in names})
               + "\n" + CHILD)
        extra = []
        if memray is not None:
            capture_dir = os.path.join(outdir, "captures")
            os.mkdir(capture_dir)
            extra = [memray[0], json.dumps(memray[1]), capture_dir]
        cmd = [valgrind, "--tool=callgrind", "--collect-atstart=no",
               "--toggle-collect=builtin_exec", "--dump-after=builtin_exec",
               f"--callgrind-out-file={base}", python, "-s", *args,
               "-c", src, ",".join(names), *extra]
        # A fixed hash seed: dict and set work must not differ between
        # the configurations' runs (string hashing moves json's count by
        # a few percent).
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("PYTHON")}
        env["PYTHONHASHSEED"] = "0"
        proc = subprocess.run(cmd, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env)
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-2000:])
        totals = []
        files = sorted((f for f in os.listdir(outdir)
                        if f.startswith("cg.out.")),
                       key=lambda f: int(f.rsplit(".", 1)[1]))
        for fn in files:
            with open(os.path.join(outdir, fn)) as f:
                for line in f:
                    if line.startswith(("totals:", "summary:")):
                        totals.append(int(line.split()[1]))
                        break
        # The last exec() dumps are the workloads' (the child's own
        # compile() and imports ran none after them).
        counts = dict(zip(names, totals[-len(names):]))
        if memray is None:
            return counts
        return counts, json.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(outdir, ignore_errors=True)


def find_memray(pristine):
    """(site, version) of memray built for PRISTINE, or (None, why not).
    MEMRAY_PYTHONPATH names the directory holding the `memray` package;
    otherwise the newest build in the cache for the pristine's version
    (memray_build.sh's MEMRAY_OUT default)."""
    site = os.environ.get("MEMRAY_PYTHONPATH")
    if not site:
        try:
            version = subprocess.run(
                [pristine, "-s", "-c", "import sys; "
                 "print('%d.%d.%d' % sys.version_info[:3])"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                timeout=60).stdout.strip()
        except (OSError, subprocess.SubprocessError) as e:
            return None, f"pristine did not start: {e}"
        cache = os.environ.get("TRACEMALLOC_FORK_CACHE") or os.path.join(
            os.environ.get("XDG_CACHE_HOME")
            or os.path.expanduser("~/.cache"), "tracemalloc-fork")
        built = [os.path.dirname(stamp) for stamp in glob.glob(
            os.path.join(cache, f"memray-*-{version}", ".built"))]
        if not built:
            return None, (f"memray not built for Python {version} (no "
                          f"{cache}/memray-*-{version}; build it with "
                          f"{MEMRAY_BUILD_HINT})")
        # memray-1.19.3-3.13.15: the newest memray version
        built.sort(key=lambda d: [int(x) if x.isdigit() else 0 for x in
                                  os.path.basename(d).split("-")[1]
                                  .split(".")])
        site = os.path.join(built[-1], "site")
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); import memray; "
             "print(memray.__version__)")
    try:
        proc = subprocess.run([pristine, "-s", "-c", probe, site],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"pristine did not start: {e}"
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return None, (f"memray at {site} does not import in the pristine "
                      f"interpreter ({last}); rebuild it with "
                      f"{MEMRAY_BUILD_HINT}")
    return site, proc.stdout.split()[-1]


BYTES_CHILD = r"""
import ctypes, sys, tracemalloc
frames = sys.argv[1] == "1"
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
if frames:
    tracemalloc.start(1, native=True, native_frames=True)
else:
    tracemalloc.start(1, native=True)
def grow(n):
    return [libc.malloc(64) for _ in range(n)]
kept = grow(1000)
m0 = tracemalloc.get_tracemalloc_memory()
n0 = tracemalloc.get_native_traced_memory()[0] // 64
kept += grow(200000)
m1 = tracemalloc.get_tracemalloc_memory()
n1 = tracemalloc.get_native_traced_memory()[0] // 64
print(n1 - n0, m1 - m0)
"""


def bytes_per_trace(fork, timeout):
    """Engine bytes per native trace, without and with native frames:
    what 200,000 more live 64-byte blocks malloc()ed by C code (ctypes)
    add to the engine's memory (get_tracemalloc_memory()), per block.  One
    call path: the C stack's nodes are shared (interned), so this is the
    trace store's cost; each distinct C path adds nodes once."""
    out = {}
    for frames in (0, 1):
        proc = subprocess.run([fork, "-s", "-c", BYTES_CHILD, str(frames)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-2000:])
        n, used = map(int, proc.stdout.split())
        out["frames" if frames else "plain"] = {"traces": n, "bytes": used}
    return out


def run_bench_suite(pythons, quick, timeout, progress):
    """The suite of ``run.py --suites native`` (``make bench``)."""
    names = QUICK_WORKLOADS if quick else list(WORKLOADS)
    errors = []
    results = {}
    valgrind = shutil.which("valgrind")
    configs = [c[0] for c in CONFIGS]
    memray = {}
    if valgrind is None:
        errors.append("valgrind not found: no instruction counts")
    else:
        for label, side, xargs in CONFIGS:
            progress.line(f"native: {label}")
            try:
                results[label] = measure(pythons[side], xargs, names,
                                         valgrind)
            except (RuntimeError, subprocess.SubprocessError) as e:
                errors.append(f"{label}: {str(e)[-300:]}")
        site, version = find_memray(pythons["pristine"])
        if site is None:
            progress.line(f"native: no memray rows: {version}")
        else:
            memray = {"version": version, "site": site, "captures": {}}
            for label, options in MEMRAY_CONFIGS:
                progress.line(f"native: {label} (memray {version})")
                try:
                    results[label], memray["captures"][label] = measure(
                        pythons["pristine"], [], names, valgrind,
                        memray=(site, options))
                    configs.append(label)
                except (RuntimeError, subprocess.SubprocessError,
                        ValueError) as e:
                    errors.append(f"{label}: {str(e)[-300:]}")
    try:
        progress.line("native: engine bytes per native trace")
        per_trace = bytes_per_trace(pythons["fork"], timeout)
    except (RuntimeError, subprocess.SubprocessError, ValueError) as e:
        per_trace = {}
        errors.append(f"bytes per native trace: {str(e)[-300:]}")
    return {"quick": quick, "workloads": names,
            "descriptions": {n: WORKLOADS[n][0] for n in names},
            "configs": configs, "results": results, "memray": memray,
            "bytes_per_trace": per_trace, "errors": errors}


def ratio_rows(data):
    names = data["workloads"]
    results = data["results"]
    header = (["instructions / pristine off"] + names + ["geomean"])
    rows = []
    ref = results.get("pristine off")
    if not ref:
        return header, rows
    for label in data["configs"]:
        if label not in results:
            continue
        ratios = [results[label][n] / ref[n] for n in names]
        geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
        rows.append([label] + [f"{r:.3f}" for r in ratios] + [f"{geo:.3f}"])
    return header, rows


def markdown(data):
    """The suite's section of RESULTS.md (without its title)."""
    lines = ["Native memory (issue 32): callgrind instructions of native-heavy "
             "workloads, each configuration's ratio to pristine untraced, in "
             "one run; N=1, sampling at 512 KiB; *native frames* adds the C "
             "stack of every native block (libunwind at allocation, "
             "symbolised at snapshot time).  Workloads: "
             + "; ".join(f"`{n}`: {d}" for n, d in
                         data["descriptions"].items()) + ".", ""]
    header, rows = ratio_rows(data)
    if rows:
        lines += ["| " + " | ".join(header) + " |",
                  "| --- |" + " ---: |" * (len(header) - 1)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        lines.append("")
    memray = data.get("memray") or {}
    if memray.get("captures"):
        lines += [f"*memray* rows: pristine under memray "
                  f"{memray['version']}'s `Tracker` (built from its source "
                  "by `Tools/bench/memray_build.sh`), one capture file per "
                  "workload.  memray patches the libraries' PLT entries: "
                  "without `trace_python_allocators` it does not see "
                  "pymalloc's small blocks, and it never sees a `malloc()` "
                  "called through a pointer from `dlsym()` (ctypes in "
                  "`c_malloc_loop`).  Its background thread (RSS every "
                  "10 ms) is not counted.  Capture files (lz4-compressed "
                  "when the Tracker stops) and the allocations memray "
                  "recorded:", ""]
        names = data["workloads"]
        lines += ["| capture | " + " | ".join(names) + " |",
                  "| --- |" + " ---: |" * len(names)]
        for label, per in memray["captures"].items():
            lines.append(f"| {label} | " + " | ".join(
                f"{per[n]['bytes'] / 1024:,.1f} KiB "
                f"({per[n]['allocations']:,})" for n in names) + " |")
        lines.append("")
    bpt = data.get("bytes_per_trace") or {}
    if bpt:
        parts = []
        for key, what in (("plain", "native tracing"),
                          ("frames", "with native frames")):
            if key in bpt and bpt[key]["traces"]:
                b = bpt[key]
                parts.append(f"{what}: {b['bytes'] / b['traces']:.1f} bytes "
                             f"per native trace ({b['traces']:,} traces, "
                             f"{b['bytes']:,} bytes)")
        lines += ["Engine memory per live native block (200,000 more "
                  "64-byte blocks malloc()ed from one call path; the C "
                  "stack's nodes are interned, so a new distinct path adds "
                  "its nodes once; the trace table's 24-byte entries take "
                  "32 to 64 bytes each as it doubles): " + "; ".join(parts)
                  + ".", ""]
    if data.get("errors"):
        lines += ["Problems:", ""] + [f"- {e}" for e in data["errors"]] + [""]
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pristine", required=True)
    p.add_argument("--fork", required=True)
    p.add_argument("--json", metavar="OUT")
    args = p.parse_args(argv)
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        print("native_workloads: valgrind not found", file=sys.stderr)
        return 2
    names = list(WORKLOADS)
    results = {}
    for label, side, xargs in CONFIGS:
        python = args.pristine if side == "pristine" else args.fork
        results[label] = measure(python, xargs, names, valgrind)
        print(f"{label:<20} " + " ".join(
            f"{n}={results[label][n]:,}" for n in names), flush=True)
    labels = [c[0] for c in CONFIGS]
    captures = {}
    site, version = find_memray(args.pristine)
    if site is None:
        print(f"native_workloads: no memray rows: {version}", flush=True)
    else:
        for label, options in MEMRAY_CONFIGS:
            results[label], captures[label] = measure(
                args.pristine, [], names, valgrind, memray=(site, options))
            labels.append(label)
            print(f"{label:<20} " + " ".join(
                f"{n}={results[label][n]:,} ({captures[label][n]['bytes']:,}"
                f" bytes captured)" for n in names), flush=True)
    ref = results["pristine off"]
    width = max(map(len, labels)) + 2
    print()
    print(f"{'instructions / pristine off':<{width}}"
          + "".join(f"{n:>15}" for n in names) + f"{'geomean':>10}")
    for label in labels:
        ratios = [results[label][n] / ref[n] for n in names]
        geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
        print(f"{label:<{width}}" + "".join(f"{r:>15.3f}" for r in ratios)
              + f"{geo:>10.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"workloads": {n: WORKLOADS[n][0] for n in names},
                       "results": results,
                       "memray": {"version": version, "site": site,
                                  "captures": captures} if site else {}},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
