"""Correctness tests of the fork's tracing engine.

test_tracemalloc checks the Python API shared with upstream CPython, and
test_tracemalloc_module the fork's additions to the tracemalloc module.  This
file checks the C engine underneath:

* tracebacks are exact: every trace names the frames that were really on the
  stack, whatever the call-context cache saw before (generators resumed from
  elsewhere, code objects freed and their addresses reused, threads...);
* the trace store is exact through every allocator API (raw/mem/obj x
  malloc/calloc/realloc/free), under pymalloc, PYTHONMALLOC=malloc, the
  debug hooks and a user's PyMem_SetAllocator() hooks;
* it survives threads, fork() and out-of-memory in its own bookkeeping;
* PyTraceMalloc_Track()/Untrack(), _PyMem_DumpTraceback(), ResourceWarning
  tracebacks and startup options behave as upstream.

The ground truth for a traceback is always the interpreter's own frame
chain (sys._getframe() and f_back) read on the line of the allocation, so a
test fails whenever the engine reports anything else.
"""

import asyncio
import collections
import functools
import gc
import os
import random
import re
import sys
import textwrap
import threading
import traceback
import tracemalloc
import types
import unittest

from test import support
from test.support import (import_helper, os_helper, script_helper,
                          threading_helper)

_tracemalloc = import_helper.import_module('_tracemalloc')
_testtracemalloc = import_helper.import_module('_testtracemalloc')
ctypes = import_helper.import_module('ctypes')
try:
    import _testcapi
except ImportError:
    _testcapi = None

requires_testcapi = unittest.skipIf(_testcapi is None, 'needs _testcapi')


def get_traceback_function():
    """(module name, function name) of _PyTraceMalloc_GetTraceback() as
    the base's test modules export it: _testcapi.tracemalloc_get_traceback
    on 3.11, _testinternalcapi._PyTraceMalloc_GetTraceback on 3.13 (which
    has no _testcapi one).  Subinterpreter code imports it by these
    names."""
    if _testcapi is not None and hasattr(_testcapi,
                                         'tracemalloc_get_traceback'):
        return '_testcapi', 'tracemalloc_get_traceback'
    return '_testinternalcapi', '_PyTraceMalloc_GetTraceback'


if _testcapi is not None:
    track = _testcapi.tracemalloc_track
    untrack = _testcapi.tracemalloc_untrack
    # get_traceback(domain, address): the trace's frames, most recent
    # first, or None.
    get_traceback = getattr(
        import_helper.import_module(get_traceback_function()[0]),
        get_traceback_function()[1])
    # The name of the allocators in use ('pymalloc', 'malloc', 'debug',
    # ...; RuntimeError for a user's): in _testcapi on 3.11, in
    # _testinternalcapi on 3.13.
    if hasattr(_testcapi, 'pymem_getallocatorsname'):
        pymem_getallocatorsname = _testcapi.pymem_getallocatorsname
    else:
        pymem_getallocatorsname = import_helper.import_module(
            '_testinternalcapi').pymem_getallocatorsname

# PYTHONMALLOC=mimalloc and mimalloc_debug exist from 3.13 on, in builds
# with mimalloc (the feature test.support.with_mimalloc() asks for).
WITH_MIMALLOC = bool(getattr(_testcapi, 'WITH_MIMALLOC', False))
requires_mimalloc = unittest.skipUnless(
    WITH_MIMALLOC, f'no mimalloc in Python {sys.version.split()[0]}')

# PEP 709 (3.12): list, dict and set comprehensions run inline in their
# caller's frame; generator expressions keep a frame of their own.
COMPREHENSIONS_INLINED = sys.version_info >= (3, 12)

# Default traceback limit of the tests: deeper than the unittest stack.
NFRAME = 100

# Big enough that the libc never has it: realloc() to it must fail.
HUGE = 2 ** 62

# A start count of set_nomemory() (a C int) that the tests never reach: its
# hooks then forward every call to the previous allocator.
NEVER = 2 ** 31 - 1


# ---------------------------------------------------------------------------
# Helpers

class Obj:
    """Instances are fresh GC blocks with the managed-dict pre-header."""


class SlotObj:
    """Instances are fresh GC blocks without a managed dict."""
    __slots__ = ('a',)


def stack():
    """The caller's frames as (filename, lineno), most recent call LAST.

    Call it on the line of the allocation: the caller's f_lineno is then the
    line the engine must report.
    """
    frame = sys._getframe(1)
    frames = []
    while frame is not None:
        frames.append((frame.f_code.co_filename, frame.f_lineno))
        frame = frame.f_back
    frames.reverse()
    return frames


def raw_frames(obj):
    """The engine's frames of obj, most recent first, or None."""
    return _tracemalloc._get_object_traceback(obj)


def allocated_at(obj, expected):
    """True if obj's traceback is expected (most recent last), cut to the
    traceback limit."""
    frames = raw_frames(obj)
    limit = tracemalloc.get_traceback_limit()
    expected = [tuple(f) for f in expected][-limit:]
    return frames is not None and list(reversed(frames)) == expected


def recurse(depth, func, *args):
    """Call func(*args) under depth extra frames."""
    if depth <= 0:
        return func(*args)
    return recurse(depth - 1, func, *args)


def _do(fn, *args):
    """Call fn(*args) on a known line and return (result, key).

    key is the two most recent frames of whatever fn allocates: this
    function's call line, then the caller's line.  fn(*args) passes the
    args tuple as is (no new tuple on the call line), so the only blocks
    traced with key are fn's own block and the int of its result.
    """
    frame = sys._getframe()
    line = frame.f_lineno + 1
    result = fn(*args)
    key = ((frame.f_code.co_filename, line),
           (frame.f_back.f_code.co_filename, frame.f_back.f_lineno))
    del frame   # no frame <-> locals cycle keeping result alive
    return result, key


def sizes_at(key, domain=0):
    """Sorted sizes of the live traces whose most recent frames are key."""
    n = len(key)
    return sorted(size
                  for dom, size, frames, total in _tracemalloc._get_traces()
                  if dom == domain and frames[:n] == key)


def int_size(value):
    """Size of the block of an int (what PyLong_FromVoidPtr allocates)."""
    return sys.getsizeof(value)


def allocator_name():
    if _testcapi is None:
        return None
    try:
        return pymem_getallocatorsname()
    except RuntimeError:
        return None


class Domain:
    """ctypes bindings of one allocator domain."""

    def __init__(self, name, lib, prefix, gil):
        vp, sz = ctypes.c_void_p, ctypes.c_size_t
        self.name = name
        self.gil = gil
        self.malloc = self._bind(lib, prefix + 'Malloc', vp, [sz])
        self.calloc = self._bind(lib, prefix + 'Calloc', vp, [sz, sz])
        self.realloc = self._bind(lib, prefix + 'Realloc', vp, [vp, sz])
        self.free = self._bind(lib, prefix + 'Free', None, [vp])

    @staticmethod
    def _bind(lib, name, restype, argtypes):
        func = getattr(lib, name)
        func.restype = restype
        func.argtypes = argtypes
        return func

    def __repr__(self):
        return f'<Domain {self.name}>'


def make_domains():
    # Own library objects: the restype/argtypes of ctypes.pythonapi stay
    # untouched.  PyDLL keeps the GIL during the call, CDLL releases it.
    gil = ctypes.PyDLL(None)
    nogil = ctypes.CDLL(None)
    return {
        'raw': Domain('raw', gil, 'PyMem_Raw', True),
        'raw-nogil': Domain('raw-nogil', nogil, 'PyMem_Raw', False),
        'mem': Domain('mem', gil, 'PyMem_', True),
        'obj': Domain('obj', gil, 'PyObject_', True),
    }


DOMAINS = make_domains()


class EngineTestCase(unittest.TestCase):
    """Tracing off before and after every test, whatever it did."""

    def setUp(self):
        was_tracing = tracemalloc.is_tracing()
        limit = tracemalloc.get_traceback_limit()
        tracemalloc.stop()

        def restore():
            _testtracemalloc.fail_bookkeeping(0)
            tracemalloc.stop()
            if was_tracing:
                tracemalloc.start(limit)
        self.addCleanup(restore)

    def start(self, nframe=NFRAME):
        """Start tracing from scratch."""
        tracemalloc.stop()
        tracemalloc.start(nframe)
        self.addCleanup(tracemalloc.stop)

    def check_consistency(self):
        try:
            return _testtracemalloc.check_consistency()
        except AssertionError as exc:
            self.fail(f'trace store inconsistent: {exc}')

    def assertAllocatedAt(self, obj, expected, msg=None):
        """obj's traceback is expected (most recent last), cut to the
        traceback limit."""
        limit = tracemalloc.get_traceback_limit()
        expected = [tuple(frame) for frame in expected][-limit:]
        frames = raw_frames(obj)
        self.assertIsNotNone(frames, msg or f'{type(obj).__name__} untraced')
        self.assertEqual(list(reversed(frames)), expected, msg)
        tb = tracemalloc.get_object_traceback(obj)
        self.assertEqual([(f.filename, f.lineno) for f in tb], expected, msg)

    def assertTotalNframe(self, frames, total):
        """Every exported trace with these frames has this total_nframe."""
        found = [t for d, s, f, t in _tracemalloc._get_traces() if f == frames]
        self.assertTrue(found, 'no trace has these frames')
        self.assertEqual(set(found), {total})


# ---------------------------------------------------------------------------
# 1. Tracebacks

def gen_allocating():
    while True:
        yield Obj(), stack()


def gen_inner():
    while True:
        yield Obj(), stack()


def gen_middle():
    yield from gen_inner()


def gen_outer():
    yield from gen_middle()


@types.coroutine
def suspend():
    yield 'suspended'


class TracebackTest(EngineTestCase):

    def setUp(self):
        super().setUp()
        self.start(NFRAME)

    def check_all(self, pairs):
        self.assertTrue(pairs)
        for obj, expected in pairs:
            self.assertAllocatedAt(obj, expected)

    # -- plain calls ------------------------------------------------------

    def test_object_kinds(self):
        n = 1000
        O, S, ba = Obj, SlotObj, bytearray
        objs, expected = (O(), S(), ba(n), bytes(n), b'x' * n, object()), stack()
        for obj in objs:
            self.assertAllocatedAt(obj, expected)
        self.assertTotalNframe(raw_frames(objs[0]), len(expected))
        # The block of a bytearray's buffer is traced on the same line.
        self.assertIn(1001, sizes_at(tuple(reversed(expected))[:2]))

    def test_nested_calls(self):
        def a():
            return b()

        def b():
            return c()

        def c():
            return Obj(), stack()

        obj, expected = a()
        self.assertEqual([line for _, line in expected[-3:]],
                         [a.__code__.co_firstlineno + 1,
                          b.__code__.co_firstlineno + 1,
                          c.__code__.co_firstlineno + 1])
        self.assertAllocatedAt(obj, expected)
        self.assertTotalNframe(raw_frames(obj), len(expected))
        # Same function, another call site: another traceback.
        obj2, expected2 = b()
        self.assertNotEqual(expected, expected2)
        self.assertAllocatedAt(obj2, expected2)
        self.assertAllocatedAt(obj, expected)

    def test_same_line_several_allocations(self):
        def f():
            return [Obj() for _ in range(3)], stack()
        # Called twice from two lines: the per-frame cache must follow.
        objs1, exp1 = f()
        objs2, exp2 = f()
        # The objects were made by the list comprehension's frame, called
        # from f's line; with inlined comprehensions, by f's frame on that
        # line.
        for objs, expected in ((objs1, exp1), (objs2, exp2)):
            for obj in objs:
                frames = list(reversed(raw_frames(obj)))
                if COMPREHENSIONS_INLINED:
                    self.assertEqual(frames, expected)
                else:
                    self.assertEqual(frames[:-1], expected)
                    self.assertEqual(frames[-1][1], expected[-1][1])

    def test_line_memo_follows_lines(self):
        # The per-frame memo covers every instruction of the line of the
        # frame's last allocation: a statement spread over several lines,
        # lines that alternate in a loop and a line split around a call
        # must each still get its own line.  Objects of free lists filled
        # before the start are untraced, and stay so when reused: replace
        # them with traced ones first.
        junk = [(float(i), [i], (i, i, i)) for i in range(3000)]
        del junk
        first = sys._getframe().f_lineno
        pairs = []
        for i in range(3):
            a = float(i) + 0.25             # first + 3
            b = (float(i) * 3.0,            # first + 4
                 float(i) * 5.0,            # first + 5
                 Obj())                     # first + 6
            c = [a * 2.0, stack()[-1][1],   # first + 7
                 b[0] * 7.0]                # first + 8
            d = a * 3.0 + len(stack()) * 0.5 + b[1] * 11.0  # first + 9
            pairs.append((a, b, c, d))
        here = stack()[:-1]
        where = lambda off: here + [(__file__, first + off)]
        for a, b, c, d in pairs:
            self.assertAllocatedAt(a, where(3))
            self.assertAllocatedAt(b, where(4))
            self.assertAllocatedAt(b[0], where(4))
            self.assertAllocatedAt(b[1], where(5))
            self.assertAllocatedAt(b[2], where(6))
            self.assertAllocatedAt(c, where(7))
            self.assertAllocatedAt(c[0], where(7))
            self.assertAllocatedAt(c[2], where(8))
            self.assertAllocatedAt(d, where(9))
            self.assertEqual(c[1], first + 7)

    # -- free lists: _PyTraceMalloc_NewReference --------------------------

    def test_free_list_objects_are_retraced(self):
        def make_floats(n):
            return [float(i) + 0.5 for i in range(n)]

        def make_tuples(n):
            return [tuple([i, i, i]) for i in range(n)]

        def make_lists(n):
            return [[] for i in range(n)]       # PyList_New(): free list

        def make_dicts(n):
            return [{} for i in range(n)]       # PyDict_New(): free list

        # Objects taken from a free list keep the trace of their block; a
        # block allocated before start() has none, as upstream.  Empty the
        # free lists, keep their untraced blocks alive, and put back only
        # blocks allocated while tracing.
        untraced = []
        for make in (make_floats, make_tuples, make_lists, make_dicts):
            blocks = make(5000)
            untraced.extend(b for b in blocks if raw_frames(b) is None)
            self.assertLess(len(untraced), 4500)
            del blocks

        def reuse():
            x = 3.25
            y = 1.0
            f, expected = x * y, stack()
            t, expected_t = tuple([f, f, f]), stack()
            l, expected_l = [], stack()
            d, expected_d = {}, stack()
            return ((f, expected), (t, expected_t), (l, expected_l),
                    (d, expected_d))

        results = reuse()
        for obj, expected in results:
            self.assertAllocatedAt(obj, expected, type(obj).__name__)

        # Again from another function: the reused blocks move with them.
        def elsewhere():
            return reuse()
        del results
        for obj, expected in elsewhere():
            self.assertAllocatedAt(obj, expected, type(obj).__name__)

    def test_new_float_back_to_the_free_list_and_reused_at_once(self):
        # A float made in a new block goes back to the free list and is
        # taken again at the next line, with no traced allocation between
        # the two: the second line's traceback.  A new object skips its
        # re-trace (_Py_NewReferenceFresh()); this checks that the engine
        # does not take the reused block for one it has just traced.
        def reuse_at_once(x, y):
            f = x * y
            del f
            g = x * y
            return g

        first = reuse_at_once.__code__.co_firstlineno
        for _ in range(3):
            # Empty the float free list, so that f gets a new block (one
            # float per item, no temporary float going back to the list).
            hold = [i + 0.5 for i in range(1000)]
            g = reuse_at_once(3.25, 2.0)
            del hold
            tb = tracemalloc.get_object_traceback(g)
            self.assertIsNotNone(tb)
            self.assertEqual(tb[-1].lineno, first + 3)

    # -- recursion --------------------------------------------------------

    def check_recursion(self, depth):
        out = []

        def rec(n):
            obj, expected = Obj(), stack()
            out.append((obj, expected))
            if n > 1:
                rec(n - 1)
            # On the way back too, once the callee frames are gone.
            obj, expected = SlotObj(), stack()
            out.append((obj, expected))

        base = len(stack())
        rec(depth)
        self.assertEqual(len(out), 2 * depth)
        self.assertEqual(max(len(e) for _, e in out), base + depth)
        self.check_all(out)
        deepest = max(out, key=lambda item: len(item[1]))
        self.assertTotalNframe(raw_frames(deepest[0]), len(deepest[1]))

    def test_recursion_50(self):
        self.check_recursion(50)

    def test_recursion_400(self):
        tracemalloc.stop()
        tracemalloc.start(1000)
        self.check_recursion(400)

    # -- generators -------------------------------------------------------

    def test_generator_resumed_from_different_callers(self):
        g = gen_allocating()

        def from_a():
            return next(g)

        def from_b():
            return g.send(None)

        def from_c():
            return recurse(5, next, g)

        results = []
        for func in (from_a, from_b, from_a, from_c, from_b):
            results.append(func())
            obj, expected = results[-1]
            self.assertAllocatedAt(obj, expected)
            if func is not from_c:
                self.assertEqual(expected[-2],
                                 (func.__code__.co_filename,
                                  func.__code__.co_firstlineno + 1))
        self.assertEqual(len({tuple(e) for _, e in results}), 3)
        self.check_all(results)

    def test_generator_resumed_from_different_threads(self):
        g = gen_allocating()
        results = []
        errors = []

        def worker(depth):
            try:
                results.append(recurse(depth, next, g))
            except BaseException as exc:
                errors.append(exc)

        for depth in (0, 3, 7, 1):
            thread = threading.Thread(target=worker, args=(depth,))
            thread.start()
            threading_helper.join_thread(thread)
            # And from this thread in between.
            results.append(next(g))
        self.assertEqual(errors, [])
        self.assertEqual(len(results), 8)
        self.assertGreater(len({tuple(e) for _, e in results}), 4)
        self.check_all(results)

    def test_yield_from_chain(self):
        g = gen_outer()

        def from_a():
            return next(g)

        def from_b():
            return recurse(3, g.send, None)

        results = [from_a(), from_b(), from_a(), next(g)]
        for obj, expected in results:
            # the resumer, outer, middle, inner
            self.assertEqual([f[1] for f in expected[-3:]],
                             [gen_outer.__code__.co_firstlineno + 1,
                              gen_middle.__code__.co_firstlineno + 1,
                              gen_inner.__code__.co_firstlineno + 2])
        self.assertEqual(len({tuple(e) for _, e in results}), 3)
        self.check_all(results)

    def test_await_chain_manual_send(self):
        out = []

        async def leaf():
            out.append((Obj(), stack()))
            await suspend()
            out.append((Obj(), stack()))
            await suspend()
            out.append((Obj(), stack()))

        async def middle():
            await leaf()

        async def top():
            await middle()

        coro = top()

        def first():
            return coro.send(None)

        def second():
            return recurse(4, coro.send, None)

        def third():
            try:
                coro.send(None)
            except StopIteration:
                pass

        self.assertEqual(first(), 'suspended')
        self.assertEqual(second(), 'suspended')
        third()
        self.assertEqual(len(out), 3)
        self.assertEqual(len({tuple(e) for _, e in out}), 3)
        self.check_all(out)

    def test_await_chain_asyncio(self):
        out = []

        async def leaf(i):
            out.append((Obj(), stack()))
            await asyncio.sleep(0)
            out.append((Obj(), stack()))
            await asyncio.sleep(0)
            out.append((bytearray(2000), stack()))
            return i

        async def middle(i):
            return await leaf(i)

        async def top():
            results = await asyncio.gather(*(middle(i) for i in range(3)))
            out.append((Obj(), stack()))
            return results

        self.addCleanup(asyncio.set_event_loop_policy, None)
        self.assertEqual(asyncio.run(top()), [0, 1, 2])
        self.assertEqual(len(out), 10)
        self.check_all(out)

    def test_generator_throw_into_delegating_generator(self):
        out = []

        def sub():
            while True:
                try:
                    yield
                except ValueError:
                    out.append((Obj(), stack()))
                    out.append((bytearray(3000), stack()))

        def delegating():
            yield from sub()

        def outer():
            yield from delegating()

        for gen in (delegating(), outer()):
            next(gen)

            def thrower_a():
                gen.throw(ValueError)

            def thrower_b():
                recurse(6, gen.throw, ValueError('x'))

            thrower_a()
            thrower_b()
            thrower_a()
        self.assertEqual(len(out), 12)
        self.check_all(out)
        self.assertGreater(len({tuple(e) for _, e in out}), 3)

    def test_generator_throw_caught_by_delegating_generator(self):
        out = []

        def failing_sub():
            yield
            yield

        def delegating():
            while True:
                try:
                    yield from failing_sub()
                except KeyError:
                    out.append((Obj(), stack()))

        gen = delegating()
        next(gen)

        def thrower():
            gen.throw(KeyError)
        thrower()
        recurse(4, gen.throw, KeyError)
        self.assertEqual(len(out), 2)
        self.check_all(out)

    def test_generator_close_with_finally(self):
        out = []

        def sub():
            try:
                yield
            finally:
                out.append((Obj(), stack()))

        def delegating():
            try:
                yield from sub()
            finally:
                out.append((Obj(), stack()))

        for closer in (lambda g: g.close(), lambda g: recurse(3, g.close)):
            gen = delegating()
            next(gen)
            closer(gen)
        self.assertEqual(len(out), 4)
        self.check_all(out)

    # -- exceptions -------------------------------------------------------

    def test_exception_unwinding(self):
        out = []

        def raiser(n):
            try:
                if n == 0:
                    raise KeyError(n)
                raiser(n - 1)
            finally:
                out.append((Obj(), stack()))

        def handler():
            try:
                raiser(50)
            except KeyError:
                out.append((Obj(), stack()))
                out.append((bytearray(5000), stack()))
            finally:
                out.append((Obj(), stack()))
            # Deep again, reusing the frames' memory of the raise.
            out.append(recurse(40, lambda: (Obj(), stack())))

        handler()
        self.assertEqual(len(out), 51 + 4)
        self.check_all(out)

    # -- comprehensions, lambdas, class bodies, decorators ----------------

    def test_comprehensions(self):
        lc = [(Obj(), stack()) for _ in range(3)]
        dc = {i: (Obj(), stack()) for i in range(3)}
        sc = {(Obj(), tuple(stack())) for _ in range(3)}
        ge = list((Obj(), stack()) for _ in range(3))
        nested = [[(Obj(), stack()) for _ in range(2)] for _ in range(2)]
        pairs = (lc + list(dc.values()) + list(sc) + ge
                 + [p for row in nested for p in row])
        self.check_all(pairs)
        this_file = stack()[-1][0]
        if not COMPREHENSIONS_INLINED:
            # Each comprehension is its own frame, called from this file.
            for _, expected in pairs:
                self.assertEqual(expected[-2][0], this_file)
            return
        # The generator expression is its own frame, called from this one;
        # the others run in this frame.
        depth = len(stack())
        for _, expected in ge:
            self.assertEqual(len(expected), depth + 1)
            self.assertEqual(expected[-2][0], this_file)
        for _, expected in (lc + list(dc.values()) + list(sc)
                            + [p for row in nested for p in row]):
            self.assertEqual(len(expected), depth)
            self.assertEqual(expected[-1][0], this_file)

    def test_lambdas(self):
        make = lambda: (Obj(), stack())
        twice = lambda f: [f(), f()]
        pairs = [make()] + twice(make) + [recurse(3, make)]
        self.check_all(pairs)

    def test_class_bodies(self):
        class A:
            obj, expected = Obj(), stack()

            class B:
                obj, expected = Obj(), stack()

        def in_function():
            class C:
                obj, expected = bytearray(700), stack()
            return C

        C = in_function()
        self.check_all([(A.obj, A.expected), (A.B.obj, A.B.expected),
                        (C.obj, C.expected)])

    def test_decorators(self):
        out = []

        def deco(func):
            out.append((Obj(), stack()))

            @functools.wraps(func)
            def wrapper(*args):
                out.append((Obj(), stack()))
                return func(*args)
            return wrapper

        def deco_factory(n):
            out.append((Obj(), stack()))
            return deco

        @deco
        def f():
            out.append((Obj(), stack()))

        @deco_factory(3)
        @deco
        def g():
            out.append((Obj(), stack()))

        f()
        g()
        recurse(2, f)
        self.assertEqual(len(out), 4 + 2 + 3 + 2)
        self.check_all(out)

    # -- Python called from C ---------------------------------------------

    def test_callbacks_from_c(self):
        out = []

        def key(x):
            out.append((Obj(), stack()))
            return -x

        def add(a, b):
            out.append((Obj(), stack()))
            return a + b

        self.assertEqual(sorted([3, 1, 2], key=key), [3, 2, 1])
        self.assertEqual(list(map(key, [1, 2])), [-1, -2])
        self.assertEqual(functools.reduce(add, [1, 2, 3]), 6)
        self.assertEqual(min([4, 5, 6], key=key), 6)
        self.assertEqual(max(recurse(3, map, key, [7])), -7)
        self.assertEqual(len(out), 3 + 2 + 2 + 3 + 1)
        self.check_all(out)

    def test_specialized_inline_calls(self):
        # Once specialized, Python calls, __getitem__ included, run in the
        # caller's eval loop without a new C-level entry.
        out = []

        class Seq:
            def __getitem__(self, index):
                out.append((Obj(), stack()))
                return index

        def callee(a, b=2):
            out.append((Obj(), stack()))
            return a

        def caller(seq, n):
            for i in range(n):
                seq[i]
                callee(i)
                callee(i, 3)
            return out

        seq = Seq()
        for n in (1, 20, 5):
            caller(seq, n)
            recurse(2, caller, seq, n)
        self.assertEqual(len(out), 3 * 2 * 26)
        self.check_all(out)

    # -- exec/compile: code objects freed and their addresses reused ------

    @unittest.skipIf(support.check_sanitizer(address=True),
                     "ASan's quarantine keeps freed addresses from reuse")
    def test_exec_fresh_code_in_a_loop(self):
        names = ['<engine-exec-%d>', 'engine_exec_%d.py', 'caf\xe9_%d.py',
                 '\u20ac/%d.py', '\U0001f600_%d.py']
        kept = []
        seen_addresses = set()
        reused = 0
        for i in range(2000):
            filename = names[i % len(names)] % i
            pad = i % 11
            body = i % 4
            trailing = i % 3
            src = ('\n' * pad
                   + 'def func():\n'
                   + '    x = 1\n' * body
                   + '    return Obj(), stack()\n'
                   + '\n' * trailing
                   + 'result = func()\n')
            alloc_line = pad + 2 + body
            call_line = alloc_line + 1 + trailing
            code = compile(src, filename, 'exec')
            if id(code) in seen_addresses:
                reused += 1
            seen_addresses.add(id(code))
            namespace = {'Obj': Obj, 'stack': stack}
            exec(code, namespace)
            obj, expected = namespace['result']
            self.assertEqual(expected[-2:], [(filename, call_line),
                                             (filename, alloc_line)])
            self.assertAllocatedAt(obj, expected, filename)
            if i % 97 == 0:
                kept.append((obj, expected))
            del code, namespace, obj
        # The point of the test: code objects died and their addresses
        # were reused by new ones.
        self.assertGreater(reused, 100)
        # Old traces keep their own file names after the code died.
        self.check_all(kept)

    # -- threads ----------------------------------------------------------

    def test_threads_with_own_stack_depths(self):
        nthreads = 8
        errors = []
        barrier = threading.Barrier(nthreads)

        def check(index):
            barrier.wait()
            for i in range(150):
                size = 600 + index
                obj = Obj() if i % 2 else bytearray(size); expected = stack()
                if not allocated_at(obj, expected):
                    errors.append((index, i, expected, raw_frames(obj)))
                    return

        def worker(index):
            try:
                recurse(3 + index * 7, check, index)
            except BaseException:
                errors.append(traceback.format_exc())

        threads = [threading.Thread(target=worker, args=(i,))
                   for i in range(nthreads)]
        with threading_helper.start_threads(threads):
            pass
        for thread in threads:
            self.assertFalse(thread.is_alive())
        self.assertEqual(errors, [])
        self.check_consistency()

    # -- the traceback limit ----------------------------------------------

    def test_traceback_limit(self):
        size_1 = 54321
        size_25 = 54322

        def alloc(n):
            data, expected = bytes(n), stack()
            return data, expected

        def traces_of_size(size):
            block_size = sys.getsizeof(bytes(size))
            return [(f, t) for d, s, f, t in _tracemalloc._get_traces()
                    if d == 0 and s == block_size]

        tracemalloc.stop()
        tracemalloc.start(1)
        data1, expected1 = recurse(40, alloc, size_1)
        depth = len(expected1)
        self.assertGreater(depth, 40)
        self.assertEqual(raw_frames(data1), (expected1[-1],))
        traces = traces_of_size(size_1)
        self.assertEqual(traces, [((expected1[-1],), depth)])

        tracemalloc.stop()
        tracemalloc.start(25)
        data25, expected25 = recurse(40, alloc, size_25)
        self.assertEqual(len(expected25), depth)
        self.assertEqual(list(reversed(raw_frames(data25))), expected25[-25:])
        traces = traces_of_size(size_25)
        self.assertEqual(len(traces), 1)
        self.assertEqual(traces[0][1], depth)
        self.assertEqual(list(reversed(traces[0][0])), expected25[-25:])
        tb = tracemalloc.get_object_traceback(data25)
        self.assertEqual(len(tb), 25)

        # A second start() while tracing is ignored, limit included, as
        # upstream: the traces and their tracebacks stay as they are.
        tracemalloc.start(5)
        self.assertTrue(tracemalloc.is_tracing())
        self.assertEqual(tracemalloc.get_traceback_limit(), 25)
        self.assertEqual(list(reversed(raw_frames(data25))), expected25[-25:])
        data5, expected5 = recurse(40, alloc, size_1)
        self.assertEqual(list(reversed(raw_frames(data5))), expected5[-25:])
        snapshot = tracemalloc.take_snapshot()
        self.assertEqual(snapshot.traceback_limit, 25)

        # Restarted with another limit, new traces get it.
        tracemalloc.stop()
        tracemalloc.start(NFRAME)
        self.assertEqual(tracemalloc.get_traceback_limit(), NFRAME)
        data100, expected100 = recurse(40, alloc, size_25)
        self.assertEqual(list(reversed(raw_frames(data100))), expected100)
        self.assertTotalNframe(raw_frames(data100), depth)

    def test_clear_traces_and_restart_keep_tracebacks_exact(self):
        # Frame caches of live frames must not survive a clear or restart.
        def inner(n):
            return Obj(), stack()

        def outer():
            pairs = [inner(0)]
            tracemalloc.clear_traces()
            pairs.append(inner(1))
            tracemalloc.stop()
            tracemalloc.start(NFRAME)
            pairs.append(inner(2))
            pairs.append((Obj(), stack()))
            return pairs

        pairs = recurse(5, outer)
        self.assertIsNone(raw_frames(pairs[0][0]))
        self.check_all(pairs[2:])

    def test_incomplete_frames_are_skipped(self):
        # A function's cells are made before its first traceable
        # instruction: like upstream, and like f_back, that frame is not
        # shown yet, the cell is charged to the call site.
        def make_closure():
            value = 1
            return lambda: value

        func, expected = make_closure(), stack()
        cell = func.__closure__[0]
        self.assertAllocatedAt(cell, expected)

    def test_exports_while_finalizers_clear_traces(self):
        # Building the export allocates, which runs the GC, whose
        # finalizers may clear or restart tracing, or export again, while
        # the outer export still reads the nodes of the traces it copied.
        calls = collections.Counter()
        exporting = []

        class Finalizer:
            def __init__(self, action):
                self.action = action
                self.cycle = self

            def __del__(self):
                calls[self.action] += 1
                if exporting:
                    calls['during export: ' + self.action] += 1
                if self.action == 'clear':
                    tracemalloc.clear_traces()
                elif self.action == 'restart':
                    tracemalloc.stop()
                    tracemalloc.start(NFRAME)
                else:
                    _tracemalloc._get_traces()
                    tracemalloc.get_object_traceback(self)

        old_threshold = gc.get_threshold()
        self.addCleanup(gc.set_threshold, *old_threshold)
        rng = random.Random(7)
        actions = ('clear', 'restart', 'export')
        for i in range(100):
            keep = [recurse(i % 9, lambda: (Obj(), bytearray(64 + i)))
                    for _ in range(20)]
            gc.collect()
            gc.set_threshold(rng.randrange(3, 120))
            for j in range(rng.randrange(1, 4)):
                Finalizer(actions[(i + j) % 3])
            exporting.append(True)
            if i % 2:
                traces = _tracemalloc._get_traces()
            else:
                traces = [(t.domain, t.size,
                           tuple((f.filename, f.lineno)
                                 for f in reversed(t.traceback)),
                           t.traceback.total_nframe)
                          for t in tracemalloc.take_snapshot().traces]
            exporting.clear()
            gc.set_threshold(*old_threshold)
            for domain, size, frames, total in traces:
                self.assertIsInstance(frames, tuple)
                self.assertGreaterEqual(len(frames), 1)
                self.assertGreaterEqual(total, len(frames))
                for filename, lineno in frames:
                    self.assertIsInstance(filename, str)
                    self.assertIsInstance(lineno, int)
            this_file = stack()[-1][0]
            for obj, _ in keep[::7]:
                frames = raw_frames(obj)
                if frames is not None:
                    self.assertIn(this_file, {f[0] for f in frames})
            del keep, traces
        # Finalizers still in cycles run now, not in the next test (the
        # exports pause the collector, so fewer run during them).
        gc.collect()
        self.assertTrue(tracemalloc.is_tracing())
        for action in actions:
            self.assertGreater(calls['during export: ' + action], 0, calls)
        self.check_consistency()
        obj, expected = Obj(), stack()
        self.assertAllocatedAt(obj, expected)


# ---------------------------------------------------------------------------
# 2. Store exactness through the allocator APIs

class StoreExactnessTest(EngineTestCase):
    """Every API of every domain; run again in subprocesses under
    PYTHONMALLOC=malloc and PYTHONMALLOC=debug (StoreSubprocessTest)."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.pymalloc = allocator_name() == 'pymalloc'

    def setUp(self):
        super().setUp()
        self.start(10)

    def assertBlock(self, ptr, key, size):
        """The block at ptr is traced once, with size and key."""
        self.assertIsNotNone(ptr)
        self.assertEqual(sizes_at(key), sorted([size, int_size(ptr)]))
        if _testcapi is not None:
            frames = get_traceback(0, ptr)
            self.assertIsNotNone(frames)
            self.assertEqual(frames[:2], key)
        self.check_consistency()

    def assertNoBlock(self, key):
        self.assertEqual(sizes_at(key), [])
        self.check_consistency()

    def check_domain(self, d):
        in_pool = self.pymalloc and d.name in ('mem', 'obj')
        self.check_consistency()

        # malloc(0) is a real block, traced with size 0.
        p0, key = _do(d.malloc, 0)
        self.assertBlock(p0, key, 0)
        res, key = _do(d.free, p0)
        self.assertNoBlock(key)

        # free(NULL)
        res, key = _do(d.free, None)
        self.assertNoBlock(key)

        # calloc
        p, key = _do(d.calloc, 3, 7)
        self.assertBlock(p, key, 21)
        self.assertEqual(ctypes.string_at(p, 21), bytes(21))
        res, key = _do(d.free, p)
        self.assertNoBlock(key)
        p, key = _do(d.calloc, 0, 5)
        self.assertBlock(p, key, 0)
        d.free(p)
        p, key = _do(d.calloc, 1000, 3)
        self.assertBlock(p, key, 3000)
        self.assertEqual(ctypes.string_at(p, 3000), bytes(3000))
        d.free(p)

        # realloc growing then shrinking in place.
        p, key1 = _do(d.malloc, 100)
        self.assertBlock(p, key1, 100)
        ctypes.memset(p, 0x5A, 100)
        p2, key2 = _do(d.realloc, p, 110)
        # The trace moves to where the block was resized.
        self.assertEqual(sizes_at(key1), [int_size(p)])
        self.assertBlock(p2, key2, 110)
        if in_pool:
            self.assertEqual(p2, p, 'pymalloc grows 100 -> 110 in place')
        self.assertEqual(ctypes.string_at(p2, 100), b'\x5a' * 100)
        p3, key3 = _do(d.realloc, p2, 90)
        self.assertEqual(sizes_at(key2), [int_size(p2)])
        self.assertBlock(p3, key3, 90)
        if in_pool:
            self.assertEqual(p3, p, 'pymalloc shrinks 110 -> 90 in place')

        # Across the 512-byte small/large boundary, both ways.
        p4, key4 = _do(d.realloc, p3, 600)
        self.assertEqual(sizes_at(key3), [int_size(p3)])
        self.assertBlock(p4, key4, 600)
        self.assertEqual(ctypes.string_at(p4, 90), b'\x5a' * 90)
        p5, key5 = _do(d.realloc, p4, 200)
        self.assertEqual(sizes_at(key4), [int_size(p4)])
        self.assertBlock(p5, key5, 200)
        p6, key6 = _do(d.realloc, p5, 5000)
        self.assertBlock(p6, key6, 5000)
        p7, key7 = _do(d.realloc, p6, 16)
        self.assertEqual(sizes_at(key6), [int_size(p6)])
        self.assertBlock(p7, key7, 16)
        self.assertEqual(ctypes.string_at(p7, 16), b'\x5a' * 16)
        p8, key8 = _do(d.realloc, p7, 0)
        self.assertBlock(p8, key8, 0)

        # A failed realloc leaves the block and its trace as they were.
        res, key_fail = _do(d.realloc, p8, HUGE)
        self.assertIsNone(res)
        self.assertNoBlock(key_fail)
        self.assertBlock(p8, key8, 0)
        p9, key9 = _do(d.realloc, p8, 300)
        self.assertBlock(p9, key9, 300)
        res, key_fail = _do(d.realloc, p9, HUGE)
        self.assertIsNone(res)
        self.assertBlock(p9, key9, 300)
        res, key = _do(d.free, p9)
        self.assertNoBlock(key)
        self.assertEqual(sizes_at(key9), [int_size(p9)])

        # calloc() whose size overflows fails before the allocator.
        res, key = _do(d.calloc, 2 ** 62, 8)
        self.assertIsNone(res)
        self.assertNoBlock(key)

        # realloc(NULL, n) is malloc(n).
        p, key = _do(d.realloc, None, 64)
        self.assertBlock(p, key, 64)
        p2, key2 = _do(d.realloc, p, 1024)
        self.assertBlock(p2, key2, 1024)
        d.free(p2)
        self.check_consistency()

    def test_raw(self):
        self.check_domain(DOMAINS['raw'])

    def test_raw_without_gil(self):
        self.check_domain(DOMAINS['raw-nogil'])

    def test_mem(self):
        self.check_domain(DOMAINS['mem'])

    def test_obj(self):
        self.check_domain(DOMAINS['obj'])

    def test_traced_memory_deltas(self):
        # The deltas also hold the small objects that the calls create and
        # free (the tuples, the ints): a free of one of those can take a few
        # bytes off a delta, whence the slack on both sides.  A collection
        # would free arbitrary garbage in between: none runs.
        big = 1_000_003
        slack = 512
        gc_was_enabled = gc.isenabled()
        gc.disable()
        self.addCleanup(lambda: gc_was_enabled and gc.enable())
        for d in DOMAINS.values():
            with self.subTest(domain=d.name):
                for size, alloc in ((big, lambda: d.malloc(big)),
                                    (big, lambda: d.calloc(1, big)),
                                    (3 * big, lambda: d.calloc(3, big))):
                    before = tracemalloc.get_traced_memory()[0]
                    p = alloc()
                    after = tracemalloc.get_traced_memory()[0]
                    self.assertGreater(after - before, size - slack)
                    self.assertLess(after - before, size + slack)
                    p2 = d.realloc(p, size + 1000)
                    after2 = tracemalloc.get_traced_memory()[0]
                    self.assertGreater(after2 - after, 1000 - slack)
                    self.assertLess(after2 - after, 1000 + slack)
                    d.free(p2)
                    after3 = tracemalloc.get_traced_memory()[0]
                    self.assertGreater(after3 - after2, -(size + 1000) - slack)
                    self.assertLess(after3 - after2, -(size + 1000) + slack)
                    self.check_consistency()

    def test_peak(self):
        d = DOMAINS['raw']
        big = 2_000_000
        tracemalloc.reset_peak()
        current, peak = tracemalloc.get_traced_memory()
        p = d.malloc(big)
        d.free(p)
        current2, peak2 = tracemalloc.get_traced_memory()
        self.assertGreaterEqual(peak2 - max(current, peak), big - 1024)
        tracemalloc.reset_peak()
        current3, peak3 = tracemalloc.get_traced_memory()
        self.assertLess(peak3 - current3, 1024)

    def test_blocks_from_before_start(self):
        tracemalloc.stop()
        old = []
        for d in DOMAINS.values():
            for size in (48, 300, 50_000):
                old.append((d, d.malloc(size), size))
        re_old = [(d, d.malloc(64)) for d in DOMAINS.values()]
        tracemalloc.start(10)
        self.check_consistency()
        if _testcapi is not None:
            for d, p, size in old:
                self.assertIsNone(get_traceback(0, p))
        before = tracemalloc.get_traced_memory()[0]
        for d, p, size in old:
            d.free(p)
        after = tracemalloc.get_traced_memory()[0]
        self.check_consistency()
        # Freeing untraced blocks takes nothing from the totals.
        self.assertGreater(after - before, -1024)
        self.assertLess(after - before, 4096)
        # Resizing one traces it from then on, with its new size.
        for d, p in re_old:
            p2, key = _do(d.realloc, p, 700)
            self.assertBlock(p2, key, 700)
            d.free(p2)
        self.check_consistency()

    def test_pools_emptied_and_reused(self):
        # Fill pools with one size class, empty them, reuse them for
        # another class; free whole arenas; trace again in new arenas.
        d = DOMAINS['obj']
        small = [d.malloc(8) for _ in range(20000)]
        self.check_consistency()
        for p in small:
            d.free(p)
        self.check_consistency()
        mid = [d.malloc(400) for _ in range(3000)]
        self.check_consistency()
        if _testcapi is not None:
            for p in mid[::50]:
                frames = get_traceback(0, p)
                self.assertIsNotNone(frames)
        for p in mid:
            d.free(p)
        objs = [bytes(200 + i % 50) for i in range(40000)]
        self.check_consistency()
        del objs
        gc.collect()
        self.check_consistency()
        objs = [(Obj(), bytearray(100)) for i in range(20000)]
        self.check_consistency()
        del objs
        self.check_consistency()


@requires_testcapi
class UserAllocatorStoreTest(StoreExactnessTest):
    """The same with a user's PyMem_SetAllocator() hooks on every domain."""

    def setUp(self):
        super().setUp()
        _testcapi.set_nomemory(NEVER)
        self.addCleanup(_testcapi.remove_mem_hooks)

    def test_hooks_really_installed(self):
        # pymem_getallocatorsname() cannot name a user's allocator.
        self.assertRaises(RuntimeError, pymem_getallocatorsname)

    def test_tracebacks_under_hooks(self):
        def f():
            return (Obj(), bytearray(3000), bytes(10)), stack()
        objs, expected = recurse(4, f)
        for obj in objs:
            self.assertAllocatedAt(obj, expected)
        self.check_consistency()


@support.requires_subprocess()
class StoreSubprocessTest(unittest.TestCase):
    """StoreExactnessTest and UserAllocatorStoreTest in other allocators."""

    def run_classes(self, pythonmalloc, *classes):
        names = [f'{__name__}.{cls.__name__}' for cls in classes]
        res = script_helper.assert_python_ok(
            '-m', 'unittest', *names, PYTHONMALLOC=pythonmalloc)
        err = res.err.decode('utf-8', 'replace')
        self.assertRegex(err, r'Ran [1-9][0-9]* tests')
        self.assertRegex(err, r'\nOK')
        self.assertNotIn('skipped=', err)
        return err

    def test_pythonmalloc_malloc(self):
        self.run_classes('malloc', StoreExactnessTest, UserAllocatorStoreTest)

    def test_pythonmalloc_debug(self):
        self.run_classes('debug', StoreExactnessTest, UserAllocatorStoreTest)

    @requires_mimalloc
    def test_pythonmalloc_mimalloc(self):
        self.run_classes('mimalloc', StoreExactnessTest,
                         UserAllocatorStoreTest)

    @requires_mimalloc
    def test_pythonmalloc_mimalloc_debug(self):
        self.run_classes('mimalloc_debug', StoreExactnessTest,
                         UserAllocatorStoreTest)

    def test_pythonmalloc_malloc_debug_tracebacks(self):
        self.run_classes('malloc_debug', TracebackTest)


# ---------------------------------------------------------------------------
# 4. Threads

class ThreadStressTest(EngineTestCase):

    def test_allocating_threads_and_start_stop_loop(self):
        nworkers = 8
        stop = threading.Event()
        errors = []
        domains = list(DOMAINS.values())

        def worker(index):
            rng = random.Random(index)
            held = []
            try:
                for i in range(20000):
                    if stop.is_set() and i > 5000:
                        break
                    d = domains[(index + i) % len(domains)]
                    size = rng.choice((0, 8, 100, 500, 513, 4000, 70000))
                    op = rng.random()
                    if op < 0.4 or not held:
                        p = d.malloc(size)
                        if p is None and size:
                            raise MemoryError
                        held.append((d, p))
                    elif op < 0.6:
                        j = rng.randrange(len(held))
                        d2, p = held[j]
                        p2 = d2.realloc(p, rng.choice((1, 64, 600, 9000)))
                        if p2 is None:
                            raise MemoryError
                        held[j] = (d2, p2)
                    elif op < 0.7:
                        p = d.calloc(2, size)
                        held.append((d, p))
                    else:
                        d2, p = held.pop(rng.randrange(len(held)))
                        d2.free(p)
                    if i % 16 == 0:
                        objs = [Obj() for _ in range(10)], bytearray(size)
                        del objs
            except BaseException:
                errors.append(traceback.format_exc())
            finally:
                for d2, p in held:
                    d2.free(p)

        def controller():
            rng = random.Random(12345)
            try:
                for i in range(200):
                    tracemalloc.start(rng.choice((1, 5, 30)))
                    junk = [bytearray(100) for _ in range(20)]
                    _testtracemalloc.check_consistency()
                    snapshot = tracemalloc.take_snapshot()
                    snapshot.statistics('lineno')
                    tracemalloc.get_traced_memory()
                    tracemalloc.reset_peak()
                    if i % 3 == 0:
                        tracemalloc.clear_traces()
                    _testtracemalloc.check_consistency()
                    if i % 4 == 3:
                        tracemalloc.stop()
                    del junk
            except BaseException:
                errors.append(traceback.format_exc())
            finally:
                stop.set()

        threads = [threading.Thread(target=worker, args=(i,))
                   for i in range(nworkers)]
        threads.append(threading.Thread(target=controller))
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                thread.join(support.SHORT_TIMEOUT)
                if thread.is_alive():
                    stop.set()
                    self.fail(f'{thread} still alive: deadlock?')
        finally:
            stop.set()
        self.assertEqual(errors, [])

        if not tracemalloc.is_tracing():
            tracemalloc.start(5)
        self.check_consistency()
        before = tracemalloc.get_traced_memory()[0]
        snapshot = tracemalloc.take_snapshot()
        total = sum(trace.size for trace in snapshot.traces)
        # Taking the snapshot allocates a little before it copies the
        # traces; _check_consistency() did the exact comparison.
        self.assertLess(abs(total - before), 1024)
        self.check_consistency()

    @requires_testcapi
    def test_failed_realloc_without_gil_racing_clear_traces(self):
        # A raw realloc() that fails must leave the traces as they are.
        # If clear_traces() runs while it is in the allocator, the block's
        # old trace is gone with everything else: putting it back after the
        # failure would revive a trace of the old tree, whose node means
        # nothing (or another call path) in the new one.
        d = DOMAINS['raw-nogil']
        stop = threading.Event()
        state = {}
        errors = []

        def worker():
            try:
                p = d.malloc(100)
                i = 0
                while not stop.is_set():
                    # 100 and 101 bytes share one libc chunk: no move.
                    p2 = d.realloc(p, 100 + (i & 1)); state['key'] = stack()
                    if p2 != p:
                        state.pop('p', None)
                    p = p2
                    state['p'] = p
                    i += 1
                    for _ in range(5):
                        if d.realloc(p, HUGE) is not None:
                            raise AssertionError('realloc(HUGE) succeeded')
                state.pop('p', None)
                d.free(p)
            except BaseException:
                errors.append(traceback.format_exc())

        self.start(1)
        thread = threading.Thread(target=worker)
        thread.start()
        wrong = []
        try:
            for i in range(20000):
                tracemalloc.clear_traces()
                junk = [bytearray(10) for _ in range(3)]
                p = state.get('p')
                if p is None:
                    continue
                frames = get_traceback(0, p)
                # Untraced, or traced by the worker's successful realloc.
                if frames is not None and frames != (tuple(state['key'][-1]),):
                    wrong.append(frames)
                    break
                del junk
        finally:
            stop.set()
            threading_helper.join_thread(thread)
        self.assertEqual(errors, [])
        self.assertEqual(wrong, [], 'a failed realloc() put back a trace '
                                    'from before clear_traces()')
        self.check_consistency()

    def test_raw_without_gil_concurrent_with_clear(self):
        # Threads that never hold the GIL while they allocate, racing
        # with clear_traces() and stop()/start() of the main thread.
        d = DOMAINS['raw-nogil']
        stop = threading.Event()
        errors = []

        def worker():
            try:
                while not stop.is_set():
                    ps = [d.malloc(s) for s in (16, 1000, 100_000)]
                    ps = [d.realloc(p, 50) for p in ps]
                    for p in ps:
                        d.free(p)
            except BaseException:
                errors.append(traceback.format_exc())

        threads = [threading.Thread(target=worker) for _ in range(4)]
        self.start(3)
        for thread in threads:
            thread.start()
        try:
            for i in range(200):
                if i % 5 == 0:
                    tracemalloc.clear_traces()
                elif i % 7 == 0:
                    tracemalloc.stop()
                    tracemalloc.start(3)
                self.check_consistency()
                _tracemalloc._get_traces()
        finally:
            stop.set()
            for thread in threads:
                thread.join(support.SHORT_TIMEOUT)
        self.assertFalse(any(t.is_alive() for t in threads))
        self.assertEqual(errors, [])
        self.check_consistency()


# ---------------------------------------------------------------------------
# 5. Out of memory in the bookkeeping

class BookkeepingOOMTest(EngineTestCase):

    def failing(self, n):
        _testtracemalloc.fail_bookkeeping(n)

    def test_new_filename_allocation_raises_memoryerror(self):
        # A new file name must be copied into the engine: with that copy
        # failing, the traced allocation fails as upstream's does.
        self.start(10)
        for i in range(20):
            filename = f'<oom-{i}>'
            code = compile('obj = Obj()\n', filename, 'exec')
            namespace = {'Obj': Obj}
            with self.assertRaises(MemoryError):
                self.failing(1)
                try:
                    exec(code, namespace)
                finally:
                    self.failing(0)
            self.assertNotIn('obj', namespace)
            self.check_consistency()
            # And with memory back, it works.
            exec(code, namespace)
            frames = raw_frames(namespace['obj'])
            self.assertEqual(frames[0], (filename, 1))
            self.check_consistency()

    def test_table_growth_failure(self):
        self.start(5)
        keep = []
        hits = 0
        n = 5000
        for i in range(n):
            self.failing(1)
            try:
                keep.append(bytearray(600))
            except MemoryError:
                hits += 1
            finally:
                self.failing(0)
            if i % 500 == 0:
                self.check_consistency()
        self.assertGreater(hits, 0, 'the table never had to grow?')
        self.assertEqual(len(keep) + hits, n)
        self.check_consistency()
        # Tracing goes on, exactly.
        for b in keep[::250]:
            self.assertIsNotNone(raw_frames(b))
        obj, expected = bytearray(600), stack()
        self.assertAllocatedAt(obj, expected)
        del keep
        self.check_consistency()

    def test_new_pool_slot_array_failure(self):
        # Blocks of a rare size class need new pools (and new slot arrays)
        # every few allocations.
        self.start(5)
        d = DOMAINS['obj']
        held = []
        nulls = errors = 0
        for i in range(300):
            self.failing(1)
            try:
                p = d.malloc(496)
            except (MemoryError, ctypes.ArgumentError):
                errors += 1   # ctypes' own objects got the failure
                continue
            finally:
                self.failing(0)
            if p is None:
                nulls += 1
            else:
                held.append(p)
                self.assertIsNotNone(get_traceback(0, p)
                                     if _testcapi else True)
        self.check_consistency()
        if allocator_name() == 'pymalloc':
            self.assertGreater(nulls, 0)
        for p in held:
            d.free(p)
        self.check_consistency()

    def test_realloc_bookkeeping_failure_keeps_block(self):
        # realloc() that moved the block cannot give it back: the new block
        # stays valid and untraced, and the totals stay exact.
        self.start(5)
        d = DOMAINS['obj']
        held = []
        untraced = 0
        for i in range(300):
            p = d.malloc(16)
            ctypes.memset(p, 0x33, 16)
            self.failing(1)
            try:
                p2 = d.realloc(p, 496)
            except (MemoryError, ctypes.ArgumentError):
                # ctypes' own objects got the failure: no realloc()
                self.failing(0)
                held.append(p)
                continue
            finally:
                self.failing(0)
            self.assertIsNotNone(p2, 'realloc failed for the bookkeeping')
            self.assertEqual(ctypes.string_at(p2, 16), b'\x33' * 16)
            ctypes.memset(p2, 0x44, 496)
            held.append(p2)
            if (_testcapi is not None
                    and get_traceback(0, p2) is None):
                untraced += 1
            self.check_consistency()
        if allocator_name() == 'pymalloc' and _testcapi is not None:
            self.assertGreater(untraced, 0)
        for p in held:
            d.free(p)
        self.check_consistency()

    def test_failures_scattered_over_a_workload(self):
        self.start(10)
        outcomes = collections.Counter()
        for i in range(400):
            self.failing(1 + i % 3)
            try:
                src = (f'def f{i}(n):\n'
                       f'    return [bytearray(n) for _ in range(3)], Obj()\n')
                ns = {'Obj': Obj}
                exec(compile(src, f'<scattered-{i}>', 'exec'), ns)
                res = ns[f'f{i}'](100 + i)
                res = recurse(i % 7, lambda: [Obj() for _ in range(i % 13)])
                outcomes['ok'] += 1
            except MemoryError:
                outcomes['MemoryError'] += 1
            finally:
                self.failing(0)
            if i % 50 == 0:
                self.check_consistency()
        self.assertGreater(outcomes['MemoryError'], 0)
        self.check_consistency()
        obj, expected = Obj(), stack()
        self.assertAllocatedAt(obj, expected)

    def test_start_failure(self):
        tracemalloc.stop()
        self.failing(1)
        try:
            self.assertRaises(MemoryError, tracemalloc.start, 5)
        finally:
            self.failing(0)
        self.assertFalse(tracemalloc.is_tracing())
        self.assertEqual(tracemalloc.get_traced_memory(), (0, 0))
        self.failing(2)
        try:
            try:
                tracemalloc.start(5)
            except MemoryError:
                self.assertFalse(tracemalloc.is_tracing())
        finally:
            self.failing(0)
        tracemalloc.stop()
        self.start(5)
        obj, expected = Obj(), stack()
        self.assertAllocatedAt(obj, expected)
        self.check_consistency()

    def test_clear_traces_failure_then_tracebacks_come_back(self):
        # clear_traces() has no error to report: when its bookkeeping
        # fails, tracing must still give real tracebacks once memory is
        # back, not '<unknown>' until the next start().
        self.start(NFRAME)
        self.failing(1)
        try:
            tracemalloc.clear_traces()
        finally:
            self.failing(0)
        self.assertTrue(tracemalloc.is_tracing())
        self.check_consistency()
        obj, expected = Obj(), stack()
        self.assertAllocatedAt(obj, expected)


# ---------------------------------------------------------------------------
# 6. fork()

@support.requires_fork()
class ForkTest(EngineTestCase):

    def run_in_child(self, child):
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                child()
                status = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(status)
        support.wait_process(pid, exitcode=0)

    def child_checks(self, parent_pairs):
        assert tracemalloc.is_tracing()
        _testtracemalloc.check_consistency()
        for obj, expected in parent_pairs:
            assert allocated_at(obj, expected), (raw_frames(obj), expected)
        # New allocations are traced...
        obj, expected = Obj(), stack()
        assert allocated_at(obj, expected), (raw_frames(obj), expected)
        data = [bytearray(1000) for _ in range(100)]
        count = _testtracemalloc.check_consistency()
        # ...and frees remove their traces.
        del data
        assert _testtracemalloc.check_consistency() <= count - 200, 'frees'
        for d in DOMAINS.values():
            p, key = _do(d.malloc, 777)
            assert sizes_at(key) == sorted([777, int_size(p)]), key
            p2 = d.realloc(p, 5)
            d.free(p2)
            _testtracemalloc.check_consistency()
        tracemalloc.clear_traces()
        _testtracemalloc.check_consistency()
        obj2, expected2 = Obj(), stack()
        assert allocated_at(obj2, expected2), (raw_frames(obj2), expected2)

    def test_fork(self):
        self.start(NFRAME)
        pairs = [(Obj(), stack()), (bytearray(5000), stack())]
        self.run_in_child(lambda: self.child_checks(pairs))
        # The parent goes on.
        for obj, expected in pairs:
            self.assertAllocatedAt(obj, expected)
        self.check_consistency()

    def test_fork_while_threads_allocate_without_gil(self):
        self.start(10)
        d = DOMAINS['raw-nogil']
        stop = threading.Event()

        def worker():
            while not stop.is_set():
                ps = [d.malloc(s) for s in (10, 2000, 300)]
                for p in ps:
                    d.free(p)

        threads = [threading.Thread(target=worker) for _ in range(2)]
        for thread in threads:
            thread.start()
        try:
            for i in range(10):
                pairs = [(Obj(), stack())]
                self.run_in_child(lambda: self.child_checks(pairs))
        finally:
            stop.set()
            for thread in threads:
                threading_helper.join_thread(thread)
        self.check_consistency()

    def test_fork_from_a_thread(self):
        self.start(NFRAME)
        pairs = [(Obj(), stack())]
        errors = []

        def worker():
            try:
                pairs.append((Obj(), stack()))
                self.run_in_child(lambda: self.child_checks(pairs))
            except BaseException:
                errors.append(traceback.format_exc())

        thread = threading.Thread(target=worker)
        thread.start()
        threading_helper.join_thread(thread)
        self.assertEqual(errors, [])
        self.check_consistency()


# ---------------------------------------------------------------------------
# 7. PyTraceMalloc_Track() / PyTraceMalloc_Untrack()

@requires_testcapi
class TrackTest(EngineTestCase):

    def setUp(self):
        super().setUp()
        self.start(NFRAME)

    def domain_traces(self, domain):
        return [(size, frames) for d, size, frames, total
                in _tracemalloc._get_traces() if d == domain]

    def test_custom_domains(self):
        base = 0x7000_0000_0000
        for release_gil in (False, True):
            for domain in (5, 123_456, 2 ** 32 - 1):
                with self.subTest(domain=domain, release_gil=release_gil):
                    ptr = base + domain * 16 + release_gil * 8
                    track(domain, ptr, 1234, release_gil); expected = stack()
                    frames = get_traceback(domain, ptr)
                    self.assertEqual(list(reversed(frames)), expected)
                    self.assertIsNone(get_traceback(domain + 1, ptr))
                    self.assertIsNone(get_traceback(0, ptr))
                    self.assertEqual(self.domain_traces(domain),
                                     [(1234, frames)])
                    snapshot = tracemalloc.take_snapshot().filter_traces(
                        [tracemalloc.DomainFilter(True, domain)])
                    self.assertEqual([t.size for t in snapshot.traces], [1234])
                    self.check_consistency()
                    # Tracking the same pointer again replaces the trace.
                    recurse(2, track, domain, ptr, 99, release_gil)
                    self.assertEqual(
                        [s for s, f in self.domain_traces(domain)], [99])
                    self.check_consistency()
                    untrack(domain, ptr)
                    self.assertEqual(self.domain_traces(domain), [])
                    self.assertIsNone(get_traceback(domain, ptr))
                    # Untracking an untracked pointer is not an error.
                    untrack(domain, ptr)
                    self.check_consistency()

    def test_not_tracing(self):
        tracemalloc.stop()
        with self.assertRaises(RuntimeError):
            _testcapi.tracemalloc_track(5, 0x1000, 10, False)
        with self.assertRaises(RuntimeError):
            _testcapi.tracemalloc_track(5, 0x1000, 10, True)
        with self.assertRaises(RuntimeError):
            _testcapi.tracemalloc_untrack(5, 0x1000)

    def test_domain_zero_visible_in_snapshots(self):
        libc = ctypes.CDLL(None)
        libc.malloc.restype = ctypes.c_void_p
        libc.malloc.argtypes = [ctypes.c_size_t]
        libc.free.restype = None
        libc.free.argtypes = [ctypes.c_void_p]
        p = libc.malloc(4321)
        self.addCleanup(libc.free, p)
        _testcapi.tracemalloc_track(0, p, 4321, True); expected = stack()
        frames = get_traceback(0, p)
        self.assertEqual(list(reversed(frames)), expected)
        snapshot = tracemalloc.take_snapshot()
        want = [tracemalloc.Frame(f) for f in reversed(frames)]
        traces = [t for t in snapshot.traces
                  if t.domain == 0 and t.size == 4321
                  and list(t.traceback) == want]
        self.assertEqual(len(traces), 1)
        stats = snapshot.filter_traces(
            [tracemalloc.Filter(True, expected[-1][0], expected[-1][1])]
        ).statistics('lineno')
        self.assertIn(4321, [s.size for s in stats])
        self.check_consistency()
        _testcapi.tracemalloc_untrack(0, p)
        self.assertIsNone(get_traceback(0, p))
        self.check_consistency()

    def test_domain_zero_inside_a_traced_pymalloc_block(self):
        # Traces are keyed by exact (domain, address): tracking an address
        # inside another traced block adds a trace and leaves that one
        # alone, as upstream's hash table does.
        data, expected = bytes(100), stack()
        addr = id(data) + 8
        _testcapi.tracemalloc_track(0, addr, 10, False)
        self.assertAllocatedAt(data, expected)
        self.assertIsNotNone(get_traceback(0, addr))
        self.check_consistency()
        _testcapi.tracemalloc_untrack(0, addr)
        self.assertAllocatedAt(data, expected)
        self.assertIsNone(get_traceback(0, addr))
        self.check_consistency()

    def test_many_domains_same_addresses(self):
        # One address in many domains: distinct traces, found and removed
        # by (domain, address), through table growth and deletions.
        rng = random.Random(3)
        base = 0x5000_0000_0000
        domains = [1, 2, 3, 7, 64, 2 ** 16, 2 ** 31, 2 ** 32 - 2]
        live = {}
        for i in range(1500):
            for domain in domains:
                ptr = base + i * 16
                size = (i * 7 + domain) % 1000
                _testcapi.tracemalloc_track(domain, ptr, size, False)
                live[domain, ptr] = size
        self.check_consistency()
        for key in rng.sample(sorted(live), len(live) // 2):
            _testcapi.tracemalloc_untrack(*key)
            del live[key]
        self.check_consistency()
        for (domain, ptr) in rng.sample(sorted(live), 300):
            self.assertIsNotNone(get_traceback(domain, ptr))
        got = collections.Counter()
        for d, size, frames, total in _tracemalloc._get_traces():
            if d in domains:
                got[d, size] += 1
        want = collections.Counter((d, size) for (d, p), size in live.items())
        self.assertEqual(got, want)
        for key in list(live):
            _testcapi.tracemalloc_untrack(*key)
        self.assertFalse([t for t in _tracemalloc._get_traces()
                          if t[0] in domains])
        self.check_consistency()

    def test_threads_track_without_gil(self):
        errors = []
        nthreads = 8
        count = 300

        def worker(index):
            try:
                domain = 1000 + index
                base = 0x6000_0000_0000 + index * 0x1000_0000
                for i in range(count):
                    track(domain, base + i * 16, i + 1, i % 2 == 0)
                for i in range(0, count, 2):
                    _testcapi.tracemalloc_untrack(domain, base + i * 16)
            except BaseException:
                errors.append(traceback.format_exc())

        threads = [threading.Thread(target=worker, args=(i,))
                   for i in range(nthreads)]
        with threading_helper.start_threads(threads):
            pass
        self.assertEqual(errors, [])
        self.check_consistency()
        by_domain = collections.defaultdict(list)
        for d, size, frames, total in _tracemalloc._get_traces():
            if 1000 <= d < 1000 + nthreads:
                by_domain[d].append(size)
        for index in range(nthreads):
            self.assertEqual(sorted(by_domain[1000 + index]),
                             list(range(2, count + 1, 2)))


def ascii_escape(text):
    """text escaped as _Py_DumpASCII() (faulthandler) writes it."""
    out = []
    for ch in text:
        code = ord(ch)
        if 32 <= code <= 126:
            out.append(ch)
        elif code <= 0xff:
            out.append('\\x%02x' % code)
        elif code <= 0xffff:
            out.append('\\u%04x' % code)
        else:
            out.append('\\U%08x' % code)
    return ''.join(out)

# ---------------------------------------------------------------------------
# 8-10. Subprocesses: fatal error dumps, ResourceWarning, startup

@support.requires_subprocess()
class SubprocessTest(unittest.TestCase):

    def write_script(self, source, name='script', ascii_path=True):
        # In a new temporary directory: the current one may have a
        # non-ASCII name (regrtest's does), which fatal error dumps escape.
        directory = self.enterContext(os_helper.temp_dir())
        filename = os.path.join(os.path.abspath(directory),
                                name + '_engine.py')
        if ascii_path and not filename.isascii():
            self.skipTest(f'non-ASCII temporary directory: {directory!r}')
        with open(filename, 'w', encoding='utf-8') as fp:
            fp.write(textwrap.dedent(source))
        return filename

    @requires_testcapi
    def check_dump_traceback(self, helper):
        filename = self.write_script(f'''\
            import _testcapi

            def func():
                _testcapi.{helper}()

            def caller():
                func()

            caller()
        ''')
        res = script_helper.assert_python_failure(
            '-X', 'tracemalloc=5', filename, PYTHONMALLOC='debug')
        err = res.err.decode('ascii', 'replace')
        self.assertIn('Fatal Python error', err)
        expected = ('Memory block allocated at (most recent call first):\n'
                    f'  File "{filename}", line 4\n'
                    f'  File "{filename}", line 7\n'
                    f'  File "{filename}", line 9\n')
        self.assertIn(expected, err)

    def test_dump_traceback_buffer_overflow(self):
        self.check_dump_traceback('pymem_buffer_overflow')

    def test_dump_traceback_api_misuse(self):
        self.check_dump_traceback('pymem_api_misuse')

    def check_assert_failed_dump(self, name):
        # _PyObject_AssertFailed() dumps the traceback of a live block.
        filename = self.write_script('''\
            import ctypes
            api = ctypes.PyDLL(None)
            func = api._PyObject_AssertFailed
            func.restype = None
            func.argtypes = [ctypes.py_object, ctypes.c_char_p,
                             ctypes.c_char_p, ctypes.c_char_p,
                             ctypes.c_int, ctypes.c_char_p]

            def alloc():
                return bytes(1000)

            data = alloc()
            func(data, b"expr", b"message", b"file.c", 1, b"function")
        ''', name, ascii_path=False)
        res = script_helper.assert_python_failure(
            '-X', 'tracemalloc=5', filename)
        err = res.err.decode('ascii', 'replace')
        self.assertIn('_PyObject_AssertFailed', err)
        escaped = ascii_escape(filename)
        self.assertTrue(escaped.isascii())
        expected = ('Memory block allocated at (most recent call first):\n'
                    f'  File "{escaped}", line 10\n'
                    f'  File "{escaped}", line 12\n'
                    '\n')
        self.assertIn(expected, err)

    def test_dump_traceback_live_block(self):
        self.check_assert_failed_dump('script')

    def test_dump_traceback_non_ascii_filename(self):
        # Written like faulthandler's tracebacks (_Py_DumpASCII()).
        self.check_assert_failed_dump('caf\xe9_\u20ac_\U0001f600')

    def test_dump_traceback_realloc_api_misuse(self):
        # PyMem_Malloc() block resized with PyObject_Realloc(): the debug
        # hooks stop in realloc, and show where the block came from.
        filename = self.write_script('''\
            import ctypes
            api = ctypes.PyDLL(None)
            api.PyMem_Malloc.restype = ctypes.c_void_p
            api.PyMem_Malloc.argtypes = [ctypes.c_size_t]
            api.PyObject_Realloc.restype = ctypes.c_void_p
            api.PyObject_Realloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t]

            def func():
                return api.PyMem_Malloc(24)

            p = func()
            api.PyObject_Realloc(p, 100)
        ''')
        res = script_helper.assert_python_failure(
            '-X', 'tracemalloc=5', filename, PYTHONMALLOC='debug')
        err = res.err.decode('ascii', 'replace')
        self.assertIn('bad ID', err)
        expected = ('Memory block allocated at (most recent call first):\n'
                    f'  File "{filename}", line 9\n'
                    f'  File "{filename}", line 11\n')
        self.assertIn(expected, err)

    def test_resource_warning_traceback(self):
        filename = self.write_script('''\
            def func():
                f = open(__file__, "rb")
                # Emit ResourceWarning
                f = None

            def caller():
                func()

            caller()
        ''', ascii_path=False)
        res = script_helper.assert_python_ok(
            '-W', 'always', '-X', 'tracemalloc=5', filename,
            PYTHONIOENCODING='utf-8')
        err = res.err.decode('utf-8', 'replace')
        err = '\n'.join(err.splitlines())
        err = re.sub('<.*>', '<...>', err)
        expected = textwrap.dedent(f'''\
            {filename}:4: ResourceWarning: unclosed file <...>
              f = None
            Object allocated at (most recent call last):
              File "{filename}", lineno 9
                caller()
              File "{filename}", lineno 7
                func()
              File "{filename}", lineno 2
                f = open(__file__, "rb")''')
        self.assertEqual(err, expected)

    STARTUP = textwrap.dedent('''\
        import tracemalloc, _tracemalloc, _testtracemalloc
        print(tracemalloc.is_tracing(), tracemalloc.get_traceback_limit())
        if tracemalloc.is_tracing():
            traces = _tracemalloc._get_traces()
            files = {f[0] for t in traces for f in t[2]}
            print(len(traces) > 500,
                  any(f.startswith('<frozen importlib._bootstrap')
                      for f in files),
                  any(f.endswith('.py') or f.startswith('<frozen ')
                      for f in files))
            _testtracemalloc.check_consistency()
    ''')

    def startup(self, *args, **env):
        res = script_helper.assert_python_ok(*args, '-c', self.STARTUP, **env)
        return res.out.decode().split()

    def test_startup_x_option(self):
        self.assertEqual(self.startup('-X', 'tracemalloc=7'),
                         ['True', '7', 'True', 'True', 'True'])
        out = self.startup('-X', 'tracemalloc')
        self.assertEqual(out[:2], ['True', '1'])
        self.assertEqual(out[2], 'True')
        self.assertEqual(out[4], 'True')

    def test_startup_env_var(self):
        self.assertEqual(self.startup(PYTHONTRACEMALLOC='6'),
                         ['True', '6', 'True', 'True', 'True'])

    def test_startup_env_var_ignored_with_E(self):
        self.assertEqual(self.startup('-E', PYTHONTRACEMALLOC='6'),
                         ['False', '1'])
        self.assertEqual(self.startup('-I', PYTHONTRACEMALLOC='6'),
                         ['False', '1'])


if __name__ == '__main__':
    unittest.main()
