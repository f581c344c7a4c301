"""Native frames (issue 32, item 4): the C call stack of a native trace,
spliced into its Python traceback (start(native=True, native_frames=True)).

Each scenario runs in a child interpreter of its own.  The C extension is
compiled here, with debug information, by the build's compiler; the tests
that need it skip without a compiler or without libunwind.
"""

import os
import sys
import tempfile
import textwrap
import unittest

from test.support.script_helper import assert_python_failure
from test.test_tracemalloc_native import (
    INTERPRETER_OBJECT, PRELUDE, SANITIZED, allocator_known,
    build_extension, run)

import tracemalloc

# INNER_LINE is the malloc() the tests look for, in inner_alloc(), called
# by alloc() (ALLOC_LINE); call() calls a Python callable from C
# (CALL_LINE); threads() starts C threads that never had a thread state.
C_SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdlib.h>

#define MAX_KEPT 100000
static void *kept[MAX_KEPT];
static int nkept;

__attribute__((noinline)) void *
nf_inner_alloc(size_t size)
{
    void *p = malloc(size);     /* INNER_LINE */
    __asm__ volatile("" ::: "memory");
    return p;
}

static PyObject *
nf_alloc(PyObject *self, PyObject *arg)
{
    Py_ssize_t size = PyLong_AsSsize_t(arg);
    if (size < 0 && PyErr_Occurred()) {
        return NULL;
    }
    if (nkept == MAX_KEPT) {
        return PyErr_NoMemory();
    }
    void *p = nf_inner_alloc((size_t)size);     /* ALLOC_LINE */
    __asm__ volatile("" ::: "memory");
    kept[nkept++] = p;
    return PyLong_FromVoidPtr(p);
}

static PyObject *
nf_free_all(PyObject *self, PyObject *unused)
{
    while (nkept > 0) {
        free(kept[--nkept]);
    }
    Py_RETURN_NONE;
}

static PyObject *
nf_call(PyObject *self, PyObject *fn)
{
    PyObject *res = PyObject_CallNoArgs(fn);    /* CALL_LINE */
    __asm__ volatile("" ::: "memory");
    return res;
}

static void *thread_blocks[8];

__attribute__((noinline)) static void *
nf_thread_main(void *arg)
{
    long i = (long)arg;
    thread_blocks[i] = malloc(7777);    /* THREAD_LINE */
    __asm__ volatile("" ::: "memory");
    return NULL;
}

static PyObject *
nf_thread(PyObject *self, PyObject *unused)
{
    pthread_t t;
    if (pthread_create(&t, NULL, nf_thread_main, (void *)0L) != 0) {
        return PyErr_NoMemory();
    }
    pthread_join(t, NULL);
    return PyLong_FromVoidPtr(thread_blocks[0]);
}

static PyMethodDef methods[] = {
    {"alloc", nf_alloc, METH_O, NULL},
    {"free_all", nf_free_all, METH_NOARGS, NULL},
    {"call", nf_call, METH_O, NULL},
    {"thread", nf_thread, METH_NOARGS, NULL},
    {NULL}
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_nativeframes_ext", NULL, -1, methods,
};

PyMODINIT_FUNC
PyInit__nativeframes_ext(void)
{
    return PyModule_Create(&module);
}
"""


def c_line(marker):
    return next(i for i, line in enumerate(C_SOURCE.splitlines(), 1)
                if marker in line)


INNER_LINE = c_line("INNER_LINE")
ALLOC_LINE = c_line("ALLOC_LINE")
CALL_LINE = c_line("CALL_LINE")
THREAD_LINE = c_line("THREAD_LINE")

# Child prelude: the extension, and the native traces as raw frames.
FRAMES_PRELUDE = """
import _nativeframes_ext as ext
import _tracemalloc

def traces_of(size, snapshot=None):
    snapshot = snapshot or tracemalloc.take_snapshot()
    return [t for t in snapshot.traces
            if t.domain == NATIVE and t.size == size]

def show(tb):
    # most recent first, one frame a line: C frames "C function file:line",
    # Python frames "PY file:line"
    for frame in reversed(list(tb)):
        if frame.is_native:
            print("C", frame.function, os.path.basename(frame.filename),
                  frame.lineno, os.path.basename(frame.library))
        else:
            print("PY", os.path.basename(frame.filename), frame.lineno)
"""


class NativeFramesTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        if SANITIZED:
            raise unittest.SkipTest("sanitizer build: its runtime comes "
                                    "first, native tracing is refused")
        cls.tmpdir = tempfile.mkdtemp()
        source = C_SOURCE
        path, why = build_extension(cls.tmpdir, "_nativeframes_ext", source)
        if path is None:
            raise unittest.SkipTest(why)
        # build_extension() uses the build's CFLAGS; the C file is where
        # the frames point.
        cls.c_file = os.path.join(cls.tmpdir, "_nativeframes_ext.c")
        probe = run("""
            try:
                tracemalloc.start(1, native=True, native_frames=True)
            except RuntimeError as exc:
                print("missing", exc)
            else:
                print("ok")
        """)
        if probe.strip() != "ok":
            raise unittest.SkipTest(probe.strip())

    @classmethod
    def tearDownClass(cls):
        import shutil
        shutil.rmtree(cls.tmpdir, ignore_errors=True)

    def run_frames(self, body, env=None, python_args=()):
        env = dict(env or {})
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [self.tmpdir, os.environ.get("PYTHONPATH")]))
        return run(FRAMES_PRELUDE + textwrap.dedent(body), env=env,
                   python_args=python_args)

    def parse(self, out):
        return [line.split() for line in out.strip().splitlines()]

    HYBRID = """
        tracemalloc.start(25, native=True, native_frames=True)
        def callback():
            return ext.alloc(4242)          # PY_CALLBACK
        def outer():
            return ext.call(callback)       # PY_OUTER
        outer()                             # PY_MODULE
        [t] = traces_of(4242)
        print("total", t.traceback.total_nframe)
        show(t.traceback)
    """

    def py_line(self, marker, body=None):
        """The line of MARKER in the child's script of BODY."""
        code = PRELUDE + textwrap.dedent(
            FRAMES_PRELUDE + textwrap.dedent(body or self.HYBRID))
        return next(i for i, line in enumerate(code.splitlines(), 1)
                    if marker in line)

    def check_hybrid(self, out):
        lines = self.parse(out)
        self.assertEqual(lines[0], ["total", "3"])
        frames = lines[1:]
        # The C frames of the extension first, with their file and line.
        self.assertEqual(frames[0], ["C", "nf_inner_alloc",
                                     "_nativeframes_ext.c", str(INNER_LINE),
                                     frames[0][4]])
        self.assertTrue(frames[0][4].startswith("_nativeframes_ext"))
        self.assertEqual(frames[1][:4], ["C", "nf_alloc",
                                         "_nativeframes_ext.c",
                                         str(ALLOC_LINE)])
        # Then the Python line that called it, then its callers, with the
        # C frames of the call from C between them.
        py = [i for i, f in enumerate(frames) if f[0] == "PY"]
        self.assertEqual([frames[i][1:] for i in py],
                         [["<string>", str(self.py_line("PY_CALLBACK"))],
                          ["<string>", str(self.py_line("PY_OUTER"))],
                          ["<string>", str(self.py_line("PY_MODULE"))]])
        between = [f[1] for f in frames[py[0] + 1:py[1]]]
        self.assertIn("nf_call", between)
        call = frames[py[0] + 1:py[1]][between.index("nf_call")]
        self.assertEqual(call[2:4], ["_nativeframes_ext.c", str(CALL_LINE)])
        self.assertTrue(all(f[0] == "C" for f in frames[py[0] + 1:py[1]]))
        # The evaluation loop's frames are replaced by the Python frames.
        self.assertNotIn("_PyEval_EvalFrameDefault", [f[1] for f in frames])
        return frames

    def test_hybrid_stack(self):
        frames = self.check_hybrid(self.run_frames(self.HYBRID))
        # The interpreter's own C frames are named, with file and line (the
        # build has -g).
        own = [f for f in frames if f[0] == "C"
               and f[4] == os.path.basename(INTERPRETER_OBJECT)]
        self.assertTrue(own)
        self.assertTrue(any(f[2].endswith(".c") and int(f[3]) > 0
                            for f in own), own)

    def test_hybrid_stack_allocators(self):
        for name in ("malloc", "debug", "mimalloc"):
            if not allocator_known(name):
                continue
            with self.subTest(allocator=name):
                self.check_hybrid(self.run_frames(
                    self.HYBRID, env={"PYTHONMALLOC": name}))

    def test_startup_option(self):
        body = self.HYBRID.replace(
            "tracemalloc.start(25, native=True, native_frames=True)",
            "assert tracemalloc.is_tracing_native_frames() == 'native'")
        self.check_hybrid(self.run_frames(
            body, python_args=("-X", "tracemalloc=25",
                               "-X", "tracemalloc_native=frames")))
        self.check_hybrid(self.run_frames(
            body, env={"PYTHONTRACEMALLOC": "25",
                       "PYTHONTRACEMALLOCNATIVE": "frames"}))

    def test_python_tracebacks_unchanged(self):
        # The Python frames, total_nframe and statistics('lineno') are the
        # same with native frames as without.
        out = self.run_frames("""
            import sys
            mode = sys.argv[1:]
            def site():
                return ext.alloc(3131)
            def caller():
                return site()
            results = []
            for frames in (False, True):
                tracemalloc.start(2, native=True, native_frames=frames)
                caller()
                [t] = traces_of(3131)
                py = [f._frame for f in t.traceback if not f.is_native]
                stats = [(s.traceback[0]._frame, s.size) for s in
                         tracemalloc.take_snapshot().filter_traces(
                             NATIVE_ONLY).statistics("lineno")
                         if s.size >= 3131]
                results.append((py, t.traceback.total_nframe, stats,
                                any(f.is_native for f in t.traceback)))
                tracemalloc.stop()
                ext.free_all()
            print(results[0][:3] == results[1][:3], results[0][3],
                  results[1][3])
        """)
        self.assertEqual(out.split(), ["True", "False", "True"])

    def test_raw_stack(self):
        out = self.run_frames("""
            tracemalloc.start(5, native=True, native_frames=True)
            def f():
                return ext.alloc(999)
            address = ext.call(f)
            stack = _tracemalloc._native_stack(NATIVE, address)
            print(_tracemalloc._native_symbol(stack[0][0])[0])
            print([n for pc, n in stack if n >= 0][:2])
            print(_tracemalloc._native_stack(NATIVE, 12345))
        """)
        lines = out.splitlines()
        self.assertEqual(lines[0], "nf_inner_alloc")
        # The innermost call of the evaluation loop runs f() alone (entered
        # from C), the next one the module's frame.
        self.assertEqual(lines[1], "[1, 1]")
        self.assertEqual(lines[2], "None")

    def test_format_and_leak_checker(self):
        out = self.run_frames("""
            tracemalloc.start(4, native=True, native_frames=True)
            def leaky():
                ext.alloc(5555)
            [t] = (leaky(), traces_of(5555))[1]
            lines = t.traceback.format(most_recent_first=True)
            print(lines[0])
            print(lines[1])
            from tracemalloc import leaks
            report = leaks.check(leaky)
            print(report.format())
        """)
        lines = out.splitlines()
        self.assertEqual(lines[0],
                         '  File "%s", line %d, in nf_inner_alloc '
                         '[_nativeframes_ext%s]'
                         % (self.c_file, INNER_LINE,
                            lines[0].split("[_nativeframes_ext")[1][:-1]))
        self.assertIn("malloc(size);", lines[1])
        # The leak's site is the Python line; its traceback shows the C
        # frame first.
        site = next(line for line in lines if ": size=" in line)
        self.assertTrue(site.startswith("<string>:"), site)
        self.assertIn("domain %d" % tracemalloc.NATIVE_DOMAIN, site)
        c_frame = next(line for line in lines[lines.index(site):]
                       if "nf_inner_alloc" in line)
        self.assertIn("line %d" % INNER_LINE, c_frame)

    SQLITE = """
        import sqlite3
        tracemalloc.start(3, native=True, native_frames=True)
        con = sqlite3.connect(":memory:")
        con.execute("create table t(x)")
        con.executemany("insert into t values (?)",  # SQL
                        (("x" * 200,) for i in range(2000)))
        p = libc.malloc(6543)                                 # CTYPES
        snap = tracemalloc.take_snapshot()
        libs = set()
        sql_lines = set()
        for t in snap.traces:
            if t.domain != NATIVE:
                continue
            frames = list(t.traceback)
            if any(f.is_native and "libsqlite3" in f.library
                   for f in frames):
                sql_lines.add(next((f.lineno for f in reversed(frames)
                                    if not f.is_native), 0))
        [c] = traces_of(6543, snap)
        native = [f for f in reversed(list(c.traceback)) if f.is_native]
        print(sorted(sql_lines))
        print(any("ffi" in os.path.basename(f.library)
                  or f.function.startswith("ffi") for f in native))
        print(next(f for f in reversed(list(c.traceback))
                   if not f.is_native).lineno)
    """

    def test_sqlite3_and_ctypes(self):
        lines = self.run_frames(self.SQLITE).splitlines()
        # sqlite3's blocks, with libsqlite3's C frames, at the Python line
        # that ran the statement (and at the ones that opened the database).
        self.assertIn(str(self.py_line("# SQL", self.SQLITE)),
                      lines[0].strip("[]").split(", "))
        # ctypes' call of the C library's malloc(): libffi's frames, then
        # the Python line.
        self.assertEqual(lines[1:], ["True",
                                     str(self.py_line("# CTYPES",
                                                      self.SQLITE))])

    SAMPLING = """
        tracemalloc.start(3, native=True, native_frames=True, sample=4096)
        _tracemalloc._set_sample_seed(7)
        def site():
            for i in range(50):
                ext.alloc(1 << 20)      # SITE
        site()
        snap = tracemalloc.take_snapshot()
        ts = [t for t in snap.traces
              if t.domain == NATIVE and any(
                  f.is_native and f.function == "nf_inner_alloc"
                  for f in t.traceback)]
        print(len(ts) > 0, sorted({
            next(f for f in reversed(list(t.traceback))
                 if not f.is_native).lineno for t in ts}))
    """

    def test_sampling(self):
        out = self.run_frames(self.SAMPLING)
        self.assertEqual(out.strip(), "True [%d]"
                         % self.py_line("# SITE", self.SAMPLING))

    def test_c_thread_without_python_frames(self):
        out = self.run_frames("""
            tracemalloc.start(5, native=True, native_frames=True)
            ext.thread()
            [t] = traces_of(7777)
            print(t.traceback.total_nframe,
                  [f.is_native for f in t.traceback].count(False))
            show(t.traceback)
        """)
        lines = self.parse(out)
        self.assertEqual(lines[0], ["1", "0"])
        self.assertEqual(lines[1][:4], ["C", "nf_thread_main",
                                        "_nativeframes_ext.c",
                                        str(THREAD_LINE)])

    def test_review_groupings(self):
        # Second review of the native domain (session 40): a C thread's
        # block groups at '<unknown>:0' by line and file, as without native
        # frames; statistics('filename', cumulative=True) keeps C frames
        # C frames; pprof and the HTML report do not mark a whole stack as
        # cut (the limit counts Python frames).
        out = self.run_frames("""
            import tempfile
            tracemalloc.start(3, native=True, native_frames=True)
            ext.thread()
            snap = tracemalloc.take_snapshot()
            sub = snap.filter_traces([tracemalloc.DomainFilter(True, NATIVE)])
            for key in ("lineno", "filename"):
                st = [st for st in sub.statistics(key) if st.size == 7777]
                print(key, [str(f) for f in st[0].traceback])
            kept = snap.filter_traces([tracemalloc.Filter(False, "<unknown>")])
            print("kept", [t.size for t in kept.traces if t.domain == NATIVE
                           and t.size == 7777])
            def cb():
                return ext.alloc(4242)
            ext.call(cb)
            snap = tracemalloc.take_snapshot()
            sub = snap.filter_traces([tracemalloc.DomainFilter(True, NATIVE)])
            cum = [st.traceback[0] for st
                   in sub.statistics("filename", cumulative=True)
                   if st.size >= 4242]
            print("cumulative", sum(f.is_native for f in cum) > 0,
                  all(f.is_native == (f.function is not None) for f in cum),
                  any(f.filename.endswith(".c") and not f.is_native
                      for f in cum))
            from tracemalloc import htmlreport
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "r.html")
                htmlreport.write_html(sub, path)
                with open(path, encoding="utf-8") as f:
                    print("html marker", "beyond the traceback limit" in f.read())
        """)
        lines = out.strip().splitlines()
        self.assertEqual(lines[0], "lineno ['<unknown>:0']")
        self.assertEqual(lines[1], "filename ['<unknown>:0']")
        self.assertEqual(lines[2], "kept []")
        self.assertEqual(lines[3], "cumulative True True False")
        self.assertEqual(lines[4], "html marker False")

    def test_fork(self):
        out = self.run_frames("""
            tracemalloc.start(5, native=True, native_frames=True)
            ext.alloc(100)
            tracemalloc.take_snapshot()     # the symbol cache is used
            pid = os.fork()
            if pid == 0:
                def child():
                    return ext.alloc(2468)
                child()
                [t] = traces_of(2468)
                ok = [f.function for f in t.traceback if f.is_native][-1]
                os._exit(0 if ok == "nf_inner_alloc" else 3)
            _, status = os.waitpid(pid, 0)
            print(os.waitstatus_to_exitcode(status))
        """)
        self.assertEqual(out.strip(), "0")

    def test_threads_while_snapshots(self):
        # Python threads allocating natively (with native frames) while
        # the main thread takes snapshots and symbolises: no deadlock (the
        # child's time is bounded by run()'s timeout), every trace right.
        out = self.run_frames("""
            import threading
            tracemalloc.start(5, native=True, native_frames=True)
            stop = threading.Event()
            def worker():
                while not stop.is_set():
                    for i in range(50):
                        ext.alloc(321)
                    ext.call(lambda: ext.alloc(322))
            threads = [threading.Thread(target=worker) for i in range(3)]
            for t in threads:
                t.start()
            bad = 0
            for i in range(15):
                snap = tracemalloc.take_snapshot()
                for t in snap.traces:
                    if t.domain == NATIVE and t.size in (321, 322):
                        c = [f for f in t.traceback if f.is_native]
                        if not c or c[-1].function != "nf_inner_alloc":
                            bad += 1
            stop.set()
            for t in threads:
                t.join()
            print("bad", bad)
        """)
        self.assertEqual(out.strip(), "bad 0")

    def test_compaction_keeps_native_nodes(self):
        out = self.run_frames("""
            import _testtracemalloc
            tracemalloc.start(3, native=True, native_frames=True)
            def keep():
                return ext.alloc(1357)
            keep()
            before = _testtracemalloc.engine_stats()["compactions"]
            # Many short-lived call paths: the tree is compacted.
            for i in range(6000):
                exec("\\n" * i + "bytearray(10)")
            after = _testtracemalloc.engine_stats()["compactions"]
            [t] = traces_of(1357)
            c = [f.function for f in t.traceback if f.is_native]
            print(after > before, c[-2:])
        """)
        self.assertEqual(out.strip(),
                         "True ['nf_alloc', 'nf_inner_alloc']")

    def test_dump_load_pprof(self):
        out = self.run_frames("""
            import gzip, pickle, tempfile
            tracemalloc.start(3, native=True, native_frames=True)
            def site():
                return ext.alloc(8642)
            site()
            snap = tracemalloc.take_snapshot()
            [t] = traces_of(8642, snap)
            path = tempfile.mktemp()
            snap.dump(path)
            loaded = tracemalloc.Snapshot.load(path)
            os.unlink(path)
            [u] = traces_of(8642, loaded)
            print(u.traceback == t.traceback,
                  [f.function for f in u.traceback if f.is_native][-1],
                  u.traceback.total_nframe == t.traceback.total_nframe)
            print(pickle.loads(pickle.dumps(t.traceback)) == t.traceback)
            from tracemalloc import _pprof
            data = _pprof.encode(snap)
            print(b"nf_inner_alloc" in data, b"_nativeframes_ext" in data)
            from tracemalloc import htmlreport
            page = tempfile.mktemp(suffix=".html")
            htmlreport.write_html(snap, page)
            with open(page, encoding="utf-8") as f:
                text = f.read()
            os.unlink(page)
            print("nf_inner_alloc()" in text)
        """)
        self.assertEqual(out.split(), ["True", "nf_inner_alloc", "True",
                                       "True", "True", "True", "True"])

    ALL = """
        tracemalloc.start(3, native=True, native_frames="all")
        print(tracemalloc.is_tracing_native_frames())
        def make():
            return bytearray(70000)     # MAKE
        obj = ext.call(make)
        tb = tracemalloc.get_object_traceback(obj)
        frames = list(reversed(list(tb)))
        print(frames[0].is_native,
              next(f for f in frames if not f.is_native).lineno,
              "nf_call" in [f.function for f in frames])
        # the engine's own hooks are not shown
        print(any(f.function.startswith("_PyTraceMalloc_")
                  for f in frames if f.is_native))
    """

    def test_python_domains_all(self):
        out = self.run_frames(self.ALL)
        self.assertEqual(out.split(), ["all", "True",
                                       str(self.py_line("# MAKE", self.ALL)),
                                       "True", "False"])

    def test_bad_values(self):
        out = self.run_frames("""
            for kwargs in ({"native_frames": 1}, {"native_frames": "yes"},
                           {"native_frames": True},
                           {"native": False, "native_frames": True}):
                try:
                    tracemalloc.start(1, **kwargs)
                except (TypeError, ValueError) as exc:
                    print(type(exc).__name__)
                print(tracemalloc.is_tracing())
                tracemalloc.stop()
        """)
        self.assertEqual(out.split(),
                         ["TypeError", "False", "ValueError", "False",
                          "ValueError", "False", "ValueError", "False"])
        rc, out, err = assert_python_failure(
            "-X", "tracemalloc_native=framez", "-c", "pass")
        self.assertIn(b"-X tracemalloc_native=framez: expected 1, 0, "
                      b"frames or frames-all", err)




if __name__ == "__main__":
    unittest.main()
