"""A differential fuzzer of the tracing engine against pristine CPython.

    python Tools/fork/fuzz_differential.py --seconds 300      (make fuzz-differential)
    python Tools/fork/fuzz_differential.py --seed 17 --show   one program
    python Tools/fork/fuzz_differential.py --mode sampling --seeds 0-99

Each seed gives a reproducible program: a list of steps, each one or a few
lines of Python, written into a file of its own.  Two modes:

exact     the program runs on the fork and on pristine CPython of the same
          release (--pristine-python, or $TRACEMALLOC_PRISTINE_PYTHON, or
          the cache of `make bench-pristine`).  After every step both
          report, for each object or block the program holds, its
          traceback (_tracemalloc._get_object_traceback() for objects,
          _testinternalcapi._PyTraceMalloc_GetTraceback() for blocks), and
          the live traces of the program's step lines, grouped by
          (traceback, domain) into (count, bytes).  The fork must report
          what pristine reports.  The free lists are emptied (gc.collect())
          before each report and after it (the report frees all of its
          objects before that collection, see M(): pristine leaves the
          trace tuples it allocated untraced, to be reused untraced, where
          the fork traces them at the line that reuses them), so that the
          documented differences of take_snapshot() with free lists
          ("Differences from upstream" in Doc/library/tracemalloc.rst)
          cannot show; programs make no
          generator, coroutine or frame object (16 bytes bigger in the
          fork, documented), and every free-list reuse happens inside one
          step.  One reuse differs by design: the fork re-traces a
          dictionary's key table taken from its free list at the line that
          takes it, pristine leaves it where it was first allocated; a
          line whose traces differ by whole key tables only, when every
          line that differs does, is taken as that difference.
sampling  the fork only: the program runs with start(sample=R) and a seed,
          and again exactly.  The estimate of each step line's bytes
          (Snapshot.statistics('lineno')) must lie within Z_BOUND standard
          deviations of the exact run's bytes, the deviation being the
          Horvitz-Thompson estimator's own, computed from the exact run's
          blocks: var = sum(s*s*(1-p)/p), p = 1-exp(-s/R), plus one largest
          block of slack for the rounding.  A user allocator built on
          PyMem_Raw*() (the fork's _testtracemalloc.raw_backed_allocation)
          must never have its inner raw blocks sampled (the exact answer
          traces none of them).

What the steps mix: PyMem_Raw*/PyMem_*/PyObject_* malloc, calloc, realloc
(grow, shrink, move) and free through ctypes.pythonapi (with the GIL) and
raw calls through ctypes.CDLL (the GIL released), at sizes across the
512-byte pool/table boundary and the 65535-byte slot boundary; floats,
tuples, lists and dicts made, freed and reused through their free lists
inside a step; lists grown and shrunk; start/stop/clear_traces/reset_peak,
start(sample=...) and _set_sample_seed(); threads (short ones, and in
sampling mode a persistent worker that keeps its countdown across
restarts, among them from a run at an interval of 2**40 bytes to one at
the program's interval); os.fork() (the child reports the tracebacks of what it made);
a user allocator of every domain (_testcapi.set_nomemory() with a limit
never reached, which wraps the allocators in place).

Labels (issue 33 item 5).  A share of the programs (LABEL_SHARE, drawn
apart; --labels on/off overrides) run some object steps in "with LBL(...)"
blocks (LBL), nested at times: tracemalloc.label() on the fork, a no-op on
pristine.  The comparison with pristine then checks that labels change no
traceback and no trace; and after every step the fork checks that every
held object made in a label, and its items, have that label's set
(tracemalloc.get_object_labels()), or no trace.

Native memory (issue 32).  A share of the programs (NATIVE_SHARE, drawn
apart; --native on/off overrides) start tracing with native=True on the
fork (pristine, which has no native domain, runs the same program
without) and add steps that call the C library's malloc, calloc, realloc
(and realloc(NULL)), free (and free(NULL)), posix_memalign, aligned_alloc,
memalign, valloc, mmap, munmap (a whole mapping, its first pages, pages at
its end or in its middle, the whole range of a mapping with holes) and
mremap through ctypes.CDLL(None) (the GIL released), on lines marked "#N",
in the main thread and in threads.  The program keeps a model of the
native blocks tracing must hold (_N(), _NF(), _NH(), _NCUT(): a block made
while tracing, at its line and size; a mapping cut leaves its pieces;
mremap() of a traced mapping is a new block at its line, of an untraced
one nothing; start() and clear_traces() forget them).  After every step
the native traces whose most recent frame is a step line must be the
model's, per line (count, bytes), and no other step line may have any:
Python's own memory is never native, under every PYTHONMALLOC.  The
Python domains are compared with pristine as in every program.  Sampling
programs add lines that keep C blocks (malloc() in a list comprehension),
estimated with the rest of their line.

Issue 43's cases ("edges").  A share of the programs (EDGES_SHARE, drawn
apart; --edges on/off overrides) add, when they are labelled, steps with
a raw allocation without the GIL as the first allocation of a frame in a
label (its argument made before the label, no argtypes), followed in the
same frame by an object that must have the label's set; and steps that
run a subinterpreter (sharing the GIL, made and destroyed in the step) in
a label, from the main thread or from a thread of its own, again and again
until an exec's thread-state id reaches the labelled thread's, each exec
asking the fork for the labels of an object it made in a new frame of a
context of its own: none (SUBERR, checked with the labels).  Sampled
native programs add lines that keep raw blocks made through a raw
allocator built on malloc() (_testtracemalloc.set_c_backed_raw_allocator())
installed while tracing and removed on the same line: estimated with the
rest of their line, counted once (not also as native blocks).

Allocation totals (issue 33).  A share of the programs (ALLOC_SHARE,
drawn from the seed apart from the program, so that the others are what
they were before; --allocations on/off overrides) start tracing with
allocations=True on the fork (pristine, which has no totals, runs the same
program without), and add steps whose lines, marked "#T" (tallied), make
only what the program tallies; whatever a tallied step needs besides is
made on an untallied line before.  There is no upstream answer: the oracle
is the program's own tally, per (line, domain) of the tallied lines, of
what it allocated since the last start() or clear_traces(), compared after
every step (and in every fork child, and at the end of a sampling run)
with take_snapshot(allocated=True).statistics('lineno') per domain: equal
when tracing is exact, within Z_BOUND standard deviations (as above, for
bytes and for blocks) under sampling.  The live-trace comparison with
pristine goes on unchanged in these programs: allocations=True must not
change a live trace.  What the tally counts, per step kind:

allocation calls   PyMem_Raw*/PyMem_*/PyObject_* Malloc and Calloc (with
                   the GIL, and raw ones without it): one block of the
                   size asked (Calloc: n * size), domain 0; plus the int
                   that ctypes makes of the address (its sys.getsizeof()).
                   The call takes its arguments from a tuple made before,
                   without argtypes (ints as C ints, a pointer as a byref()
                   argument), so that ctypes converts nothing on the line.
realloc            one block of the new size (a resize is an allocation of
                   the new size; what it frees does not count), plus the int.
free               nothing: a tallied Free line must show no allocation.
free-list reuse    each object made on the line, taken from its free list
                   or not (floats, tuples, empty dicts and lists), one block
                   of its sys.getsizeof(), at the line that reuses it (freed
                   at the same line, or made at one line, freed, and reused
                   at another); gc.collect() on the line before, so that the
                   free list holds nothing untraced (an object freed untraced
                   is reused untraced: no trace, no allocation).  Under
                   sampling the reuses of one freed block are drawn once,
                   all or none, not as independent draws: sampling programs
                   do not tally them (exact programs with start(sample=1) do).
PyTraceMalloc_Track  one block of its size in its domain (0, 3 or 7), with
                   or without the GIL, replacing a trace or not; Untrack:
                   nothing.
threads            an allocator call on a line that only a thread runs
                   (exact: Th(); sampling: bytes objects made and freed in
                   the persistent worker): as in the main thread.
fork               the child's totals are the parent's at the fork, then
                   its own: the child compares its snapshot with the tally
                   it inherited plus its allocator call, and reports the
                   result to the parent; the parent's totals do not change.
user allocator     an allocator call under _testcapi.set_nomemory() (which
                   wraps the hooks in place): as without.  The blocks of
                   _testtracemalloc.raw_backed_allocation() are not tallied
                   (what it allocates inside is the module's own business).
start/stop/clear   start() and clear_traces() reset the tally to 0 (stop()
                   ends the checks until the next start()); reset_peak()
                   changes nothing.
sampling restarts  as start(): the run at 2**40 bytes and the restart after
                   it begin again from 0.
compaction         _paths() runs 1100 lines that each allocate, so that the
                   call-context tree reaches its compaction threshold: the
                   call paths of the tallied lines, whose blocks are freed
                   or not, must keep their totals.
Not tallied: the lines of the other steps (list comprehensions, list
growth, ints of range(), dict resizes: what they allocate depends on
CPython's internals of the release, not on the program), and the untallied
lines before the tallied ones.

On a mismatch it prints the seed, the shrunk list of steps that still
mismatches, and the diff, and exits 1.
"""

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_FORK = os.path.join(ROOT, "build", "3.13", "obj", "python")
PRISTINE_ENV = "TRACEMALLOC_PRISTINE_PYTHON"
Z_BOUND = 6.0
ALLOC_SHARE = 0.4      # programs run with start(allocations=True)
LABEL_SHARE = 0.3      # programs whose object steps run in label()s
NATIVE_SHARE = 0.3     # programs run with start(native=True) and C calls
EDGES_SHARE = 0.5      # programs with issue 43's cases (when labelled or
                       # sampled native)
TIMEOUT = 60

SIZES = [0, 1, 8, 16, 24, 56, 64, 100, 255, 256, 500, 511, 512, 513, 1000,
         4096, 65534, 65535, 65536, 65537, 200_000]
DOMAINS = {"raw": "PyMem_Raw", "mem": "PyMem_", "obj": "PyObject_"}


def find_pristine(version):
    """(path, None) of pristine *version*, or (None, why not): the search
    of Lib/test/test_tracemalloc_parity.py, loaded from this checkout."""
    import importlib.util
    path = os.path.join(ROOT, "Lib", "test", "test_tracemalloc_parity.py")
    spec = importlib.util.spec_from_file_location("_parity_search", path)
    parity = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(parity)
    return parity.find_pristine(version)


# --------------------------------------------------------------------------
# The program: a header (helpers, on lines that are not step lines), then
# the steps, each followed by a report line M(k).

HEADER = r'''
import contextvars, ctypes, gc, json, os, sys, threading, tracemalloc, _tracemalloc
try:
    import _testinternalcapi
    _GT = _testinternalcapi._PyTraceMalloc_GetTraceback
except (ImportError, AttributeError):
    _GT = None
try:
    import _testcapi
except ImportError:
    _testcapi = None
try:
    import _testtracemalloc as _ttm
except ImportError:
    _ttm = None
api = ctypes.pythonapi
nogil = ctypes.CDLL(None)
for _lib in (api, nogil):
    for _d in ("PyMem_Raw", "PyMem_", "PyObject_"):
        for _n, _r, _a in (("Malloc", ctypes.c_void_p, [ctypes.c_size_t]),
                           ("Calloc", ctypes.c_void_p,
                            [ctypes.c_size_t, ctypes.c_size_t]),
                           ("Realloc", ctypes.c_void_p,
                            [ctypes.c_void_p, ctypes.c_size_t]),
                           ("Free", None, [ctypes.c_void_p])):
            _f = getattr(_lib, _d + _n)
            _f.restype = _r
            _f.argtypes = _a
del _lib, _d, _n, _r, _a, _f
SK = json.loads(os.environ.get("FUZZ_SAMPLE_KW", "{}"))
MODE = os.environ.get("FUZZ_MODE", "exact")
STEP_LINES = set(json.loads(os.environ["FUZZ_STEP_LINES"]))
OUT = open(os.environ["FUZZ_OUT"], "w")
H = {}                 # objects held
B = {}                 # blocks held: name -> address
HITS = [0, 0]
A = object()
# Allocation totals (issue 33): with FUZZ_ALLOC=1 the program starts
# tracing with allocations=True where the engine has it (pristine has not:
# it runs the same program without), and tallies what its tallied lines
# (TALLIED) allocate: one string "line domain size" per block.  The
# tally's work is the fork's alone (pristine has no totals): it makes and
# frees only str and int objects, which have no free list, so that what
# the free lists hold, and so the live traces, stay those of pristine's
# run (a tuple or dict key freed untraced after stop() would be reused
# untraced at a step line).
ALLOC = os.environ.get("FUZZ_ALLOC") == "1"
# Labels (issue 33 item 5): with FUZZ_LABELS=1, object steps may run in
# "with LBL(...)" blocks, tracemalloc.label() on the fork and a no-op on
# pristine, and record in EXPECT the labels their objects must have.  The
# fork's report checks them (get_object_labels()); the comparison with
# pristine checks that labels change no traceback and no trace.
LABELS = os.environ.get("FUZZ_LABELS") == "1"
EXPECT = {}
# Pristine's stand-in does what label() does with its two ContextVars, so
# that the thread's context and its HAMT (made and replaced at the with
# lines) are the same objects, of the same sizes, in both runs.
_NC = contextvars.ContextVar("fuzz_label", default=None)
_ND = contextvars.ContextVar("fuzz_label_dict", default=None)
_NR = contextvars.ContextVar("fuzz_label_stack", default=None)
class _NoLabel:
    def __init__(self, **kw):
        self._t = repr(sorted(kw.items()))
        self._d = kw
    def __enter__(self):
        _NR.set((_NR.get(), _NC.get(), _ND.get()))
        _NC.set(self._t)
        _ND.set(self._d)
        return self
    def __exit__(self, *a):
        s = _NR.get()
        _NR.set(s[0])
        _NC.set(s[1])
        _ND.set(s[2])
        return False
LBL = (tracemalloc.label if LABELS and hasattr(tracemalloc, "label")
       else _NoLabel)
# Issue 43 (FUZZ_EDGES=1): the cases that a label or a sampled estimate got
# wrong.  _sub_labels() makes a subinterpreter (sharing the GIL) and runs
# it again and again from the calling thread, until the thread state of an
# exec has this thread's id (thread-state ids count per interpreter; the
# label ContextVar's cache is keyed by them): each exec makes an object in
# a new frame of a context of its own, and asks the engine for its labels
# (the fork's _get_object_labels(); pristine has none), which must be
# none, whatever label this thread is in.  The answers come back through a
# pipe; SUBERR keeps the wrong ones, checked with the labels.  The
# subinterpreter is destroyed before the step ends (a fork child of a
# process with one fails).  _RAWC: the raw blocks are the C allocator's,
# so that _testtracemalloc's raw allocator built on malloc() may be
# installed.
EDGES = os.environ.get("FUZZ_EDGES") == "1"
SUBERR = []
_si = None
if EDGES:
    try:
        import _interpreters as _si
        _SUBNEW = lambda: _si.create(_si.new_config("legacy"))
        _SUBRUN = _si.exec
    except ImportError:
        try:
            import _xxsubinterpreters as _si
            _SUBNEW = _si.create
            _SUBRUN = _si.run_string
        except ImportError:
            pass
    _SUBR, _SUBW = os.pipe()
    for _f in (api.PyThreadState_Get, api.PyThreadState_GetID):
        _f.restype = ctypes.c_void_p
    api.PyThreadState_GetID.argtypes = [ctypes.c_void_p]
_SUBCODE = """
import contextvars, ctypes, os
contextvars.ContextVar('x').set(1)
def f():
    return bytearray(100)
o = f()
try:
    import _tracemalloc
    g = _tracemalloc._get_object_labels(o)
except (ImportError, AttributeError):
    g = None
api = ctypes.pythonapi
for _f in (api.PyThreadState_Get, api.PyThreadState_GetID):
    _f.restype = ctypes.c_void_p
api.PyThreadState_GetID.argtypes = [ctypes.c_void_p]
os.write(%d, repr((api.PyThreadState_GetID(api.PyThreadState_Get()),
                   g)).encode() + b"\\n")
"""

def _sub_labels():
    if _si is None:
        return
    me = api.PyThreadState_GetID(api.PyThreadState_Get())
    last = 0
    interp = _SUBNEW()
    for _ in range(200):
        _SUBRUN(interp, _SUBCODE % _SUBW)
        tsid, got = eval(os.read(_SUBR, 4096))
        if got not in (None, ""):
            SUBERR.append(f"subinterpreter (thread state {tsid}): {got}")
        if tsid >= me or tsid <= last:
            break
        last = tsid
    _si.destroy(interp)
_RAWC = False
for _m in ("_testinternalcapi", "_testcapi"):        # 3.13, 3.11
    try:
        _RAWC = (hasattr(_ttm, "set_c_backed_raw_allocator")
                 and __import__(_m).pymem_getallocatorsname()
                 in ("pymalloc", "malloc"))
        break
    except (ImportError, AttributeError, RuntimeError):
        pass
# Native memory (issue 32): with FUZZ_NATIVE=1 the program starts tracing
# with native=True where the engine has it (pristine runs the same program
# without), and calls the C library's allocators through ctypes (the GIL
# released) on lines marked "#N".  NL is the program's model of the native
# blocks that tracing must hold: address -> (line, size), kept the same way
# in both runs (pristine's model is made and never read), so that the
# Python objects of both runs stay the same.
NATIVE = os.environ.get("FUZZ_NATIVE") == "1"
_NDOM = getattr(tracemalloc, "NATIVE_DOMAIN", 0x4e6174)
NB = {}                # native blocks held: name -> address
NL = {}                # the traced ones: address -> (line, size)
_PGS = os.sysconf("SC_PAGE_SIZE")
for _n, _r, _a in (
        ("malloc", ctypes.c_void_p, [ctypes.c_size_t]),
        ("calloc", ctypes.c_void_p, [ctypes.c_size_t, ctypes.c_size_t]),
        ("realloc", ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t]),
        ("free", None, [ctypes.c_void_p]),
        ("posix_memalign", ctypes.c_int,
         [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_size_t]),
        ("aligned_alloc", ctypes.c_void_p, [ctypes.c_size_t, ctypes.c_size_t]),
        ("memalign", ctypes.c_void_p, [ctypes.c_size_t, ctypes.c_size_t]),
        ("valloc", ctypes.c_void_p, [ctypes.c_size_t]),
        ("mmap", ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t,
                                   ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                   ctypes.c_long]),
        ("munmap", ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t]),
        ("mremap", ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t,
                                     ctypes.c_size_t, ctypes.c_int])):
    _f = getattr(nogil, _n)
    _f.restype = _r
    _f.argtypes = _a
del _n, _r, _a, _f
_PM = ctypes.c_void_p()
_PMR = ctypes.byref(_PM)

_MAP_FAILED = ctypes.c_void_p(-1).value

def _N(addr, size, name, depth=1):
    # After a C allocation on a "#N" line: the block NAME at ADDR, traced
    # at this line while tracing is on.  (A shrunk program may resize or
    # free a block that no step made: None, as free(NULL) and
    # realloc(NULL, n) take it; mremap() of it fails.)
    if addr == _MAP_FAILED:
        addr = None
    NB[name] = addr
    if NATIVE and tracemalloc.is_tracing() and addr:
        NL[addr] = (sys._getframe(depth).f_lineno, size)
    return addr

_NW = [False]          # was the block _NF() took out traced?

def _NF(name):
    # Before a C free (or resize) of the block NAME: its address
    addr = NB.pop(name, None)
    _NW[0] = NL.pop(addr, None) is not None
    return addr

def _NK(addr, size, name):
    # After mremap(): the new mapping is traced only if the old one was
    # (an untraced mapping may be a file's: the engine leaves it alone)
    if _NW[0]:
        return _N(addr, size, name, 2)
    NB[name] = None if addr == _MAP_FAILED else addr
    return addr

def _NCUT(a, b):
    # The pages [a, b) go: each modelled block they cut (mappings only: a
    # heap block never lies in a mapping the program made) leaves traces
    # of its pieces before and after them, at its line
    for s, (line, size) in list(NL.items()):
        e = s + size
        if s < b and a < e:
            del NL[s]
            if s < a:
                NL[s] = (line, a - s)
            if b < e:
                NL[b] = (line, e - b)

def _NX(name, pages):
    # Before munmap() of the whole range of the mapping NAME (holes and
    # all): its address
    addr = NB.pop(name, None)
    if addr is not None:
        _NCUT(addr, addr + pages * _PGS)
    return addr

def _NY(name, off, n):
    # Before munmap() of N pages at page OFF of the mapping NAME: their
    # address
    addr = NB.get(name)
    if addr is None:
        return None
    a = addr + off * _PGS
    _NCUT(a, a + n * _PGS)
    return a

def _NH(name, gone):
    # Before munmap() of the first GONE bytes of the mapping NAME: the rest
    # keeps its trace, past them
    addr = NB.get(name)
    if addr is None:
        return None     # munmap(NULL, n): EINVAL
    NB[name] = addr + gone
    t = NL.pop(addr, None)
    if t is not None:
        NL[addr + gone] = (t[0], t[1] - gone)
    return addr

TALLIED = set(json.loads(os.environ.get("FUZZ_TALLIED", "[]")))
TALLY = []
CHILD = []             # the allocation reports of fork children: JSON text
_TA = hasattr(tracemalloc, "is_tracing_allocations")
_ = _o = _r = _t = _it = None
_x = 0.5
_RN = {n: list(range(n)) for n in (10, 200, 1000, 2000, 20000)}
F = {}                 # allocator functions without argtypes: see _T()
for _lib, _ln in ((api, "api"), (nogil, "nogil")):
    for _d in ("PyMem_Raw", "PyMem_", "PyObject_"):
        for _n in ("Malloc", "Calloc", "Realloc", "Free"):
            _f = _lib[_d + _n]
            _f.restype = None if _n == "Free" else ctypes.c_void_p
            F[_ln, _d, _n] = _f
del _lib, _ln, _d, _n, _f
_Z = ctypes.c_char()
_ZA = ctypes.addressof(_Z)
byref = ctypes.byref
# Call paths for compaction: 1100 lines that each allocate, so that the
# call-context tree reaches its compaction threshold (1024 new nodes).
_PG = {"A": A}
exec(compile("def _paths():\n" + "".join(
    f"    _k = [A, {i}]\n" for i in range(1100)), "<paths>", "exec"), _PG)
_paths = _PG["_paths"]

def _tallying():
    return (ALLOC and _TA and tracemalloc.is_tracing()
            and tracemalloc.is_tracing_allocations())

def _add(line, dom, size):
    TALLY.append(f"{line} {dom} {size}")

def _T(r, size=-1, dom=0, name=None):
    # After an allocator call on a tallied line: one block of SIZE in DOM
    # (size -1: none), and the int that ctypes made of the address
    if name is not None:
        B[name] = r
    if _tallying():
        line = sys._getframe(1).f_lineno
        if size >= 0:
            _add(line, dom, size)
        if type(r) is int and not -5 <= r <= 256:
            _add(line, 0, sys.getsizeof(r))
    return r

def _TO(o):
    # An object made on a tallied line: one block of its size
    if _tallying():
        _add(sys._getframe(1).f_lineno, 0, sys.getsizeof(o))

if ALLOC or NATIVE:
    # The tally's work (the fork's alone) makes objects that the
    # collector counts: an automatic collection would run at other points
    # than in pristine's run, and free there, into the free lists, garbage
    # made untraced (before a stop() or clear_traces()), which a step line
    # would then reuse untraced.  These programs collect only where they
    # say so (gc.collect() in the steps and in each report).
    gc.disable()
    _ct = tracemalloc.clear_traces
    def _clear_traces():
        _ct()
        TALLY.clear()
        NL.clear()
    tracemalloc.clear_traces = _clear_traces

def _alloc_rep():
    if not _tallying():
        return None
    snap = tracemalloc.take_snapshot(allocated=True)
    got = {}
    for d in sorted({t.domain for t in snap.traces}):
        sub = snap.filter_traces([tracemalloc.DomainFilter(True, d)])
        for st in sub.statistics("lineno"):
            f = st.traceback[0]
            if f.filename == __file__ and f.lineno in TALLIED:
                got[f"{f.lineno} {d}"] = [st.count, st.size]
    want = {}
    for t in TALLY:
        l, d, size = t.split()
        h = want.setdefault(f"{l} {d}", {})
        h[int(size)] = h.get(int(size), 0) + 1
    want = {k: sorted(h.items()) for k, h in want.items()}
    return {"got": got, "want": want, "sample": tracemalloc.get_sample()}

def _st(nframe, **kw):
    extra = {}
    if ALLOC:
        extra["allocations"] = True
    if NATIVE:
        extra["native"] = True
    if extra:
        try:
            tracemalloc.start(nframe, **extra, **kw)
            return
        except TypeError:        # pristine: no allocation totals, no native
            pass
    tracemalloc.start(nframe, **kw)

def _start(nframe, every_byte=False, huge=False):
    if not tracemalloc.is_tracing():
        TALLY.clear()           # the totals start again at 0
        NL.clear()              # and no native block is traced yet
    _start1(nframe, every_byte, huge)

def _start1(nframe, every_byte, huge):
    # every_byte: sampling mode with an interval of 1 byte on the fork (a
    # block of 16 bytes or more is sampled with probability 1 - 1e-7), so
    # that the sampling paths are compared with pristine's exact answers;
    # huge: in sampling mode, a run at an interval of 2**40 bytes, in which
    # threads draw countdowns that the next run must not keep
    if huge and SK:
        _st(nframe, sample=1 << 40)
        return
    if every_byte and not SK:
        try:
            _st(nframe, sample=1)
            return
        except TypeError:        # pristine: no sampling mode
            pass
    _st(nframe, **SK)

def _seed(seed):
    if SK and hasattr(_tracemalloc, "_set_sample_seed"):
        _tracemalloc._set_sample_seed(seed)

def _tb(tb):
    if tb is None:
        return None
    return [f"{f[1]}" if f[0] == __file__ else "?" for f in tb]

def _mine(tb):
    return bool(tb) and tb[0][0] == __file__ and tb[0][1] in STEP_LINES

def Th(fn):
    box = []
    t = threading.Thread(target=lambda: box.append(fn()))
    t.start()
    t.join()
    return box[0]

class Worker:
    def __init__(self):
        import queue
        self.q = queue.Queue()
        self.r = queue.Queue()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()
    def run(self):
        while True:
            fn = self.q.get()
            if fn is None:
                return
            self.r.put(fn())
    def do(self, fn):
        self.q.put(fn)
        return self.r.get()
W = None

def Fork(fn):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            made = fn()
            # the tracebacks seen, not which objects an untraced free-list
            # entry went to (that changes from run to run in pristine too)
            res = sorted({json.dumps(_tb(_tracemalloc._get_object_traceback(x)))
                          for x in made} - {"null"})
            # the child's totals: the parent's at the fork, then its own
            os.write(w, (json.dumps(res) + "\n"
                         + json.dumps(_alloc_rep())).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    # the child's allocation report is read at the next report (M()): the
    # parent makes here only what pristine's makes
    res, alloc = data.decode().split("\n")
    if alloc != "null":
        CHILD.append(alloc)
    return "fork:" + res

def _held(name, value):
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        runs = []           # run-length: [[traceback, count], ...]
        for x in value:
            tb = _tb(_tracemalloc._get_object_traceback(x))
            if runs and runs[-1][0] == tb:
                runs[-1][1] += 1
            else:
                runs.append([tb, 1])
        return runs
    return _tb(_tracemalloc._get_object_traceback(value))

def M(k):
    # The report after step K.  Its objects are made in _report()'s frame,
    # which is gone before the collection that ends the report: a local of
    # M() would be freed after that collection, when M() returns, into a
    # free list from which the next step line takes it.  Made from an
    # export's free-list entry (untraced in the fork, whose exports are
    # untraced; traced in pristine, which re-traces a traced block on
    # reuse), it would then be an untraced object at a step line in the
    # fork only: a 2-tuple key of the trace groups, once the last key of
    # the loop below, was the block one fewer than pristine of the labelled
    # seeds 1 and 28 (3.13) and of seeds 15 and 20 (3.11).
    gc.collect()           # empties the free lists of both versions
    OUT.write(_report(k))
    OUT.flush()
    # the report's own objects (made untraced by the fork's _get_traces(),
    # traced by pristine's: documented) must not reach the program
    gc.collect()

def _report(k):
    rep = {"step": k, "tracing": tracemalloc.is_tracing()}
    if MODE == "exact":
        rep["held"] = {n: _held(n, v) for n, v in sorted(H.items())}
        rep["blocks"] = {n: _tb(_GT(0, v)) if _GT and v else None
                         for n, v in sorted(B.items())}
        agg = {}
        nagg = {}
        if tracemalloc.is_tracing():
            for t in _tracemalloc._get_traces():
                if _mine(t[2]):
                    if t[0] == _NDOM:
                        c = nagg.setdefault(str(t[2][0][1]), [0, 0])
                    else:
                        c = agg.setdefault((t[0], " ".join(_tb(t[2]))),
                                           [0, 0])
                    c[0] += 1
                    c[1] += t[1]
        rep["traces"] = sorted([d, tb, c, s] for (d, tb), (c, s)
                               in agg.items())
        if NATIVE:
            # the native traces at the step lines (pristine: none) against
            # the model; every other step line must have none (Python's
            # own memory is never native)
            want = {}
            if tracemalloc.is_tracing():
                for line, size in NL.values():
                    c = want.setdefault(str(line), [0, 0])
                    c[0] += 1
                    c[1] += size
            rep["native"] = {"got": nagg, "want": want,
                             "on": _NON() and tracemalloc.is_tracing()}
            want = None
        nagg = None
    if ALLOC:
        rep["alloc"] = _alloc_rep()
        rep["alloc_child"] = [json.loads(c) for c in CHILD]
        CHILD.clear()
    if LABELS and LBL is not _NoLabel:
        rep["label_errors"] = _label_errors()
    return json.dumps(rep) + "\n"

def _NON():
    f = getattr(tracemalloc, "is_tracing_native", None)
    return bool(f and f())

def _label_errors():
    # Each held object made in a label, and its items, have its labels (or
    # no trace at all, under sampling or after a restart).  Compared as the
    # engine's text (_get_object_labels()), not through get_object_labels(),
    # whose cache of decoded label sets would keep objects of its own from
    # one step to the next, which pristine's run has not.
    errors = []
    for n, want in sorted(EXPECT.items()):
        v = H.get(n)
        if v is None:
            continue
        text = json.dumps(sorted(want.items()), ensure_ascii=False,
                          separators=(",", ":"))
        for x in [v] + (v if isinstance(v, list) else []):
            got = _tracemalloc._get_object_labels(x)
            if got is not None and got != text:
                errors.append(f"{n}: {got} != {text}")
                break
    errors += SUBERR
    SUBERR.clear()
    return errors

def END():
    rep = {"step": "end", "hits": HITS}
    if MODE == "sampling" and tracemalloc.is_tracing():
        gc.collect()
        snap = tracemalloc.take_snapshot()
        lines = {}
        blocks = {}
        for st in snap.statistics("lineno"):
            f = st.traceback[0]
            if f.filename == __file__ and f.lineno in STEP_LINES:
                lines[f.lineno] = lines.get(f.lineno, 0) + st.size
        if not SK:
            for tr in snap.traces:
                f = tr.traceback[0]
                if f.filename == __file__ and f.lineno in STEP_LINES:
                    blocks.setdefault(f.lineno, []).append(tr.size)
            for v in blocks.values():
                v.sort()
        rep["lines"] = lines
        rep["blocks"] = blocks
    if ALLOC:
        gc.collect()
        rep["alloc"] = _alloc_rep()
    OUT.write(json.dumps(rep) + "\n")
    OUT.flush()
'''


class Gen:
    """Generates the steps of one program from a seed.  A step is a list
    of source lines (no report in between); the generator keeps the model
    of what the program holds so that frees and resizes name live
    things."""

    def __init__(self, seed, mode, allocations=None, labels=None,
                 native=None, edges=None):
        self.rng = random.Random(seed)
        self.mode = mode
        # allocations=True in a share of the programs, drawn apart so that
        # the other programs stay what they were before issue 33
        if allocations is None:
            allocations = (random.Random(f"allocations {seed}").random()
                           < ALLOC_SHARE)
        self.alloc = allocations
        # labels in a share of the programs, drawn apart as well
        if labels is None:
            labels = (random.Random(f"labels {seed}").random()
                      < LABEL_SHARE)
        self.labels = labels
        # native memory in a share of the programs, drawn apart as well
        if native is None:
            native = (random.Random(f"native {seed}").random()
                      < NATIVE_SHARE)
        self.native = native
        # the cases of issue 43 in a share of the programs, drawn apart as
        # well: in labelled programs, allocations without the GIL in labels
        # and subinterpreters under labels; in sampled native programs, a
        # raw allocator built on malloc() installed while tracing
        if edges is None:
            edges = (random.Random(f"edges {seed}").random()
                     < EDGES_SHARE)
        self.edges = edges
        self.nblocks = {}       # name -> ("heap", size), ("map", pages) or
                                # ("holed", pages): a mapping with holes
        self.n = 0
        self.blocks = {}        # name -> (domain, size)
        self.objs = set()
        self.lists = set()
        self.tracing = False
        self.every_byte = mode == "exact" and self.rng.random() < 0.4
        self.sizes = [x for x in SIZES if x >= 16] if self.every_byte else SIZES

    def min_items(self, k):
        """K items for a list, but not 1 when every byte is sampled: the
        8-byte items array of a 1-item list is left out with probability
        exp(-8), and a program holds thousands of them (a 16-byte block
        with probability exp(-16), 1e-7)."""
        return 2 if self.every_byte and k == 1 else k

    def name(self, prefix):
        self.n += 1
        return f"{prefix}{self.n}"

    def size(self):
        return self.rng.choice(self.sizes)

    def start_call(self, nframe):
        eb = self.every_byte and self.rng.random() < 0.6
        return f"_start({nframe}, True)" if eb else f"_start({nframe})"

    # each returns a list of lines
    def s_start(self):
        nframe = self.rng.choice([1, 1, 3, 10])
        pre = ["gc.collect()"] if self.rng.random() < 0.5 else []
        if self.tracing:
            return pre + ["tracemalloc.stop()", self.start_call(nframe)]
        self.tracing = True
        return pre + [self.start_call(nframe)]

    def s_stop(self):
        self.tracing = False
        return ["tracemalloc.stop()"]

    def s_clear(self):
        return [self.rng.choice(["tracemalloc.clear_traces()",
                                 "tracemalloc.reset_peak()"])]

    def s_seed(self):
        return [f"_seed({self.rng.randrange(1 << 32)})"]

    def s_block(self):
        dom = self.rng.choice(list(DOMAINS))
        how = self.rng.choice(["Malloc", "Calloc"])
        lib = "nogil" if dom == "raw" and self.rng.random() < 0.5 else "api"
        size = self.size()
        name = self.name("b")
        self.blocks[name] = (dom, size)
        if how == "Malloc":
            call = f"{lib}.{DOMAINS[dom]}Malloc({size})"
        else:
            n = self.rng.choice([1, 2, 3])
            call = f"{lib}.{DOMAINS[dom]}Calloc({n}, {max(size // n, 1)})"
        return [f"B[{name!r}] = {call}"]

    def s_realloc(self):
        if not self.blocks:
            return self.s_block()
        name = self.rng.choice(sorted(self.blocks))
        dom, size = self.blocks[name]
        new = self.size()
        lib = "nogil" if dom == "raw" and self.rng.random() < 0.5 else "api"
        lines = [f"B[{name!r}] = {lib}.{DOMAINS[dom]}Realloc("
                 f"B[{name!r}], {new})"]
        if self.rng.random() < 0.3:
            # a move: a neighbour keeps the old place busy
            keep = self.name("b")
            self.blocks[keep] = (dom, size)
            lines.insert(0, f"B[{keep!r}] = api.{DOMAINS[dom]}"
                            f"Malloc({size})")
        self.blocks[name] = (dom, new)
        return lines

    def s_free(self):
        if not self.blocks:
            return self.s_block()
        name = self.rng.choice(sorted(self.blocks))
        dom, _ = self.blocks.pop(name)
        lib = "nogil" if dom == "raw" and self.rng.random() < 0.6 else "api"
        return [f"{lib}.{DOMAINS[dom]}Free(B.pop({name!r}))"]

    def item_expr(self):
        kind = self.rng.choice(["float", "tuple", "tuple", "list", "dict",
                                "bytes"])
        if kind == "float":
            return f"float(i) + {self.rng.random():.3f}"
        if kind == "tuple":
            k = self.rng.randint(1, 8)
            return f"({'A, ' * (k - 1)}i)"
        if kind == "list":
            return f"[i] * {self.min_items(self.rng.randint(0, 9))}"
        if kind == "dict":
            return f"{{j: i for j in range({self.rng.randint(0, 6)})}}"
        return f"bytes({self.rng.choice([1, 100, 600])})"

    def make_expr(self, item=None):
        n = self.rng.choice([1, 5, 50, 300])
        return f"[{item or self.item_expr()} for i in range({n})]"

    def prealloc(self, target, item, n):
        # no resize: the list has its final size before the items come
        return [f"{target} = [None] * {n}",
                f"for i in range({n}): {target}[i] = {item}"]

    def s_objects(self):
        name = self.name("o")
        self.objs.add(name)
        line = f"H[{name!r}] = {self.make_expr()}"
        if not self.labels or self.rng.random() < 0.4:
            return [line]
        return self.labelled(name, [line])

    def s_labelled(self):
        """Objects made in a label (labelled programs only), after a
        compaction in the label at times, or by a callee."""
        name = self.name("o")
        self.objs.add(name)
        body = []
        if self.rng.random() < 0.3:
            body.append("_paths()")
        fn = self.name("f")
        if self.rng.random() < 0.5:
            body += [f"def {fn}(): return {self.make_expr()}",
                     f"H[{name!r}] = {fn}()"]
        else:
            body.append(f"H[{name!r}] = {self.make_expr()}")
        return self.labelled(name, body)

    def s_label_nogil(self):
        """Issue 43, 1.1: in a label, a frame's first allocation made
        without the GIL (PyMem_RawMalloc() through ctypes, its argument
        made before the label), then an object made in the same frame
        with the GIL, which must have the label's set."""
        name = self.name("o")
        self.objs.add(name)
        block = self.name("b")
        size = self.size()
        self.blocks[block] = ("raw", size)
        k = self.min_items(self.rng.choice([1, 4, 30]))
        body = [f"B[{block!r}] = F['nogil', 'PyMem_Raw', 'Malloc'](*_t)",
                f"H[{name!r}] = [A] * {k}"]
        # The block's key first: in the label, a dict of the fork's
        # label() can be in the dict free list where pristine's stand-in
        # left none, and a second new key would take it.
        return ([f"_t = ({size},); B[{block!r}] = 0"]
                + self.labelled(name, body))

    def s_sub_labels(self):
        """Issue 43, 1.2: a subinterpreter run in a label, from the
        labelled thread (the main one, or a thread of its own), whose
        allocations must carry no label."""
        k = self.rng.choice(["a", "route"])
        v = self.rng.choice(["1", "/x"])
        if self.rng.random() < 0.5:
            return [f"with LBL({k}={v!r}):", "    _sub_labels()"]
        fn = self.name("_sl")
        return [f"def {fn}():", f"    with LBL({k}={v!r}):",
                "        _sub_labels()", f"Th({fn})"]

    def labelled(self, name, body):
        # In a label, sometimes nested; the objects of a made-up callee
        # get them too.  EXPECT is written outside the labels, before.
        k = self.rng.choice(["a", "b", "route"])
        v = self.rng.choice(["1", "2", "/x"])
        want = {k: v}
        lines = [f"with LBL({k}={v!r}):"]
        indent = "    "
        if self.rng.random() < 0.3:
            k2 = self.rng.choice(["a", "tenant"])
            want[k2] = "t"
            lines.append(f"{indent}with LBL({k2}='t'):")
            indent += "    "
        lines += [indent + line for line in body]
        return [f"EXPECT[{name!r}] = {want!r}"] + lines

    def s_churn(self):
        # made, freed to the free list, reused at another line: held
        name = self.name("o")
        self.objs.add(name)
        item = self.item_expr()
        if self.rng.random() < 0.5:
            expr = self.make_expr(item)
            return [f"T = {expr}", "del T", f"H[{name!r}] = {expr}"]
        n = self.rng.choice([10, 200, 1000])
        return (self.prealloc("T", item, n) + ["del T"]
                + self.prealloc(f"H[{name!r}]", item, n))

    def s_lifecycle(self):
        """A burst without reports in between: a block resized while
        tracing, a change of tracing state, the block freed, tracing again,
        then objects made and reused through a free list (the order in
        which a stale engine state shows)."""
        lines = []
        n = self.rng.choice([10, 200, 1000])
        if self.rng.random() < 0.5:
            k = self.rng.randint(0, 9)
            lines += [f"L = [0] * {k}", "L.append(0)"]
            free = ["del L"]
        else:
            dom = self.rng.choice(["raw", "raw", "mem", "obj"])
            lib = self.rng.choice(["api", "nogil"]) if dom == "raw" else "api"
            s0, s1 = self.rng.choice(self.sizes), self.rng.choice(self.sizes)
            lines += [f"P = api.{DOMAINS[dom]}Malloc({s0})",
                      f"P = {lib}.{DOMAINS[dom]}Realloc(P, {s1})"]
            lib = self.rng.choice(["api", "nogil"]) if dom == "raw" else "api"
            free = [f"{lib}.{DOMAINS[dom]}Free(P)"]
        how = self.rng.choice(["stop", "clear", "none"])
        if how == "stop":
            lines += ["tracemalloc.stop()"] + free
            lines.append(self.start_call(self.rng.choice([1, 3])))
        elif how == "clear":
            lines += ["tracemalloc.clear_traces()"] + free
        else:
            lines += free
        self.tracing = True
        name = self.name("o")
        self.objs.add(name)
        item = self.item_expr()
        lines += self.prealloc("T", item, n) + ["del T"]
        lines += self.prealloc(f"H[{name!r}]", item, n)
        return lines

    def s_drop(self):
        pool = sorted(self.objs | self.lists)
        if not pool:
            return self.s_objects()
        name = self.rng.choice(pool)
        self.objs.discard(name)
        self.lists.discard(name)
        return [f"del H[{name!r}]"]

    def s_list_resize(self):
        if not self.lists or self.rng.random() < 0.4:
            name = self.name("l")
            self.lists.add(name)
            k = self.rng.choice([0, 1, 3, 4, 7, 8, 16, 60, 64, 100])
            return [f"H[{name!r}] = [0] * {self.min_items(k)}"]
        name = self.rng.choice(sorted(self.lists))
        op = self.rng.choice(["append", "extend", "shrink", "clear"])
        if op == "append":
            return [f"H[{name!r}].append(0)"]
        if op == "extend":
            return [f"H[{name!r}].extend(range({self.rng.choice([1, 4, 9, 70, 600])}))"]
        if op == "shrink":
            return [f"del H[{name!r}][{self.rng.choice([0, 1, 2, 5])}:]"]
        return [f"H[{name!r}].clear()"]

    def s_thread(self):
        name = self.name("o")
        self.objs.add(name)
        return [f"H[{name!r}] = Th(lambda: {self.make_expr()})"]

    def s_fork(self):
        name = self.name("f")
        return [f"H[{name!r}] = Fork(lambda: {self.make_expr()})"]

    def s_user_alloc(self):
        lines = ["if _testcapi: _testcapi.set_nomemory(1 << 30)"]
        for _ in range(self.rng.randint(1, 3)):
            if self.rng.random() < 0.5:
                name = self.name("o")
                self.objs.add(name)
                lines.append(f"H[{name!r}] = {self.make_expr()}")
            else:
                lines += self.s_block()
        if self.alloc:
            lines += self.s_tcall()
        lines.append("if _testcapi: _testcapi.remove_mem_hooks()")
        return lines

    # ---- allocation totals: tallied steps (programs with allocations on).
    # A tallied line (marked "#T") allocates only what the program tallies
    # on it; what it needs is made on the untallied line before it.
    def tcall(self, op=None, thread=False):
        """An allocator call: (prep lines, the call's expression) in the
        form whose line makes nothing else: the arguments in a tuple made
        before (ints as C ints, a pointer as a byref() argument, so that
        ctypes converts nothing), no argtypes, and the int made of the
        returned address tallied by _T()."""
        if op is None or (op != "Malloc" and not self.blocks):
            op = self.rng.choice(["Malloc", "Malloc", "Calloc", "Realloc",
                                  "Realloc", "Free"])
            if op in ("Realloc", "Free") and not self.blocks:
                op = "Malloc"
        if op in ("Malloc", "Calloc"):
            name = None
            dom = self.rng.choice(list(DOMAINS))
        else:
            name = self.rng.choice(sorted(self.blocks))
            dom = self.blocks[name][0]
        lib = "nogil" if dom == "raw" and self.rng.random() < 0.5 else "api"
        fn = f"F[{lib!r}, {DOMAINS[dom]!r}, {op!r}]"
        if op == "Free":
            del self.blocks[name]
            return ([f"_t = (byref(_Z, B.pop({name!r}) - _ZA),)"],
                    f"{fn}(*_t)")
        size = self.size()
        if op == "Realloc":
            prep = f"_t = (byref(_Z, B[{name!r}] - _ZA), {size})"
        elif op == "Calloc":
            n = self.rng.choice([1, 2, 3])
            prep = f"_t = ({n}, {max(size // n, 1)})"
            size = n * max(size // n, 1)
        else:
            prep = f"_t = ({size},)"
        if name is None:
            name = self.name("b")
        self.blocks[name] = (dom, size)
        return [prep], f"_T({fn}(*_t), {size}, 0, {name!r})"

    def s_tcall(self):
        prep, call = self.tcall()
        return prep + [call + "  #T"]

    def s_track(self):
        """PyTraceMalloc_Track() (with or without the GIL) or _Untrack()
        of a made-up address, in domain 0 or another."""
        dom = self.rng.choice([0, 3, 3, 7])
        addr = 0x10000 + 16 * self.rng.randrange(8)
        guard = "if _testcapi and tracemalloc.is_tracing(): "
        if self.rng.random() < 0.3:
            return [f"_t = ({dom}, {addr})",
                    guard + "_testcapi.tracemalloc_untrack(*_t)  #T"]
        size = self.rng.choice(self.sizes)
        gil = self.rng.choice([0, 0, 1])
        return [f"_t = ({dom}, {addr}, {size}, {gil})",
                guard + f"_testcapi.tracemalloc_track(*_t); "
                f"_T(None, {size}, {dom})  #T"]

    def s_treuse(self):
        """Objects made on a tallied line, through their free list: after
        gc.collect() it holds only what this step frees, all traced (an
        untraced entry, freed by an object made before tracing, would be
        reused untraced: no allocation, as no trace)."""
        kind = self.rng.choice(["float", "tuple", "dict", "list"])
        if kind == "float":
            expr = "_x + _"
        elif kind == "tuple":
            expr = f"({'A, ' * self.rng.randint(0, 5)}_,)"
        elif kind == "dict":
            expr = "{}"
        else:
            expr = "[]"
        n = self.rng.choice([10, 200, 1000])
        if self.rng.random() < 0.5:
            # reused at the line that freed it
            return [f"_o = None; _it = iter(_RN[{n}]); gc.collect()",
                    f"for _ in _it: _o = {expr}; _TO(_o)  #T"]
        # made at one line, freed, reused at another: held
        name = self.name("o")
        self.objs.add(name)
        return [f"_o = None; T = [None] * {n}; _it = iter(_RN[{n}]); "
                "gc.collect()",
                f"for _ in _it: T[_] = {expr}; _TO(T[_])  #T",
                "del T  #T",
                f"T = [None] * {n}; _it = iter(_RN[{n}])",
                f"for _ in _it: T[_] = {expr}; _TO(T[_])  #T",
                f"H[{name!r}] = T; del T"]

    def s_tthread(self):
        """An allocator call in a thread, on a line that only the thread
        runs."""
        fn = self.name("_fn")
        prep, call = self.tcall("Malloc")
        return prep + [f"def {fn}():", f"    return {call}  #T",
                       f"Th({fn})"]

    def s_tfork(self):
        """An allocator call in a fork child, which reports its own totals
        (the parent's at the fork, then its own); the parent's are
        untouched by the child's."""
        fn = self.name("_fk")
        prep, call = self.tcall("Malloc")
        self.blocks.pop(call.split("'")[-2])    # the child's: not held here
        call = call.rsplit(",", 1)[0] + ", None)"
        return prep + [f"def {fn}():", f"    {call}  #T",
                       "    return [float(i) + 0.5 for i in range(5)]",
                       f"H[{self.name('f')!r}] = Fork({fn})"]

    def s_paths(self):
        return ["_paths()"]

    # ---- native memory (programs with native on): C allocations through
    # ctypes on lines marked "#N", the GIL released, modelled by _N(),
    # _NF() and _NH() (in the program) so that each report compares the
    # native traces at the step lines with the blocks the program holds.
    def ncall(self):
        """One C call on a line of its own: a new block, a resize, or a
        free, of the heap or of an anonymous mapping."""
        heap = sorted(n for n, (k, _) in self.nblocks.items() if k == "heap")
        maps = sorted(n for n, (k, _) in self.nblocks.items() if k == "map")
        holed = sorted(n for n, (k, _) in self.nblocks.items() if k == "holed")
        ops = ["malloc", "malloc", "calloc", "realloc0", "posix_memalign",
               "aligned_alloc", "memalign", "valloc", "mmap", "free0"]
        if heap:
            ops += ["realloc", "realloc", "free", "free"]
        if maps:
            ops += ["munmap", "munmap_head", "munmap_part", "mremap"]
        if holed:
            ops += ["munmap_holed", "munmap_part"]
        op = self.rng.choice(ops)
        size = max(self.size(), 1)
        if op in ("realloc", "free"):
            name = self.rng.choice(heap)
            if op == "free":
                del self.nblocks[name]
                return f"nogil.free(_NF({name!r}))"
            self.nblocks[name] = ("heap", size)
            return (f"_N(nogil.realloc(_NF({name!r}), {size}), {size}, "
                    f"{name!r})")
        if op == "munmap_holed" or (op == "munmap_part"
                                    and (not maps or self.rng.random() < 0.5)
                                    and holed):
            # a mapping with holes: its whole range goes, or more of it
            name = self.rng.choice(holed)
            pages = self.nblocks[name][1]
            if op == "munmap_holed":
                del self.nblocks[name]
                return f"nogil.munmap(_NX({name!r}, {pages}), {pages} * _PGS)"
            off = self.rng.randrange(pages)
            n = self.rng.randint(1, pages - off)
            return (f"nogil.munmap(_NY({name!r}, {off}, {n}), "
                    f"{n} * _PGS)")
        if op == "munmap_part":
            # pages at the end or in the middle (the first: munmap_head)
            name = self.rng.choice(maps)
            pages = self.nblocks[name][1]
            if pages < 2:
                del self.nblocks[name]
                return f"nogil.munmap(_NX({name!r}, 1), _PGS)"
            off = self.rng.randint(1, pages - 1)
            n = self.rng.randint(1, pages - off)
            self.nblocks[name] = ("holed", pages)
            return (f"nogil.munmap(_NY({name!r}, {off}, {n}), "
                    f"{n} * _PGS)")
        if op in ("munmap", "munmap_head", "mremap"):
            name = self.rng.choice(maps)
            pages = self.nblocks[name][1]
            if op == "munmap" or (op == "munmap_head" and pages == 1):
                del self.nblocks[name]
                return f"nogil.munmap(_NF({name!r}), {pages} * _PGS)"
            if op == "munmap_head":
                gone = self.rng.randint(1, pages - 1)
                self.nblocks[name] = ("map", pages - gone)
                return (f"nogil.munmap(_NH({name!r}, {gone} * _PGS), "
                        f"{gone} * _PGS)")
            new = self.rng.choice([1, 2, 5, 33])
            self.nblocks[name] = ("map", new)
            # MREMAP_MAYMOVE
            return (f"_NK(nogil.mremap(_NF({name!r}), {pages} * _PGS, "
                    f"{new} * _PGS, 1), {new} * _PGS, {name!r})")
        if op == "free0":
            return "nogil.free(None)"
        name = self.name("n")
        if op == "mmap":
            pages = self.rng.choice([1, 2, 3, 17])
            self.nblocks[name] = ("map", pages)
            # PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS
            return (f"_N(nogil.mmap(None, {pages} * _PGS, 3, 0x22, -1, 0), "
                    f"{pages} * _PGS, {name!r})")
        self.nblocks[name] = ("heap", size)
        if op == "malloc":
            call = f"nogil.malloc({size})"
        elif op == "realloc0":
            call = f"nogil.realloc(None, {size})"
        elif op == "calloc":
            n = self.rng.choice([1, 2, 3])
            size = n * max(size // n, 1)
            self.nblocks[name] = ("heap", size)
            call = f"nogil.calloc({n}, {size // n})"
        elif op == "posix_memalign":
            return (f"nogil.posix_memalign(_PMR, 64, {size}); "
                    f"_N(_PM.value, {size}, {name!r})")
        elif op == "valloc":
            call = f"nogil.valloc({size})"
        else:
            call = f"nogil.{op}(64, {size})"
        return f"_N({call}, {size}, {name!r})"

    def s_native(self):
        return [self.ncall() + "  #N"
                for _ in range(self.rng.choice([1, 1, 2, 3]))]

    def s_nthread(self):
        """A C call in a thread, on a line that only the thread runs."""
        fn = self.name("_nt")
        return [f"def {fn}():", f"    {self.ncall()}  #N", f"Th({fn})"]

    NATIVE_STEPS = [("s_native", 10), ("s_nthread", 2)]

    EDGE_LABEL_STEPS = [("s_label_nogil", 4), ("s_sub_labels", 2)]

    ALLOC_STEPS = [("s_tcall", 10), ("s_track", 3), ("s_treuse", 4),
                   ("s_tthread", 2), ("s_tfork", 1), ("s_paths", 2)]

    STEPS = [("s_start", 3), ("s_stop", 2), ("s_clear", 2), ("s_seed", 1),
             ("s_block", 6), ("s_realloc", 6), ("s_free", 5),
             ("s_objects", 5), ("s_churn", 6), ("s_drop", 5),
             ("s_list_resize", 7), ("s_thread", 2), ("s_fork", 1),
             ("s_user_alloc", 1), ("s_lifecycle", 4)]

    def exact_program(self, nsteps):
        # the allocator of the run: a property of the seed
        self.pythonmalloc = self.rng.choice([None, None, "malloc"])
        steps = [self.s_start()]
        table = (self.STEPS + (self.ALLOC_STEPS if self.alloc else [])
                 + ([("s_labelled", 6)] if self.labels else [])
                 + (self.NATIVE_STEPS if self.native else [])
                 + (self.EDGE_LABEL_STEPS if self.labels and self.edges
                    else []))
        names = [n for n, w in table for _ in range(w)]
        for _ in range(nsteps - 1):
            steps.append(getattr(self, self.rng.choice(names))())
        return steps

    # sampling mode: kept memory at several lines, restarts in between, a
    # persistent worker thread, a user allocator built on PyMem_Raw*().
    def huge_detour(self, reseed=None):
        # without a seed after the restart too: a seed could redraw what
        # the restart forgot
        if reseed is None:
            reseed = self.rng.random() < 0.5
        return (["tracemalloc.stop()", "_start(1, huge=True)",
                 "W.do(lambda: [bytes(50) for i in range(20)])",
                 "tracemalloc.stop()", "_start(1)"]
                + ([f"_seed({self.rng.randrange(1 << 32)})"] if reseed
                   else []))

    def sampling_program(self, nsteps):
        steps = [["W = Worker()", "W.do(lambda: bytes(10))"],
                 [f"_start(1)", f"_seed({self.rng.randrange(1 << 32)})"],
                 # the worker draws its countdown under this run
                 ["W.do(lambda: [bytes(50) for i in range(20)])"]]
        # a run at a huge interval, in which the worker draws a countdown,
        # then a restart at the program's interval (item 1.1 of issue 29:
        # the worker kept the huge countdown, and was estimated at 0)
        steps.append(self.huge_detour(reseed=False))
        for _ in range(nsteps):
            if self.alloc and self.rng.random() < 0.4:
                steps.append(self.sampling_tallied())
                continue
            if self.edges and self.native and self.rng.random() < 0.2:
                steps.append(self.raw_user_allocator())
                continue
            r = self.rng.random()
            if r < 0.05:
                steps.append(self.huge_detour())
            elif r < 0.12:
                steps.append(["tracemalloc.stop()", "_start(1)",
                              f"_seed({self.rng.randrange(1 << 32)})"])
            elif r < 0.45:
                n = self.rng.choice([2000, 20000])
                s = self.rng.choice([16, 64, 100, 1000])
                steps.append([f"H[{self.name('w')!r}] = W.do(lambda: "
                              f"[bytes({s}) for i in range({n})])"])
            elif r < 0.7:
                n = self.rng.choice([2000, 20000])
                s = self.rng.choice([16, 64, 100, 1000, 70000])
                steps.append([f"H[{self.name('m')!r}] = "
                              f"[bytes({s}) for i in range({min(n, 200) if s > 5000 else n})]"])
            elif self.native and r < 0.78:
                # C blocks, kept: estimated with the rest of the line
                n = self.rng.choice([500, 3000])
                s = self.rng.choice([64, 100, 600, 5000])
                steps.append([f"H[{self.name('c')!r}] = "
                              f"[nogil.malloc({s}) for i in range({n})]"])
            elif r < 0.85:
                n = self.rng.choice([500, 3000])
                s = self.rng.choice([64, 100, 600])
                dom = self.rng.choice(["PyMem_", "PyObject_", "PyMem_Raw"])
                steps.append([f"H[{self.name('p')!r}] = "
                              f"[api.{dom}Malloc({s}) for i in range({n})]"])
            else:
                n = self.rng.choice([2000, 5000])
                s = self.rng.choice([64, 100, 1000])
                steps.append([f"for _i in range({n}): _r = _ttm.raw_backed_"
                              f"allocation({s}) if _ttm else (None,) * 4; "
                              "HITS[0] += (_r[0] is not None) + (_r[2] is not None); "
                              "HITS[1] += (_r[1] is not None) + (_r[3] is not None)"])
        return steps

    def raw_user_allocator(self):
        """Issue 43, 1.3: raw blocks, kept, made through a raw allocator
        built on malloc() that is installed while tracing (and removed
        again on the same line): counted once, not also as the native
        blocks of its malloc() calls."""
        n, s = self.rng.choice([(20000, 1000), (5000, 4000)])
        return [f"_RAWC and _ttm.set_c_backed_raw_allocator(True); "
                f"H[{self.name('u')!r}] = "
                f"[api.PyMem_RawMalloc({s}) for i in range({n})]; "
                f"_RAWC and _ttm.set_c_backed_raw_allocator(False)"]

    def sampling_tallied(self):
        """Many allocations on one tallied line, for the estimates of the
        allocation totals: allocator calls (blocks kept), bytes objects
        made and freed in the worker thread.  Not objects reused through a
        free list: a loop that frees and remakes one object reuses one
        block, sampled or not once, when it was allocated; its reuses are
        counted all or none (the estimate is unbiased, but its deviation
        is not that of independent draws, which the check assumes).  Exact
        programs tally them (with start(sample=1) in some of them)."""
        n = self.rng.choice([2000, 20000])
        s = self.rng.choice([16, 64, 100, 1000])
        r = self.rng.random()
        if r < 0.4:
            dom = self.rng.choice(["PyMem_", "PyObject_", "PyMem_Raw"])
            return [f"_t = ({s},); _it = iter(_RN[{n}])",
                    f"for _ in _it: _T(F['api', {dom!r}, 'Malloc'](*_t), "
                    f"{s})  #T"]
        fn = self.name("_w")
        return [f"def {fn}():",
                f"    for i in _it: o = bytes({s}); _TO(o)  #T",
                f"_it = iter(_RN[{n}])",
                f"W.do({fn})"]


def render(steps, mode):
    """Source text, the step line numbers, and the tallied line numbers
    (the lines marked "#T")."""
    lines = HEADER.split("\n")
    step_lines = []
    tallied = []
    for k, step in enumerate(steps):
        for line in step:
            lines.append(line)
            step_lines.append(len(lines))
            if line.endswith("#T"):
                tallied.append(len(lines))
        if mode == "exact":
            lines.append(f"M({k})")
    lines.append("END()")
    return "\n".join(lines) + "\n", step_lines, tallied


def run(python, steps, mode, sample_kw=None, env_extra=None, tmpdir=None):
    """Run *steps* on *python*: (list of reports, error text or None)."""
    src, step_lines, tallied = render(steps, mode)
    path = os.path.join(tmpdir, "prog.py")
    with open(path, "w") as f:
        f.write(src)
    out_path = os.path.join(tmpdir, "out.jsonl")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(PYTHONHASHSEED="0", FUZZ_MODE=mode,
               FUZZ_SAMPLE_KW=json.dumps(sample_kw or {}),
               FUZZ_STEP_LINES=json.dumps(step_lines),
               FUZZ_TALLIED=json.dumps(tallied), FUZZ_OUT=out_path)
    env.update(env_extra or {})
    try:
        proc = subprocess.run([python, "-s", path], env=env,
                              stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return [], "timeout"
    try:
        with open(out_path) as f:
            out = f.read()
        os.unlink(out_path)
    except FileNotFoundError:
        out = ""
    reports = [json.loads(line) for line in out.splitlines() if line]
    err = None
    if proc.returncode != 0:
        err = (f"exit {proc.returncode}: "
               f"{proc.stderr.decode(errors='replace')[-2000:]}")
    return reports, err


def _flat(report):
    """A report as {key: value}, one key per held thing and per trace
    group."""
    flat = {}
    for key, value in report.items():
        if key in ("alloc", "alloc_child", "label_errors", "native"):
            continue            # the fork's alone: diff_alloc(),
                                # diff_labels(), diff_native()
        if key in ("held", "blocks") and isinstance(value, dict):
            for n, v in value.items():
                flat[f"{key}[{n}]"] = json.dumps(v)
        elif key == "traces":
            for d, tb, c, size in value:
                flat[f"trace domain {d} lines {tb}"] = json.dumps([c, size])
        else:
            flat[key] = json.dumps(value)
    return flat


# The size of a dictionary's smallest key table, the one with a free
# list: the fork re-traces such a table at the line that takes it from
# its free list (patch dict-keys-retrace); upstream leaves it at the line
# that allocated it first.
KEY_TABLE_SIZE = {"a": 1}.__sizeof__() - {}.__sizeof__()
_TRACE_KEY = "trace domain 0 lines "


def _moved_key_tables(fa, fb):
    """FA (the fork's flat report) with the trace groups of domain 0 whose
    difference from FB (pristine's) is only key tables that changed lines
    set to FB's values, when every group that differs does so by whole key
    tables; otherwise FA unchanged.  The tables' count is not checked: a
    table may come from, or go to, a line the report does not show (the
    harness's own code, a thread's)."""
    moved = []
    for key in set(fa) | set(fb):
        if not key.startswith(_TRACE_KEY) or fa.get(key) == fb.get(key):
            continue
        ca, sa = json.loads(fa[key]) if key in fa else (0, 0)
        cb, sb = json.loads(fb[key]) if key in fb else (0, 0)
        if sa - sb != KEY_TABLE_SIZE * (ca - cb):
            return fa
        moved.append(key)
    if not moved:
        return fa
    fa = dict(fa)
    for key in moved:
        if key in fb:
            fa[key] = fb[key]
        else:
            del fa[key]
    return fa


def diff_exact(a, runs):
    """First difference between the fork's reports *a* and pristine's
    (*runs*, a list of runs of the same program), as text, or None.  Some
    answers of pristine itself change from run to run (what a free list
    holds after a thread ran); the fork's answer for a key passes when any
    run of pristine gave it.  Key tables that only changed lines are the
    documented difference (_moved_key_tables())."""
    nsteps = max(len(b) for b in runs)
    if len(a) != nsteps:
        return f"the fork made {len(a)} reports, pristine {nsteps}"
    for k, ra in enumerate(a):
        fbs = [_flat(b[k]) for b in runs if len(b) > k]
        fa = _moved_key_tables(_flat(ra), fbs[0]) if fbs else _flat(ra)
        out = []
        for key in sorted(set(fa).union(*fbs)):
            va = fa.get(key)
            vbs = [fb.get(key) for fb in fbs]
            if va not in vbs:
                out.append(f"  {key}: fork {va} pristine "
                           + " or ".join(sorted(set(map(str, vbs)))))
        if out:
            return f"after step {ra.get('step')}:\n" + "\n".join(out)
    return None


def diff_alloc_one(al):
    """The allocation totals that a report's take_snapshot(allocated=True)
    gave for the tallied lines (al["got"]: "line domain" -> [count,
    bytes]) against the program's tally (al["want"]: "line domain" ->
    [[size, blocks], ...]): text or None.  Exact tracing: equal.  Sampling
    (al["sample"] = R): within Z_BOUND standard deviations of the
    Horvitz-Thompson estimator's own, as the live estimates (check_sampling),
    for the bytes (var = sum(s*s*(1-p)/p), slack one largest block + R) and
    for the blocks (var = sum((1-p)/p), slack the weight 1/p of one block
    of the smallest size).  A 0-byte block is never sampled (p = 0): under
    sampling, 0-byte blocks are left out of the expected count (the
    generator makes none in sampling runs)."""
    R = al["sample"]
    got, want = al["got"], al["want"]
    out = []
    for key in sorted(set(got) | set(want), key=lambda k: [int(x) for x in k.split()]):
        hist = [(s, c) for s, c in want.get(key, []) if not (R and s == 0)]
        tc = sum(c for s, c in hist)
        tb = sum(s * c for s, c in hist)
        gc_, gb = got.get(key, [0, 0])
        line, dom = key.split()
        where = f"  line {line} domain {dom}"
        if not R:
            if [gc_, gb] != [tc, tb]:
                out.append(f"{where}: allocated (count, bytes) ({gc_}, {gb}),"
                           f" the program made ({tc}, {tb})")
            continue
        if not hist:
            if gb > 4 * R:
                out.append(f"{where}: estimate ({gc_}, {gb}), the program "
                           "made nothing")
            continue
        odds = lambda s: 1 / math.expm1(s / R) if s < 700 * R else 0.0
        var_b = sum(c * s * s * odds(s) for s, c in hist)   # (1-p)/p
        var_c = sum(c * odds(s) for s, c in hist)
        slack_b = max(s for s, c in hist) + R
        slack_c = 1 / -math.expm1(-min(s for s, c in hist) / R)
        sd_b, sd_c = math.sqrt(var_b), math.sqrt(var_c)
        if (abs(gb - tb) > Z_BOUND * sd_b + slack_b
                or abs(gc_ - tc) > Z_BOUND * sd_c + slack_c):
            out.append(f"{where}: estimate ({gc_}, {gb}), the program made "
                       f"({tc}, {tb}) (sd {sd_c:.0f}, {sd_b:.0f}; z "
                       f"{(gc_ - tc) / max(sd_c, 1):.1f}, "
                       f"{(gb - tb) / max(sd_b, 1):.1f})")
    return "\n".join(out) if out else None


def diff_alloc(reports):
    """First mismatch of the allocation totals in the fork's *reports*
    (after each step in exact mode, at the end in sampling mode, and in
    the fork children), as text, or None."""
    for rep in reports:
        alls = [("", rep.get("alloc"))]
        alls += [("in the fork child ", c) for c in rep.get("alloc_child", [])]
        for which, al in alls:
            if al is None:
                continue
            d = diff_alloc_one(al)
            if d:
                return (f"after step {rep.get('step')}, {which}"
                        f"take_snapshot(allocated=True), sample "
                        f"{al['sample']}:\n{d}")
    return None


def diff_labels(reports):
    """The first objects whose labels were not those of the label() they
    were made in, as text, or None."""
    for rep in reports:
        if rep.get("label_errors"):
            return (f"after step {rep.get('step')}, get_object_labels():\n  "
                    + "\n  ".join(rep["label_errors"]))
    return None


def diff_native(reports):
    """The first report whose native traces at the step lines are not the
    blocks the program's model holds (line -> [count, bytes]), as text, or
    None.  Exact tracing only (with start(sample=1) in some programs: the
    model's blocks are of 16 bytes or more there)."""
    for rep in reports:
        nat = rep.get("native")
        if nat is None or not rep.get("tracing"):
            continue
        if not nat["on"]:
            return (f"after step {rep.get('step')}: tracing, but "
                    "is_tracing_native() is False")
        got, want = nat["got"], nat["want"]
        out = [f"  line {line}: native (count, bytes) {got.get(line)}, the "
               f"program holds {want.get(line)}"
               for line in sorted(set(got) | set(want), key=int)
               if got.get(line) != want.get(line)]
        if out:
            return (f"after step {rep.get('step')}, the native domain:\n"
                    + "\n".join(out))
    return None


def check_exact(fork, pristine, steps, env_extra, tmpdir, reruns=3):
    a, ea = run(fork, steps, "exact", env_extra=env_extra, tmpdir=tmpdir)
    b, eb = run(pristine, steps, "exact", env_extra=env_extra, tmpdir=tmpdir)
    if (ea or eb) and ea != eb:
        return f"fork: {ea}\npristine: {eb}"
    runs = [b]
    d = diff_exact(a, runs)
    while d is not None and len(runs) <= reruns:
        runs.append(run(pristine, steps, "exact", env_extra=env_extra,
                        tmpdir=tmpdir)[0])
        d = diff_exact(a, runs)
    return d or diff_alloc(a) or diff_labels(a) or diff_native(a)


def check_sampling(fork, steps, sample, env_extra, tmpdir):
    """Estimate against the fork's own exact answer: text or None."""
    a, ea = run(fork, steps, "sampling", {"sample": sample},
                env_extra=env_extra, tmpdir=tmpdir)
    b, eb = run(fork, steps, "sampling", {}, env_extra=env_extra,
                tmpdir=tmpdir)
    if ea or eb:
        return f"sampled: {ea}\nexact: {eb}"
    d = (diff_alloc(a) or diff_alloc(b) or diff_labels(a)
         or diff_labels(b))
    if d:
        return d
    est, exact = a[-1], b[-1]
    out = []
    R = sample
    for line, blocks in sorted(exact.get("blocks", {}).items()):
        true = sum(blocks)
        var = sum(s * s / math.expm1(s / R) for s in blocks if s)
        # (1-p)/p = 1 / (exp(s/R) - 1)
        sd = math.sqrt(var)
        got = est.get("lines", {}).get(line, 0)
        slack = max(blocks) + R
        if abs(got - true) > Z_BOUND * sd + slack:
            out.append(f"  line {line}: estimate {got} exact {true} "
                       f"(sd {sd:.0f}, z {(got - true) / max(sd, 1):.1f})")
    for line, got in sorted(est.get("lines", {}).items()):
        if line not in exact.get("blocks", {}) and got > 4 * R:
            out.append(f"  line {line}: estimate {got}, exact 0")
    inner = est["hits"][1]
    if inner:
        out.append(f"  user allocator built on PyMem_Raw*: {inner} of its "
                   f"inner raw blocks sampled (exact traces none; "
                   f"{est['hits'][0]} caller blocks sampled)")
    return "\n".join(out) if out else None


def shrink(steps, still_fails, budget):
    """Delta-debugging of the step list, keeping step 0 (start)."""
    chunk = max(1, len(steps) // 2)
    while chunk >= 1 and budget > 0:
        i = 1
        changed = False
        while i < len(steps) and budget > 0:
            cand = steps[:i] + steps[i + chunk:]
            budget -= 1
            if len(cand) < len(steps) and still_fails(cand):
                steps = cand
                changed = True
            else:
                i += chunk
        if not changed:
            chunk //= 2
    return steps


def fuzz_one(seed, args, tmpdir):
    """Return a report of a mismatch for *seed*, or None."""
    env_extra = {}
    gen = Gen(seed, args.mode, getattr(args, "allocations", None),
              getattr(args, "labels", None), getattr(args, "native", None),
              getattr(args, "edges", None))
    if gen.alloc:
        env_extra["FUZZ_ALLOC"] = "1"
    if gen.labels:
        env_extra["FUZZ_LABELS"] = "1"
    if gen.native:
        env_extra["FUZZ_NATIVE"] = "1"
    if gen.edges:
        env_extra["FUZZ_EDGES"] = "1"
    if args.mode == "exact":
        steps = gen.exact_program(args.steps)
        alloc = args.pythonmalloc or gen.pythonmalloc
        if alloc and alloc != "pymalloc":
            env_extra["PYTHONMALLOC"] = alloc
        check = lambda s: check_exact(args.fork_python, args.pristine_python,
                                      s, env_extra, tmpdir)
    else:
        steps = gen.sampling_program(max(3, args.steps // 4))
        sample = gen.rng.choice([1024, 4096, 65536])
        if args.pythonmalloc and args.pythonmalloc != "pymalloc":
            env_extra["PYTHONMALLOC"] = args.pythonmalloc
        check = lambda s: check_sampling(args.fork_python, s, sample,
                                         env_extra, tmpdir)
    d = check(steps)
    if d is None:
        return None
    if args.shrink:
        steps = shrink(steps, lambda s: check(s) is not None, args.shrink)
        d = check(steps) or d
    text = [f"MISMATCH seed {seed} mode {args.mode}"
            + (f" PYTHONMALLOC={env_extra['PYTHONMALLOC']}"
               if "PYTHONMALLOC" in env_extra else "")
            + (f" sample {sample}" if args.mode == "sampling" else "")
            + (" allocations=True" if gen.alloc else "")
            + (" labels" if gen.labels else "")
            + (" native" if gen.native else "")
            + (" edges" if gen.edges else ""),
            "steps:"]
    for k, step in enumerate(steps):
        text.append(f"  [{k}] " + "; ".join(step))
    text.append(d)
    return "\n".join(text)


def parse_seeds(text):
    seeds = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        seeds += range(int(lo), int(hi or lo) + 1)
    return seeds


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--fork-python", default=DEFAULT_FORK)
    p.add_argument("--pristine-python")
    p.add_argument("--mode", choices=["exact", "sampling"], default="exact")
    p.add_argument("--both-modes", action="store_true",
                   help="alternate exact and sampling seeds")
    p.add_argument("--pythonmalloc", default=None,
                   help="PYTHONMALLOC for both runs (e.g. malloc)")
    p.add_argument("--seeds", help="e.g. 0-99,120")
    p.add_argument("--seed", type=int)
    p.add_argument("--seconds", type=float, default=None)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--shrink", type=int, default=60,
                   help="budget of runs to shrink a mismatch (0: none)")
    p.add_argument("--show", action="store_true",
                   help="print the program of --seed and exit")
    p.add_argument("--keep-going", action="store_true")
    p.add_argument("--allocations", choices=["seed", "on", "off"],
                   default="seed",
                   help="start(allocations=True) and the check of the "
                        "allocation totals: as the seed draws it (a share "
                        "of the programs), always or never")
    p.add_argument("--labels", choices=["seed", "on", "off"],
                   default="seed",
                   help="object steps in tracemalloc.label() blocks and the "
                        "check of get_object_labels(): as the seed draws "
                        "it, always or never")
    p.add_argument("--native", choices=["seed", "on", "off"],
                   default="seed",
                   help="start(native=True), C allocations through ctypes "
                        "and the check of the native domain: as the seed "
                        "draws it, always or never")
    p.add_argument("--edges", choices=["seed", "on", "off"],
                   default="seed",
                   help="issue 43's cases (allocations without the GIL in "
                        "labels, subinterpreters in labels, a raw allocator "
                        "built on malloc() installed while tracing native "
                        "memory sampled): as the seed draws it, always or "
                        "never")
    args = p.parse_args(argv)
    args.allocations = {"seed": None, "on": True, "off": False}[
        args.allocations]
    args.labels = {"seed": None, "on": True, "off": False}[args.labels]
    args.native = {"seed": None, "on": True, "off": False}[args.native]
    args.edges = {"seed": None, "on": True, "off": False}[args.edges]

    if args.show:
        gen = Gen(args.seed or 0, args.mode, args.allocations, args.labels,
                  args.native, args.edges)
        steps = (gen.exact_program(args.steps) if args.mode == "exact"
                 else gen.sampling_program(max(3, args.steps // 4)))
        print(render(steps, args.mode)[0])
        return 0
    if args.mode == "exact" or args.both_modes:
        if not args.pristine_python:
            version = subprocess.run(
                [args.fork_python, "-c",
                 "import sys; print(sys.version.split()[0])"],
                capture_output=True, text=True).stdout.strip()
            args.pristine_python, why = find_pristine(version)
            if args.pristine_python is None:
                print(f"fuzz_differential: {why}", file=sys.stderr)
                return 2
    if args.seed is not None:
        seeds = iter([args.seed])
    elif args.seeds:
        seeds = iter(parse_seeds(args.seeds))
    else:
        start = random.randrange(1 << 30)
        seeds = iter(range(start, start + (1 << 30)))
    deadline = time.monotonic() + args.seconds if args.seconds else None
    found = runs = 0
    modes = ["exact", "sampling"] if args.both_modes else [args.mode]
    with tempfile.TemporaryDirectory(prefix="fuzzdiff") as tmpdir:
        for seed in seeds:
            if deadline and time.monotonic() > deadline:
                break
            for mode in modes:
                args.mode = mode
                runs += 1
                report = fuzz_one(seed, args, tmpdir)
                if report:
                    found += 1
                    print(report, flush=True)
                    if not args.keep_going:
                        return 1
    print(f"fuzz_differential: {runs} programs, {found} mismatches")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
