"""Stress tests of tracemalloc: bounded in time, each in its own process.

Every scenario runs in a child interpreter (`python
Lib/test/test_tracemalloc_stress.py SCENARIO SECONDS`), so that a crash or a
deadlock fails one test instead of killing the runner.  The child prints one
`ITERATIONS {json}` line with what it did; the test checks the exit status,
that stderr holds no fatal error, and that every counter moved, then prints
the counts (`ITERATIONS scenario: ...`) so that the run's output shows how
much was exercised.

The scenarios run for TRACEMALLOC_STRESS_SECONDS each (default 2); set it
higher for a soak run, e.g. under ThreadSanitizer (`make tsan`).
"""

import json
import os
import random
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import threading
import time
import traceback
import tracemalloc
import unittest

from test import support
from test.support import import_helper

DEFAULT_SECONDS = float(os.environ.get("TRACEMALLOC_STRESS_SECONDS", "2"))

# C threads created by pthread_create(), without any Python thread state,
# calling the C API functions that promise to work there: the raw domain and
# PyTraceMalloc_Track/Untrack.
C_THREADS_SOURCE = r"""
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int (*track_fn)(unsigned int, uintptr_t, size_t);
typedef int (*untrack_fn)(unsigned int, uintptr_t);
typedef void *(*malloc_fn)(size_t);
typedef void *(*calloc_fn)(size_t, size_t);
typedef void *(*realloc_fn)(void *, size_t);
typedef void (*free_fn)(void *);

#define MAX_THREADS 16
#define LIVE 32

static track_fn track;
static untrack_fn untrack;
static malloc_fn raw_malloc;
static calloc_fn raw_calloc;
static realloc_fn raw_realloc;
static free_fn raw_free;
static int stop_flag;
static int nthreads;
static pthread_t threads[MAX_THREADS];
static long iterations[MAX_THREADS];
static long failures[MAX_THREADS];

static void *
worker(void *arg)
{
    long index = (long)(intptr_t)arg;
    unsigned int domain = 1000 + (unsigned int)index;
    void *tracked[LIVE];
    void *raw[LIVE];
    unsigned int seed = (unsigned int)index * 7919u + 1u;
    long n = 0;
    memset(tracked, 0, sizeof(tracked));
    memset(raw, 0, sizeof(raw));
    while (!__atomic_load_n(&stop_flag, __ATOMIC_RELAXED)) {
        int slot = (int)(rand_r(&seed) % LIVE);
        size_t size = (size_t)(rand_r(&seed) % 5000);
        /* A block of our own, reported in a domain of our own. */
        if (tracked[slot] != NULL) {
            untrack(domain, (uintptr_t)tracked[slot]);
            free(tracked[slot]);
        }
        tracked[slot] = malloc(size + 1);
        if (tracked[slot] != NULL
            && track(domain, (uintptr_t)tracked[slot], size + 1) < 0) {
            /* -2 = not tracing: allowed at any time. */
            failures[index]++;
        }
        /* The raw domain, which needs neither the GIL nor a thread state. */
        switch (rand_r(&seed) % 3) {
        case 0:
            raw_free(raw[slot]);
            raw[slot] = raw_malloc(size);
            break;
        case 1:
            raw_free(raw[slot]);
            raw[slot] = raw_calloc(1, size);
            break;
        default: {
            void *p = raw_realloc(raw[slot], size);
            if (p != NULL || size == 0) {
                raw[slot] = p;
            }
        }
        }
        n++;
    }
    for (int i = 0; i < LIVE; i++) {
        if (tracked[i] != NULL) {
            untrack(domain, (uintptr_t)tracked[i]);
            free(tracked[i]);
        }
        raw_free(raw[i]);
    }
    iterations[index] = n;
    return NULL;
}

int
stress_start(int n)
{
    track = (track_fn)dlsym(RTLD_DEFAULT, "PyTraceMalloc_Track");
    untrack = (untrack_fn)dlsym(RTLD_DEFAULT, "PyTraceMalloc_Untrack");
    raw_malloc = (malloc_fn)dlsym(RTLD_DEFAULT, "PyMem_RawMalloc");
    raw_calloc = (calloc_fn)dlsym(RTLD_DEFAULT, "PyMem_RawCalloc");
    raw_realloc = (realloc_fn)dlsym(RTLD_DEFAULT, "PyMem_RawRealloc");
    raw_free = (free_fn)dlsym(RTLD_DEFAULT, "PyMem_RawFree");
    if (!track || !untrack || !raw_malloc || !raw_calloc || !raw_realloc
        || !raw_free) {
        return -1;
    }
    if (n > MAX_THREADS) {
        n = MAX_THREADS;
    }
    __atomic_store_n(&stop_flag, 0, __ATOMIC_RELAXED);
    for (nthreads = 0; nthreads < n; nthreads++) {
        iterations[nthreads] = 0;
        if (pthread_create(&threads[nthreads], NULL, worker,
                           (void *)(intptr_t)nthreads) != 0) {
            break;
        }
    }
    return nthreads;
}

long
stress_stop(void)
{
    long total = 0;
    __atomic_store_n(&stop_flag, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < nthreads; i++) {
        pthread_join(threads[i], NULL);
        total += iterations[i];
    }
    nthreads = 0;
    return total;
}
"""


def build_c_threads(tmpdir):
    """Compile the C threads helper; return a ctypes library or None."""
    import ctypes
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            return None
    source = os.path.join(tmpdir, "c_threads.c")
    library = os.path.join(tmpdir, "c_threads.so")
    with open(source, "w") as f:
        f.write(C_THREADS_SOURCE)
    proc = subprocess.run([cc, "-shared", "-fPIC", "-O1", "-pthread",
                           source, "-o", library, "-ldl"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        return None
    lib = ctypes.CDLL(library)      # CDLL: the GIL is released during calls
    lib.stress_start.argtypes = [ctypes.c_int]
    lib.stress_start.restype = ctypes.c_int
    lib.stress_stop.argtypes = []
    lib.stress_stop.restype = ctypes.c_long
    return lib


class Allocators:
    """ctypes bindings of the three domains (raw also without the GIL)."""

    def __init__(self):
        import ctypes
        vp, sz = ctypes.c_void_p, ctypes.c_size_t
        self.domains = []
        for lib, prefix in ((ctypes.PyDLL(None), "PyMem_Raw"),
                            (ctypes.CDLL(None), "PyMem_Raw"),
                            (ctypes.PyDLL(None), "PyMem_"),
                            (ctypes.PyDLL(None), "PyObject_")):
            malloc = getattr(lib, prefix + "Malloc")
            malloc.restype, malloc.argtypes = vp, [sz]
            calloc = getattr(lib, prefix + "Calloc")
            calloc.restype, calloc.argtypes = vp, [sz, sz]
            realloc = getattr(lib, prefix + "Realloc")
            realloc.restype, realloc.argtypes = vp, [vp, sz]
            free = getattr(lib, prefix + "Free")
            free.restype, free.argtypes = None, [vp]
            self.domains.append((malloc, calloc, realloc, free))


class Stop:
    """A deadline shared by the threads of a scenario.

    A thread's first question is always answered "go on", so that every
    loop runs at least once however late its thread got the CPU: on a
    loaded machine a thread could otherwise start after the deadline and
    count nothing, and the scenario would fail for want of work, not for
    a wrong answer.
    """

    def __init__(self, seconds):
        self.deadline = time.monotonic() + seconds
        self.event = threading.Event()
        self.asked = set()

    def __bool__(self):
        me = threading.get_ident()
        if me not in self.asked:
            self.asked.add(me)
            return False
        if not self.event.is_set() and time.monotonic() >= self.deadline:
            self.event.set()
        return self.event.is_set()


def run_threads(functions):
    """Run each function in a thread; re-raise the first failure."""
    errors = []

    def wrap(function):
        try:
            function()
        except BaseException:
            errors.append(traceback.format_exc())

    threads = [threading.Thread(target=wrap, args=(f,)) for f in functions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise AssertionError("thread failed:\n" + "\n".join(errors))


def allocating_worker(stop, allocators, seed, counts, key):
    """Allocate, resize and free through every domain until stopped."""
    rng = random.Random(seed)
    held = []
    n = 0
    try:
        while not stop:
            malloc, calloc, realloc, free = rng.choice(allocators.domains)
            size = rng.choice((0, 1, 8, 100, 512, 513, 4000, 70000))
            op = rng.random()
            if op < 0.35 or len(held) < 4:
                held.append((free, realloc, malloc(size)))
            elif op < 0.5:
                held.append((free, realloc, calloc(3, size)))
            elif op < 0.7:
                i = rng.randrange(len(held))
                free_, realloc_, p = held[i]
                p2 = realloc_(p, rng.choice((1, 64, 600, 9000)))
                if p2 is not None:
                    held[i] = (free_, realloc_, p2)
            else:
                free_, realloc_, p = held.pop(rng.randrange(len(held)))
                free_(p)
            if n % 8 == 0:
                # Python objects too: GC objects, free lists, big buffers.
                junk = [[i] * 3 for i in range(20)], {n: str(n)}, \
                    bytearray(size), 1.5 * n
                del junk
            n += 1
    finally:
        for free_, realloc_, p in held:
            free_(p)
        counts[key] = counts.get(key, 0) + n


def controller(stop, counts, check_consistency=True):
    """Start, stop, snapshot and clear until stopped."""
    import _tracemalloc, _testtracemalloc
    rng = random.Random(1)
    n = 0
    previous = None
    while not stop:
        if not tracemalloc.is_tracing():
            tracemalloc.start(rng.choice((1, 5, 25)))
        action = rng.randrange(8)
        if action == 0:
            tracemalloc.stop()
        elif action == 1:
            tracemalloc.clear_traces()
        elif action == 2:
            snapshot = tracemalloc.take_snapshot()
            snapshot.statistics(rng.choice(("lineno", "filename",
                                            "traceback")))
            if previous is not None:
                snapshot.compare_to(previous, "lineno")
            previous = snapshot
        elif action == 3:
            tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
        elif action == 4:
            tracemalloc.get_tracemalloc_memory()
            tracemalloc.get_traceback_limit()
        elif action == 5:
            obj = [n]
            tracemalloc.get_object_traceback(obj)
        elif action == 6 and check_consistency:
            _testtracemalloc.check_consistency()
        else:
            _tracemalloc._get_traces()
        n += 1
    counts["control_operations"] = n


# ---------------------------------------------------------------------------
# Scenarios: run in the child process; each returns its counters.

def scenario_domains(seconds):
    """Threads allocate through every domain (raw also without the GIL),
    C threads without a thread state use the raw domain and
    PyTraceMalloc_Track, while a controller starts, stops, snapshots and
    clears."""
    allocators = Allocators()
    counts = {}
    tmpdir = tempfile.mkdtemp()
    try:
        c_threads = build_c_threads(tmpdir)
        if c_threads is not None:
            started = c_threads.stress_start(3)
            if started != 3:
                raise AssertionError(f"C threads: stress_start -> {started}")
        tracemalloc.start(25)
        stop = Stop(seconds)
        workers = [lambda i=i: allocating_worker(stop, allocators, i, counts,
                                                 "allocations")
                   for i in range(4)]
        run_threads(workers + [lambda: controller(stop, counts)])
        if c_threads is not None:
            counts["c_thread_iterations"] = c_threads.stress_stop()
        else:
            print("no C compiler: C threads skipped", file=sys.stderr)
    finally:
        shutil.rmtree(tmpdir)
    import _tracemalloc, _testtracemalloc
    if not tracemalloc.is_tracing():
        tracemalloc.start(5)
    _testtracemalloc.check_consistency()
    # No trace left in the C threads' domains once they untracked all.
    left = [t for t in _tracemalloc._get_traces() if 1000 <= t[0] < 1016]
    if left:
        raise AssertionError(f"{len(left)} traces left in C threads' domains")
    tracemalloc.stop()
    return counts


def scenario_fork_from_thread(seconds):
    """A thread forks while others allocate; each child checks its
    inherited state, allocates, snapshots and exits."""
    import _tracemalloc, _testtracemalloc
    allocators = Allocators()
    counts = {"forks": 0}
    tracemalloc.start(25)
    stop = Stop(seconds)

    def forker():
        while not stop:
            pid = os.fork()
            if pid == 0:
                status = 1
                try:
                    _testtracemalloc.check_consistency()
                    data = [bytearray(100) for _ in range(100)]
                    if tracemalloc.get_object_traceback(data[0]) is None:
                        raise AssertionError("child: block not traced")
                    snapshot = tracemalloc.take_snapshot()
                    snapshot.statistics("lineno")
                    tracemalloc.clear_traces()
                    _testtracemalloc.check_consistency()
                    tracemalloc.stop()
                    status = 0
                except BaseException:
                    traceback.print_exc()
                finally:
                    os._exit(status)
            deadline = time.monotonic() + support.SHORT_TIMEOUT
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                if time.monotonic() > deadline:
                    os.kill(pid, 9)
                    os.waitpid(pid, 0)
                    raise AssertionError("forked child hung")
                time.sleep(0.001)
            if os.waitstatus_to_exitcode(status) != 0:
                raise AssertionError(f"forked child failed: status {status}")
            counts["forks"] += 1

    workers = [lambda i=i: allocating_worker(stop, allocators, i, counts,
                                             "allocations")
               for i in range(3)]
    run_threads(workers + [forker])
    _testtracemalloc.check_consistency()
    tracemalloc.stop()
    return counts


SUBINTERPRETER_CODE = """
import time, tracemalloc
deadline = time.monotonic() + {seconds}
n = 0
kept = []
def allocate(depth):
    if depth:
        return allocate(depth - 1)
    return [{{i: str(i)}} for i in range(20)], bytearray(3000)
while time.monotonic() < deadline:
    kept.append(allocate(n % 7))
    if len(kept) > 50:
        del kept[:25]
    if n % 50 == 0 and tracemalloc.is_tracing():
        tracemalloc.get_object_traceback(kept[-1][0])
        tracemalloc.get_traced_memory()
    if n % 200 == 0:
        tracemalloc.take_snapshot().statistics("lineno")
    n += 1
"""


def _subinterpreter_api():
    """(create, run, destroy) of the base's private subinterpreter module:
    3.13's _interpreters, 3.11's _xxsubinterpreters.  The subinterpreters
    share the main GIL ('legacy' on 3.13), because they use tracemalloc,
    whose _tracemalloc module, like upstream's, loads only there;
    test_tracemalloc_subinterp covers interpreters with a GIL of their
    own."""
    try:
        import _interpreters
    except ImportError:
        module = import_helper.import_module("_xxsubinterpreters")
        return module.create, module.run_string, module.destroy
    def create():
        return _interpreters.create(_interpreters.new_config('legacy'))
    return create, _interpreters.exec, _interpreters.destroy


def scenario_subinterpreters(seconds):
    """Subinterpreters allocate while the main interpreter traces,
    snapshots and clears, then are destroyed while tracing."""
    import _tracemalloc, _testtracemalloc
    create, run, destroy = _subinterpreter_api()
    counts = {"subinterpreters": 0, "allocation_rounds": 0}
    tracemalloc.start(25)
    stop = Stop(seconds)
    round_seconds = max(seconds / 4, 0.1)

    def sub():
        while not stop:
            interp = create()
            try:
                failure = run(interp, SUBINTERPRETER_CODE.format(
                    seconds=round_seconds))
                if failure is not None:
                    raise RuntimeError(f"subinterpreter failed: {failure}")
            finally:
                destroy(interp)
            counts["subinterpreters"] += 1
            counts["allocation_rounds"] += 1

    def main_loop():
        n = 0
        previous = None
        while not stop:
            snapshot = tracemalloc.take_snapshot()
            snapshot.statistics("traceback")
            if previous is not None:
                snapshot.compare_to(previous, "filename")
            previous = snapshot
            if n % 5 == 0:
                tracemalloc.clear_traces()
            _testtracemalloc.check_consistency()
            time.sleep(0.01)
            n += 1
        counts["main_snapshots"] = n

    run_threads([sub, sub, main_loop])
    # The destroyed interpreters' code is gone: tracebacks must still
    # read fine.
    snapshot = tracemalloc.take_snapshot()
    for stat in snapshot.statistics("traceback"):
        stat.traceback.format()
    _testtracemalloc.check_consistency()
    tracemalloc.stop()
    return counts


def _nomemory_operations(tmpdir):
    """(name, function) pairs: each operation of the public API that
    allocates, to fail at every allocation."""
    filename = os.path.join(tmpdir, "snapshot")
    tracemalloc.start(10)
    data = [bytearray(i) for i in range(50)]
    old = tracemalloc.take_snapshot()
    data.extend(str(i) * 3 for i in range(50))
    new = tracemalloc.take_snapshot()
    new.dump(filename)
    tracemalloc.stop()

    def start():
        tracemalloc.stop()
        tracemalloc.start(25)

    return [
        ("start", start),
        ("take_snapshot", tracemalloc.take_snapshot),
        ("statistics", lambda: new.statistics("traceback")),
        ("compare_to", lambda: new.compare_to(old, "lineno")),
        ("dump", lambda: new.dump(filename)),
        ("load", lambda: tracemalloc.Snapshot.load(filename)),
        ("clear_traces", tracemalloc.clear_traces),
    ], data


NOMEMORY_OPERATIONS = ("start", "take_snapshot", "statistics", "compare_to",
                       "dump", "load", "clear_traces")
# Bound on each operation's sweep, so that the scenario stays bounded.
NOMEMORY_MAX_POINTS = 5000
# The sweep ends after this many failure points in a row that the
# operation got through: past its last allocation.
NOMEMORY_CLEAN_RUN = 30
# The engine's own bookkeeping memory does not come from the Python
# allocators: _testtracemalloc.fail_bookkeeping(n) fails its next n
# allocations instead.
BOOKKEEPING_MAX_FAILURES = 40


def scenario_nomemory(seconds, operation_name):
    """Fail the k-th allocation (k = 1, 2, ...) of one operation, through
    _testcapi.set_nomemory(); then fail the engine's next n bookkeeping
    allocations (n = 1, 2, ...).  After each failure, tracing must still be
    consistent and work."""
    import _tracemalloc, _testtracemalloc
    import zlib
    _testcapi = import_helper.import_module("_testcapi")
    tmpdir = tempfile.mkdtemp()
    counts = {"failure_points": 0, "memory_errors": 0,
              "bookkeeping_points": 0, "bookkeeping_errors": 0}

    def attempt(operation, inject, remove):
        tracemalloc.stop()
        tracemalloc.start(25)
        inject()
        failed = False
        try:
            operation()
        except (MemoryError, zlib.error):
            failed = True
        except RuntimeError as exc:
            # io's "can't allocate read lock": how CPython reports that
            # PyThread_allocate_lock() failed.
            if "allocate" not in str(exc):
                raise
            failed = True
        except ValueError as exc:
            # load() reads a file it dumped itself: the only acceptable
            # ValueError is a memory failure it wrapped.
            if operation_name != "load" or "memory" not in str(exc).lower():
                raise
            failed = True
        finally:
            remove()
        _testtracemalloc.check_consistency()
        # Tracing still works after the failure.
        if tracemalloc.is_tracing():
            obj = bytearray(10)      # no free list: a fresh block
            if tracemalloc.get_object_traceback(obj) is None:
                raise AssertionError(f"{operation_name}: no traceback "
                                     f"after an injected failure")
            tracemalloc.take_snapshot()
        return failed

    try:
        operations, keep = _nomemory_operations(tmpdir)
        operation = dict(operations)[operation_name]
        clean = 0
        for k in range(NOMEMORY_MAX_POINTS):
            failed = attempt(operation,
                             lambda: _testcapi.set_nomemory(k, k + 1),
                             _testcapi.remove_mem_hooks)
            counts["failure_points"] += 1
            counts["memory_errors"] += failed
            clean = 0 if failed else clean + 1
            if clean >= NOMEMORY_CLEAN_RUN:
                break
        for n in range(1, BOOKKEEPING_MAX_FAILURES + 1):
            failed = attempt(operation,
                             lambda: _testtracemalloc.fail_bookkeeping(n),
                             lambda: _testtracemalloc.fail_bookkeeping(0))
            counts["bookkeeping_points"] += 1
            counts["bookkeeping_errors"] += failed
        tracemalloc.stop()
        del keep
    finally:
        shutil.rmtree(tmpdir)
    return counts


SHUTDOWN_SCRIPT = r"""
import atexit, bz2, lzma, os, sys, threading, time, tracemalloc, weakref, zlib
import ctypes

raw_malloc = ctypes.CDLL(None).PyMem_RawMalloc
raw_malloc.restype, raw_malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
raw_free = ctypes.CDLL(None).PyMem_RawFree
raw_free.restype, raw_free.argtypes = None, [ctypes.c_void_p]
variant = int(sys.argv[1])

def compressing(module):
    data = os.urandom(2000) * 20
    while True:
        module.decompress(module.compress(data))
        raw_free(raw_malloc(5000))

class LateFinalizer:
    def __init__(self, size):
        self.size = size
        self.cycle = self
    def __del__(self):
        # Runs at any point of the shutdown, while tracing.
        blocks = [bytearray(self.size) for _ in range(10)]
        tracemalloc.is_tracing() and tracemalloc.get_traced_memory()
        zlib.compress(bytes(self.size))

for module in (zlib, bz2, lzma):
    threading.Thread(target=compressing, args=(module,), daemon=True).start()
# Finalized late: module globals, reference cycles, weakref callbacks.
keep = [LateFinalizer(100 * i) for i in range(10)]
holder = LateFinalizer(5000)
weakref.finalize(holder, lambda: [bytearray(200) for _ in range(10)])
del holder
if variant % 3 == 1:
    atexit.register(tracemalloc.stop)
elif variant % 3 == 2:
    atexit.register(lambda: tracemalloc.take_snapshot().statistics("lineno"))
if variant % 2:
    def stopper():
        time.sleep(0.01)
        tracemalloc.stop()
        tracemalloc.start(3)
    threading.Thread(target=stopper, daemon=True).start()
time.sleep(0.02 + 0.01 * (variant % 4))
if variant % 4 == 3:
    sys.exit(0)
"""


def scenario_shutdown(seconds):
    """The interpreter exits while tracing, daemon threads compress with
    zlib, bz2 and lzma and allocate raw memory, and finalizers run late."""
    stop = Stop(seconds)
    counts = {"shutdowns": 0}
    with tempfile.TemporaryDirectory() as tmpdir:
        script = os.path.join(tmpdir, "shutdown.py")
        with open(script, "w") as f:
            f.write(SHUTDOWN_SCRIPT)
        variant = 0
        while not stop or variant < 4:
            proc = subprocess.run(
                [sys.executable, "-X", "tracemalloc=25", "-X", "faulthandler",
                 script, str(variant)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                timeout=support.SHORT_TIMEOUT)
            if proc.returncode != 0 or proc.stderr:
                raise AssertionError(f"variant {variant}: exit status "
                                     f"{proc.returncode}\n{proc.stderr}")
            variant += 1
            counts["shutdowns"] += 1
    return counts


SCENARIOS = {
    "domains": scenario_domains,
    "fork_from_thread": scenario_fork_from_thread,
    "subinterpreters": scenario_subinterpreters,
    "shutdown": scenario_shutdown,
}


def child_main(argv):
    name, seconds = argv[0], float(argv[1])
    start = time.monotonic()
    if name.startswith("nomemory:"):
        counts = scenario_nomemory(seconds, name.partition(":")[2])
    else:
        counts = SCENARIOS[name](seconds)
    counts["seconds"] = round(time.monotonic() - start, 2)
    print("ITERATIONS " + json.dumps(counts), flush=True)


# ---------------------------------------------------------------------------
# The tests: one child per scenario.

class StressTest(unittest.TestCase):
    seconds = DEFAULT_SECONDS

    def run_scenario(self, name, seconds=None):
        seconds = self.seconds if seconds is None else seconds
        env = dict(os.environ)
        env.pop("PYTHONTRACEMALLOC", None)  # each scenario starts tracing
        # The child runs this very file, wherever it was imported from.
        cmd = [sys.executable, "-X", "faulthandler",
               os.path.abspath(__file__), name, str(seconds)]
        try:
            proc = subprocess.run(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True, env=env,
                timeout=seconds * 10 + support.LONG_TIMEOUT)
        except subprocess.TimeoutExpired as exc:
            self.fail(f"{name}: timed out (deadlock?)\n{exc.stderr}")
        counts = None
        for line in proc.stdout.splitlines():
            if line.startswith("ITERATIONS "):
                counts = json.loads(line[len("ITERATIONS "):])
        self.assertEqual(proc.returncode, 0,
                         f"{name}: exit status {proc.returncode}\n"
                         f"{proc.stdout}\n{proc.stderr}")
        self.assertNotIn("Fatal Python error", proc.stderr)
        self.assertIsNotNone(counts, f"{name}: no counts\n{proc.stderr}")
        summary = ", ".join(f"{key}={value}" for key, value in counts.items())
        print(f"ITERATIONS {name}: {summary}", flush=True)
        return counts

    def assertAllMoved(self, counts, *keys):
        for key in keys:
            self.assertGreater(counts.get(key, 0), 0, f"{key}: {counts}")

    def test_domains_threads_and_control(self):
        counts = self.run_scenario("domains")
        self.assertAllMoved(counts, "allocations", "control_operations")
        if shutil.which("cc") or shutil.which("gcc"):
            self.assertAllMoved(counts, "c_thread_iterations")

    @support.requires_fork()
    # A forked child deadlocks inside AddressSanitizer's own allocator when
    # another thread held its lock at the fork: libasan before compiler-rt
    # 18 (GCC 12's included) installs no fork handlers for it.  Seen in
    # `make sanitizer-test`, the child stuck in
    # SizeClassAllocator64::GetFromAllocator, called from malloc(); the
    # plain build runs this test in `make test`.
    @unittest.skipIf(support.check_sanitizer(address=True),
                     "libasan's allocator is not fork-safe")
    def test_fork_from_a_thread_while_others_allocate(self):
        counts = self.run_scenario("fork_from_thread")
        self.assertAllMoved(counts, "allocations", "forks")

    def test_subinterpreters(self):
        _subinterpreter_api()   # skips where the base has neither module
        counts = self.run_scenario("subinterpreters")
        self.assertAllMoved(counts, "subinterpreters", "main_snapshots")

    def check_nomemory(self, operation, reports_errors=True):
        import_helper.import_module("_testcapi")
        counts = self.run_scenario(f"nomemory:{operation}")
        # The sweep reached the end of the operation before the bound.
        self.assertLess(counts["failure_points"], NOMEMORY_MAX_POINTS)
        if reports_errors:
            # Failures were injected, and reported as exceptions.
            self.assertGreater(counts["memory_errors"]
                               + counts["bookkeeping_errors"], 0)

    def test_nomemory_start(self):
        self.check_nomemory("start")

    def test_nomemory_take_snapshot(self):
        self.check_nomemory("take_snapshot")

    def test_nomemory_statistics(self):
        self.check_nomemory("statistics")

    def test_nomemory_compare_to(self):
        self.check_nomemory("compare_to")

    def test_nomemory_dump(self):
        self.check_nomemory("dump")

    def test_nomemory_load(self):
        self.check_nomemory("load")

    def test_nomemory_clear_traces(self):
        # clear_traces() has no error to report: it must just leave a
        # consistent, working state.
        self.check_nomemory("clear_traces", reports_errors=False)

    def test_shutdown_while_tracing(self):
        counts = self.run_scenario("shutdown")
        self.assertGreaterEqual(counts["shutdowns"], 4)


if __name__ == "__main__":
    if len(sys.argv) == 3 and (sys.argv[1] in SCENARIOS
                               or sys.argv[1].startswith("nomemory:")):
        child_main(sys.argv[1:])
    else:
        unittest.main()
