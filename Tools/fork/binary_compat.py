"""Binary compatibility of the 3.13 fork with extensions built for stock 3.13.

Issue 20, item 8: extension modules compiled for stock CPython 3.13.15 must
load into the fork and work with tracing on.  Three checks, each a function
the test module (Lib/test/test_tracemalloc_abi.py) calls, and together the
command line:

    build/3.13/obj/python Tools/fork/binary_compat.py [--check NAME]...
        [--pristine PATH] [--fork PATH] [--json]

stdlib      the .so files that pristine 3.13.15's own build produced
            (_decimal, _ctypes, xxlimited, _testcapi, _json, _pickle,
            array...) are copied into a scratch directory put first on
            sys.path; the fork runs their stdlib tests with tracing on
            (PYTHONTRACEMALLOC=25, and -X tracemalloc=1), each child proving
            that the module it imported is the pristine file; pristine runs
            the same tests on the same files, and any test that fails only
            on the fork is a finding.
markupsafe  Debian's markupsafe source (the .orig tarball of sid's source
            package, fetched with a private apt state, see
            fetch_markupsafe()) is compiled with pristine's compiler flags
            and headers; its own pytest suite runs on the fork, traced, on
            that _speedups .so, and tracemalloc must attribute a string the
            C code allocates to the Python line that called it.
layout      a small C program compiled against pristine's headers and
            against the fork's prints the size and field offsets of the
            public structures (they must be equal) and of the internal
            structures that stdlib extension modules, which are built with
            Py_BUILD_CORE_MODULE, reach through macros (_PyRuntime's
            static objects, the interpreter state).

Pristine is $TRACEMALLOC_PRISTINE_PYTHON, else the build of `make BASE=3.13
bench-pristine` in the fork's cache.  Everything built or fetched is cached
under the fork's cache directory (binary-compat/), keyed by what it was
built from.
"""

import argparse
import contextlib
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap

__all__ = ["STDLIB_SUITES", "TRACING", "find_pristine", "run_stdlib_suite",
           "compare_stdlib_suite", "fetch_markupsafe", "build_markupsafe",
           "run_markupsafe_tests", "markupsafe_traceback_check",
           "compare_layouts", "Unavailable"]

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PRISTINE_VERSION = "3.13.15"
PRISTINE_ENV = "TRACEMALLOC_PRISTINE_PYTHON"


class Unavailable(Exception):
    """What a check needs is not here (no pristine build, no network...):
    the check cannot run, which is not a failure of the fork."""


# name: (the pristine extension modules to load, the stdlib tests to run).
# _testcapi's slice is the part of test_capi that drives _testcapi and
# _testlimitedcapi (which load pristine's) without _testinternalcapi (an
# interpreter's internals; its own build's by definition).
STDLIB_SUITES = {
    "decimal": (["_decimal"], ["test.test_decimal"]),
    "ctypes": (["_ctypes", "_ctypes_test"], ["test.test_ctypes"]),
    "xxlimited": (["xxlimited", "xxlimited_35"], ["test.test_xxlimited"]),
    "capi": (["_testcapi", "_testlimitedcapi"],
             ["test.test_capi.test_mem", "test.test_capi.test_object",
              "test.test_capi.test_list", "test.test_capi.test_dict",
              "test.test_capi.test_bytes", "test.test_capi.test_unicode",
              "test.test_capi.test_exceptions", "test.test_capi.test_long",
              "test.test_capi.test_structmembers",
              "test.test_capi.test_getargs", "test.test_capi.test_abstract",
              "test.test_capi.test_watchers"]),
    "json": (["_json"], ["test.test_json"]),
    "pickle": (["_pickle"], ["test.test_pickle"]),
    "elementtree": (["_elementtree", "pyexpat"], ["test.test_xml_etree_c"]),
    "array": (["array"], ["test.test_array"]),
    "struct": (["_struct"], ["test.test_struct"]),
    "datetime": (["_datetime"], ["test.datetimetester"]),
}

# How tracing is on: (label, extra command line options, extra environment).
TRACING = {
    "PYTHONTRACEMALLOC=25": ([], {"PYTHONTRACEMALLOC": "25"}),
    "-X tracemalloc=1": (["-X", "tracemalloc=1"], {}),
}


# --------------------------------------------------------------- locations

def cache_dir():
    cache = os.environ.get("TRACEMALLOC_FORK_CACHE")
    if not cache:
        base = (os.environ.get("XDG_CACHE_HOME")
                or os.path.join(os.path.expanduser("~"), ".cache"))
        cache = os.path.join(base, "tracemalloc-fork")
    return cache


def default_fork():
    return os.path.join(REPO, "build", "3.13", "obj", "python")


def find_pristine():
    """Path of pristine 3.13.15's python (in its build tree); Unavailable
    says why there is none."""
    path = os.environ.get(PRISTINE_ENV)
    if path:
        if not os.access(path, os.X_OK):
            raise Unavailable(f"${PRISTINE_ENV}={path} is not an executable")
        candidates = [path]
    else:
        stamps = glob.glob(os.path.join(
            glob.escape(cache_dir()), f"pristine-{PRISTINE_VERSION}-build",
            "*", ".built"))
        stamps.sort(key=os.path.getmtime, reverse=True)
        candidates = [os.path.join(os.path.dirname(s),
                                   f"Python-{PRISTINE_VERSION}", "python")
                      for s in stamps]
    for python in candidates:
        if (os.access(python, os.X_OK)
                and glob.glob(os.path.join(os.path.dirname(python), "build",
                                           "lib.*", "*.so"))):
            return python
    if path:
        raise Unavailable(f"${PRISTINE_ENV}={path} is not a build tree with "
                          "its extension modules (build/lib.*/*.so)")
    raise Unavailable(f"no pristine CPython {PRISTINE_VERSION} build: run "
                      f"`make BASE=3.13 bench-pristine` or set "
                      f"${PRISTINE_ENV}")


def extension_dir(pristine):
    dirs = glob.glob(os.path.join(os.path.dirname(pristine), "build",
                                  "lib.*"))
    if len(dirs) != 1:
        raise Unavailable(f"expected one build/lib.* beside {pristine}, "
                          f"found {dirs}")
    return dirs[0]


def ext_suffix(python):
    return _python_output(python, "import sysconfig; "
                          "print(sysconfig.get_config_var('EXT_SUFFIX'))")


def _sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _python_output(python, code):
    return subprocess.run([python, "-I", "-c", code], check=True, text=True,
                          stdout=subprocess.PIPE).stdout.strip()


def _clean_env(extra=()):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PYTHON")}
    env.update(extra)
    return env


# ------------------------------------------------------ stdlib extensions

def stage_extensions(pristine, modules, dest):
    """Copy pristine's .so files of *modules* into *dest*; return
    {module: path of the copy}."""
    source = extension_dir(pristine)
    suffix = ext_suffix(pristine)
    staged = {}
    for module in modules:
        path = os.path.join(source, module + suffix)
        if not os.path.exists(path):
            raise Unavailable(f"pristine's build has no {module}{suffix}")
        staged[module] = shutil.copy2(path, dest)
    return staged


# The child: puts the scratch directory first on sys.path, imports each
# module and checks it is the copy of pristine's file, runs the tests with
# unittest (resources off, as regrtest without -u), checks again that the
# modules in sys.modules are still those files (import_fresh_module()
# imports them anew), and prints one line of JSON.
_CHILD = r"""
import json, os, sys, unittest, tracemalloc
sodir, modules, tests = sys.argv[1], sys.argv[2].split(","), sys.argv[3:]
sys.path.insert(0, sodir)
from test import support
support.use_resources = []
def loaded():
    files = {}
    for name in modules:
        module = sys.modules.get(name)
        if module is None:
            module = __import__(name)
        files[name] = getattr(module, "__file__", None)
    return files
before = loaded()
for name, path in before.items():
    if path is None or os.path.dirname(os.path.realpath(path)) != sodir:
        sys.exit(f"{name} was loaded from {path}, not from {sodir}")
print("LOADED", json.dumps(before), file=sys.stderr, flush=True)
class Result(unittest.TextTestResult):
    def startTest(self, test):
        print("START", test.id(), file=sys.stderr, flush=True)
        super().startTest(test)
suite = unittest.defaultTestLoader.loadTestsFromNames(tests)
runner = unittest.TextTestRunner(stream=sys.stderr, resultclass=Result,
                                 verbosity=0)
result = runner.run(suite)
after = loaded()
def ids(pairs):
    return sorted(t.id() for t, _ in pairs)
print("RESULT " + json.dumps({
    "python": sys.executable, "is_tracing": tracemalloc.is_tracing(),
    "nframe": tracemalloc.get_traceback_limit(),
    "loaded": before, "loaded_after": after,
    "run": result.testsRun, "skipped": len(result.skipped),
    "failed": ids(result.failures) + ids(result.errors)
              + sorted(t.id() for t in result.unexpectedSuccesses)}))
"""


def run_stdlib_suite(python, pristine, name, tracing, timeout=900):
    """Run suite *name* of STDLIB_SUITES on *python* with pristine's .so
    files first on sys.path and tracing as TRACING[tracing]; return a dict:
    run, skipped, failed (test ids), loaded (module: the file the child
    imported), staged (module: the pristine file it is a copy of, and its
    sha256), and for a crash, crashed (the test that was running and the
    signal)."""
    modules, tests = STDLIB_SUITES[name]
    options, env = TRACING[tracing]
    with tempfile.TemporaryDirectory(prefix="binary-compat-") as sodir:
        sodir = os.path.realpath(sodir)
        staged = {module: {"from": os.path.join(
                      extension_dir(pristine),
                      os.path.basename(path)), "sha256": _sha256(path)}
                  for module, path in stage_extensions(pristine, modules,
                                                       sodir).items()}
        # PYTHONPATH too, so that children the tests start (those not run
        # with -I) load the same files.
        child_env = _clean_env({**env, "PYTHONPATH": sodir,
                                "PYTHONHASHSEED": "0"})
        cmd = [python, *options, "-X", "faulthandler", "-c", _CHILD, sodir,
               ",".join(modules), *tests]
        with tempfile.TemporaryDirectory(prefix="binary-compat-cwd-") as cwd:
            try:
                proc = subprocess.run(cmd, env=child_env, cwd=cwd, text=True,
                                      stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE,
                                      timeout=timeout)
            except subprocess.TimeoutExpired:
                return {"suite": name, "tracing": tracing, "run": 0,
                        "skipped": 0, "failed": [], "loaded": {},
                        "staged": staged,
                        "crashed": f"timeout after {timeout}s"}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT "):])
            result.update(suite=name, tracing=tracing, staged=staged)
            if proc.returncode:
                result["crashed"] = f"exit status {proc.returncode}"
            return result
    started = re.findall(r"^START (\S+)", proc.stderr, re.M)
    loaded = re.findall(r"^LOADED (.*)$", proc.stderr, re.M)
    fatal = re.findall(r"^Fatal Python error: (.*)$", proc.stderr, re.M)
    where = (started[-1] if started else "loading the tests" if loaded
             else "importing the modules")
    why = fatal[0] if fatal else f"exit status {proc.returncode}"
    tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
    return {"suite": name, "tracing": tracing, "run": len(started),
            "skipped": 0, "failed": [], "staged": staged,
            "loaded": json.loads(loaded[0]) if loaded else {},
            "crashed": f"{why} in {where}", "stderr_tail": tail}


def _pristine_results_path(pristine):
    key = hashlib.sha256(os.path.realpath(pristine).encode()
                         + _CHILD.encode()
                         + json.dumps(STDLIB_SUITES).encode()).hexdigest()
    return os.path.join(cache_dir(), "binary-compat",
                        f"pristine-results-{key[:12]}.json")


def pristine_reference(pristine, name, tracing, refresh=False):
    """Pristine's result on suite *name* under *tracing*: pristine and its
    files do not change, so the result is kept in the cache (upstream's
    tracemalloc at 25 frames takes minutes on test_decimal)."""
    path = _pristine_results_path(pristine)
    try:
        with open(path) as f:
            results = json.load(f)
    except (OSError, ValueError):
        results = {}
    key = f"{name} {tracing}"
    if refresh or key not in results:
        results[key] = run_stdlib_suite(pristine, pristine, name, tracing)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "w") as f:
            json.dump(results, f, indent=1, sort_keys=True)
        os.replace(path + ".tmp", path)
    return results[key]


def compare_stdlib_suite(fork, pristine, name, tracing):
    """(fork's result, pristine's result, the findings: a list of
    strings, empty when the fork fails nothing pristine passes)."""
    mine = run_stdlib_suite(fork, pristine, name, tracing)
    reference = pristine_reference(pristine, name, tracing)
    findings = []
    if mine.get("crashed"):
        findings.append(f"{name} [{tracing}]: the fork crashed: "
                        f"{mine['crashed']}")
    only_fork = sorted(set(mine["failed"]) - set(reference["failed"]))
    if only_fork:
        findings.append(f"{name} [{tracing}]: fails only on the fork: "
                        + ", ".join(only_fork))
    if not mine.get("crashed") and mine["run"] != reference["run"]:
        findings.append(f"{name} [{tracing}]: the fork ran {mine['run']} "
                        f"tests, pristine {reference['run']}")
    return mine, reference, findings


# -------------------------------------------------------------- markupsafe

MARKUPSAFE_SOURCE = "markupsafe"


def _apt_options(state):
    return ["-o", "Dir::Etc::SourceList=/dev/null",
            "-o", f"Dir::Etc::SourceParts={state}/parts",
            "-o", f"Dir::State::Lists={state}/lists",
            "-o", f"Dir::Cache={state}/cache",
            "-o", "Debug::NoLocking=1", "-o", "APT::Sandbox::User=root"]


def fetch_markupsafe():
    """Directory of markupsafe's unpacked upstream source (Debian sid's
    .orig tarball), fetched once into the cache.

    The private apt state's sources come from Tools/fork/fetch-tarball.sh
    --apt-sources with the 3.13 base's suite (sid): the machine's own
    mirror, as deb-src, its apt configuration untouched; apt checks the
    files against the signed Release file."""
    cache = os.path.join(cache_dir(), "binary-compat", "debian-src",
                         MARKUPSAFE_SOURCE)
    for stamp in glob.glob(os.path.join(glob.escape(cache), "*", ".fetched")):
        return os.path.dirname(stamp)
    if os.environ.get("TRACEMALLOC_FORK_OFFLINE") == "1":
        raise Unavailable("markupsafe's source is not cached and "
                          "TRACEMALLOC_FORK_OFFLINE=1")
    if not shutil.which("apt-get"):
        raise Unavailable("apt-get is not available to fetch markupsafe")
    os.makedirs(cache, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix="apt.") as state:
        for sub in ("lists/partial", "cache/archives/partial", "parts",
                    "dl"):
            os.makedirs(os.path.join(state, sub))
        env = dict(os.environ, TRACEMALLOC_FORK_BASE="3.13")
        steps = [
            [os.path.join(HERE, "fetch-tarball.sh"), "--apt-sources",
             os.path.join(state, "parts")],
            ["apt-get", *_apt_options(state), "-qq", "update"],
            ["apt-get", *_apt_options(state), "-qq", "source",
             "--download-only", "--tar-only", MARKUPSAFE_SOURCE],
        ]
        for step in steps:
            proc = subprocess.run(step, env=env, cwd=os.path.join(state, "dl"),
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
            if proc.returncode:
                raise Unavailable(f"could not fetch Debian's markupsafe "
                                  f"source ({os.path.basename(step[0])} "
                                  f"{step[1]}...): {proc.stdout.strip()}")
        origs = glob.glob(os.path.join(state, "dl", "*.orig.tar.*"))
        if len(origs) != 1:
            raise Unavailable(f"markupsafe's source package has no single "
                              f".orig tarball: {os.listdir(state + '/dl')}")
        version = os.path.basename(origs[0])
        version = version[len(MARKUPSAFE_SOURCE) + 1:].split(".orig.tar")[0]
        target = os.path.join(cache, version)
        shutil.rmtree(target, ignore_errors=True)
        os.makedirs(target)
        subprocess.run(["tar", "-xf", origs[0], "-C", target,
                        "--strip-components=1"], check=True)
        open(os.path.join(target, ".fetched"), "w").close()
        return target


def build_markupsafe(pristine, source):
    """Compile markupsafe's C speedups with pristine's compiler, flags and
    headers; return a directory holding the markupsafe package with that
    _speedups .so (cached, keyed by the source and pristine)."""
    package = os.path.join(source, "src", "markupsafe")
    c_file = os.path.join(package, "_speedups.c")
    if not os.path.exists(c_file):
        raise Unavailable(f"no {c_file} in markupsafe's source")
    config = json.loads(_python_output(pristine, textwrap.dedent("""\
        import json, sysconfig
        print(json.dumps({k: sysconfig.get_config_var(k) for k in
              ("CC", "CFLAGS", "CCSHARED", "LDSHARED", "EXT_SUFFIX",
               "srcdir", "abs_builddir")}))""")))
    with open(c_file, "rb") as f:
        key = hashlib.sha256(f.read() + json.dumps(config).encode()
                             + os.path.realpath(pristine).encode())
    out = os.path.join(cache_dir(), "binary-compat",
                       f"markupsafe-{os.path.basename(source)}-"
                       f"{key.hexdigest()[:12]}")
    so = os.path.join(out, "markupsafe", "_speedups" + config["EXT_SUFFIX"])
    if os.path.exists(os.path.join(out, ".built")):
        return out
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(package, os.path.join(out, "markupsafe"),
                    ignore=shutil.ignore_patterns("*.c", "__pycache__"))
    # An uninstalled build tree: the headers are Include/ of the source and
    # pyconfig.h of the build directory (INCLUDEPY names the prefix).
    includes = ["-I" + os.path.join(config["srcdir"], "Include"),
                "-I" + config["abs_builddir"]]
    obj = so[:-len(".so")] + ".o"
    compile_cmd = (config["CC"].split() + config["CFLAGS"].split()
                   + config["CCSHARED"].split() + includes
                   + ["-c", c_file, "-o", obj])
    link_cmd = config["LDSHARED"].split() + [obj, "-o", so]
    for cmd in (compile_cmd, link_cmd):
        proc = subprocess.run(cmd, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        if proc.returncode:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout}")
    os.remove(obj)
    with open(os.path.join(out, ".built"), "w") as f:
        f.write(" ".join(compile_cmd) + "\n")
    return out


PYTEST_SITE = os.environ.get("TRACEMALLOC_TEST_PYTEST_PATH",
                             "/usr/lib/python3/dist-packages")
# The pure-Python packages pytest needs; the directory also holds compiled
# modules built for the system's Python, which are kept off the path.
PYTEST_PACKAGES = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging",
                   "attr", "attrs", "py.py", "py", "exceptiongroup", "tomli")


@contextlib.contextmanager
def pytest_site():
    """A directory with only pytest's pure-Python packages (Debian's
    python3-pytest), for sys.path."""
    if not os.path.isdir(os.path.join(PYTEST_SITE, "_pytest")):
        raise Unavailable(f"no pytest in {PYTEST_SITE}; on Debian: apt-get "
                          "install python3-pytest")
    with tempfile.TemporaryDirectory(prefix="binary-compat-pytest-") as d:
        for name in os.listdir(PYTEST_SITE):
            if name in PYTEST_PACKAGES or re.match(
                    r"(pytest|pluggy|iniconfig|packaging|attrs|"
                    r"exceptiongroup|tomli)-[^-]+\.(dist|egg)-info$", name):
                os.symlink(os.path.join(PYTEST_SITE, name),
                           os.path.join(d, name))
        yield d


# A pytest plugin (loaded with -p): counts outcomes per test and records
# which _speedups file the tests used and whether tracing was on.
_PYTEST_PLUGIN = r"""
import json, os, sys, tracemalloc
_outcomes = {}
def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        _outcomes.setdefault(report.nodeid, report.outcome)
def pytest_sessionfinish(session, exitstatus):
    speedups = sys.modules.get("markupsafe._speedups")
    with open(os.environ["BINARY_COMPAT_REPORT"], "w") as f:
        json.dump({"outcomes": _outcomes,
                   "speedups": getattr(speedups, "__file__", None),
                   "tracing": tracemalloc.is_tracing(),
                   "nframe": tracemalloc.get_traceback_limit(),
                   "exitstatus": int(exitstatus)}, f)
"""


def run_markupsafe_tests(python, built, source,
                         tracing="PYTHONTRACEMALLOC=25"):
    """Run markupsafe's own tests (its tests/ directory) with pytest on
    *python*, on the package in *built*; return a dict: passed, failed,
    skipped (counts), speedups_passed (tests run on _speedups), speedups
    (the file the tests imported), tracing, output's tail."""
    options, env = TRACING[tracing]
    with pytest_site() as site, \
            tempfile.TemporaryDirectory(prefix="binary-compat-ms-") as work:
        shutil.copytree(os.path.join(source, "tests"),
                        os.path.join(work, "tests"))
        with open(os.path.join(work, "binary_compat_plugin.py"), "w") as f:
            f.write(_PYTEST_PLUGIN)
        report = os.path.join(work, "report.json")
        child_env = _clean_env({
            **env, "BINARY_COMPAT_REPORT": report,
            "PYTHONPATH": os.pathsep.join([built, work, site])})
        proc = subprocess.run(
            [python, *options, "-X", "faulthandler", "-m", "pytest", "-q",
             "-p", "no:cacheprovider", "-p", "binary_compat_plugin",
             "-rs", "tests"],
            cwd=work, env=child_env, text=True, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, timeout=600)
        if not os.path.exists(report):
            raise RuntimeError(f"pytest did not finish (status "
                               f"{proc.returncode}):\n{proc.stdout[-3000:]}")
        with open(report) as f:
            data = json.load(f)
    outcomes = list(data["outcomes"].items())
    count = {k: sum(1 for _, o in outcomes if o == k)
             for k in ("passed", "failed", "skipped")}
    return {**count,
            "speedups_passed": sum(1 for n, o in outcomes
                                   if o == "passed" and "_speedups" in n),
            "failed_ids": sorted(n for n, o in outcomes if o == "failed"),
            "speedups": data["speedups"], "tracing": data["tracing"],
            "nframe": data["nframe"], "status": proc.returncode,
            "tail": "\n".join(proc.stdout.strip().splitlines()[-5:])}


# The allocation inside the extension: _escape_inner() (C) makes the escaped
# string with PyUnicode_New(), with no frame of its own; its trace must name
# the line that called it (inner_line) and that function's caller
# (call_line): oldest first, as tracemalloc.Traceback lists frames.
_TRACEBACK_CHECK = r"""
import json, sys, tracemalloc
import markupsafe._speedups as speedups
def escape_inner(text):
    global inner_line
    inner_line = sys._getframe().f_lineno + 1
    return speedups._escape_inner(text)
text = "<&>" * 200_000
tracemalloc.start(5)
call_line = sys._getframe().f_lineno + 1
escaped = escape_inner(text)
snapshot = tracemalloc.take_snapshot()
size = sys.getsizeof(escaped)
traces = [t for t in snapshot.traces if size <= t.size < size + 64]
print(json.dumps({
    "speedups": speedups.__file__, "file": __file__,
    "expected": [[__file__, call_line], [__file__, inner_line]],
    "size": size, "traced_object": tracemalloc.get_object_traceback(
        escaped) is not None,
    "tracebacks": [[[f.filename, f.lineno] for f in t.traceback]
                   for t in traces]}))
"""


def markupsafe_traceback_check(python, built):
    """Where tracemalloc says the string allocated inside _speedups comes
    from: a dict with the tracebacks of the traces of that size
    (tracebacks) and the one expected (expected)."""
    with tempfile.TemporaryDirectory(prefix="binary-compat-tb-") as work:
        script = os.path.join(work, "escape_check.py")
        with open(script, "w") as f:
            f.write(_TRACEBACK_CHECK)
        proc = subprocess.run([python, "-X", "faulthandler", script],
                              env=_clean_env({"PYTHONPATH": built}),
                              cwd=work, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=120)
    if proc.returncode:
        raise RuntimeError(f"the traceback check failed (status "
                           f"{proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout)


# ------------------------------------------------------------------ layout

# Public structures (Include/, Include/cpython/): an extension compiled for
# stock 3.13 reads these fields directly, so size and offsets must be
# upstream's.  NAME: (C type, fields whose offsets are printed).
PUBLIC_LAYOUT = {
    "PyObject": ("PyObject", ["ob_refcnt", "ob_type"]),
    "PyVarObject": ("PyVarObject", ["ob_base", "ob_size"]),
    "PyTypeObject": ("PyTypeObject", [
        "tp_name", "tp_basicsize", "tp_itemsize", "tp_dealloc",
        "tp_vectorcall_offset", "tp_getattr", "tp_setattr", "tp_as_async",
        "tp_repr", "tp_as_number", "tp_as_sequence", "tp_as_mapping",
        "tp_hash", "tp_call", "tp_str", "tp_getattro", "tp_setattro",
        "tp_as_buffer", "tp_flags", "tp_doc", "tp_traverse", "tp_clear",
        "tp_richcompare", "tp_weaklistoffset", "tp_iter", "tp_iternext",
        "tp_methods", "tp_members", "tp_getset", "tp_base", "tp_dict",
        "tp_descr_get", "tp_descr_set", "tp_dictoffset", "tp_init",
        "tp_alloc", "tp_new", "tp_free", "tp_is_gc", "tp_bases", "tp_mro",
        "tp_cache", "tp_subclasses", "tp_weaklist", "tp_del",
        "tp_version_tag", "tp_finalize", "tp_vectorcall", "tp_watched",
        "tp_versions_used"]),
    "PyHeapTypeObject": ("PyHeapTypeObject", [
        "as_async", "as_number", "as_mapping", "as_sequence", "as_buffer",
        "ht_name", "ht_slots", "ht_qualname", "ht_cached_keys", "ht_module",
        "_ht_tpname", "_spec_cache"]),
    "PyNumberMethods": ("PyNumberMethods", ["nb_add", "nb_index",
                                            "nb_matrix_multiply"]),
    "PySequenceMethods": ("PySequenceMethods", ["sq_length", "sq_contains"]),
    "PyMappingMethods": ("PyMappingMethods", ["mp_subscript"]),
    "PyAsyncMethods": ("PyAsyncMethods", ["am_send"]),
    "PyBufferProcs": ("PyBufferProcs", ["bf_releasebuffer"]),
    "Py_buffer": ("Py_buffer", ["buf", "obj", "len", "itemsize", "ndim",
                                "format", "shape", "strides", "suboffsets",
                                "internal"]),
    "PyMethodDef": ("PyMethodDef", ["ml_name", "ml_meth", "ml_flags",
                                    "ml_doc"]),
    "PyMemberDef": ("PyMemberDef", ["name", "type", "offset", "flags",
                                    "doc"]),
    "PyGetSetDef": ("PyGetSetDef", ["name", "get", "set", "doc",
                                    "closure"]),
    "PyModuleDef_Base": ("PyModuleDef_Base", ["m_init", "m_index",
                                              "m_copy"]),
    "PyModuleDef": ("PyModuleDef", ["m_base", "m_name", "m_doc", "m_size",
                                    "m_methods", "m_slots", "m_traverse",
                                    "m_clear", "m_free"]),
    "PyModuleDef_Slot": ("PyModuleDef_Slot", ["slot", "value"]),
    "PyType_Spec": ("PyType_Spec", ["name", "basicsize", "itemsize",
                                    "flags", "slots"]),
    "PyType_Slot": ("PyType_Slot", ["slot", "pfunc"]),
    "PyStructSequence_Desc": ("PyStructSequence_Desc",
                              ["name", "doc", "fields", "n_in_sequence"]),
    "PyMemAllocatorEx": ("PyMemAllocatorEx", ["ctx", "malloc", "calloc",
                                              "realloc", "free"]),
    "PyObjectArenaAllocator": ("PyObjectArenaAllocator",
                               ["ctx", "alloc", "free"]),
    "PyLongObject": ("PyLongObject", ["long_value"]),
    "PyFloatObject": ("PyFloatObject", ["ob_fval"]),
    "PyComplexObject": ("PyComplexObject", ["cval"]),
    "PyBytesObject": ("PyBytesObject", ["ob_shash", "ob_sval"]),
    "PyByteArrayObject": ("PyByteArrayObject", ["ob_alloc", "ob_bytes",
                                                "ob_start", "ob_exports"]),
    "PyASCIIObject": ("PyASCIIObject", ["length", "hash", "state"]),
    "PyCompactUnicodeObject": ("PyCompactUnicodeObject",
                               ["utf8_length", "utf8"]),
    "PyUnicodeObject": ("PyUnicodeObject", ["data"]),
    "PyTupleObject": ("PyTupleObject", ["ob_item"]),
    "PyListObject": ("PyListObject", ["ob_item", "allocated"]),
    "PyDictObject": ("PyDictObject", ["ma_used", "ma_version_tag",
                                      "ma_keys", "ma_values"]),
    "PySetObject": ("PySetObject", ["fill", "used", "mask", "table", "hash",
                                    "finger", "smalltable", "weakreflist"]),
    "PySliceObject": ("PySliceObject", ["start", "stop", "step"]),
    "PyCellObject": ("PyCellObject", ["ob_ref"]),
    "PyFunctionObject": ("PyFunctionObject", [
        "func_globals", "func_builtins", "func_name", "func_qualname",
        "func_code", "func_defaults", "func_kwdefaults", "func_closure",
        "func_doc", "func_dict", "func_weakreflist", "func_module",
        "func_annotations", "func_typeparams", "vectorcall",
        "func_version"]),
    "PyMethodObject": ("PyMethodObject", ["im_func", "im_self",
                                          "im_weakreflist", "vectorcall"]),
    "PyCFunctionObject": ("PyCFunctionObject", ["m_ml", "m_self",
                                                "m_module", "m_weakreflist",
                                                "vectorcall"]),
    "PyCMethodObject": ("PyCMethodObject", ["mm_class"]),
    "PyCodeObject": ("PyCodeObject", [
        "co_consts", "co_names", "co_exceptiontable", "co_flags",
        "co_argcount", "co_posonlyargcount", "co_kwonlyargcount",
        "co_stacksize", "co_firstlineno", "co_nlocalsplus",
        "co_framesize", "co_nlocals", "co_ncellvars", "co_nfreevars",
        "co_version", "co_localsplusnames", "co_localspluskinds",
        "co_filename", "co_name", "co_qualname", "co_linetable",
        "co_weakreflist", "co_executors", "_co_cached",
        "_co_instrumentation_version", "_co_monitoring", "_co_firsttraceable",
        "co_extra", "co_code_adaptive"]),
    "PyBaseExceptionObject": ("PyBaseExceptionObject", [
        "dict", "args", "notes", "traceback", "context", "cause",
        "suppress_context"]),
    "PyThreadState": ("PyThreadState", [
        "prev", "next", "interp", "eval_breaker", "_status", "_whence",
        "state", "py_recursion_remaining", "py_recursion_limit",
        "c_recursion_remaining", "recursion_headroom", "tracing",
        "what_event", "current_frame", "c_profilefunc", "c_tracefunc",
        "c_profileobj", "c_traceobj", "current_exception", "exc_info",
        "dict", "gilstate_counter", "async_exc", "thread_id",
        "native_thread_id", "delete_later", "critical_section",
        "coroutine_origin_tracking_depth", "async_gen_firstiter",
        "async_gen_finalizer", "context", "context_ver", "id",
        "datastack_chunk", "datastack_top", "datastack_limit",
        "exc_state", "previous_executor", "dict_global_version"]),
    "PyConfig": ("PyConfig", ["_config_init", "isolated", "tracemalloc",
                              "perf_profiling", "module_search_paths",
                              "_is_python_build"]),
    "PyPreConfig": ("PyPreConfig", ["allocator"]),
    "PyStatus": ("PyStatus", ["_type", "func", "err_msg", "exitcode"]),
}

# Internal structures a stdlib extension module (Py_BUILD_CORE_MODULE)
# reaches through macros: _Py_ID() and _Py_SINGLETON() read
# _PyRuntime.static_objects, _PyInterpreterState_GET() fields of the
# interpreter.  The fork may change these only where no such macro reads.
INTERNAL_LAYOUT = {
    "_PyRuntimeState": ("_PyRuntimeState", [
        "tracemalloc", "ref_tracer", "stoptheworld", "object_state",
        "float_state", "unicode_state", "types", "cached_objects",
        "static_objects", "_main_interpreter"]),
    "struct _tracemalloc_runtime_state": (
        "struct _tracemalloc_runtime_state", []),
    "PyInterpreterState": ("PyInterpreterState", [
        "ceval", "threads", "runtime", "gc", "sysdict", "builtins",
        "imports", "obmalloc", "types", "cached_objects", "static_objects",
        "_initial_thread"]),
    "_PyThreadStateImpl": ("_PyThreadStateImpl", []),
    "_PyInterpreterFrame": ("_PyInterpreterFrame", [
        "f_executable", "previous", "f_funcobj", "f_globals", "f_builtins",
        "f_locals", "frame_obj", "instr_ptr", "stacktop",
        "return_offset", "owner", "localsplus"]),
    "PyFrameObject": ("PyFrameObject", ["f_back", "f_frame", "f_trace",
                                        "f_lineno", "f_trace_lines",
                                        "f_trace_opcodes", "f_extra_locals",
                                        "f_locals_cache", "_f_frame_data"]),
    "PyGenObject": ("PyGenObject", ["gi_weakreflist", "gi_name",
                                    "gi_qualname", "gi_exc_state",
                                    "gi_origin_or_finalizer",
                                    "gi_hooks_inited",
                                    "gi_closed", "gi_running_async",
                                    "gi_frame_state", "gi_iframe"]),
}


def _layout_program(layouts):
    lines = ["#include <stddef.h>", "#include <stdio.h>"]
    lines.append("int main(void) {")
    for name, (ctype, fields) in layouts.items():
        lines.append(f'    printf("%s size %zu\\n", "{name}", '
                     f'sizeof({ctype}));')
        for field in fields:
            lines.append(f'    printf("%s.%s %zu\\n", "{name}", "{field}", '
                         f'offsetof({ctype}, {field}));')
    lines.append("    return 0;")
    lines.append("}")
    return "\n".join(lines) + "\n"


_LAYOUT_HEADER = {
    "public": '#include "Python.h"\n#include "frameobject.h"\n',
    "internal": textwrap.dedent("""\
        #define Py_BUILD_CORE 1
        #include "Python.h"
        #include "pycore_runtime.h"
        #include "pycore_interp.h"
        #include "pycore_frame.h"
        #include "pycore_tstate.h"
        #include "pycore_genobject.h"
        """),
}


def include_dirs(python):
    """The -I options of the build tree of *python* (source Include/, and
    the build directory's pyconfig.h)."""
    srcdir, builddir = json.loads(_python_output(
        python, "import json, sysconfig; print(json.dumps(["
        "sysconfig.get_config_var('srcdir'), "
        "sysconfig.get_config_var('abs_builddir')]))"))
    return [f"-I{srcdir}/Include", f"-I{srcdir}/Include/internal",
            f"-I{builddir}"]


def measure_layouts(python, kind):
    """{'Struct size': n, 'Struct.field': offset} compiled against the
    headers of *python*'s build tree."""
    layouts = PUBLIC_LAYOUT if kind == "public" else INTERNAL_LAYOUT
    with tempfile.TemporaryDirectory(prefix="binary-compat-layout-") as d:
        source = os.path.join(d, "layout.c")
        with open(source, "w") as f:
            f.write(_LAYOUT_HEADER[kind] + _layout_program(layouts))
        exe = os.path.join(d, "layout")
        proc = subprocess.run(["gcc", *include_dirs(python), source, "-o",
                               exe], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        if proc.returncode:
            raise RuntimeError(f"the layout program does not compile "
                               f"against {python}'s headers:\n{proc.stdout}")
        out = subprocess.run([exe], stdout=subprocess.PIPE, text=True,
                             check=True).stdout
    return {k: int(v) for k, v in (line.rsplit(" ", 1)
                                   for line in out.splitlines())}


def compare_layouts(fork, pristine, kind):
    """[(item, pristine's value, fork's value)] for every size or offset
    that differs."""
    if not shutil.which("gcc"):
        raise Unavailable("gcc is not installed")
    mine = measure_layouts(fork, kind)
    theirs = measure_layouts(pristine, kind)
    return [(k, theirs[k], mine[k]) for k in theirs if theirs[k] != mine[k]]


# The internal structures whose changes the fork makes on purpose, and why
# no extension module built for stock 3.13 notices them.
INTERNAL_CHANGES = {
    "_PyInterpreterFrame": "patch 0002 appends the call-context cache "
    "before localsplus; frames live in the thread's data stack and in "
    "generators, sized by the interpreter, and of pristine's modules only "
    "_testinternalcapi reads localsplus",
}


def layout_findings(diffs):
    """The differences in *diffs* (of internal structures) that no entry of
    INTERNAL_CHANGES explains: fields that stdlib extension modules reach
    through macros moved."""
    return [(item, theirs, mine) for item, theirs, mine in diffs
            if item.split()[0].split(".")[0] not in INTERNAL_CHANGES]


# --------------------------------------------------------------------- CLI

def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fork", default=default_fork())
    parser.add_argument("--pristine")
    parser.add_argument("--check", action="append",
                        choices=["stdlib", "markupsafe", "layout"])
    parser.add_argument("--suite", action="append",
                        choices=sorted(STDLIB_SUITES))
    parser.add_argument("--tracing", action="append", choices=list(TRACING))
    args = parser.parse_args(argv)
    checks = args.check or ["layout", "stdlib", "markupsafe"]
    try:
        pristine = args.pristine or find_pristine()
    except Unavailable as exc:
        print(f"binary_compat: cannot run: {exc}")
        return 2
    print(f"fork:     {args.fork}\npristine: {pristine}")
    findings = []
    if "layout" in checks:
        for kind in ("public", "internal"):
            diffs = compare_layouts(args.fork, pristine, kind)
            print(f"\nlayout of {kind} structures: "
                  f"{len(diffs)} sizes/offsets differ (pristine -> fork)")
            for item, theirs, mine in diffs:
                print(f"  {item}: {theirs} -> {mine}")
            if kind == "public" and diffs:
                findings.append("public structures differ in layout")
            elif kind == "internal" and layout_findings(diffs):
                findings.append(
                    "internal fields that stdlib extension modules reach "
                    "through macros moved: " + ", ".join(
                        item for item, _, _ in layout_findings(diffs)))
    if "stdlib" in checks:
        print(f"\n{'suite':12} {'tracing':22} {'fork run/pass/skip':>20} "
              f"{'pristine run/pass/skip':>24}")
        for name in args.suite or STDLIB_SUITES:
            for tracing in args.tracing or TRACING:
                mine, ref, found = compare_stdlib_suite(args.fork, pristine,
                                                        name, tracing)

                def cell(r):
                    passed = r["run"] - len(r["failed"]) - r["skipped"]
                    if r.get("crashed"):
                        return f"CRASH after {r['run']}"
                    return f"{r['run']}/{passed}/{r['skipped']}"
                print(f"{name:12} {tracing:22} {cell(mine):>20} "
                      f"{cell(ref):>24}", flush=True)
                if mine.get("loaded"):
                    print(f"{'':12} loaded: " + ", ".join(
                        f"{m} <- {p}" for m, p in mine["loaded"].items()))
                for finding in found:
                    print(f"  FINDING {finding}")
                findings += found
    if "markupsafe" in checks:
        try:
            source = fetch_markupsafe()
        except Unavailable as exc:
            print(f"\nmarkupsafe: cannot run: {exc}")
        else:
            built = build_markupsafe(pristine, source)
            print(f"\nmarkupsafe {os.path.basename(source)} built with "
                  f"pristine in {built}")
            for python in (args.fork, pristine):
                r = run_markupsafe_tests(python, built, source)
                print(f"  tests on {python} [PYTHONTRACEMALLOC=25]: "
                      f"{r['passed']} passed ({r['speedups_passed']} on "
                      f"_speedups), {r['failed']} failed, {r['skipped']} "
                      f"skipped; _speedups: {r['speedups']}")
                if python == args.fork and (r["failed"] or r["status"]):
                    findings.append(f"markupsafe's tests fail on the fork: "
                                    f"{r['failed_ids']}")
            check = markupsafe_traceback_check(args.fork, built)
            print(f"  the string _speedups allocated, traced on the fork: "
                  f"{check['tracebacks']}")
    print(f"\n{len(findings)} findings")
    for finding in findings:
        print(f"  {finding}")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
