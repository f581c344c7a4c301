"""The engine left on for days: bounded memory, every input, every exit.

Each test here is a defect the engine once had (issue "Engine round 2"):
memory that followed the history of call paths instead of live data, C API
calls that crashed on odd addresses, snapshots that traced themselves,
thread states read after finalization freed them, and a handful of smaller
ones.  See Doc/internals/tracemalloc-engine.rst.
"""

import gc
import random
import sys
import textwrap
import threading
import threading
import tracemalloc
import unittest

from test import support
from test.support import import_helper, script_helper
from test.test_tracemalloc_engine import (
    EngineTestCase, Obj, recurse, stack, _testcapi)
if _testcapi is not None:
    from test.test_tracemalloc_engine import (get_traceback,
                                              pymem_getallocatorsname)

_tracemalloc = import_helper.import_module('_tracemalloc')
ctypes = import_helper.import_module('ctypes')
_testtracemalloc = import_helper.import_module('_testtracemalloc')

requires_testcapi = unittest.skipIf(_testcapi is None, 'needs _testcapi')

KiB = 1024

# 3.13's Py_FinalizeEx() clears the interpreter state (which releases the
# codec search functions) between _PyTraceMalloc_Stop() and
# _PyTraceMalloc_Fini(); 3.11's clears it after _PyTraceMalloc_Fini().
CLEARS_INTERPRETER_BEFORE_TRACEMALLOC_FINI = sys.version_info >= (3, 13)
MiB = 1024 * KiB


def engine_memory():
    gc.collect()
    return tracemalloc.get_tracemalloc_memory()


# ---------------------------------------------------------------------------
# 1. Engine memory follows live data, not the history of call paths

def exact_recursion(n):
    x = [n]
    if n:
        exact_recursion(n - 1)
        exact_recursion(n - 1)


def random_shape(rng, depth):
    node = [depth]
    if depth < 40:
        for _ in range(rng.randrange(3)):
            if rng.random() < 0.5:
                random_shape(rng, depth + 1)
            else:
                random_shape_other(rng, depth + 1)


def random_shape_other(rng, depth):
    node = (depth, [depth])
    if depth < 40 and rng.random() < 0.7:
        random_shape(rng, depth + 1)


def deep(n):
    x = [n]
    if n:
        deep(n - 1)


# One function with many call sites near the root: each site starts a
# distinct deep path.
ROOT_BRANCHES = 200
_source = ['def diverging_root(i, depth):']
for _i in range(ROOT_BRANCHES):
    _source.append(f'    if i == {_i}: return deep(depth)')
exec('\n'.join(_source))
del _source, _i


class BoundedMemoryTest(EngineTestCase):
    """Constant live data, ever new call paths: engine memory stays flat."""

    # Fixed costs (the line cache, the first chunk of nodes, the indexes)
    # are about 300 KiB; the leak this guards against grew by megabytes.
    SLACK = 512 * KiB

    def run_flat(self, nframe, rounds, check_every=1):
        self.start(nframe)
        baseline = None
        for i, work in enumerate(rounds):
            work()
            if i == 0:
                baseline = engine_memory()
            elif i % check_every == 0:
                used = engine_memory()
                self.assertLess(used, baseline + self.SLACK,
                                f'engine memory grew to {used} bytes after '
                                f'{i + 1} rounds (first: {baseline})')
        self.check_consistency()
        return baseline

    def test_exact_recursion(self):
        # The measurement: 414 KB at n=10, 29.6 MB at n=17.
        for nframe in (1, 25):
            with self.subTest(nframe=nframe):
                self.start(nframe)
                sizes = {}
                for n in (10, 14, 17):
                    tracemalloc.clear_traces()
                    exact_recursion(n)
                    sizes[n] = engine_memory()
                self.assertLess(sizes[17], sizes[10] + self.SLACK, sizes)
                self.assertLess(sizes[17], 2 * MiB, sizes)

    def test_random_shape_recursion(self):
        rng = random.Random(454)
        self.run_flat(25, [lambda: random_shape(rng, 0)] * 300,
                      check_every=20)

    def test_deep_stacks_diverging_near_the_root(self):
        rounds = [lambda i=i: diverging_root(i % ROOT_BRANCHES, 200)
                  for i in range(ROOT_BRANCHES * 2)]
        self.run_flat(25, rounds, check_every=50)

    def test_live_traces_keep_exact_tracebacks_across_compactions(self):
        self.start(100)
        kept = []

        def keep(i):
            kept.append((Obj(), stack()))

        before = _testtracemalloc.engine_stats()['compactions']
        rng = random.Random(7)
        for i in range(300):
            # Enough fresh paths to force compactions in between.
            diverging_root(i % ROOT_BRANCHES, 30)
            if i % 10 == 0:
                recurse(rng.randrange(20), keep, i)
        after = _testtracemalloc.engine_stats()['compactions']
        self.assertGreater(after, before, 'no compaction happened')
        for obj, expected in kept:
            self.assertAllocatedAt(obj, expected)
        self.check_consistency()

    def test_nodes_named_by_live_traces_survive(self):
        # A live trace deep in a path that is otherwise gone keeps its whole
        # path (its ancestors), and nothing else.
        self.start(100)

        def leaf():
            return Obj(), stack()

        obj, expected = recurse(50, leaf)
        for i in range(ROOT_BRANCHES * 3):
            diverging_root(i % ROOT_BRANCHES, 40)
        stats = _testtracemalloc.engine_stats()
        self.assertGreater(stats['compactions'], 0)
        self.assertAllocatedAt(obj, expected)
        self.check_consistency()


# ---------------------------------------------------------------------------
# 2. Every address is a valid input of the C API

@requires_testcapi
class CAPISweepTest(EngineTestCase):
    """track/untrack/get_traceback over hostile addresses and domains:
    upstream's answers, never a crash."""

    DOMAINS = (0, 1, 2**32 - 1)

    # _testcapi returns None when the C function returns 0, and raises
    # RuntimeError when it returns a negative value.

    def sweep(self, addresses, release_gil=False):
        track = _testcapi.tracemalloc_track
        untrack = _testcapi.tracemalloc_untrack
        get_tb = get_traceback
        for domain in self.DOMAINS:
            for addr in addresses:
                if addr == 0:
                    # The one documented difference: the table marks empty
                    # entries with address 0, so it cannot be tracked.
                    with self.assertRaises(RuntimeError):
                        track(domain, addr, 10, release_gil)
                    self.assertIsNone(get_tb(domain, addr))
                else:
                    track(domain, addr, 10, release_gil)
                    self.assertIsNotNone(get_tb(domain, addr),
                                         (domain, addr))
                untrack(domain, addr)
                self.assertIsNone(get_tb(domain, addr), (domain, addr))
        self.check_consistency()

    def test_low_addresses(self):
        self.start(5)
        self.sweep(range(0, 64 * KiB + 1, 7))
        self.sweep(range(0, 64))

    def test_unaligned_and_wild_addresses(self):
        self.start(5)
        rng = random.Random(1)
        wild = [rng.randrange(1, 2**64) for _ in range(2000)]
        wild += [2**64 - 1, 2**63, 2**48 - 1, 2**47 + 3]
        self.sweep(wild)

    def test_addresses_inside_live_blocks(self):
        self.start(5)
        blocks = [bytearray(n) for n in (1, 8, 24, 100, 511, 513, 4000)]
        objs = [Obj() for _ in range(50)]
        addresses = []
        for b in blocks:
            base = ctypes.addressof((ctypes.c_char * len(b)).from_buffer(b))
            addresses += [base + off for off in (1, 3, 7, 8, 15)
                          if off < len(b)]
        addresses += [id(o) + off for o in objs for off in (1, 5, 8)]
        self.sweep(addresses)
        # The live blocks themselves keep their own traces.
        for obj in objs:
            self.assertIsNotNone(tracemalloc.get_object_traceback(obj))

    def test_exact_block_addresses_in_domain_zero(self):
        # Upstream keys traces by (domain, address): tracking the address
        # of a traced block replaces its trace, untracking removes it.
        self.start(5)
        objs = [Obj() for _ in range(20)]
        for obj in objs:
            tb = _tracemalloc._get_object_traceback(obj)
            self.assertIsNotNone(tb)
            # Obj has a GC header and the managed-dict pre-header.
            addr = id(obj) - 4 * ctypes.sizeof(ctypes.c_void_p)
            self.assertEqual(get_traceback(0, addr), tb)
            _testcapi.tracemalloc_track(0, addr, 12345)
            self.assertIsNotNone(tracemalloc.get_object_traceback(obj))
            _testcapi.tracemalloc_untrack(0, addr)
            self.assertIsNone(tracemalloc.get_object_traceback(obj))
        self.check_consistency()

    def test_not_tracing(self):
        # Both functions return -2 when tracing is off.
        for domain in self.DOMAINS:
            for addr in (0, 1, 0x100, 2**64 - 1):
                with self.assertRaises(RuntimeError):
                    _testcapi.tracemalloc_track(domain, addr, 10)
                with self.assertRaises(RuntimeError):
                    _testcapi.tracemalloc_untrack(domain, addr)
                self.assertIsNone(
                    get_traceback(domain, addr))

    def test_without_the_gil(self):
        self.start(5)
        self.sweep([1, 0x100, 0xfff1, 2**64 - 1] + list(range(0, 4096, 3)),
                   release_gil=True)


# ---------------------------------------------------------------------------
# 3. The tracer does not trace its own snapshots

class SnapshotSelfTracingTest(EngineTestCase):

    def test_held_snapshot_adds_no_traces(self):
        self.start(1)
        data = [Obj() for _ in range(40000)]
        first = tracemalloc.take_snapshot()
        second = tracemalloc.take_snapshot()
        # Before: one extra trace per trace of the held snapshot.
        self.assertLess(len(second.traces) - len(first.traces), 500)
        del data, first, second

    def test_export_is_not_traced_but_other_threads_are(self):
        self.start(1)
        data = [Obj() for _ in range(20000)]
        current, _ = tracemalloc.get_traced_memory()
        traces = _tracemalloc._get_traces()
        after, _ = tracemalloc.get_traced_memory()
        # The list of 20000 tuples is far bigger than this.
        self.assertLess(after - current, 64 * KiB)
        self.assertGreater(len(traces), 20000)
        del traces

        # Meanwhile another thread's allocations are traced.
        started = threading.Event()
        stop = threading.Event()
        kept = []

        def worker():
            started.set()
            while not stop.is_set():
                kept.append(Obj())

        t = threading.Thread(target=worker)
        t.start()
        try:
            started.wait()
            for _ in range(5):
                _tracemalloc._get_traces()
        finally:
            stop.set()
            t.join()
        self.assertTrue(kept)
        for obj in kept[-10:]:
            self.assertIsNotNone(tracemalloc.get_object_traceback(obj))
        del data


# ---------------------------------------------------------------------------
# 4. Shutdown, out of memory, barriers, caches, bookkeeping, allocators

@support.requires_subprocess()
class ShutdownTest(unittest.TestCase):

    def test_daemon_threads_allocating_without_gil_at_exit(self):
        # Finalization frees daemon threads' thread states while tracing is
        # still on; a daemon compressing (raw domain, no GIL) must not read
        # its freed thread state.  MALLOC_PERTURB_ scribbles on freed memory
        # so that such a read crashes instead of passing by luck.
        code = textwrap.dedent('''
            import bz2, lzma, threading, tracemalloc, zlib
            tracemalloc.start(5)
            data = bytes(range(256)) * 4096
            def work(compress):
                while True:
                    compress(data)
            for f in (zlib.compress, bz2.compress, lzma.compress) * 2:
                threading.Thread(target=work, args=(f,), daemon=True).start()
            x = [bytes(100) for _ in range(10000)]
        ''')
        for i in range(8):
            res = script_helper.assert_python_ok(
                '-c', code, PYTHONMALLOC='malloc', MALLOC_PERTURB_='165')
            self.assertEqual(res.rc, 0)

    def test_start_after_finalization_is_refused(self):
        # A __del__ that runs after tracemalloc was finalized must not
        # restart tracing that nothing would stop.  A codec search function
        # is released when the interpreter state is cleared, after
        # tracemalloc's finalization on 3.11; module globals are gone by then, so
        # the finalizer keeps what it needs in default arguments.
        code = textwrap.dedent('''
            import codecs, os, _tracemalloc
            class Late:
                def __call__(self, name):
                    return None
                def __del__(self, start=_tracemalloc.start,
                            is_tracing=_tracemalloc.is_tracing,
                            write=os.write, error=RuntimeError, str=str):
                    try:
                        start()
                    except error as exc:
                        write(2, b'refused: ' + str(exc).encode())
                    else:
                        write(2, b'started: %d' % is_tracing())
            codecs.register(Late())
            _tracemalloc.start()
        ''')
        res = script_helper.assert_python_ok('-c', code)
        if CLEARS_INTERPRETER_BEFORE_TRACEMALLOC_FINI:
            # The search function is released before tracemalloc's
            # finalization: start() succeeds, as on pristine 3.13, and the
            # finalization that follows ends that tracing (exit status 0).
            self.assertEqual(res.err.decode(), 'started: 1')
        else:
            self.assertEqual(res.err.decode(), 'refused: the tracemalloc '
                             'module has been unloaded')


@support.requires_subprocess()
class BarrierFailureTest(unittest.TestCase):

    def test_membarrier_failure_falls_back(self):
        code = textwrap.dedent('''
            import threading, tracemalloc, zlib
            import _testtracemalloc
            tracemalloc.start(3)
            if not _testtracemalloc.fail_barrier(3):
                print('no membarrier')
                raise SystemExit
            assert _testtracemalloc.engine_stats()['asymmetric'] == 1
            data = bytes(range(256)) * 1024
            def work():
                for i in range(200):
                    zlib.compress(data)
            threads = [threading.Thread(target=work) for _ in range(3)]
            for t in threads:
                t.start()
            keep = [bytes(100) for _ in range(20000)]
            for t in threads:
                t.join()
            print('asymmetric', _testtracemalloc.engine_stats()['asymmetric'])
            _testtracemalloc.check_consistency()
            print('ok')
        ''')
        res = script_helper.assert_python_ok('-c', code)
        out = res.out.decode()
        if 'no membarrier' in out:
            self.skipTest('this build does not use membarrier(2)')
        # Before: abort().  Now: real fences from then on.
        self.assertIn('asymmetric 0', out)
        self.assertIn('ok', out)


class ForeignStreamTest(EngineTestCase):

    def test_interpreter_progresses_during_a_stream_without_the_gil(self):
        # C threads with no thread state enter the engine back to back; the
        # interpreter (GIL side) must still get in: it waits for one
        # critical section at most.  Counted, not timed: the loop below has
        # to finish while the storm is still going.
        self.start(5)
        done = threading.Event()
        errors = []

        def storm():
            try:
                while not done.is_set():
                    _testtracemalloc.foreign_storm(3, 20000)
            except BaseException as exc:
                errors.append(exc)

        t = threading.Thread(target=storm)
        t.start()
        try:
            kept = []
            for i in range(20000):
                kept.append(Obj())
        finally:
            done.set()
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(len(kept), 20000)
        print(f'\n  {len(kept)} traced allocations while C threads '
              f'tracked without the GIL', file=sys.stderr, end=' ')
        self.check_consistency()


class CodeCacheTest(EngineTestCase):

    def test_code_freed_invalidates_only_its_own_lines(self):
        # Before: every code_dealloc() emptied the whole line cache, so an
        # exec() loop made every other allocation decode its line again.
        self.start(5)

        def alloc():
            return Obj()

        keep = [alloc() for _ in range(10)]
        misses_in_alloc = 0
        for i in range(200):
            exec(compile(f'x = {i}', '<loop>', 'exec'))
            before = _testtracemalloc.engine_stats()['cache_misses']
            keep.append(alloc())
            misses_in_alloc += (_testtracemalloc.engine_stats()['cache_misses']
                                - before)
        # A freed code object invalidates the entries of the codes that
        # share its epoch slot (1 in 1024): a handful of misses at most.
        self.assertLess(misses_in_alloc, 20)


def one_site_per_level(n):
    # One node per level, and one key of the shared site cache per level:
    # (the level's parent node, this code, the call's offset; the list is
    # built on the same line, so it hits the frame's memo).  The levels'
    # lists stay alive, so that no compaction drops their nodes.
    return [n, one_site_per_level(n - 1) if n else None]


class SiteCacheSizeTest(EngineTestCase):
    """The shared site cache grows with the tree when the tree outgrows it,
    and shrinks when the tree does (Doc/internals/tracemalloc-engine.rst)."""

    DEPTH = 30_000      # keys: about four times the cache's first size

    def setUp(self):
        super().setUp()
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(self.DEPTH + 1000)
        self.addCleanup(sys.setrecursionlimit, limit)

    def entries(self):
        return _testtracemalloc.engine_stats()['cache_entries']

    def round_misses(self):
        before = _testtracemalloc.engine_stats()['cache_misses']
        self.keep = None
        self.keep = one_site_per_level(self.DEPTH)
        return _testtracemalloc.engine_stats()['cache_misses'] - before

    def test_grows_until_a_deep_recursion_fits(self):
        self.start(1)
        self.addCleanup(setattr, self, 'keep', None)
        first_size = self.entries()
        first = self.round_misses()
        # Every level is new: one miss each.
        self.assertGreaterEqual(first, self.DEPTH)
        for _ in range(10):
            last = self.round_misses()
        stats = _testtracemalloc.engine_stats()
        self.assertGreater(stats['cache_entries'], first_size)
        # Never more than four entries per node (and a power of two).
        self.assertLess(stats['cache_entries'], 8 * stats['nodes'])
        # A cache of the first size keeps at most first_size of the keys: a
        # round would miss at least DEPTH - first_size of them (21,808
        # here).  Grown, only the keys that share an entry miss.
        self.assertLess(last, (self.DEPTH - first_size) // 2)
        self.check_consistency()

    def grow_and_drop(self):
        """Grow the cache with a deep tree, drop the tree's traces; return
        the cache's first and grown sizes."""
        self.start(1)
        first_size = self.entries()
        for _ in range(6):
            self.round_misses()
        self.keep = None
        grown = self.entries()
        self.assertGreater(grown, first_size)
        return first_size, grown

    def test_shrinks_when_the_tree_does(self):
        first_size, grown = self.grow_and_drop()
        memory = engine_memory()
        tracemalloc.clear_traces()
        self.assertEqual(self.entries(), first_size)
        # The smaller cache is given back (32 bytes an entry).
        self.assertLess(engine_memory(), memory - (grown - first_size) * 16)
        # And it still works.
        line = sys._getframe().f_lineno + 1
        obj = [1]
        self.assertEqual(tracemalloc.get_object_traceback(obj)[0].lineno,
                         line)
        self.check_consistency()

    def test_new_paths_grow_it_with_the_tree(self):
        # A program whose paths keep changing makes a site table per new
        # (code, parent): the index grows with them, never past about one
        # bucket per node, and every new path interns its node once.
        self.start(1)
        ballast = [object() for _ in range(200_000)]
        for i in range(10):
            diverging_root(i, 100)
        stats = _testtracemalloc.engine_stats()
        for i in range(10, ROOT_BRANCHES):
            diverging_root(i, 100)
        after = _testtracemalloc.engine_stats()
        new_paths = (ROOT_BRANCHES - 10) * 100
        self.assertGreaterEqual(after['cache_misses'] - stats['cache_misses'],
                                new_paths)
        self.assertEqual(after['compactions'], stats['compactions'])
        self.assertGreater(after['cache_entries'], stats['cache_entries'])
        self.assertLessEqual(after['cache_entries'], 2 * after['nodes'])
        del ballast
        self.check_consistency()

    def test_compaction_shrinks_it(self):
        first_size, grown = self.grow_and_drop()
        # The peak's totals keep the nodes that held it.
        tracemalloc.reset_peak()
        compactions = _testtracemalloc.engine_stats()['compactions']
        # Paths seen once and gone: the next compaction keeps few nodes.
        i = 0
        while _testtracemalloc.engine_stats()['compactions'] == compactions:
            diverging_root(i % ROOT_BRANCHES, 100)
            i += 1
        stats = _testtracemalloc.engine_stats()
        self.assertLess(stats['nodes'], 1000)
        self.assertEqual(stats['cache_entries'], first_size)
        self.check_consistency()

    def test_table_without_memory_falls_back(self):
        # Without memory for a code's line map or site table, its nodes
        # are interned one by one: the allocation works, at its line.
        self.start(5)
        namespace = {'Obj': Obj}
        source = 'obj = Obj()\n'
        for failures in range(5):
            # A new code object each time (the last one died): a new map
            # and table, under a parent and at a node that exist already,
            # so that nothing but the map and the table asks for memory.
            code = compile(source, __file__, 'exec')
            _testtracemalloc.fail_bookkeeping(failures)
            try:
                exec(code, namespace)
            finally:
                left = _testtracemalloc.fail_bookkeeping(0)
            if failures:
                self.assertLess(left, failures, 'nothing was refused')
            tb = tracemalloc.get_object_traceback(namespace['obj'])
            self.assertEqual((tb[-1].filename, tb[-1].lineno), (__file__, 1))
            self.check_consistency()
            del code

class PymallocBookkeepingTest(EngineTestCase):

    def test_arena_array_and_radix_nodes_are_not_traced(self):
        # pymalloc grows its arena array (and radix tree) through the raw
        # allocator; that is pymalloc's own memory, never the user's.
        self.start(1)
        floats = []
        line = sys._getframe().f_lineno + 2
        for i in range(3_000_000):
            floats.append(float(i))
        sizes = {}
        for dom, size, frames, total in _tracemalloc._get_traces():
            if frames == ((__file__, line),):
                sizes[size] = sizes.get(size, 0) + 1
        float_size = sys.getsizeof(1.0)
        others = {s: n for s, n in sizes.items() if s != float_size}
        # The list's own array (resized, so one block) may be here too.
        self.assertLessEqual(sum(others.values()), 1, others)
        self.assertGreaterEqual(sizes.get(float_size, 0), 2_900_000)
        del floats


@requires_testcapi
class UserAllocatorOnPublicAPITest(EngineTestCase):

    def test_traced_once(self):
        # A user allocator that carves its blocks from PyMem_RawMalloc():
        # the caller's block is traced, the raw block under it is not
        # (upstream's re-entrancy guard did the same).
        self.start(5)
        for size in (10, 100, 1000, 100000):
            with self.subTest(size=size):
                (block, raw, block2, raw2) = (
                    _testtracemalloc.raw_backed_allocation(size))
                self.assertIsNotNone(block)
                self.assertIsNone(raw)
                self.assertIsNotNone(block2)
                self.assertIsNone(raw2)
        self.check_consistency()


class ExactBlocksTest(EngineTestCase):
    """The hooks find a pool block's slot without checking where in the
    block the caller's pointer lies, as long as the mem and obj allocators
    are Python's own: a user's allocator may shift its blocks by a header,
    and every lookup must then agree on which blocks have slots."""

    def exact(self):
        return _testtracemalloc.engine_stats()['blocks_exact']

    def test_user_allocator_with_a_header_over_pymalloc(self):
        self.start()
        if _testcapi is not None:
            try:
                pymem_getallocatorsname()
            except RuntimeError:
                self.skipTest('a user allocator is installed already')
        self.assertEqual(self.exact(), 1)
        # 24 bytes + the header: pymalloc blocks, at 16 bytes past their
        # start.  Each block's trace must be found by its address.
        tbs = _testtracemalloc.shifted_allocation(500, 24); expected = stack()
        self.assertEqual(self.exact(), 0)
        self.assertEqual(len(tbs), 500)
        for tb in tbs:
            self.assertIsNotNone(tb)
            self.assertEqual(list(reversed(tb)), expected[-len(tb):])
        # The blocks were freed under the same allocator: no trace is left.
        self.check_consistency()
        # Blocks traced before the change are still found and removed.
        data = [Obj() for _ in range(200)]
        _testtracemalloc.shifted_allocation(1, 24)
        del data
        self.check_consistency()
        # The next clear finds Python's allocator again.
        tracemalloc.clear_traces()
        self.assertEqual(self.exact(), 1)

    @requires_testcapi
    @support.requires_subprocess()
    def test_restart_under_user_hooks_over_debug_hooks(self):
        # Under the debug hooks, a restart with a user's hooks on top cannot
        # know the caller skew (it looks like a user allocator's): the hooks
        # then check every block, so that frees find the traces of blocks
        # whose pool left the pool cache.
        code = textwrap.dedent("""
            import tracemalloc, _testcapi, _testtracemalloc
            tracemalloc.start(5)
            assert _testtracemalloc.engine_stats()['blocks_exact'] == 1
            _testcapi.set_nomemory(2 ** 31 - 1)
            tracemalloc.stop()
            tracemalloc.start(5)
            assert _testtracemalloc.engine_stats()['blocks_exact'] == 0
            for rnd in range(20):
                # Many pools of many size classes, so that the pool cache
                # misses on some frees and hits on others.
                keep = [bytes(n % 400) for n in range(rnd, 6000, 3)]
                del keep[::2]
                _testtracemalloc.check_consistency()
                del keep
                _testtracemalloc.check_consistency()
            _testcapi.remove_mem_hooks()
            tracemalloc.clear_traces()
            assert _testtracemalloc.engine_stats()['blocks_exact'] == 1
            print('ok')
            """)
        res = script_helper.assert_python_ok('-c', code, PYTHONMALLOC='debug')
        self.assertEqual(res.out.strip(), b'ok')


@requires_testcapi
class ExporterOutOfMemoryTest(EngineTestCase):

    def test_every_allocation_of_an_export_may_fail(self):
        # Each allocation of _get_traces() fails in turn: MemoryError, never
        # a crash (the second table's failure once dereferenced NULL).
        self.start(5)
        data = [Obj() for _ in range(100)]
        failures = 0
        for start in range(1, 60):
            _testcapi.set_nomemory(start, start + 1)
            try:
                _tracemalloc._get_traces()
            except MemoryError:
                failures += 1
            finally:
                _testcapi.remove_mem_hooks()
        self.assertGreater(failures, 0)
        self.assertEqual(len(data), 100)
        _testtracemalloc.check_consistency()


if __name__ == '__main__':
    unittest.main()
