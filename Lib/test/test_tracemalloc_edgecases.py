"""The engine's answers at the edges a review found wrong.

Each test here failed on the engine before the fix it names (engine round
3): a legal PyTraceMalloc_Track() call that broke every later snapshot, an
object re-traced with another thread's or another line's traceback, a
forked child reporting its parent's thread, a subinterpreter taken for a
thread without the GIL, a str subclass as a file name, and a second
start() that changed the traceback limit.  The expected answer is always
upstream 3.11's (Modules/_tracemalloc.c of the pristine tarball), or the
interpreter's own frames read on the line of the allocation.
"""

import os
import sys
import textwrap
import threading
import tracemalloc
import unittest

from test import support
from test.support import import_helper, script_helper, threading_helper

_tracemalloc = import_helper.import_module('_tracemalloc')
_testtracemalloc = import_helper.import_module('_testtracemalloc')
_testcapi = import_helper.import_module('_testcapi')
ctypes = import_helper.import_module('ctypes')
from test.test_tracemalloc_engine import (get_traceback,
                                          get_traceback_function)


def here():
    """(filename, lineno) of the caller's current line."""
    frame = sys._getframe(1)
    return (frame.f_code.co_filename, frame.f_lineno)


def first_frame(obj):
    """The most recent frame of obj's traceback, or None."""
    frames = _tracemalloc._get_object_traceback(obj)
    return tuple(frames[0]) if frames else None


class EngineTest(unittest.TestCase):

    def setUp(self):
        if tracemalloc.is_tracing():
            self.skipTest('tracemalloc must be stopped before the test')
        tracemalloc.start(25)
        self.addCleanup(tracemalloc.stop)


class TrackFreedPoolBlockTest(EngineTest):
    """PyTraceMalloc_Track(0, addr) of a block the allocator owns but has
    not handed out keeps its trace until Untrack(), whatever pymalloc does
    with the block's pool meanwhile (upstream keeps it in its table)."""

    def check(self, size, other_size, count):
        addr, reused = _testtracemalloc.track_freed_pool_block(
            size, other_size, count)
        _testtracemalloc.check_consistency()
        if reused:
            # Upstream too: the new block's trace replaced the tracked
            # one, and its free removed it.
            self.assertIsNone(get_traceback(0, addr))
            self.assertNotIn(100, [t.size for t in
                                   tracemalloc.take_snapshot().traces])
            return
        self.assertIsNotNone(get_traceback(0, addr))
        # Snapshots still work, and hold the trace.
        sizes = [t.size for t in tracemalloc.take_snapshot().traces]
        self.assertEqual(sizes.count(100), 1)
        _testcapi.tracemalloc_untrack(0, addr)
        _testtracemalloc.check_consistency()
        self.assertIsNone(get_traceback(0, addr))
        sizes = [t.size for t in tracemalloc.take_snapshot().traces]
        self.assertNotIn(100, sizes)

    def test_pool_reused_for_another_size_class(self):
        # 33 blocks of 480 bytes per pool: the middle pools are all ours.
        # Reused for 208-byte blocks, the tracked address is a block start
        # only once in 13 pools.
        self.check(480, 208, 4000)

    def test_pool_reused_over_the_tracked_address(self):
        # Reused for 96-byte blocks: the tracked address is handed out.
        self.check(480, 96, 4000)

    def test_arena_freed(self):
        # 256 KiB arenas: 40,000 blocks of 496 bytes span many, which go
        # back to the OS once emptied.
        self.check(496, 16, 40000)

    def test_block_allocated_again_replaces_the_trace(self):
        # The tracked address comes back from the allocator: its new trace
        # replaces the tracked one (one key, one trace), and its free
        # leaves none.
        addr = _testtracemalloc.track_freed_then_reallocate(200)
        if addr is None:
            self.skipTest('the allocator did not hand the address out again')
        _testtracemalloc.check_consistency()
        sizes = [t.size for t in tracemalloc.take_snapshot().traces]
        self.assertIn(200, sizes)
        self.assertNotIn(100, sizes)
        self.assertIsNotNone(get_traceback(0, addr))
        _testtracemalloc.free_reallocated()
        self.assertIsNone(get_traceback(0, addr))
        _testtracemalloc.check_consistency()
        sizes = [t.size for t in tracemalloc.take_snapshot().traces]
        self.assertNotIn(100, sizes)


class FreshBlockTest(EngineTest):
    """An object initialised at another position than where its block was
    allocated gets the traceback of its initialisation, as upstream's
    _PyTraceMalloc_NewReference() re-trace gives."""

    def test_extension_allocates_and_initialises_apart(self):
        _testtracemalloc.object_malloc()
        obj = _testtracemalloc.object_init(); where = here()
        self.assertEqual(first_frame(obj), where)

    def test_float_reused_across_threads(self):
        # Thread A's last traced block is a list's item array X; thread B
        # frees X, gets a float at X and drops it onto the float free
        # list; A then takes that float: it must be traced at A's line.
        # Plain locks hand over between the threads: they allocate nothing.
        ready = threading.Lock()
        go = threading.Lock()
        done = threading.Lock()
        for lock in (ready, go, done):
            lock.acquire()
        z = 1.25
        items = []
        result = {}

        def thread_a():
            items.extend((z, z, z))  # X: 24 bytes, a float's size class
            ready.release()
            go.acquire()
            y = z * 3.0; where = here()
            result['where'] = where
            result['frame'] = first_frame(y)
            result['reused'] = id(y) == result['x']
            done.release()

        def thread_b():
            ready.acquire()
            x = ctypes.c_void_p.from_address(
                id(items) + 3 * ctypes.sizeof(ctypes.c_void_p)).value
            result['x'] = x
            items.clear()                     # frees X
            keep = []
            f = hit = None
            for i in range(200000):
                f = float(i) + 0.5
                if id(f) == x:
                    hit = f
                    break
                keep.append(f)
            result['found'] = hit is not None
            del f, hit                        # onto the float free list
            go.release()
            done.acquire()
            del keep

        a = threading.Thread(target=thread_a)
        b = threading.Thread(target=thread_b)
        with threading_helper.wait_threads_exit():
            a.start()
            b.start()
            a.join()
            b.join()
        if not (result.get('found') and result.get('reused')):
            self.skipTest('the allocator did not reuse the block')
        self.assertEqual(result['frame'], result['where'])


class ForkTest(EngineTest):

    @support.requires_fork()
    def test_child_reports_its_own_thread(self):
        parent_tid = threading.get_native_id()
        # Frames linked before the fork: their caches name the parent's
        # thread root.
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                data = [bytearray(3000) for _ in range(20)]
                snap = tracemalloc.take_snapshot(threads=True)
                tids = {t.thread for t in snap.traces if t.size >= 3000}
                os.write(w, repr((sorted(tids),
                                  threading.get_native_id())).encode())
                del data
                status = 0
            finally:
                os._exit(status)
        os.close(w)
        with open(r, 'rb') as f:
            tids, child_tid = eval(f.read())
        support.wait_process(pid, exitcode=0)
        self.assertNotEqual(child_tid, parent_tid)
        self.assertEqual(tids, [child_tid])


class SubinterpreterTest(EngineTest):

    def test_main_thread_subinterpreter_holds_the_gil(self):
        # A subinterpreter run on the main thread holds the GIL: its raw
        # allocations take the engine's GIL side, and are attributed to
        # its own frames, like its objects.
        r, w = os.pipe()
        self.addCleanup(os.close, r)
        module, function = get_traceback_function()
        code = textwrap.dedent(f"""
            import os, _testtracemalloc
            from {module} import {function} as get_traceback
            before = _testtracemalloc.foreign_entries()
            addrs = [_testtracemalloc.raw_malloc_with_gil(100)
                     for _ in range(50)]
            after = _testtracemalloc.foreign_entries()
            tb = get_traceback(0, addrs[0])
            for a in addrs:
                _testtracemalloc.raw_free_with_gil(a)
            os.write({w}, repr((after - before, tb)).encode())
            os.close({w})
        """)
        self.assertEqual(_testcapi.run_in_subinterp(code), 0)
        with open(r, 'rb', closefd=False) as f:
            foreign, tb = eval(f.read())
        self.assertEqual(foreign, 0)
        self.assertIsNotNone(tb)
        allocation_line = 1 + code.splitlines().index(
            "addrs = [_testtracemalloc.raw_malloc_with_gil(100)")
        self.assertEqual(tb[0], ('<string>', allocation_line))


class FilenameTest(EngineTest):

    def test_str_subclass(self):
        class Name(str):
            pass
        code = compile('data = bytearray(5000)', 'x.py', 'exec')
        code = code.replace(co_filename=Name('subclass.py'))
        self.assertIs(type(code.co_filename), Name)
        ns = {}
        exec(code, ns)
        self.assertEqual(first_frame(ns['data']), ('subclass.py', 1))


class StartTest(unittest.TestCase):

    def test_second_start_keeps_the_limit(self):
        # Upstream ignores start() while tracing, limit included.
        script_helper.assert_python_ok('-c', textwrap.dedent("""
            import tracemalloc
            tracemalloc.start(3)
            tracemalloc.start(10)
            assert tracemalloc.get_traceback_limit() == 3, \\
                tracemalloc.get_traceback_limit()
            tracemalloc.stop()
            tracemalloc.start(7)
            assert tracemalloc.get_traceback_limit() == 7
        """))

    def test_second_start_from_the_command_line(self):
        script_helper.assert_python_ok('-X', 'tracemalloc=2', '-c',
                                       textwrap.dedent("""
            import tracemalloc
            tracemalloc.start(25)
            assert tracemalloc.get_traceback_limit() == 2
        """))


class NoGilTrackTest(EngineTest):
    """PyTraceMalloc_Track(0, ...) without the GIL on a traced pymalloc
    block replaces its trace (same key), as with the GIL."""

    def test_track_without_gil_replaces(self):
        data = bytearray(100)       # a 157-byte pymalloc block
        addr = id(data)
        # bytearray objects are not GC objects: the block starts at id().
        self.assertIsNotNone(get_traceback(0, addr))
        _testcapi.tracemalloc_track(0, addr, 1000, True)
        _testtracemalloc.check_consistency()
        sizes = [t.size for t in tracemalloc.take_snapshot().traces]
        self.assertEqual(sizes.count(1000), 1)
        del data
        _testtracemalloc.check_consistency()
        self.assertIsNone(get_traceback(0, addr))
        sizes = [t.size for t in tracemalloc.take_snapshot().traces]
        self.assertNotIn(1000, sizes)


class TrackTooBigForASlotTest(EngineTest):
    """A pool slot keeps a size of 16 bits (a pymalloc block is at most
    512 bytes).  PyTraceMalloc_Track(0, ...) of a traced pymalloc block
    with a bigger size replaces its trace all the same: one trace, of the
    new size, which Untrack() removes."""

    def check(self, size):
        data = bytearray(100)       # a 157-byte pymalloc block
        addr = id(data)
        self.assertIsNotNone(get_traceback(0, addr))
        _testcapi.tracemalloc_track(0, addr, size)
        _testtracemalloc.check_consistency()
        sizes = [t.size for t in tracemalloc.take_snapshot().traces]
        self.assertEqual(sizes.count(size), 1)
        _testcapi.tracemalloc_untrack(0, addr)
        _testtracemalloc.check_consistency()
        self.assertIsNone(get_traceback(0, addr))
        sizes = [t.size for t in tracemalloc.take_snapshot().traces]
        self.assertNotIn(size, sizes)
        del data
        _testtracemalloc.check_consistency()

    def test_largest_size_a_slot_holds(self):
        self.check(65535)

    def test_size_too_big_for_a_slot(self):
        self.check(65536)
        self.check(10 ** 9)


if __name__ == '__main__':
    unittest.main()
