"""Native memory (issue 32): what code outside Python's allocator API
allocates, traced in tracemalloc.NATIVE_DOMAIN at the Python line that
caused it.

Each scenario runs in a child interpreter of its own (native tracing
interposes the process's malloc(), and some scenarios need -X options,
PYTHONMALLOC or fork()).  The C and C++ extensions are compiled here with
the build's own compiler and flags (sysconfig); the tests that need them
skip without a compiler.
"""

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import unittest

from test import support
from test.support.script_helper import assert_python_ok, assert_python_failure

import tracemalloc

NATIVE_DOMAIN = tracemalloc.NATIVE_DOMAIN

# A sanitizer build (make sanitizer-test): its runtime replaces C++'s
# operator new (not through malloc()) and must come first in the library
# list (no LD_PRELOAD allocator).
SANITIZED = any(
    flag in (sysconfig.get_config_var(var) or "")
    for var in ("CONFIG_ARGS", "CFLAGS", "PY_CFLAGS")
    for flag in ("sanitizer", "-fsanitize="))


def interpreter_object():
    """The file that defines the interposers: the executable, or a shared
    libpython (--enable-shared) as this process mapped it."""
    if sysconfig.get_config_var("Py_ENABLE_SHARED"):
        library = sysconfig.get_config_var("INSTSONAME") or "libpython"
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split(None, 5)[-1].strip()
                if os.path.basename(path) == library:
                    return os.path.realpath(path)
        raise RuntimeError(f"{library} is not mapped in this process")
    return os.path.realpath(sys.executable)


INTERPRETER_OBJECT = interpreter_object()


def allocator_known(name):
    """Does this build know PYTHONMALLOC=NAME (a sanitizer build has no
    pymalloc)?"""
    proc = subprocess.run([sys.executable, "-c", "pass"],
                          env=dict(os.environ, PYTHONMALLOC=name),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return proc.returncode == 0


# The C extension: LEAK_LINE is the malloc() whose blocks the tests look
# for (a known line of C, called from a known line of Python); the
# threads never hold the GIL and never had a thread state.
C_EXTENSION = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KEPT 4096
static void *kept[MAX_KEPT];
static int nkept;

static PyObject *
leak(PyObject *self, PyObject *arg)
{
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n < 0 && PyErr_Occurred()) {
        return NULL;
    }
    if (nkept == MAX_KEPT) {
        return PyErr_NoMemory();
    }
    void *p = malloc((size_t)n);    /* LEAK_LINE */
    if (p == NULL) {
        return PyErr_NoMemory();
    }
    memset(p, 1, (size_t)n);
    kept[nkept++] = p;
    return PyLong_FromVoidPtr(p);
}

static PyObject *
free_all(PyObject *self, PyObject *unused)
{
    while (nkept > 0) {
        free(kept[--nkept]);
    }
    Py_RETURN_NONE;
}

/* Threads that never hold the GIL: each makes ITERATIONS rounds of
   malloc/realloc/free, and keeps KEEP blocks of 1000 bytes. */
#define MAX_THREADS 16
static pthread_t threads[MAX_THREADS];
static int nthreads, iterations, keep;
static void *thread_kept[MAX_THREADS][64];

static void *
thread_main(void *arg)
{
    long index = (long)arg;
    for (int i = 0; i < iterations; i++) {
        void *p = malloc(16 + (size_t)(i % 700));
        p = realloc(p, 2000 + (size_t)(i % 300));
        void *q = calloc(3, 100);
        free(p);
        free(q);
    }
    for (int i = 0; i < keep; i++) {
        thread_kept[index][i] = malloc(1000);
    }
    return NULL;
}

static PyObject *
start_threads(PyObject *self, PyObject *args)
{
    if (!PyArg_ParseTuple(args, "iii", &nthreads, &iterations, &keep)) {
        return NULL;
    }
    if (nthreads > MAX_THREADS || keep > 64) {
        PyErr_SetString(PyExc_ValueError, "too many");
        return NULL;
    }
    for (long i = 0; i < nthreads; i++) {
        pthread_create(&threads[i], NULL, thread_main, (void *)i);
    }
    Py_RETURN_NONE;
}

static PyObject *
join_threads(PyObject *self, PyObject *unused)
{
    Py_BEGIN_ALLOW_THREADS
    for (int i = 0; i < nthreads; i++) {
        pthread_join(threads[i], NULL);
    }
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *
free_thread_blocks(PyObject *self, PyObject *unused)
{
    for (int i = 0; i < nthreads; i++) {
        for (int j = 0; j < keep; j++) {
            free(thread_kept[i][j]);
        }
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"leak", leak, METH_O, NULL},
    {"free_all", free_all, METH_NOARGS, NULL},
    {"start_threads", start_threads, METH_VARARGS, NULL},
    {"join_threads", join_threads, METH_NOARGS, NULL},
    {"free_thread_blocks", free_thread_blocks, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native_ext", NULL, -1, methods,
};

PyMODINIT_FUNC
PyInit__native_ext(void)
{
    return PyModule_Create(&module);
}
"""

# The C++ extension: operator new (the C++ runtime's, which calls
# malloc()) at a known line.
CXX_EXTENSION = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <vector>

static std::vector<std::vector<char> *> kept;

static PyObject *
leak(PyObject *self, PyObject *arg)
{
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n < 0 && PyErr_Occurred()) {
        return NULL;
    }
    kept.push_back(new std::vector<char>((size_t)n, 1));   /* LEAK_LINE */
    Py_RETURN_NONE;
}

static PyObject *
free_all(PyObject *self, PyObject *unused)
{
    for (auto *v : kept) {
        delete v;
    }
    kept.clear();
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"leak", leak, METH_O, NULL},
    {"free_all", free_all, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native_cxx", NULL, -1, methods,
};

PyMODINIT_FUNC
PyInit__native_cxx(void)
{
    return PyModule_Create(&module);
}
"""


def _compiler(var, fallbacks):
    cc = (sysconfig.get_config_var(var) or "").split()
    if cc and shutil.which(cc[0]):
        return cc[0]
    for name in fallbacks:
        if shutil.which(name):
            return name
    return None


def build_extension(tmpdir, name, source, cxx=False):
    """Compile SOURCE as extension module NAME into TMPDIR with the
    build's flags; return None (and why) when it cannot be built."""
    cc = (_compiler("CXX", ["g++", "c++", "clang++"]) if cxx
          else _compiler("CC", ["cc", "gcc", "clang"]))
    if cc is None:
        return None, "no C%s compiler" % ("++" if cxx else "")
    includes = [sysconfig.get_paths()["include"],
                os.path.dirname(sysconfig.get_config_h_filename())]
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    src = os.path.join(tmpdir, name + (".cpp" if cxx else ".c"))
    with open(src, "w") as f:
        f.write(source)
    flags = (sysconfig.get_config_var("CFLAGS") or "").split()
    # The build's CFLAGS are C's; a C++ compiler warns about some.
    flags = [f for f in flags if not (cxx and f.startswith("-std="))]
    cmd = ([cc] + flags + ["-fPIC", "-shared", "-pthread"]
           + ["-I" + d for d in includes]
           + [src, "-o", os.path.join(tmpdir, name + suffix)])
    proc = subprocess.run(cmd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        return None, "cannot build %s: %s" % (name, proc.stdout[-2000:])
    return tmpdir, None


def leak_line(source):
    return next(i for i, line in enumerate(source.splitlines(), 1)
                if "LEAK_LINE" in line)


PRELUDE = """
import _tracemalloc, ctypes, gc, os, sys, tracemalloc
NATIVE = tracemalloc.NATIVE_DOMAIN
NATIVE_ONLY = [tracemalloc.DomainFilter(True, NATIVE)]
libc = ctypes.CDLL(None)     # the process's malloc: the interposers
vp, sz = ctypes.c_void_p, ctypes.c_size_t
libc.malloc.restype, libc.malloc.argtypes = vp, [sz]
libc.calloc.restype, libc.calloc.argtypes = vp, [sz, sz]
libc.realloc.restype, libc.realloc.argtypes = vp, [vp, sz]
libc.reallocarray.restype, libc.reallocarray.argtypes = vp, [vp, sz, sz]
libc.free.restype, libc.free.argtypes = None, [vp]
libc.aligned_alloc.restype, libc.aligned_alloc.argtypes = vp, [sz, sz]
libc.memalign.restype, libc.memalign.argtypes = vp, [sz, sz]
libc.valloc.restype, libc.valloc.argtypes = vp, [sz]
libc.pvalloc.restype, libc.pvalloc.argtypes = vp, [sz]
libc.posix_memalign.restype = ctypes.c_int
libc.posix_memalign.argtypes = [ctypes.POINTER(vp), sz, sz]
libc.mmap.restype = vp
libc.mmap.argtypes = [vp, sz, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                      ctypes.c_long]
libc.munmap.restype, libc.munmap.argtypes = ctypes.c_int, [vp, sz]
libc.mremap.restype = vp
libc.mremap.argtypes = [vp, sz, sz, ctypes.c_int]
import mmap as _mmap
PROT_RW = _mmap.PROT_READ | _mmap.PROT_WRITE
MAP_ANON_PRIVATE = _mmap.MAP_ANONYMOUS | _mmap.MAP_PRIVATE
MAP_FAILED = ctypes.c_void_p(-1).value

def here():
    return sys._getframe(1).f_lineno

def native_lines(snapshot=None):
    # {lineno: (size, count)} of the native traces of this script
    snapshot = snapshot or tracemalloc.take_snapshot()
    out = {}
    for st in snapshot.filter_traces(NATIVE_ONLY).statistics("lineno"):
        frame = st.traceback[0]
        if frame.filename == "<string>":
            out[frame.lineno] = (st.size, st.count)
    return out
"""


def run(body, *args, env=None, python_args=(), timeout=None):
    """Run PRELUDE + BODY in a child (exit status 0 expected, within
    TIMEOUT: a deadlock fails instead of hanging); return its stdout."""
    code = PRELUDE + textwrap.dedent(body)
    child_env = dict(os.environ)
    child_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-X", "faulthandler", *python_args, "-c", code,
         *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env,
        timeout=timeout or support.LONG_TIMEOUT)
    if proc.returncode != 0:
        raise AssertionError("child exited with %d\nstdout:\n%s\nstderr:\n%s"
                             % (proc.returncode, proc.stdout.decode()[-3000:],
                                proc.stderr.decode()[-3000:]))
    return proc.stdout.decode()


class NativeApiTest(unittest.TestCase):

    def test_start_allocates_nothing_native(self):
        # start() checks that a malloc() reaches the interposers: its own
        # call, never traced (review s41b).
        out = run("""
            tracemalloc.start(1, allocations=True)
            tracemalloc.start(1, native=True, allocations=True)
            snap = tracemalloc.take_snapshot(allocated=True)
            print(len(snap.filter_traces(NATIVE_ONLY).traces),
                  tracemalloc.get_native_traced_memory())
        """)
        self.assertEqual(out.split(), ["0", "(0,", "0)"])

    def test_constant_and_off(self):
        self.assertEqual(NATIVE_DOMAIN, 0x4e6174)
        out = run("""
            print(tracemalloc.is_tracing_native(),
                  tracemalloc.get_native_traced_memory())
            tracemalloc.start(3)
            print(tracemalloc.is_tracing(), tracemalloc.is_tracing_native())
            p = libc.malloc(100000)
            snap = tracemalloc.take_snapshot()
            print(len(snap.filter_traces(NATIVE_ONLY).traces),
                  tracemalloc.get_native_traced_memory())
            libc.free(p)
            tracemalloc.start(native=True)     # tracing already: native on
            print(tracemalloc.is_tracing_native(),
                  tracemalloc.get_traceback_limit())
            try:
                tracemalloc.start(native=False)
            except RuntimeError as exc:
                print("refused")
            tracemalloc.stop()
            print(tracemalloc.is_tracing(), tracemalloc.is_tracing_native(),
                  tracemalloc.get_native_traced_memory())
            tracemalloc.start(2, native=True)
            print(tracemalloc.is_tracing(), tracemalloc.is_tracing_native())
        """)
        self.assertEqual(out.split("\n")[:6], [
            "False (0, 0)", "True False", "0 (0, 0)", "True 3", "refused",
            "False False (0, 0)"])
        self.assertEqual(out.split("\n")[6], "True True")

    def test_startup_options(self):
        code = ("import tracemalloc; print(tracemalloc.is_tracing(), "
                "tracemalloc.is_tracing_native(), "
                "tracemalloc.get_traceback_limit())")
        for args, env, expected in [
                (["-X", "tracemalloc_native"], {}, "True True 1"),
                (["-X", "tracemalloc_native=1", "-X", "tracemalloc=7"], {},
                 "True True 7"),
                (["-X", "tracemalloc_native=0"], {}, "False False 1"),
                ([], {"PYTHONTRACEMALLOCNATIVE": "1"}, "True True 1"),
                (["-E"], {"PYTHONTRACEMALLOCNATIVE": "1"}, "False False 1"),
                ([], {"PYTHONTRACEMALLOCNATIVE": "0"}, "False False 1"),
                (["-X", "tracemalloc_sample=64KiB", "-X",
                  "tracemalloc_native"], {}, "True True 1")]:
            with self.subTest(args=args, env=env):
                rc, out, err = assert_python_ok(*args, "-c", code,
                                                __isolated=False, **env)
                self.assertEqual(out.decode().strip(), expected)
        rc, out, err = assert_python_failure("-X", "tracemalloc_native=yes",
                                             "-c", "pass")
        self.assertIn(b"-X tracemalloc_native=yes: expected 1, 0, frames or frames-all", err)

    def test_interposers_are_exported(self):
        # The executable (or a shared libpython) defines the family; the C
        # library's own calls (and every shared object's) resolve to its
        # definitions.
        nm = shutil.which("nm")
        if nm is None:
            self.skipTest("no nm")
        proc = subprocess.run([nm, "-D", "--defined-only",
                               INTERPRETER_OBJECT],
                              stdout=subprocess.PIPE, text=True)
        defined = {line.split()[-1] for line in proc.stdout.splitlines()}
        for name in ("malloc", "calloc", "realloc", "reallocarray", "free",
                     "posix_memalign", "aligned_alloc", "memalign",
                     "valloc", "pvalloc", "mmap", "mmap64", "munmap",
                     "mremap"):
            self.assertIn(name, defined)


    def test_libraries_bind_to_the_interposers(self):
        # The dynamic linker binds libsqlite3's and the C library's own
        # malloc() to the executable's definition, or a shared libpython's
        # (LD_DEBUG=bindings).
        try:
            import _sqlite3
        except ImportError:
            self.skipTest("no _sqlite3")
        env = dict(os.environ, LD_DEBUG="bindings")
        proc = subprocess.run([sys.executable, "-c", "import _sqlite3"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env)
        exe = INTERPRETER_OBJECT
        bound = set()
        for line in proc.stderr.splitlines():
            if "binding file" not in line or " to " not in line:
                continue
            src, _, rest = line.partition("binding file ")[2].partition(" to ")
            dst = rest.split(" [")[0]
            for name in ("malloc", "free", "realloc", "calloc"):
                if f"`{name}'" in rest and os.path.realpath(dst) == exe:
                    bound.add((os.path.basename(src.split(" [")[0]), name))
        libsqlite = {(lib, name) for lib, name in bound
                     if lib.startswith("libsqlite3")}
        if not any(lib.startswith("libsqlite3") for lib, _ in bound) \
                and "libsqlite3" not in proc.stderr:
            self.skipTest("_sqlite3 is not linked to a shared libsqlite3")
        self.assertIn(("libsqlite3.so.0", "malloc"), libsqlite, bound)
        self.assertIn(("libsqlite3.so.0", "free"), libsqlite, bound)
        self.assertIn(("libc.so.6", "malloc"), bound)


class NativeCallsTest(unittest.TestCase):
    """ctypes calls of the process's allocator family, at known lines."""

    def test_family_traced_at_line(self):
        out = run("""
            tracemalloc.start(5, native=True)
            ptrs = {}
            ptrs[here()] = (libc.malloc(100001), 100001)
            ptrs[here()] = (libc.calloc(7, 1001), 7007)
            p = libc.malloc(5000)
            ptrs[here()] = (libc.realloc(p, 300003), 300003)
            q = libc.malloc(10)
            ptrs[here()] = (libc.reallocarray(q, 3, 10007), 30021)
            ptrs[here()] = (libc.aligned_alloc(4096, 8192), 8192)
            ptrs[here()] = (libc.memalign(256, 2560), 2560)
            ptrs[here()] = (libc.valloc(12345), 12345)
            ptrs[here()] = (libc.pvalloc(999), 999)
            out = ctypes.c_void_p()
            assert libc.posix_memalign(ctypes.byref(out), 64, 6400) == 0
            ptrs[here() - 1] = (out.value, 6400)
            m = libc.mmap(None, 1 << 20, PROT_RW, MAP_ANON_PRIVATE, -1, 0)
            ptrs[here() - 1] = (m, 1 << 20)
            lines = native_lines()
            for line, (ptr, size) in sorted(ptrs.items()):
                assert ptr not in (None, MAP_FAILED), line
                assert lines.get(line) == (size, 1), (line, lines.get(line),
                                                      size)
            total = sum(size for ptr, size in ptrs.values())
            cur, peak = tracemalloc.get_native_traced_memory()
            assert cur >= total, (cur, total)
            assert tracemalloc.get_traced_memory()[0] >= cur
            for line, (ptr, size) in ptrs.items():
                if line != max(ptrs):
                    libc.free(ptr)
            libc.munmap(m, 1 << 20)
            lines = native_lines()
            assert not set(lines) & set(ptrs), lines
            print("ok", tracemalloc.get_native_traced_memory()[0] < cur)
        """)
        self.assertEqual(out.strip(), "ok True")

    def test_mmap_munmap_mremap(self):
        out = run("""
            tracemalloc.start(5, native=True)
            page = _mmap.PAGESIZE
            m = libc.mmap(None, 16 * page, PROT_RW, MAP_ANON_PRIVATE, -1, 0)
            line_map = here() - 1
            assert native_lines()[line_map] == (16 * page, 1)
            # Unmapping the first pages moves the trace past them.
            assert libc.munmap(m, 4 * page) == 0
            assert native_lines()[line_map] == (12 * page, 1)
            # mremap() moves the trace to the current line.
            m2 = libc.mremap(m + 4 * page, 12 * page, 64 * page,
                             _mmap.MREMAP_MAYMOVE if hasattr(_mmap,
                             'MREMAP_MAYMOVE') else 1)
            line_remap = here() - 3
            assert m2 != MAP_FAILED
            lines = native_lines()
            assert line_map not in lines, lines
            assert lines[line_remap] == (64 * page, 1), lines
            assert libc.munmap(m2, 64 * page) == 0
            assert line_remap not in native_lines()
            # File mappings are not native allocations.
            with open(sys.executable, "rb") as f:
                fm = _mmap.mmap(f.fileno(), 0, prot=_mmap.PROT_READ)
            assert not native_lines(), native_lines()
            fm.close()
            # Python's mmap module, anonymous: traced at the caller's line.
            am = _mmap.mmap(-1, 1 << 20)
            line_anon = here() - 1
            assert native_lines()[line_anon] == (1 << 20, 1)
            am.close()
            assert not native_lines()
            print("ok")
        """)
        self.assertEqual(out.strip(), "ok")

    def test_off_untraced(self):
        # Native tracing off: nothing native is traced, and the Python
        # domains are as before.
        out = run("""
            tracemalloc.start(5)
            before = tracemalloc.get_traced_memory()[0]
            p = libc.malloc(1 << 20)
            m = libc.mmap(None, 1 << 20, PROT_RW, MAP_ANON_PRIVATE, -1, 0)
            after = tracemalloc.get_traced_memory()[0]
            snap = tracemalloc.take_snapshot()
            print(len(snap.filter_traces(NATIVE_ONLY).traces),
                  after - before < 1 << 16,
                  tracemalloc.get_native_traced_memory())
            libc.free(p)
            libc.munmap(m, 1 << 20)
        """)
        self.assertEqual(out.strip(), "0 True (0, 0)")


class CountedOnceTest(unittest.TestCase):
    """Python's own memory is never counted again as native."""

    BODY = """
        tracemalloc.start(5, native=True)
        PyMem_RawMalloc = ctypes.pythonapi.PyMem_RawMalloc
        PyMem_RawMalloc.restype, PyMem_RawMalloc.argtypes = vp, [sz]
        PyMem_RawFree = ctypes.pythonapi.PyMem_RawFree
        PyMem_RawFree.restype, PyMem_RawFree.argtypes = None, [vp]
        n0 = tracemalloc.get_native_traced_memory()[0]
        t0 = tracemalloc.get_traced_memory()[0]
        raw = PyMem_RawMalloc(3 << 20)
        raw_line = here() - 1
        keep = [b"x" * 1000 for _ in range(5000)]
        big = bytearray(8 << 20)
        strings = [str(i) * 20 for i in range(50000)]
        n1 = tracemalloc.get_native_traced_memory()[0]
        t1 = tracemalloc.get_traced_memory()[0]
        snap = tracemalloc.take_snapshot()
        raw_trace = [t for t in snap.traces
                     if t.traceback[0].lineno == raw_line
                     and t.traceback[0].filename == "<string>"
                     and t.size == 3 << 20]
        assert [t.domain for t in raw_trace] == [0], raw_trace
        assert n1 == n0, (n0, n1)
        assert t1 - t0 > (3 << 20) + (8 << 20) + 5000 * 1000, (t0, t1)
        PyMem_RawFree(raw)
        # A thread's Python allocations (and its thread state) are not
        # native either.
        import threading
        def work():
            global keep2
            keep2 = [bytes(2000) for _ in range(1000)]
        th = threading.Thread(target=work)
        th.start(); th.join()
        n2 = tracemalloc.get_native_traced_memory()[0]
        assert n2 - n1 < 4096, (n1, n2)
        # Snapshots and statistics: the engine's and the module's own
        # memory is not native.
        for _ in range(10):
            s = tracemalloc.take_snapshot()
            s.statistics("traceback")
            s.compare_to(snap, "lineno")
        del s
        n3 = tracemalloc.get_native_traced_memory()[0]
        assert n3 == n2, (n2, n3)
        print("ok")
    """

    def test_counted_once(self):
        self.assertEqual(run(self.BODY).strip(), "ok")

    def test_counted_once_allocators(self):
        # PYTHONMALLOC=malloc sends the mem and obj domains to the raw
        # allocator (malloc()), mimalloc maps its own segments.
        allocators = ["pymalloc", "malloc", "debug", "malloc_debug"]
        if sys.version_info >= (3, 13):
            allocators += ["mimalloc", "mimalloc_debug"]   # 3.13's own
        for allocator in allocators:
            if not allocator_known(allocator):
                continue
            with self.subTest(allocator=allocator):
                env = {"PYTHONMALLOC": allocator}
                self.assertEqual(run(self.BODY, env=env).strip(), "ok")

    def test_python_domain_unchanged(self):
        # The same deterministic allocations, traced with and without
        # native tracing, give the same Python-domain traces.
        out = run("""
            def work():
                return [bytes(700 + i % 50) for i in range(3000)]  # line A

            def measure(native):
                tracemalloc.start(5, native=native)
                data = work()
                snap = tracemalloc.take_snapshot()
                stats = snap.filter_traces(
                    [tracemalloc.DomainFilter(True, 0),
                     tracemalloc.Filter(True, "<string>")]
                ).statistics("lineno")
                tracemalloc.stop()
                return [(s.traceback[0].lineno, s.size, s.count)
                        for s in stats
                        if s.traceback[0].filename == "<string>"]
            a = measure(False)
            b = measure(True)
            c = measure(False)
            assert a == b == c, (a, b, c)
            assert a and a[0][2] >= 3000, a
            print("ok")
        """)
        self.assertEqual(out.strip(), "ok")

    def test_tracked_domain_wins(self):
        # A block its owner reports with PyTraceMalloc_Track() (numpy's
        # data buffers) is counted in the owner's domain, not twice.
        out = run("""
            tracemalloc.start(5, native=True)
            track = ctypes.pythonapi.PyTraceMalloc_Track
            track.restype = ctypes.c_int
            track.argtypes = [ctypes.c_uint, ctypes.c_size_t, sz]
            untrack = ctypes.pythonapi.PyTraceMalloc_Untrack
            untrack.restype = ctypes.c_int
            untrack.argtypes = [ctypes.c_uint, ctypes.c_size_t]
            p = libc.malloc(50000)
            line = here() - 1
            assert native_lines()[line] == (50000, 1)
            assert track(389047, p, 50000) == 0
            snap = tracemalloc.take_snapshot()
            doms = sorted(t.domain for t in snap.traces
                          if t.traceback[0].filename == "<string>"
                          and t.size == 50000)
            assert doms == [389047], doms
            assert untrack(389047, p) == 0
            libc.free(p)
            print("ok", tracemalloc.get_native_traced_memory()[0] < 50000)
        """)
        self.assertEqual(out.strip(), "ok True")


class NativeTallyFuzzTest(unittest.TestCase):
    """Random programs of the allocator family's calls (fixed seeds), each
    call on a line of its own, checked after every step against the
    program's own tally of its live native blocks per line: the native
    domain must hold exactly those, with exactly their sizes, also across
    clear_traces(), reallocs that move or fail, mappings unmapped from
    their start, and Python-domain and raw-domain allocations in between
    (which must never show as native)."""

    SEEDS = range(40)
    STEPS = 200

    @staticmethod
    def program(seed, steps):
        import random
        rnd = random.Random(seed)
        sizes = [0, 1, 8, 24, 100, 512, 4000, 65536, 300000]
        lines = []
        for _ in range(steps):
            k = rnd.random()
            size = rnd.choice(sizes) + rnd.randrange(0, 64)
            if k < 0.25:
                lines.append(f"note(libc.malloc({size}), {size})")
            elif k < 0.32:
                n = rnd.randrange(1, 9)
                lines.append(f"note(libc.calloc({n}, {size}), {n * size})")
            elif k < 0.45:
                lines.append(f"resize({size}, libc.realloc(*pick({size})))")
            elif k < 0.50:
                lines.append(f"note(libc.aligned_alloc(64, {size * 64}), "
                             f"{size * 64})")
            elif k < 0.54:
                lines.append("o = vp(); assert libc.posix_memalign("
                             f"ctypes.byref(o), 256, {size}) == 0; "
                             f"note(o.value, {size})")
            elif k < 0.60:
                pages = rnd.randrange(1, 40)
                lines.append(f"mapped(libc.mmap(None, {pages} * PAGE, "
                             f"PROT_RW, MAP_ANON_PRIVATE, -1, 0), {pages})")
            elif k < 0.66:
                lines.append("unmap_some()")
            elif k < 0.86:
                lines.append("release(libc.free)")
            elif k < 0.90:
                lines.append(f"py_blocks.append(bytes({size}))")
            elif k < 0.94:
                lines.append(f"raw_blocks.append(raw_malloc({size} + 1))")
            elif k < 0.96:
                lines.append("tracemalloc.clear_traces(); forget()")
            else:
                lines.append(f"resize(0, libc.realloc(*pick(0)))")
        return lines

    DRIVER = """
        import random
        rnd = random.Random(SEED)
        PAGE = _mmap.PAGESIZE
        raw_malloc = ctypes.pythonapi.PyMem_RawMalloc
        raw_malloc.restype, raw_malloc.argtypes = vp, [sz]
        live = {}          # ptr -> (line, size, traced, kind)
        py_blocks, raw_blocks = [], []
        def caller():
            return sys._getframe(2).f_lineno
        def note(ptr, size, kind="heap"):
            assert ptr not in (None, MAP_FAILED)
            live[ptr] = (caller(), size, True, kind)
        def mapped(ptr, pages):
            assert ptr not in (None, MAP_FAILED)
            live[ptr] = (caller(), pages * PAGE, True, "map")
        heap = lambda: sorted(p for p, v in live.items() if v[3] == "heap")
        last_pick = [None]
        def pick(size):
            ptrs = heap()
            ptr = rnd.choice(ptrs) if ptrs and rnd.random() < 0.9 else None
            last_pick[0] = ptr
            return (ptr, size)
        def resize(size, ptr2):
            old = last_pick[0]
            if old is not None and (ptr2 is not None or size == 0):
                del live[old]          # moved, or freed by realloc(p, 0)
            if ptr2 is not None:
                live[ptr2] = (caller(), size, True, "heap")
        def release(free):
            ptrs = heap()
            if ptrs:
                ptr = rnd.choice(ptrs)
                del live[ptr]
                free(ptr)
        def unmap_some():
            maps = sorted(p for p, v in live.items() if v[3] == "map")
            if not maps:
                return
            ptr = rnd.choice(maps)
            line, size, traced, kind = live.pop(ptr)
            first = rnd.choice([size, PAGE]) if size > PAGE else size
            assert libc.munmap(ptr, first) == 0
            if first < size:       # the rest's trace moves past the hole
                live[ptr + first] = (line, size - first, traced, "map")
        def forget():
            for p, v in list(live.items()):
                live[p] = (v[0], v[1], False, v[3])
        def check(step):
            want = {}
            for line, size, traced, kind in live.values():
                if traced:
                    s, c = want.get(line, (0, 0))
                    want[line] = (s + size, c + 1)
            got = native_lines()
            assert got == want, (step, sorted(set(got.items()) ^ set(want.items())))
        tracemalloc.start(3, native=True)
    """

    def test_tally(self):
        for seed in self.SEEDS:
            with self.subTest(seed=seed):
                steps = self.program(seed, self.STEPS)
                body = textwrap.dedent(self.DRIVER).replace("SEED",
                                                            str(seed))
                for i, line in enumerate(steps):
                    body += f"{line}\ncheck({i})\n"
                body += ("for p, v in live.items():\n"
                         "    (libc.munmap(p, v[1]) if v[3] == 'map' "
                         "else libc.free(p))\n"
                         "assert not native_lines(), native_lines()\n"
                         "print('ok')\n")
                self.assertEqual(run(body).strip(), "ok")


class RealNativeCodeTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmpdir = tempfile.mkdtemp()
        cls.ext_dir, cls.ext_error = build_extension(
            cls.tmpdir, "_native_ext", C_EXTENSION)
        cls.cxx_dir, cls.cxx_error = build_extension(
            cls.tmpdir, "_native_cxx", CXX_EXTENSION, cxx=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmpdir, ignore_errors=True)

    def test_sqlite_grows_at_executing_line(self):
        try:
            import sqlite3  # noqa: F401
        except ImportError:
            self.skipTest("no sqlite3")
        out = run("""
            import sqlite3
            tracemalloc.start(5, native=True)
            con = sqlite3.connect(":memory:")
            con.execute("create table t (a, b)")
            before = tracemalloc.take_snapshot()
            for i in range(20000):
                con.execute("insert into t values (?, ?)", (i, "x" * 300))
            insert_line = here() - 1
            after = tracemalloc.take_snapshot()
            diff = after.filter_traces(NATIVE_ONLY).compare_to(
                before.filter_traces(NATIVE_ONLY), "lineno")
            top = diff[0]
            print(top.traceback[0].lineno == insert_line,
                  top.size_diff > 5 * 1000 * 1000,
                  tracemalloc.get_native_traced_memory()[0] > 5000000)
            # Python's domain did not grow by the table (counted once).
            py = after.filter_traces([tracemalloc.DomainFilter(False, NATIVE)])
            pyb = before.filter_traces([tracemalloc.DomainFilter(False, NATIVE)])
            growth = sum(s.size_diff for s in py.compare_to(pyb, "filename"))
            print(growth < 1000000)
            con.close()
            del con
            gc.collect()
            print(tracemalloc.get_native_traced_memory()[0] < 1000000)
        """)
        self.assertEqual(out.split(), ["True"] * 5)

    def check_extension(self, directory, error, module, source):
        if directory is None:
            self.skipTest(error)
        out = run(f"""
            sys.path.insert(0, {directory!r})
            import {module} as ext
            tracemalloc.start(5, native=True)
            for _ in range(3):
                ext.leak(1 << 20)
            call_line = here() - 1
            snap = tracemalloc.take_snapshot()
            stats = snap.filter_traces(NATIVE_ONLY).statistics("traceback")
            top = stats[0]
            print(top.traceback[0].filename == "<string>",
                  top.traceback[0].lineno == call_line,
                  top.count >= 3, top.size >= 3 << 20)
            ext.free_all()
            print(tracemalloc.get_native_traced_memory()[0] < 1 << 20)
        """)
        self.assertEqual(out.split(), ["True"] * 5)

    def test_c_extension(self):
        self.check_extension(self.ext_dir, self.ext_error, "_native_ext",
                             C_EXTENSION)

    @unittest.skipIf(SANITIZED, "the sanitizer's runtime defines operator "
                     "new itself, not through malloc()")
    def test_cxx_extension(self):
        self.check_extension(self.cxx_dir, self.cxx_error, "_native_cxx",
                             CXX_EXTENSION)

    def test_shutdown_with_c_threads_allocating(self):
        # C threads go on allocating while the interpreter finalizes (and
        # after native tracing stopped); an atexit handler's allocations
        # are still traced at its line.  Nothing may hang or crash.
        if self.ext_dir is None:
            self.skipTest(self.ext_error)
        for sample in ("None", "4096"):
            with self.subTest(sample=sample):
                out = run(f"""
                    sys.path.insert(0, {self.ext_dir!r})
                    import _native_ext as ext, atexit
                    tracemalloc.start(5, native=True, sample={sample})
                    def at_exit():
                        p = libc.malloc(123456)
                        line = here() - 1
                        if {sample} is None:
                            assert native_lines().get(line) == (123456, 1)
                        print("atexit ok", flush=True)
                    atexit.register(at_exit)
                    ext.start_threads(8, 200000, 0)   # never joined
                    print("main done", flush=True)
                """, timeout=120)
                self.assertEqual(out.split("\n")[:2],
                                 ["main done", "atexit ok"])

    def test_c_threads_while_snapshotting(self):
        # Threads without the GIL (and without a thread state) allocate
        # while the main thread takes snapshots: no deadlock, and their
        # kept blocks are traced at their thread's root (no Python frame).
        if self.ext_dir is None:
            self.skipTest(self.ext_error)
        out = run(f"""
            sys.path.insert(0, {self.ext_dir!r})
            import _native_ext as ext
            import threading
            for sample in (None, 4096):
                tracemalloc.start(5, native=True, sample=sample)
                ext.start_threads(4, 20000, 10)
                for _ in range(30):
                    snap = tracemalloc.take_snapshot()
                    snap.statistics("lineno")
                # Python threads with the GIL, at the same time.
                def py_work():
                    for _ in range(200):
                        p = libc.malloc(3000)
                        libc.free(p)
                ths = [threading.Thread(target=py_work) for _ in range(2)]
                for th in ths: th.start()
                for th in ths: th.join()
                ext.join_threads()
                snap = tracemalloc.take_snapshot()
                native = snap.filter_traces(NATIVE_ONLY)
                roots = [t for t in native.traces if t.size == 1000
                         and t.traceback[0].filename != "<string>"]
                if sample is None:
                    assert len(roots) == 40, len(roots)
                ext.free_thread_blocks()
                tracemalloc.stop()
            print("ok")
        """)
        self.assertEqual(out.strip(), "ok")


def find_numpy_site():
    """Debian's numpy for this base's tag (3.11 only, in practice)."""
    import glob
    tag = sys.implementation.cache_tag
    site = "/usr/lib/python3/dist-packages"
    if glob.glob(os.path.join(site, "numpy", "core",
                              f"_multiarray_umath.{tag}-*.so")):
        return site
    return None


NUMPY_SITE = find_numpy_site()


@unittest.skipIf(NUMPY_SITE is None,
                 "no Debian numpy built for this base (python3-numpy is "
                 "built for the system's CPython 3.11)")
class NumpyTest(unittest.TestCase):
    """numpy mallocs its data buffers and reports them with
    PyTraceMalloc_Track() in domain 389047: counted there, once."""

    def test_numpy_buffers_counted_once(self):
        out = run(f"""
            sys.path.append({NUMPY_SITE!r})
            import numpy as np
            tracemalloc.start(5, native=True)
            n0 = tracemalloc.get_native_traced_memory()[0]
            arrays = [np.ones(1 << 17) for _ in range(8)]    # 8 x 1 MiB
            line = here() - 1
            snap = tracemalloc.take_snapshot()
            by_domain = {{}}
            for t in snap.traces:
                if (t.traceback[0].filename == "<string>"
                        and t.traceback[0].lineno == line
                        and t.size >= 1 << 20):
                    by_domain[t.domain] = by_domain.get(t.domain, 0) + 1
            print(by_domain == {{389047: 8}}, by_domain)
            n1 = tracemalloc.get_native_traced_memory()[0]
            print(n1 - n0 < 1 << 20)
            del arrays
            n2 = tracemalloc.get_native_traced_memory()[0]
            print(abs(n2 - n0) < 1 << 20)
        """)
        lines = out.split("\n")
        self.assertTrue(lines[0].startswith("True"), out)
        self.assertEqual(lines[1:3], ["True", "True"], out)


def find_lxml_site():
    """Debian's lxml (python3-lxml) for this base's tag (3.11 only, in
    practice): a directory holding only it, so that the rest of the
    system's packages stay off the path."""
    import glob
    tag = sys.implementation.cache_tag
    site = "/usr/lib/python3/dist-packages"
    if not glob.glob(os.path.join(site, "lxml", f"etree.{tag}-*.so")):
        return None
    return site


LXML_SITE = find_lxml_site()


@unittest.skipIf(LXML_SITE is None,
                 "no Debian lxml built for this base (python3-lxml is built "
                 "for the system's CPython 3.11)")
class LxmlTest(unittest.TestCase):
    """lxml's trees are libxml2's: malloc()ed by the C library under
    lxml, never seen by Python's allocators.  Traced at the line that
    parsed them, freed with the tree; with native frames, the C frames
    name libxml2's functions."""

    def test_trees_traced_at_parse_line(self):
        out = run(f"""
            import importlib.util
            spec = importlib.util.spec_from_file_location(
                "lxml", os.path.join({LXML_SITE!r}, "lxml", "__init__.py"),
                submodule_search_locations=[
                    os.path.join({LXML_SITE!r}, "lxml")])
            lxml = importlib.util.module_from_spec(spec)
            sys.modules["lxml"] = lxml
            spec.loader.exec_module(lxml)
            from lxml import etree
            doc = "<r>" + "".join(f"<i n='{{i}}'>t{{i}}</i>"
                                  for i in range(20000)) + "</r>"
            tracemalloc.start(5, native=True, native_frames=True)
            n0 = tracemalloc.get_native_traced_memory()[0]
            def parse():
                return etree.fromstring(doc)
            line = here() - 1
            kept = [parse() for _ in range(3)]
            snap = tracemalloc.take_snapshot().filter_traces(NATIVE_ONLY)
            lines = native_lines(snap)
            size = lines.get(line, (0, 0))[0]
            # 3 trees of 20000 elements: libxml2's nodes, names, text
            print(size > 3 * 20000 * 100, size)
            # frames from the oldest to the most recent: the most recent
            # Python frame is the parsing line, the C frames after it
            top = snap.statistics("traceback")[0]
            frames = list(top.traceback)
            py = [k for k, f in enumerate(frames)
                  if not getattr(f, "is_native", 0)]
            c = [f for f in frames[py[-1] + 1:] if getattr(f, "is_native", 0)]
            print(frames[py[-1]].lineno == line, frames[py[-1]].lineno, line)
            print(any("libxml2" in (f.library or "") for f in c),
                  sorted({{f.library for f in c}}))
            del kept
            gc.collect()
            n2 = tracemalloc.get_native_traced_memory()[0]
            print(n2 - n0 < 200000, n2 - n0)
        """)
        self.assertEqual([x.split()[0] for x in out.strip().split("\n")],
                         ["True"] * 4, out)


RUST_SOURCE = r"""
use std::sync::Mutex;
static KEPT: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

#[no_mangle]
pub extern "C" fn rust_leak(n: usize) -> usize {
    let v = vec![7u8; n];       // Rust's global allocator: the system's
    let p = v.as_ptr() as usize;
    KEPT.lock().unwrap().push(v);
    p
}

#[no_mangle]
pub extern "C" fn rust_free_all() {
    KEPT.lock().unwrap().clear();
}
"""


@unittest.skipIf(shutil.which("rustc") is None,
                 "no rustc (Debian's rustc package)")
class RustTest(unittest.TestCase):
    """A Rust library (its Vec<u8> buffers come from Rust's default global
    allocator, the system's malloc()), loaded with ctypes: traced at the
    Python line that called it, freed when Rust drops them."""

    def test_rust_vectors(self):
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "leak.rs")
            lib = os.path.join(d, "librustleak.so")
            with open(src, "w") as f:
                f.write(RUST_SOURCE)
            proc = subprocess.run(["rustc", "-O", "--crate-type", "cdylib",
                                   src, "-o", lib],
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT)
            if proc.returncode != 0:
                self.skipTest("rustc failed: "
                              + proc.stdout.decode()[-500:])
            out = run(f"""
                rust = ctypes.CDLL({lib!r})
                rust.rust_leak.restype = ctypes.c_size_t
                rust.rust_leak.argtypes = [ctypes.c_size_t]
                tracemalloc.start(1, native=True)
                for i in range(100):
                    rust.rust_leak(10000)
                line = here() - 1
                size, count = native_lines()[line]
                # 100 buffers of 10000 bytes, and KEPT's own buffer
                print(100 * 10000 <= size < 100 * 10000 + 4096, count)
                rust.rust_free_all()
                print(tracemalloc.get_native_traced_memory()[0] < 8192)
            """)
        lines = out.split()
        self.assertEqual(lines[0], "True", out)
        self.assertGreaterEqual(int(lines[1]), 100)
        self.assertEqual(lines[2], "True", out)


PRELOADS = {
    "jemalloc": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
    "tcmalloc": "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
}


@unittest.skipIf(SANITIZED, "a sanitizer's runtime must come first: "
                 "no LD_PRELOAD allocator")
class PreloadTest(unittest.TestCase):
    """An allocator preloaded with LD_PRELOAD keeps serving the process
    (the interposers forward to the next definition, its own), and its
    blocks are traced; its own mappings made inside a call are not."""

    def check_preloaded(self, body, expected):
        """Run BODY with each allocator of PRELOADS preloaded: its output
        must be EXPECTED."""
        for name, path in PRELOADS.items():
            with self.subTest(allocator=name):
                if not os.path.exists(path):
                    self.skipTest(f"{path} is not installed (Debian's "
                                  f"libjemalloc2, libtcmalloc-minimal4)")
                out = run(body, env={"LD_PRELOAD": path})
                self.assertEqual(out.split(), expected)

    @unittest.skipIf(sysconfig.get_config_var("Py_ENABLE_SHARED"),
                     "a shared libpython comes after the preloaded "
                     "allocator: test_preloaded_before_shared_libpython")
    def test_preloaded_allocators(self):
        self.check_preloaded("""
            libc.malloc_usable_size.restype = sz
            libc.malloc_usable_size.argtypes = [vp]
            tracemalloc.start(3, native=True)
            p = libc.malloc(100)
            line = here() - 1
            # glibc's class for 100 bytes is 104; jemalloc's and
            # tcmalloc's 112: the block is the preloaded one's.
            print(libc.malloc_usable_size(p))
            print(native_lines()[line] == (100, 1))
            blocks = [libc.malloc(1 << 16) for _ in range(100)]
            line = here() - 1
            # Exactly the blocks: the allocator's own mappings
            # (made inside the calls) are not native blocks.
            print(native_lines()[line] == (100 << 16, 100))
            for b in blocks:
                libc.free(b)
            libc.free(p)
            print(native_lines().get(line) is None)
        """, ["112", "True", "True", "True"])

    @unittest.skipUnless(sysconfig.get_config_var("Py_ENABLE_SHARED"),
                         "the executable's interposers come first")
    def test_preloaded_before_shared_libpython(self):
        # The preloaded allocator is the process's malloc(): native
        # tracing is refused, and Python's own memory and the engine's
        # come from it too (the C library's malloc() after libpython
        # would be another heap: a block of one freed by the other).
        self.check_preloaded("""
            libc.malloc_usable_size.restype = sz
            libc.malloc_usable_size.argtypes = [vp]
            try:
                tracemalloc.start(3, native=True)
            except RuntimeError as exc:
                print("not available" in str(exc), tracemalloc.is_tracing())
            tracemalloc.start(3)
            kept = [bytes(100) for _ in range(1000)]
            p = libc.malloc(100)
            print(libc.malloc_usable_size(p))
            libc.free(p)
            snap = tracemalloc.take_snapshot()
            print(len(snap.filter_traces(NATIVE_ONLY).traces),
                  sum(s.count for s in snap.statistics("lineno")) >= 1000)
            tracemalloc.stop()
            del kept
        """, ["True", "False", "112", "0", "True"])


# A malloc() wrapper of the usual kind (a leak counter, memusage), which
# forwards to the next definition found with dlsym(RTLD_NEXT).
FORWARDING_WRAPPER = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#define FWD(ret, name, params, args) \
    ret name params { \
        static ret (*f) params; \
        if (!f) f = (ret (*) params)dlsym(RTLD_NEXT, #name); \
        return f args; \
    }
FWD(void *, malloc, (size_t n), (n))
FWD(void *, calloc, (size_t a, size_t b), (a, b))
FWD(void *, realloc, (void *p, size_t n), (p, n))
void free(void *p) {
    static void (*f)(void *);
    if (!f) f = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    f(p);
}
"""

# A wrapper of mmap() alone (a mapping tracker), forwarding likewise.
MMAP_WRAPPER = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <sys/types.h>
void *mmap(void *a, size_t n, int p, int f, int fd, off_t o) {
    static void *(*r)(void *, size_t, int, int, int, off_t);
    if (!r) r = dlsym(RTLD_NEXT, "mmap");
    return r(a, n, p, f, fd, o);
}
"""

GLIBC_MALLOC_DEBUG = "/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0"

# Native tracing where it is available, else the RuntimeError; then the
# Python domains traced and stopped as usual.
FOREIGN_BODY = """
    try:
        tracemalloc.start(3, native=True)
        p = libc.malloc(123457)
        print("traced", native_lines().get(here() - 1) == (123457, 1))
        libc.free(p)
        tracemalloc.stop()
    except RuntimeError as exc:
        print("refused", "not available" in str(exc))
    tracemalloc.start(3)
    kept = [bytes(100) for _ in range(1000)]
    print(sum(s.count for s in
              tracemalloc.take_snapshot().statistics("lineno")) >= 1000)
    tracemalloc.clear_traces()
    tracemalloc.stop()
"""


@unittest.skipIf(SANITIZED, "a sanitizer's runtime must come first: "
                 "no LD_PRELOAD library")
class ForeignAllocatorTest(unittest.TestCase):
    """Another object's malloc() before a shared libpython's interposers
    (issue 32's review s41): Python's memory and the engine's come from
    it, the interposers forward past it, and native tracing is refused;
    before the executable's, it is not seen."""

    def expected(self):
        if sysconfig.get_config_var("Py_ENABLE_SHARED"):
            return ["refused", "True", "True"]
        return ["traced", "True", "True"]

    def preloaded(self, source, body, **env):
        """Run BODY with SOURCE built as a library and preloaded."""
        cc = _compiler("CC", ["cc", "gcc", "clang"])
        if cc is None:
            self.skipTest("no C compiler")
        with tempfile.TemporaryDirectory() as tmpdir:
            src = os.path.join(tmpdir, "wrap.c")
            lib = os.path.join(tmpdir, "wrap.so")
            with open(src, "w") as f:
                f.write(source)
            subprocess.run([cc, "-O1", "-shared", "-fPIC", "-o", lib, src,
                            "-ldl"], check=True)
            return run(body, env=dict(env, LD_PRELOAD=lib))

    def test_forwarding_wrapper(self):
        # The wrapper's RTLD_NEXT is the interposer, whose next function
        # must not be the wrapper again (an endless recursion).
        out = self.preloaded(FORWARDING_WRAPPER, FOREIGN_BODY)
        self.assertEqual(out.split(), self.expected())

    def test_mmap_wrapper(self):
        # Python's arenas would go through the wrapper to the interposer:
        # sampled, an arena would be a native block.
        out = self.preloaded(MMAP_WRAPPER, """
            try:
                tracemalloc.start(1, native=True, sample=65536)
            except RuntimeError as exc:
                print("refused", "not available" in str(exc))
            else:
                base = tracemalloc.get_native_traced_memory()[0]
                kept = [object() for _ in range(300000)]
                print("traced", tracemalloc.get_native_traced_memory()[0]
                      - base == 0)
        """, PYTHONMALLOC="pymalloc")
        self.assertEqual(out.split(), ["refused", "True"]
                         if sysconfig.get_config_var("Py_ENABLE_SHARED")
                         else ["traced", "True"])

    @unittest.skipUnless(os.path.exists(GLIBC_MALLOC_DEBUG),
                         "no libc_malloc_debug.so.0 (glibc 2.34 or later)")
    def test_glibc_malloc_debug(self):
        # Its malloc() and free() are hidden-versioned symbols: bound, but
        # not found by dlsym().  MALLOC_CHECK_=3 aborts on a block freed
        # into the wrong heap.
        out = run(FOREIGN_BODY, env={"LD_PRELOAD": GLIBC_MALLOC_DEBUG,
                                     "MALLOC_CHECK_": "3"})
        self.assertEqual(out.split(), self.expected())

    @unittest.skipUnless(shutil.which("valgrind"), "no valgrind")
    @unittest.skipIf(os.environ.get("TRACEMALLOC_UNDER_VALGRIND"),
                     "already under Valgrind")
    def test_valgrind_refused(self):
        # Memcheck replaces the interposers where they are defined: a
        # malloc() never reaches them, which start() finds out.
        code = PRELUDE + textwrap.dedent("""
            try:
                tracemalloc.start(1, native=True)
            except RuntimeError as exc:
                print("refused", "Valgrind" in str(exc))
        """)
        proc = subprocess.run(
            ["valgrind", "-q", "--error-exitcode=0", sys.executable, "-c",
             code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=dict(os.environ, PYTHONMALLOC="malloc"),
            timeout=support.LONG_TIMEOUT)
        self.assertEqual(proc.stdout.decode().split(), ["refused", "True"],
                         proc.stderr.decode()[-2000:])


class SamplingTest(unittest.TestCase):

    def test_sampled_estimate(self):
        # 4000 blocks of 16 KiB sampled at a mean of 64 KiB: about 1000
        # samples; the estimate of 62.5 MiB is within 6 standard
        # deviations (a sample of S bytes stands for 1/p(S) blocks).
        out = run("""
            import math
            tracemalloc.start(5, native=True, sample=65536)
            tracemalloc._set_sample_seed(1234) if hasattr(
                tracemalloc, "_set_sample_seed") else None
            ptrs = [libc.malloc(16384) for _ in range(4000)]
            line = here() - 1
            est = native_lines().get(line, (0, 0))[0]
            true = 4000 * 16384
            p = -math.expm1(-16384 / 65536)
            sd = 16384 / p * math.sqrt(4000 * p * (1 - p))
            print(abs(est - true) < 6 * sd, est > 0)
            cur = tracemalloc.get_native_traced_memory()[0]
            print(abs(cur - true) < 6 * sd + 1000000)
            for q in ptrs:
                libc.free(q)
            print(native_lines().get(line) is None)
        """)
        self.assertEqual(out.split(), ["True"] * 4)

    def test_raw_user_allocator_installed_while_tracing(self):
        # Issue 43, 1.3: a user allocator of the raw domain built on the C
        # allocator, installed while tracing native memory sampled: the
        # inline entry points called it without raising the untraced
        # depth, and the interposers sampled its malloc() calls again
        # (20,000 blocks of 1000 bytes were estimated at 36 MB).  The
        # mean of 5 seeds is within 6 of its standard deviations of the
        # exact count, which must be the blocks' size.
        out = run("""
            import math, _testtracemalloc
            COUNT, SIZE, INTERVAL, SEEDS = 20000, 1000, 65536, 5
            def measure():
                return tracemalloc.get_traced_memory()[0]
            tracemalloc.start(1, native=True)
            exact = _testtracemalloc.c_backed_raw_allocation(COUNT, SIZE,
                                                             measure)
            tracemalloc.stop()
            estimates = []
            for seed in range(1, SEEDS + 1):
                tracemalloc.start(1, native=True, sample=INTERVAL)
                _tracemalloc._set_sample_seed(seed)
                estimates.append(_testtracemalloc.c_backed_raw_allocation(
                    COUNT, SIZE, measure))
                tracemalloc.stop()
            true = COUNT * SIZE
            p = -math.expm1(-SIZE / INTERVAL)
            sd = SIZE / p * math.sqrt(COUNT * p * (1 - p)) / math.sqrt(SEEDS)
            mean = sum(estimates) / SEEDS
            print(true <= exact < true + 100000, abs(mean - exact) < 6 * sd,
                  exact, mean, sd)
        """, env={"PYTHONMALLOC": "malloc"})
        self.assertEqual(out.split()[:2], ["True", "True"], out)


class NativeReviewTest(unittest.TestCase):
    """The wrong answers of the adversarial review of the native domain
    (session 40), one test each."""

    def test_munmap_any_range(self):
        # A range that cuts mappings anywhere: every mapping it covers loses
        # its trace, and each piece left keeps a trace of its own size.
        out = run("""
            page = _mmap.PAGESIZE
            tracemalloc.start(1, native=True)
            total = lambda: tracemalloc.get_native_traced_memory()[0]
            # one munmap() over several adjacent mappings, each mapped with
            # MAP_FIXED over a reservation of the whole range (unmapping
            # the range first would let another allocation take it)
            base = libc.mmap(None, 8 * 16 * page, PROT_RW, MAP_ANON_PRIVATE,
                             -1, 0)
            for i in range(8):
                p = libc.mmap(base + i * 16 * page, 16 * page, PROT_RW,
                              MAP_ANON_PRIVATE | 0x10, -1, 0)   # MAP_FIXED
                assert p == base + i * 16 * page
            assert total() == 8 * 16 * page, total()
            assert libc.munmap(base, 8 * 16 * page) == 0
            assert total() == 0, total()
            # the aligned-mapping idiom: map more, trim head and tail
            for i in range(20):
                m = libc.mmap(None, 48 * page, PROT_RW, MAP_ANON_PRIVATE,
                              -1, 0)
                lead = 16 * page - (m % (16 * page)) if m % (16 * page) else 0
                if lead:
                    assert libc.munmap(m, lead) == 0
                a = m + lead
                assert libc.munmap(a + 32 * page, 48 * page - lead
                                   - 32 * page) == 0 or lead == 16 * page
                assert total() == 32 * page, (i, total(), lead)
                assert libc.munmap(a, 32 * page) == 0
                assert total() == 0, (i, total())
            # a hole in the middle: two pieces, at the mapping's line
            m = libc.mmap(None, 10 * page, PROT_RW, MAP_ANON_PRIVATE, -1, 0)
            line = here() - 1
            assert libc.munmap(m + 3 * page, 2 * page) == 0
            assert native_lines()[line] == (8 * page, 2), native_lines()
            assert libc.munmap(m, 10 * page) == 0
            assert line not in native_lines()
            # a mapping of 5000 bytes: traced at 5000 (the size asked);
            # its last page unmapped leaves the 4096 of the first
            m = libc.mmap(None, 5000, PROT_RW, MAP_ANON_PRIVATE, -1, 0)
            assert total() == 5000
            assert libc.munmap(m + page, page) == 0
            assert total() == page
            assert libc.munmap(m, page) == 0
            assert total() == 0
            print("ok")
        """)
        self.assertEqual(out.strip(), "ok")

    def test_map_fixed_replaces(self):
        out = run("""
            page = _mmap.PAGESIZE
            tracemalloc.start(1, native=True)
            total = lambda: tracemalloc.get_native_traced_memory()[0]
            m = libc.mmap(None, 8 * page, PROT_RW, MAP_ANON_PRIVATE, -1, 0)
            line = here() - 1
            # MAP_FIXED over pages 2..3: the old trace is cut in two, the
            # new mapping traced
            p = libc.mmap(m + 2 * page, 2 * page, PROT_RW,
                          MAP_ANON_PRIVATE | 0x10, -1, 0)   # MAP_FIXED
            fixed = here() - 2
            assert p == m + 2 * page
            assert total() == 8 * page, total()
            lines = native_lines()
            assert lines[line] == (6 * page, 2), lines
            assert lines[fixed] == (2 * page, 1), lines
            assert libc.munmap(m, 8 * page) == 0
            assert total() == 0, total()
            print("ok")
        """)
        self.assertEqual(out.strip(), "ok")

    def test_refused_calls_keep_traces(self):
        # Second review: munmap() and mmap(MAP_FIXED) that the kernel
        # refuses unmap nothing; mremap(MREMAP_DONTUNMAP) leaves the old
        # pages mapped; mremap(MREMAP_FIXED) of an untraced mapping onto
        # traced pages replaces them.
        out = run("""
            page = _mmap.PAGESIZE
            tracemalloc.start(1, native=True)
            total = lambda: tracemalloc.get_native_traced_memory()[0]
            p = libc.mmap(None, 4 * page, PROT_RW, MAP_ANON_PRIVATE, -1, 0)
            assert libc.munmap(p, 1 << 47) != 0            # EINVAL
            assert total() == 4 * page, total()
            r = libc.mmap(p, 4 * page, PROT_RW, 0x10 | 0x02, 12345, 0)
            assert r == MAP_FAILED                         # EBADF
            assert total() == 4 * page, total()
            assert libc.munmap(p, 4 * page) == 0
            assert total() == 0, total()
            # MREMAP_DONTUNMAP (Linux 5.7) of 2 of 8 pages: the 6 others
            # and the old 2 stay mapped, the 2 moved are a new mapping
            m = libc.mmap(None, 8 * page, PROT_RW, MAP_ANON_PRIVATE, -1, 0)
            m2 = libc.mremap(m, 2 * page, 2 * page, 1 | 4)
            if m2 != MAP_FAILED:
                assert total() == 10 * page, total()
                assert libc.munmap(m2, 2 * page) == 0
            assert libc.munmap(m, 8 * page) == 0
            assert total() == 0, total()
            # MREMAP_FIXED of a mapping made before tracing onto traced
            # pages: they are the moved mapping's now, untraced
            tracemalloc.stop()
            old = libc.mmap(None, 4 * page, PROT_RW, MAP_ANON_PRIVATE, -1, 0)
            tracemalloc.start(1, native=True)
            t = libc.mmap(None, 4 * page, PROT_RW, MAP_ANON_PRIVATE, -1, 0)
            assert total() == 4 * page
            r = libc.mremap(old, 4 * page, 4 * page, 1 | 2,
                            ctypes.c_void_p(t))         # MREMAP_FIXED
            assert r == t, (r, t)
            assert total() == 0, total()
            assert libc.munmap(t, 4 * page) == 0
            print("ok")
        """)
        self.assertEqual(out.strip(), "ok")

    def test_reservation_not_counted(self):
        out = run("""
            tracemalloc.start(1, native=True)
            m = libc.mmap(None, 1 << 36, 0, MAP_ANON_PRIVATE | 0x4000, -1, 0)
            assert m != MAP_FAILED
            print(tracemalloc.get_native_traced_memory()[0])
            libc.munmap(m, 1 << 36)
        """)
        self.assertEqual(out.strip(), "0")

    def test_allocation_totals_count_allocations_only(self):
        out = run("""
            page = _mmap.PAGESIZE
            track = ctypes.pythonapi.PyTraceMalloc_Track
            track.argtypes = [ctypes.c_uint, ctypes.c_size_t, sz]
            untrack = ctypes.pythonapi.PyTraceMalloc_Untrack
            untrack.argtypes = [ctypes.c_uint, ctypes.c_size_t]
            raw_realloc = ctypes.pythonapi.PyMem_RawRealloc
            raw_realloc.restype = vp
            raw_realloc.argtypes = [vp, sz]
            raw_malloc = ctypes.pythonapi.PyMem_RawMalloc
            raw_malloc.restype = vp
            raw_malloc.argtypes = [sz]
            tracemalloc.start(1, native=True, allocations=True)
            def allocated(dom, line):
                snap = tracemalloc.take_snapshot(allocated=True)
                snap = snap.filter_traces([tracemalloc.DomainFilter(True, dom)])
                for st in snap.statistics("lineno"):
                    if st.traceback[0].lineno == line:
                        return st.size, st.count
                return 0, 0
            # a mapping trimmed a page at a time: one allocation
            m = libc.mmap(None, 11 * page, PROT_RW, MAP_ANON_PRIVATE, -1, 0)
            line = here() - 1
            for i in range(11):
                assert libc.munmap(m + i * page, page) == 0
            print(allocated(NATIVE, line) == (11 * page, 1))
            # failed realloc(): not an allocation, native or raw domain
            q = libc.malloc(1000); line = here()
            for i in range(10):
                assert not libc.realloc(q, 1 << 62)
            libc.free(q)
            print(allocated(NATIVE, line) == (1000, 1))
            def raw_alloc():
                return raw_malloc(1000)     # the block alone on its line
            r = raw_alloc(); line = here() - 1
            before = allocated(0, line)     # the block, ctypes' int...
            for i in range(10):
                assert not raw_realloc(r, 1 << 62)
            print(allocated(0, line) == before, before[0] >= 1000)
            # malloc() then Track() by the owner: counted once, the owner's
            ptrs = []
            for i in range(10):
                p = libc.malloc(10000); line = here()
                track(389047, p, 10000)
                ptrs.append(p)
            print(allocated(NATIVE, line), allocated(389047, line + 1))
            for p in ptrs:
                untrack(389047, p)
                libc.free(p)
        """)
        lines = out.split("\n")
        self.assertEqual([x.split()[0] for x in lines[:3]], ["True"] * 3,
                         out)
        self.assertEqual(out.split("\n")[3], "(0, 0) (100000, 10)")

    def test_sampled_owner_wins(self):
        # Sampling mode: a malloc()ed block that its owner reports is
        # estimated once, whatever the owner's draw gives.
        out = run("""
            import math
            track = ctypes.pythonapi.PyTraceMalloc_Track
            track.argtypes = [ctypes.c_uint, ctypes.c_size_t, sz]
            tracemalloc.start(1, native=True, sample=65536)
            _tracemalloc._set_sample_seed(99)
            ptrs = []
            for i in range(4000):
                p = libc.malloc(10240)
                track(389047, p, 10240)
                ptrs.append(p)
            snap = tracemalloc.take_snapshot()
            est = sum(st.size for st in snap.filter_traces(
                [tracemalloc.DomainFilter(False, 0)]).statistics("filename"))
            true = 4000 * 10240
            pr = -math.expm1(-10240 / 65536)
            sd = 10240 / pr * math.sqrt(4000 * pr * (1 - pr))
            print(abs(est - true) < 6 * sd, round(est / true, 2))
        """)
        self.assertEqual(out.split()[0], "True", out)

    def test_sampled_trimmed_mapping(self):
        # A sampled mapping whose first pages go keeps the weight of its
        # new size: the estimate of what is left stays unbiased.
        out = run("""
            import math
            page = _mmap.PAGESIZE
            R = 1 << 20
            tracemalloc.start(1, native=True, sample=R)
            _tracemalloc._set_sample_seed(7)
            maps = [libc.mmap(None, 16 * page, PROT_RW, MAP_ANON_PRIVATE,
                              -1, 0) for i in range(2000)]
            for m in maps:
                assert libc.munmap(m, 15 * page) == 0
            est = tracemalloc.get_native_traced_memory()[0]
            true = 2000 * page
            pr = -math.expm1(-page / R)
            sd = page / pr * math.sqrt(2000 * pr * (1 - pr))
            print(abs(est - true) < 6 * sd + page / pr, est, true)
            for m in maps:
                libc.munmap(m + 15 * page, page)
        """)
        self.assertEqual(out.split()[0], "True", out)

    def test_cli_nframe_keeps_native(self):
        # python -X tracemalloc_native -m tracemalloc run -n 5: the restart
        # with 5 frames keeps native tracing.
        with tempfile.TemporaryDirectory() as d:
            script = os.path.join(d, "s.py")
            with open(script, "w") as f:
                f.write("import tracemalloc\n"
                        "print('IN', tracemalloc.is_tracing_native(), "
                        "tracemalloc.get_traceback_limit())\n")
            res = assert_python_ok("-X", "tracemalloc_native", "-m",
                                   "tracemalloc", "run", "-n", "5", script)
            self.assertIn("IN True 5", res.out.decode())

    def test_startup_native_keeps_dump_sampling(self):
        # -X tracemalloc_native with a dump option alone: the dump option's
        # sampling (512 KiB) and 25 frames, native on.
        code = ("import tracemalloc; print(tracemalloc.is_tracing(), "
                "tracemalloc.is_tracing_native(), "
                "tracemalloc.get_traceback_limit(), tracemalloc.get_sample())")
        for args, env in (
                (["-X", "tracemalloc_dump_over=1GiB",
                  "-X", "tracemalloc_native"], {}),
                ([], {"PYTHONTRACEMALLOCDUMPOVER": "1GiB",
                      "PYTHONTRACEMALLOCNATIVE": "1"}),
                (["-X", "tracemalloc_dump_on_memory_error",
                  "-X", "tracemalloc_native"], {})):
            with self.subTest(args=args, env=env):
                res = assert_python_ok(*args, "-c", code, **env)
                self.assertEqual(res.out.decode().split(),
                                 ["True", "True", "25", "524288"])


class InProcessTest(unittest.TestCase):
    """Native tracing in this process, not in a child: what `make
    valgrind`, `make sanitizer-test` and `make tsan` see of it (they do not
    follow the children of the other tests).  The C library's family and
    mappings cut in every way, sqlite3 in threads while this thread takes
    snapshots, native frames symbolised, sampling, stop and start."""

    def setUp(self):
        if tracemalloc.is_tracing():
            self.skipTest("tracing already on (PYTHONTRACEMALLOC)")
        self.addCleanup(tracemalloc.stop)

    def workout(self, **kw):
        import ctypes
        import mmap
        import sqlite3
        import threading
        libc = ctypes.CDLL(None)
        vp, sz = ctypes.c_void_p, ctypes.c_size_t
        fns = {"malloc": (vp, [sz]), "calloc": (vp, [sz, sz]),
               "realloc": (vp, [vp, sz]), "free": (None, [vp]),
               "mmap": (vp, [vp, sz, ctypes.c_int, ctypes.c_int,
                             ctypes.c_int, ctypes.c_long]),
               "munmap": (ctypes.c_int, [vp, sz]),
               "mremap": (vp, [vp, sz, sz, ctypes.c_int])}
        f = {}
        for name, (res, args) in fns.items():
            f[name] = getattr(libc, name)
            f[name].restype, f[name].argtypes = res, args
        page = mmap.PAGESIZE
        tracemalloc.start(10, native=True, **kw)
        stop = threading.Event()

        def db():
            while not stop.is_set():
                con = sqlite3.connect(":memory:")
                con.execute("CREATE TABLE t (a, b)")
                con.executemany("INSERT INTO t VALUES (?, ?)",
                                ((i, "x" * 100) for i in range(300)))
                con.close()
        threads = [threading.Thread(target=db) for _ in range(2)]
        for t in threads:
            t.start()
        try:
            for round_ in range(5):
                ps = [f["malloc"](64 + i) for i in range(200)]
                ps = [f["realloc"](p, 300) for p in ps]
                ps += [f["calloc"](3, 40) for i in range(50)]
                m = f["mmap"](None, 16 * page, 3, 0x22, -1, 0)
                self.assertEqual(f["munmap"](m + 2 * page, 3 * page), 0)
                self.assertEqual(f["munmap"](m, page), 0)
                m2 = f["mremap"](m + 12 * page, 4 * page, 8 * page, 1)
                snap = tracemalloc.take_snapshot()
                native = snap.filter_traces(
                    [tracemalloc.DomainFilter(True, NATIVE_DOMAIN)])
                stats = native.statistics("traceback")
                self.assertTrue(stats)
                for st in stats[:20]:
                    st.traceback.format()
                for p in ps:
                    f["free"](p)
                # only the pages still ours: the holes made above (pages
                # 0, 2..4, and 12..15 moved to m2) may be anyone's by now
                self.assertEqual(f["munmap"](m + page, page), 0)
                self.assertEqual(f["munmap"](m + 5 * page, 7 * page), 0)
                self.assertEqual(f["munmap"](m2, 8 * page), 0)
                if round_ == 2:
                    tracemalloc.clear_traces()
        finally:
            stop.set()
            for t in threads:
                t.join()
        tracemalloc.stop()
        self.assertFalse(tracemalloc.is_tracing_native())

    def test_exact(self):
        self.workout()

    def test_sampled(self):
        self.workout(sample=4096)

    def test_native_frames(self):
        if not hasattr(tracemalloc, "is_tracing_native_frames"):
            self.skipTest("no native frames")
        try:
            self.workout(native_frames=True)
        except RuntimeError as e:
            if "libunwind" in str(e):
                self.skipTest(str(e))
            raise


@support.requires_fork()
class ForkTest(unittest.TestCase):

    def test_fork_child(self):
        out = run("""
            import threading
            tracemalloc.start(5, native=True)
            stop = False
            def churn():
                while not stop:
                    p = libc.malloc(1000)
                    libc.free(p)
            th = threading.Thread(target=churn, daemon=True)
            th.start()
            try:
                for _ in range(5):
                    pid = os.fork()
                    if pid == 0:
                        p = libc.malloc(77777)
                        line = here() - 1
                        ok = (native_lines().get(line) == (77777, 1)
                              and tracemalloc.is_tracing_native())
                        os._exit(0 if ok else 3)
                    _, status = os.waitpid(pid, 0)
                    assert os.waitstatus_to_exitcode(status) == 0, status
            finally:
                stop = True
                th.join()
            p = libc.malloc(4321)
            line = here() - 1
            print(native_lines().get(line) == (4321, 1))
        """)
        self.assertEqual(out.strip(), "True")


class SnapshotToolsTest(unittest.TestCase):

    def test_dump_load_and_filters(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "snap")
            out = run(f"""
                tracemalloc.start(5, native=True)
                ptrs = [libc.malloc(10000) for _ in range(10)]
                line = here() - 1
                snap = tracemalloc.take_snapshot()
                snap.dump({path!r})
                loaded = tracemalloc.Snapshot.load({path!r})
                a = native_lines(snap)
                b = native_lines(loaded)
                print(a == b, a.get(line) == (100000, 10))
                notnative = loaded.filter_traces(
                    [tracemalloc.DomainFilter(False, NATIVE)])
                print(all(t.domain != NATIVE for t in notnative.traces))
                # The HTML report and pprof take the native domain as any.
                from tracemalloc import htmlreport
                native_only = snap.filter_traces(NATIVE_ONLY)
                htmlreport.write_html(native_only, {path!r} + ".html")
                with open({path!r} + ".html") as f:
                    html = f.read()
                native_only.dump_pprof({path!r} + ".pb.gz")
                print("100000" in html,
                      os.path.getsize({path!r} + ".pb.gz") > 0)
                for p in ptrs:
                    libc.free(p)
            """)
        self.assertEqual(out.split(), ["True"] * 5)


if __name__ == "__main__":
    unittest.main()
