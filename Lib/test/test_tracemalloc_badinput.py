"""Bad input to every entry point of tracemalloc, compared with pristine.

Every public function and constructor of `tracemalloc` and `_tracemalloc`,
and the C API through `_testcapi` (PyTraceMalloc_Track, _Untrack,
_PyTraceMalloc_GetTraceback), is given wrong types, out-of-range numbers
(nframe 0, -1, 65536, 2**64; huge and negative sizes and domains), bad
filter patterns, and bad `PYTHONTRACEMALLOC` / `-X tracemalloc` values.

The expected outcome of each input is that of the pristine CPython release
the fork's base is (3.11.2 or 3.13.15), recorded in
tracemalloc_badinput_pristine_<major>.<minor>.json (regenerate it with
`PRISTINE_PYTHON Lib/test/test_tracemalloc_badinput.py --record`), and
compared live when that pristine interpreter is found.  An outcome is the exception type
raised (or the value returned) plus the tracing state afterwards.  Where
pristine raises, the fork may raise another exception (the message and even
the type may differ, Argument Clinic and the safe snapshot format have their
own), but never SystemError and never succeed silently; where pristine
accepts an input, the fork must accept it and return the same.

The C API address sweep (NULL, tiny, unaligned, interior, wild addresses)
lives in test_tracemalloc_engine.
"""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
# The pristine release of this base: the fork keeps upstream's version.
PRISTINE_VERSION = sys.version.split()[0]
RECORDED = os.path.join(HERE, "tracemalloc_badinput_pristine_"
                        f"{sys.version_info[0]}.{sys.version_info[1]}.json")

# Values for nframe, in start() and in the Traceback/Snapshot limits.
BAD_NFRAMES = ["0", "-1", "1", "65535", "65536", "2**31 - 1", "2**31",
               "2**63", "2**64", "-2**64", "2**1000", "1.0", "'1'", "None",
               "True", "b'1'", "[]", "1j"]

# Filename patterns for Filter: fnmatch syntax edge cases and junk.
BAD_PATTERNS = ["''", "'*'", "'?'", "'['", "'[!'", "']'", "'[]'", "'[!]'",
                "'[a-'", "'**'", "'*.py'", "'*.pyc'", "'A.PY'",
                "'\\x00'", "'a\\x00b'", "'\\udcff'", "'a' * 10000",
                "'*' * 500 + 'b'", "'?' * 1000", "'[' * 1000",
                "'\\\\'", "'/'", "'.'", "'..'"]

# Domains, addresses and sizes for the C API.
DOMAINS = ["0", "1", "-1", "2**31 - 1", "2**32 - 1", "2**32", "2**64",
           "-2**31"]
POINTERS = ["0x1000", "2**64 - 16", "2**64", "-16", "-2**63", "2**63"]
SIZES = ["0", "1", "-1", "2**31", "2**62", "2**63 - 1", "2**63", "2**64",
         "-2**63", "-2**63 - 1"]

NOARG_FUNCTIONS = ["stop", "is_tracing", "clear_traces",
                   "get_traceback_limit", "get_traced_memory", "reset_peak",
                   "get_tracemalloc_memory", "take_snapshot"]

# Values given to the -X option and the environment variable.  NUL bytes
# cannot be passed at all: execve() takes C strings, and subprocess
# refuses them with ValueError (checked by test_nul_bytes_cannot_pass).
OPTION_VALUES = [None, "", "0", "-0", "-1", "1", "25", "65535", "65536",
                 "2147483647", "2147483648", "4294967296",
                 "18446744073709551616", "9" * 30, "abc", "1.5", " 5", "5 ",
                 "+5", "0x10", "1e3", "5abc", "\u0661", "\uff15", "=5"]


def cases():
    """(tracing, code) pairs: code is one expression, evaluated with
    tracing on (a limit of 5) or off."""
    result = []

    def add(tracing, *codes):
        result.extend((tracing, code) for code in codes)

    # -- tracemalloc.start() / _tracemalloc.start() --------------------
    for value in BAD_NFRAMES:
        for tracing in (False, True):
            add(tracing, f"tm.start({value})", f"_tm.start({value})")
    add(False, "tm.start(nframe=5)", "tm.start(1, 2)", "_tm.start(1, 2)",
        "_tm.start(nframe=5)")

    # -- functions without arguments ------------------------------------
    for name in NOARG_FUNCTIONS:
        for tracing in (False, True):
            add(tracing, f"tm.{name}(1)", f"tm.{name}(x=1)",
                f"(tm.{name}(), None)[1]")
    add(True, "_tm._get_traces(1)", "_tm._get_traces(x=1)",
        "type(_tm._get_traces())")

    # -- object tracebacks ------------------------------------------------
    for value in ["None", "1", "2**64", "'str'", "object()", "int", "tm",
                  "[1, 2]", "bytearray(10)"]:
        for tracing in (False, True):
            add(tracing, f"tm.get_object_traceback({value}) is None",
                f"_tm._get_object_traceback({value}) is None")
    add(True, "_tm._get_object_traceback()",
        "_tm._get_object_traceback(1, 2)", "tm.get_object_traceback()")

    # -- Frame, Traceback, Trace, Statistic, StatisticDiff ---------------
    add(False,
        "tm.Frame(None) and None", "tm.Frame(None).filename",
        "tm.Frame(1).lineno", "str(tm.Frame(('a.py', 'x')))",
        "repr(tm.Frame(('a.py', 1)))", "tm.Frame(('a.py', 1)) == 1",
        "tm.Frame(('a.py', 1)) < 1", "tm.Frame(('a.py', 1)) < "
        "tm.Frame(('a.py', 'x'))", "hash(tm.Frame(([], 1)))",
        "tm.Frame()",
        "tm.Traceback(None)", "tm.Traceback(1)", "tm.Traceback('ab')[0]",
        "len(tm.Traceback(frames))", "len(tm.Traceback(()))",
        "tm.Traceback(frames, total_nframe='x').total_nframe",
        "tm.Traceback(frames, total_nframe=-1).total_nframe",
        "tm.Traceback(frames, 1, 2)",
        "tm.Traceback(frames)[5]", "tm.Traceback(frames)['x']",
        "tm.Traceback(frames)[2**64]", "len(tm.Traceback(frames)[::-1])",
        "tm.Traceback(frames) == 1", "tm.Traceback(frames) < 1",
        "tm.Traceback(frames) < tm.Traceback(())",
        "1 in tm.Traceback(frames)", "hash(tm.Traceback([([], 1)]))",
        "str(tm.Traceback(()))", "repr(tm.Traceback(frames, 9))",
        "str(tm.Traceback([('a.py', 'x')]))")
    for limit in ["None", "0", "1", "-1", "-100", "2**64", "'x'", "1.5"]:
        add(False, f"tm.Traceback(frames).format(limit={limit})",
            f"tm.Traceback(frames).format(limit={limit}, "
            f"most_recent_first=True)")
    add(False,
        "tm.Trace(None) and None", "tm.Trace(None).size",
        "tm.Trace((0, 1)).size", "tm.Trace((0, 1)).traceback",
        "tm.Trace(raw[0]).domain", "str(tm.Trace(raw[0]))",
        "repr(tm.Trace(raw[0]))", "tm.Trace(raw[0]) == 1",
        "hash(tm.Trace(raw[0])) == hash(tm.Trace(raw[0]))",
        "str(tm.Trace((0, 'x', frames, 1)))",
        "str(tm.Trace((0, -5, frames, 1)))", "tm.Trace()")
    for size, count in [("-5", "-1"), ("'x'", "1"), ("None", "None"),
                        ("2**64", "2**64"), ("1.5", "0")]:
        add(False,
            f"str(tm.Statistic(tm.Traceback(frames), {size}, {count}))",
            f"repr(tm.Statistic(tm.Traceback(frames), {size}, {count}))",
            f"str(tm.StatisticDiff(tm.Traceback(frames), {size}, {size}, "
            f"{count}, {count}))")
    add(False, "tm.Statistic(None, 1, 1) == 1", "str(tm.Statistic(None, 1, 1))",
        "tm.Statistic()", "tm.StatisticDiff(1, 2)",
        "hash(tm.Statistic([], 1, 1))")

    # -- Filter, DomainFilter --------------------------------------------
    for pattern in BAD_PATTERNS:
        add(False,
            f"len(snap.filter_traces([tm.Filter(True, {pattern})]).traces)",
            f"len(snap.filter_traces([tm.Filter(False, {pattern})]).traces)",
            f"len(snap.filter_traces([tm.Filter(True, {pattern}, "
            f"all_frames=True)]).traces)")
    add(False, "tm.Filter(True, None)", "tm.Filter(True, 1)",
        "tm.Filter(True, b'a.py').filename_pattern",
        "len(snap.filter_traces([tm.Filter(True, b'a.py')]).traces)",
        "tm.Filter(True, pathlib.Path('a.py')).filename_pattern",
        "tm.Filter()", "tm.Filter(True)", "tm.Filter('yes', 'a.py').inclusive",
        "len(snap.filter_traces([tm.Filter('', 'a.py')]).traces)")
    for lineno in ["0", "-1", "2**64", "'1'", "1.0", "None"]:
        add(False, f"len(snap.filter_traces([tm.Filter(True, 'a.py', "
                   f"lineno={lineno})]).traces)")
    for domain in ["0", "-1", "2**64", "'0'", "0.0", "None"]:
        add(False, f"len(snap.filter_traces([tm.Filter(True, '*', "
                   f"domain={domain})]).traces)",
            f"len(snap.filter_traces([tm.DomainFilter(True, "
            f"{domain})]).traces)",
            f"len(snap.filter_traces([tm.DomainFilter(False, "
            f"{domain})]).traces)")
    add(False, "tm.DomainFilter(True)", "tm.DomainFilter()",
        "tm.BaseFilter(True).inclusive",
        "len(snap.filter_traces([tm.BaseFilter(True)]).traces)")

    # -- Snapshot ---------------------------------------------------------
    add(False, "tm.Snapshot(None, 1) and None", "tm.Snapshot(1, 1) and None",
        "tm.Snapshot(raw, 'x').traceback_limit",
        "tm.Snapshot(raw, -1).traceback_limit", "tm.Snapshot()",
        "len(tm.Snapshot(None, 1).traces)",
        "tm.Snapshot([(0,)], 1).statistics('lineno')",
        "tm.Snapshot([1], 1).statistics('lineno')",
        "tm.Snapshot([(0, 1, 2, 3)], 1).statistics('lineno')",
        "tm.Snapshot([(0, 'x', frames, 1)], 1).statistics('lineno')",
        "len(tm.Snapshot([(0, -1, frames, 1)], 1).statistics('lineno'))",
        "tm.Snapshot([(0, 1, frames, 1)], 1).traces[5]",
        "tm.Snapshot([(0, 1, frames, 1)], 1).traces['x']")
    for key_type in ["'bad'", "None", "1", "'LINENO'", "b'lineno'"]:
        add(False, f"snap.statistics({key_type})",
            f"snap.compare_to(snap, {key_type})")
    add(False, "len(snap.statistics('lineno', cumulative='x'))",
        "snap.statistics('traceback', cumulative=True)",
        "len(snap.statistics('filename', cumulative=None))",
        "snap.statistics()", "snap.compare_to(None, 'lineno')",
        "snap.compare_to(1, 'lineno')", "snap.compare_to(snap)",
        "len(snap.compare_to(tm.Snapshot([], 1), 'lineno'))",
        "snap.compare_to(snap, 'traceback', cumulative=True)",
        "snap.filter_traces(None)", "snap.filter_traces(1)",
        "snap.filter_traces([1])", "snap.filter_traces([None])",
        "snap.filter_traces('abc')",
        "len(snap.filter_traces(iter([])).traces)",
        "len(snap.filter_traces(()).traces)")
    add(False, "snap.dump(None)", "snap.dump(1.5)", "snap.dump('')",
        "snap.dump('\\x00')", "snap.dump('/nonexistent/dir/x')",
        "snap.dump(b'/nonexistent/dir/x')", "snap.dump()",
        "snap.dump(path, 1)",
        "tm.Snapshot.load(None)", "tm.Snapshot.load('')",
        "tm.Snapshot.load('/nonexistent')", "tm.Snapshot.load('/')",
        "tm.Snapshot.load('\\x00')", "tm.Snapshot.load(3.5)",
        "tm.Snapshot.load()", "tm.Snapshot.load(empty_path)")

    # -- the C API through _testcapi --------------------------------------
    for tracing in (False, True):
        add(tracing, "capi.tracemalloc_track()",
            "capi.tracemalloc_track('x', 0x1000, 1)",
            "capi.tracemalloc_track(0, 'x', 1)",
            "capi.tracemalloc_track(0, 0x1000, 'x')",
            "capi.tracemalloc_track(0, 0x1000, 1.5)",
            "capi.tracemalloc_track(0, None, 1)",
            "capi.tracemalloc_track(0, 0x1000, 1, 'x')",
            "capi.tracemalloc_untrack()",
            "capi.tracemalloc_untrack('x', 0x1000)",
            "capi.tracemalloc_untrack(0, 0x1000)",
            "capi.tracemalloc_untrack(0, 'x')",
            "capi.tracemalloc_get_traceback()",
            "capi.tracemalloc_get_traceback(0, 0x1000)",
            "capi.tracemalloc_get_traceback('x', 0x1000)",
            "capi.tracemalloc_get_traceback(0, None)",
            "capi.tracemalloc_get_traceback(0, 2**64)")
    for domain in DOMAINS:
        for pointer in POINTERS:
            add(True, track_cycle(domain, pointer, "64"))
        add(False, f"capi.tracemalloc_track({domain}, 0x1000, 1)")
    for size in SIZES:
        add(True, track_cycle("7", "0x1000", size),
            track_cycle("7", "0x1000", size, release_gil=True),
            f"(capi.tracemalloc_track(7, 0x1000, {size}), "
            f"capi.tracemalloc_track(7, 0x2000, {size}), "
            f"[(s.size, s.count) for s in domain_stats(7)])[-1]")
    # Tracking the same address twice replaces the trace (size and
    # traceback), as upstream.
    add(True, "(capi.tracemalloc_track(7, 0x1000, 10), "
              "capi.tracemalloc_track(7, 0x1000, 20), "
              "[(s.size, s.count) for s in domain_stats(7)])[-1]",
        "(capi.tracemalloc_untrack(7, 0x1000), "
        "capi.tracemalloc_untrack(7, 0x1000))")
    return result


def case_key(tracing, code):
    return f"{'on' if tracing else 'off'}: {code}"


def track_cycle(domain, pointer, size, release_gil=False):
    """Track, look up, untrack and look up again one block."""
    gil = ", 1" if release_gil else ""
    return (f"(capi.tracemalloc_track({domain}, {pointer}, {size}{gil}), "
            f"capi.tracemalloc_get_traceback({domain}, {pointer}) "
            f"is not None, capi.tracemalloc_untrack({domain}, {pointer}), "
            f"capi.tracemalloc_get_traceback({domain}, {pointer}))")


def describe(value):
    """A comparable description of a returned value."""
    if value is None or type(value) in (bool, int, float):
        return repr(value)
    if type(value) is str:
        # Reprs hold addresses and limits; keep them comparable.
        return "str" if "0x" in value else repr(value[:200])
    if type(value) in (tuple, list):
        return f"{type(value).__name__}[" + ", ".join(
            map(describe, value[:20])) + "]"
    return type(value).__name__


def run_cases(first=0):
    """Evaluate every case from the index *first* on; print one JSON line
    per case, as soon as it starts and when it ends (a crash then names its
    case, and the next child goes on after it)."""
    import _tracemalloc
    import pathlib
    import tracemalloc
    import types
    try:
        import _testcapi
    except ImportError:
        _testcapi = None
    capi = _testcapi
    if _testcapi is not None and not hasattr(_testcapi,
                                             "tracemalloc_get_traceback"):
        # 3.13 exports _PyTraceMalloc_GetTraceback() from _testinternalcapi
        # instead; the cases keep one name on every base.
        import _testinternalcapi
        capi = types.SimpleNamespace(
            tracemalloc_track=_testcapi.tracemalloc_track,
            tracemalloc_untrack=_testcapi.tracemalloc_untrack,
            tracemalloc_get_traceback=(
                _testinternalcapi._PyTraceMalloc_GetTraceback))
    tmpdir = tempfile.mkdtemp()
    frames = (("a.py", 1), ("b.py", 2))
    raw = [(0, 10, frames, 2), (1, 20, (("c.py", 3),), 1),
           (0, 30, (("b.py", 2),), 1)]

    def domain_stats(domain):
        snapshot = tracemalloc.take_snapshot()
        return snapshot.filter_traces(
            [tracemalloc.DomainFilter(True, domain)]).statistics("filename")

    namespace = {
        "tm": tracemalloc, "_tm": _tracemalloc, "capi": capi,
        "pathlib": pathlib, "frames": frames, "raw": raw,
        "snap": tracemalloc.Snapshot(raw, 5),
        "path": os.path.join(tmpdir, "snapshot"),
        "empty_path": os.path.join(tmpdir, "empty"),
        "domain_stats": domain_stats,
    }
    open(namespace["empty_path"], "wb").close()
    try:
        for index, (tracing, code) in enumerate(cases()):
            if index < first:
                continue
            key = case_key(tracing, code)
            print("START " + json.dumps([index, key]), flush=True)
            if "capi." in code and _testcapi is None:
                continue
            # The same state before every case: traceback limit 5.
            tracemalloc.stop()
            tracemalloc.start(5)
            if not tracing:
                tracemalloc.stop()
            try:
                value = eval(code, namespace)
                result = "returned " + describe(value)
            except Exception as exc:
                result = "raised " + type(exc).__name__
            state = [tracemalloc.is_tracing(),
                     tracemalloc.get_traceback_limit()]
            tracemalloc.stop()
            print("OUTCOME " + json.dumps([key, result, state]), flush=True)
    finally:
        for name in os.listdir(tmpdir):
            os.unlink(os.path.join(tmpdir, name))
        os.rmdir(tmpdir)


OPTION_CHECK = ("import tracemalloc; "
                "print(tracemalloc.is_tracing(), "
                "tracemalloc.get_traceback_limit())")


def option_cases():
    """(label, argv options, environment value) for the start-up inputs."""
    result = []
    for value in OPTION_VALUES:
        option = "tracemalloc" if value is None else f"tracemalloc={value}"
        result.append((f"-X {option}", ["-X", option], None))
        if value is not None:
            result.append((f"PYTHONTRACEMALLOC={value!r}", [], value))
            result.append((f"-E PYTHONTRACEMALLOC={value!r}", ["-E"], value))
    return result


def run_option_cases(python):
    """Run each start-up input in a child; return {label: outcome}."""
    outcomes = {}
    for label, options, env_value in option_cases():
        env = dict(os.environ)
        for name in ("PYTHONTRACEMALLOC", "PYTHONMALLOC", "PYTHONPATH",
                     "PYTHONHOME"):
            env.pop(name, None)
        if env_value is not None:
            env["PYTHONTRACEMALLOC"] = env_value
        proc = subprocess.run([python, *options, "-c", OPTION_CHECK],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env, timeout=60)
        # The exit status, what the child saw, and whether it complained
        # (the message itself may differ).
        complaint = proc.stderr.strip().splitlines()
        outcomes[label] = [proc.returncode, proc.stdout.strip(),
                           bool(complaint)]
    return outcomes


def collect(python):
    """{case: outcome} of every input for the interpreter *python*.

    A case that kills the child gets the outcome "crashed" (with the exit
    status); a new child goes on with the next case.
    """
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONTRACEMALLOC", "PYTHONPATH")}
    outcomes = {}
    first = 0
    total = len(cases())
    while first < total:
        proc = subprocess.run([python, "-X", "faulthandler", __file__,
                               "--cases", str(first)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, timeout=600, env=env)
        started = None
        for line in proc.stdout.splitlines():
            if line.startswith("START "):
                started = json.loads(line[6:])
            elif line.startswith("OUTCOME "):
                key, result, state = json.loads(line[8:])
                outcomes[key] = [result, state]
                started = None
        if proc.returncode == 0 and started is None:
            break
        if started is None:
            raise AssertionError(f"{python} failed (status "
                                 f"{proc.returncode}) outside any case:\n"
                                 f"{proc.stderr[-3000:]}")
        index, key = started
        outcomes[key] = [f"crashed (status {proc.returncode})", None]
        first = index + 1
    return outcomes


def pristine_python():
    """This base's pristine CPython (PRISTINE_VERSION) to compare with, or
    None."""
    import glob
    candidates = [os.environ.get("TRACEMALLOC_PRISTINE_PYTHON", "")]
    # The build of `make bench-pristine`, then the system's interpreter of
    # that version.
    cache = os.environ.get("TRACEMALLOC_FORK_CACHE") or os.path.expanduser(
        "~/.cache/tracemalloc-fork")
    # (only finished builds: the stamp is written last)
    for stamp in sorted(glob.glob(os.path.join(
            cache, f"pristine-{PRISTINE_VERSION}-build", "*", ".built"))):
        candidates.append(os.path.join(os.path.dirname(stamp),
                                       f"Python-{PRISTINE_VERSION}",
                                       "python"))
    candidates.append(f"/usr/bin/python{sys.version_info[0]}."
                      f"{sys.version_info[1]}")
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def record(python=sys.executable):
    """The JSON document of recorded outcomes, for this interpreter."""
    return {
        "python": sys.version.split()[0],
        "note": f"outcomes of pristine CPython {sys.version.split()[0]}, "
                "written by test_tracemalloc_badinput.py --record",
        "cases": collect(python),
        "options": run_option_cases(python),
    }


# ---------------------------------------------------------------------------
# The tests

import unittest

# Inputs on which the fork answers differently on purpose, with why (see
# Doc/internals/tracemalloc-engine.rst): not compared.  None today: a
# second start(n) while tracing is ignored, as upstream.
DOCUMENTED_DIFFERENCES = {}


def compare(fork, pristine):
    """List the inputs on which the fork's outcome is not acceptable."""
    problems = []
    for key, (expected, expected_state) in pristine.items():
        if key in DOCUMENTED_DIFFERENCES:
            continue
        if key not in fork:
            problems.append(f"{key}: not run")
            continue
        got, state = fork[key]
        if got == "raised SystemError":
            problems.append(f"{key}: SystemError")
        elif expected.startswith("raised "):
            if not got.startswith("raised "):
                problems.append(f"{key}: pristine {expected}, fork {got}")
        elif got != expected:
            problems.append(f"{key}: pristine {expected}, fork {got}")
        if state != expected_state:
            problems.append(f"{key}: state afterwards (tracing, limit) "
                            f"pristine {expected_state}, fork {state}")
    return problems


def compare_options(fork, pristine):
    problems = []
    for label, expected in pristine.items():
        got = fork.get(label)
        if got is None:
            problems.append(f"{label}: not run")
        elif got[0] == 0 and expected[0] != 0:
            problems.append(f"{label}: pristine refuses it ({expected}), "
                            f"the fork starts ({got})")
        elif expected[0] == 0 and got != expected:
            problems.append(f"{label}: pristine {expected}, fork {got}")
        elif got[0] not in (0, 1):
            problems.append(f"{label}: exit status {got[0]} (crash?)")
        elif got[0] != 0 and not got[2]:
            problems.append(f"{label}: fails without saying why")
    return problems


class BadInputTest(unittest.TestCase):
    maxDiff = None

    @classmethod
    def setUpClass(cls):
        with open(RECORDED) as f:
            cls.recorded = json.load(f)

    def test_api_matches_recorded_pristine(self):
        fork = collect(sys.executable)
        self.assertEqual(len(fork), len(self.recorded["cases"]),
                         "the case list changed: re-record with --record")
        print(f"ITERATIONS badinput: {len(fork)} API inputs compared with "
              f"pristine {self.recorded['python']}", flush=True)
        self.assertEqual(compare(fork, self.recorded["cases"]), [])

    def test_startup_options_match_recorded_pristine(self):
        fork = run_option_cases(sys.executable)
        print(f"ITERATIONS badinput: {len(fork)} -X tracemalloc / "
              f"PYTHONTRACEMALLOC values compared", flush=True)
        self.assertEqual(compare_options(fork, self.recorded["options"]), [])

    def test_live_pristine_agrees_with_record(self):
        # The record is what pristine does today (not a stale file).
        python = pristine_python()
        if python is None:
            self.skipTest(f"no pristine {PRISTINE_VERSION} interpreter "
                          f"found")
        check = subprocess.run([python, "-c", "import sys; "
                                "print(sys.version.split()[0])"],
                               stdout=subprocess.PIPE, text=True)
        if check.stdout.strip() != PRISTINE_VERSION:
            self.skipTest(f"{python} is {check.stdout.strip()}, not "
                          f"{PRISTINE_VERSION}")
        live = collect(python)
        self.assertEqual(live, self.recorded["cases"])

    def test_nul_bytes_cannot_pass(self):
        # NUL bytes never reach the interpreter's option parsing: the OS
        # interface takes C strings, and subprocess refuses them first.
        for args, env in (([sys.executable, "-X", "tracemalloc=1\0", "-c",
                            "pass"], None),
                          ([sys.executable, "-c", "pass"],
                           dict(os.environ, PYTHONTRACEMALLOC="1\0"))):
            with self.assertRaises(ValueError):
                subprocess.run(args, env=env)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--cases"]:
        run_cases(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    elif sys.argv[1:2] == ["--record"]:
        python = sys.argv[2] if len(sys.argv) > 2 else sys.executable
        document = record(python)
        # One input per line: reviewable diffs when cases change.
        print("{")
        for name in ("python", "note"):
            print(f" {json.dumps(name)}: {json.dumps(document[name])},")
        for section in ("cases", "options"):
            print(f" {json.dumps(section)}: {{")
            items = sorted(document[section].items())
            print(",\n".join(f"  {json.dumps(key)}: {json.dumps(value)}"
                             for key, value in items))
            print(" }" + ("," if section == "cases" else ""))
        print("}")
    else:
        unittest.main()
