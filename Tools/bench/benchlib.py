"""Helpers shared by the benchmark runners (run.py, memory.py, scaling.py).

Runs under any Python 3.11; only the standard library is used.
"""

import datetime
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(BENCH_DIR))
RESULTS_DIR = os.path.join(BENCH_DIR, "results")

# The sampling interval of the sampled configurations: the engine's default
# (`-X tracemalloc_sample=512KiB`), which the targets are stated at.
SAMPLE_DEFAULT = "512KiB"

# The configurations of the time suite, in their canonical order: (side,
# frames, sample).  frames 0 means tracemalloc off; sample None means exact
# tracing, else the `-X tracemalloc_sample` value.  "fork sampled" traces
# with deep tracebacks (N=25) at the default interval: what a service
# would leave on in production.
CONFIGS = [("pristine", 0, None), ("pristine", 1, None), ("pristine", 25, None),
           ("fork", 0, None), ("fork", 1, None), ("fork", 25, None),
           ("fork", 25, SAMPLE_DEFAULT)]


def config_label(side, frames, sample=None):
    if sample is not None:
        return f"{side} sampled" + ("" if sample == SAMPLE_DEFAULT else f" {sample}")
    return f"{side} {'off' if frames == 0 else f'N={frames}'}"


_SIZE_UNITS = {"": 1, "B": 1, "KIB": 1024, "MIB": 1024 ** 2, "GIB": 1024 ** 3,
               "KB": 1000, "MB": 1000 ** 2, "GB": 1000 ** 3}


def parse_size(text):
    """Bytes of a size such as "512KiB" or "1GiB" (the forms the runners
    pass to `-X tracemalloc_sample`), to check what the child reports."""
    m = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).upper() not in _SIZE_UNITS:
        raise ValueError(f"not a size: {text!r}")
    return int(m.group(1)) * _SIZE_UNITS[m.group(2).upper()]


def child_env():
    """A clean environment: no PYTHON* variables from the caller (so no
    PYTHONTRACEMALLOC, PYTHONPATH...), a fixed hash seed, bytecode caching
    allowed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONHASHSEED"] = "0"
    env["LC_ALL"] = env.get("LC_ALL", "C.UTF-8")
    return env


def python_cmd(python, frames, sample=None):
    cmd = [python, "-s"]
    if frames:
        cmd += ["-X", f"tracemalloc={frames}"]
    if sample is not None:
        cmd += ["-X", f"tracemalloc_sample={sample}"]
    return cmd


class ChildError(Exception):
    pass


def run_child(cmd, timeout, cwd=None):
    """Run a child; return its last stdout line parsed as JSON plus stderr."""
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=child_env(), timeout=timeout, cwd=cwd,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ChildError(f"timed out after {timeout}s: {' '.join(cmd)}")
    out = proc.stdout.decode("utf-8", "replace").strip().splitlines()
    err = proc.stderr.decode("utf-8", "replace")
    if proc.returncode != 0 or not out:
        tail = "\n".join(err.strip().splitlines()[-8:])
        raise ChildError(f"exit {proc.returncode}: {' '.join(cmd)}\n{tail}")
    try:
        data = json.loads(out[-1])
    except ValueError:
        raise ChildError(f"no JSON result line from {' '.join(cmd)}: {out[-1][:200]!r}")
    return data, err


def check_tracing(data, frames, sample=None):
    """Validate that the child really ran with the intended tracemalloc
    setting; return an error string or None.  A sampled configuration's
    child must report its interval (`tracemalloc.get_sample()` as
    "sample"); a child that reports one in an exact or off configuration
    was sampling when it should not."""
    tracing = data.get("tracing")
    if frames == 0 and tracing:
        return "tracemalloc was tracing in an 'off' configuration"
    if frames and not tracing:
        return f"tracemalloc was NOT tracing under -X tracemalloc={frames}"
    if frames and data.get("traceback_limit") != frames:
        return f"traceback limit {data.get('traceback_limit')} != {frames}"
    reported = data.get("sample")
    if sample is None:
        if reported is not None:
            return f"tracemalloc was sampling (every {reported} bytes) in an exact configuration"
        return None
    if "sample" not in data:
        return "the child did not report its sampling interval (tracemalloc.get_sample())"
    if reported != parse_size(sample):
        return (f"tracemalloc.get_sample() was {reported!r}, not {parse_size(sample)} "
                f"under -X tracemalloc_sample={sample}")
    return None


def child_sample():
    """In a child: tracemalloc.get_sample(), or None where the interpreter
    has no sampling mode (pristine)."""
    import _tracemalloc
    get_sample = getattr(_tracemalloc, "get_sample", None)
    return get_sample() if get_sample is not None else None


def geomean(values):
    values = [v for v in values if v and v > 0 and math.isfinite(v)]
    if not values:
        return float("nan")
    return math.exp(sum(math.log(v) for v in values) / len(values))


def median(values):
    return statistics.median(values) if values else float("nan")


def fmt_duration(seconds):
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    m, s = divmod(seconds, 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


class Progress:
    """Progress lines with elapsed time and, when known, an ETA."""

    def __init__(self, total_units=None, stream=None):
        self.start = time.monotonic()
        self.total = total_units
        self.done = 0.0
        self.stream = stream or sys.stderr

    def elapsed(self):
        return time.monotonic() - self.start

    def advance(self, units=1.0):
        self.done += units

    def line(self, text, eta=None):
        """Print a progress line; `eta` (seconds left) overrides the
        estimate from units done / total."""
        el = self.elapsed()
        if eta is None and self.total and 0 < self.done < self.total:
            eta = el / self.done * (self.total - self.done)
        tail = f" eta ~{fmt_duration(eta)}" if eta else ""
        print(f"[{fmt_duration(el):>6}{tail}] {text}", file=self.stream, flush=True)


# ---------------------------------------------------------------- machine info

def machine_info():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = "unknown"
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    kib = int(line.split()[1])
                    mem = f"{kib / 1024 / 1024:.1f} GiB"
                    break
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count()
    return {
        "cpu": cpu,
        "cores": cores,
        "memory": mem,
        "kernel": platform.release(),
        "system": platform.system(),
    }


def git_commit():
    def git(*args):
        return subprocess.run(["git", "-C", REPO_ROOT, *args], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    head = git("rev-parse", "--short", "HEAD")
    if head.returncode != 0:
        return "unknown (no commit)"
    commit = head.stdout.strip()
    dirty = git("status", "--porcelain", "--untracked-files=no")
    if dirty.returncode == 0 and dirty.stdout.strip():
        commit += "-dirty"
    return commit


def interpreter_info(python):
    try:
        out = subprocess.run(
            [python, "-s", "-c",
             "import sys, sysconfig, json; print(json.dumps({"
             "'version': sys.version.split()[0], 'executable': sys.executable, "
             "'cc': sysconfig.get_config_var('CC'), "
             "'opt': sysconfig.get_config_var('OPT'), "
             "'config_args': sysconfig.get_config_var('CONFIG_ARGS')}))"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(), timeout=60)
        return json.loads(out.stdout.decode().strip().splitlines()[-1])
    except Exception as exc:  # noqa: BLE001 -- informational only
        return {"error": str(exc)}


def exit_on_sigterm():
    """Turn SIGTERM into SystemExit, so that subprocess.run() kills the
    running child on the way out instead of leaving it orphaned."""
    import signal

    def handler(signum, frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, handler)


def now_utc():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def human_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def add_suite_options(parser):
    """The options shared by the standalone memory and scaling suites."""
    parser.add_argument("--pristine")
    parser.add_argument("--fork")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", metavar="OUT")
    parser.add_argument("--timeout", type=float, default=900)


def run_suite_standalone(parser, args, key, run_suite):
    """Run one suite for `python memory.py` / `python scaling.py`: both
    interpreters, print its tables, optionally save the JSON."""
    import report
    if not (args.pristine and args.fork):
        parser.error("--pristine and --fork are required")
    exit_on_sigterm()
    pythons = {"pristine": os.path.abspath(args.pristine),
               "fork": os.path.abspath(args.fork)}
    data = {key: run_suite(pythons, args.quick, args.timeout, Progress())}
    print(report.all_text_tables(data))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(data, f, indent=1)
    return 0


def function_name(raw):
    """A callgrind function name without its recursion suffix ('2) and,
    for a GCC clone, its clone suffix (.part.0, .constprop.0, .cold)."""
    name = raw.split("'")[0]
    return name.split(".")[0] if not name.startswith(".") else name


def parse_callgrind(path):
    """(self instructions per function, calls per function, the base name
    of the file that defines each function) from a callgrind output file
    of one run (one part, event Ir first).  Self instructions include code
    inlined into the function; names are merged over recursion levels and
    GCC clones."""
    names = {}          # "(id)" compression -> name, for fn= and cfn=
    files = {}          # same for fl=, fi=, fe=, cfi=, cfl=
    self_cost = {}
    calls = {}
    fn_files = {}
    fn = None
    fl = None
    cfn = None
    skip_next = False
    npos = 1            # position columns before the costs ("positions:")

    def expand(table, rest):
        rest = rest.strip()
        if rest.startswith("("):
            key, _, name = rest.partition(")")
            key += ")"
            name = name.strip()
            if name:
                table[key] = name
            return table.get(key, key)
        return rest

    with open(path) as f:
        for line in f:
            if not line or line[0] in "#\n":
                continue
            c = line[0]
            if c.isdigit() or c in "+-*":
                if skip_next:       # a call's inclusive cost, not self
                    skip_next = False
                    continue
                parts = line.split()
                if len(parts) > npos and fn is not None:
                    self_cost[fn] = self_cost.get(fn, 0) + int(parts[npos])
                continue
            if line.startswith("positions:"):
                npos = len(line.split()) - 1
                continue
            key, _, rest = line.partition("=")
            if key == "fn":
                fn = function_name(expand(names, rest))
                if fl is not None:
                    fn_files.setdefault(fn, os.path.basename(fl))
            elif key == "fl":
                fl = expand(files, rest)
            elif key in ("fi", "fe", "cfi", "cfl"):
                expand(files, rest)
            elif key == "cfn":
                cfn = function_name(expand(names, rest))
            elif key == "calls":
                count = int(rest.split()[0])
                calls[cfn] = calls.get(cfn, 0) + count
                skip_next = True
    return self_cost, calls, fn_files
