"""Per-thread attribution: each trace knows the thread that allocated it.

Every thread's call paths hang from a root node of its own in the
call-context tree, so the thread costs no byte per trace and no work per
allocation; exports report it (the native thread id) and never show the
root as a frame.
"""

import sys
import threading
import tracemalloc
import unittest

from test import support
from test.support import import_helper, os_helper, script_helper
from test.test_tracemalloc_engine import EngineTestCase, Obj, recurse, stack

_tracemalloc = import_helper.import_module('_tracemalloc')
_testtracemalloc = import_helper.import_module('_testtracemalloc')


def traces_by_thread():
    """native thread id -> list of frames tuples."""
    result = {}
    for domain, size, frames, total, thread in _tracemalloc._get_traces_ex(
            threads=True):
        result.setdefault(thread, []).append(frames)
    return result


class ThreadAttributionTest(EngineTestCase):

    def run_threads(self, nthreads, func):
        ids = {}
        results = {}

        def body(i):
            ids[i] = threading.get_native_id()
            results[i] = func(i)

        threads = [threading.Thread(target=body, args=(i,), name=f'w{i}')
                   for i in range(nthreads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return ids, results

    def test_each_block_names_its_thread(self):
        self.start(25)

        def work(i):
            objs = []
            for _ in range(50 + i):
                objs.append((Obj(), stack()))
            return objs

        ids, results = self.run_threads(4, work)
        mine = [Obj() for _ in range(30)]
        by_thread = traces_by_thread()
        obj_frames = {}
        for thread, frames_list in by_thread.items():
            for frames in frames_list:
                obj_frames.setdefault(frames, set()).add(thread)
        for i, objs in results.items():
            obj, expected = objs[0]
            frames = _tracemalloc._get_object_traceback(obj)
            # The same code in each thread: tracebacks stay equal (the root
            # is not a frame) but belong to one thread each.
            self.assertEqual(list(reversed(frames)),
                             [tuple(f) for f in expected][-25:])
            self.assertIn(ids[i], obj_frames[frames])
        self.assertIn(threading.get_native_id(), by_thread)
        # Same traceback, different threads: counted apart.
        counts = {}
        for thread, frames_list in by_thread.items():
            counts[thread] = len(frames_list)
        for i in range(4):
            self.assertGreaterEqual(counts[ids[i]], 50 + i)

    def test_total_nframe_and_tracebacks_unchanged(self):
        self.start(3)
        obj, expected = recurse(10, lambda: (Obj(), stack()))
        self.assertAllocatedAt(obj, expected)
        total = [t for d, s, f, t in _tracemalloc._get_traces()
                 if f == _tracemalloc._get_object_traceback(obj)]
        self.assertEqual(set(total), {len(expected)})
        self.assertTrue(all(len(t) == 4 for t in _tracemalloc._get_traces()))

    def test_peak_traces_carry_threads(self):
        self.start(5)

        def work(i):
            return [bytes(1000) for _ in range(100)]

        ids, results = self.run_threads(2, work)
        peak = _tracemalloc._get_traces_ex(peak=True, threads=True)
        threads = {t[4] for t in peak if t[1] >= 1000}
        self.assertTrue({ids[0], ids[1]} <= threads, (ids, threads))

    def test_dead_threads_roots_are_compacted(self):
        self.start(5)

        def work(i):
            # Fresh paths, nothing kept.
            recurse(50, lambda: Obj())

        for rounds in range(30):
            self.run_threads(4, work)
        stats = _testtracemalloc.engine_stats()
        self.assertGreater(stats['compactions'], 0)
        self.assertLess(stats['nodes'], 20000)
        self.check_consistency()


class SnapshotAPITest(EngineTestCase):
    """take_snapshot(peak=..., threads=...), Trace.thread and
    statistics('thread')."""

    def test_statistics_by_thread_with_names(self):
        self.start(5)
        ready = threading.Event()
        release = threading.Event()
        kept = {}

        def work():
            kept['data'] = [bytes(1000) for _ in range(200)]
            ready.set()
            release.wait()

        t = threading.Thread(target=work, name='allocator-7')
        t.start()
        try:
            ready.wait()
            snapshot = tracemalloc.take_snapshot(threads=True)
        finally:
            release.set()
            t.join()
        stats = {s.traceback[0].filename: s
                 for s in snapshot.statistics('thread')}
        self.assertIn('<thread allocator-7>', stats)
        self.assertIn('<thread MainThread>', stats)
        worker = stats['<thread allocator-7>']
        self.assertGreaterEqual(worker.size, 200 * 1000)
        self.assertGreaterEqual(worker.count, 200)
        self.assertEqual(sum(s.size for s in stats.values()),
                         sum(t.size for t in snapshot.traces))
        self.assertEqual(worker.traceback[0].lineno, t.native_id)
        threads = {trace.thread for trace in snapshot.traces}
        self.assertIn(t.native_id, threads)
        # Without threads=True: no thread, and statistics('thread') puts
        # everything under one key.
        plain = tracemalloc.take_snapshot()
        self.assertIsNone(plain.traces[0].thread)
        self.assertEqual(len(plain.statistics('thread')), 1)

    def test_dump_and_load_keep_threads(self):
        self.start(5)
        data = [Obj() for _ in range(100)]
        snapshot = tracemalloc.take_snapshot(threads=True)
        filename = os_helper.TESTFN
        self.addCleanup(os_helper.unlink, filename)
        snapshot.dump(filename)
        loaded = tracemalloc.Snapshot.load(filename)
        self.assertEqual(loaded.traces, snapshot.traces)
        self.assertEqual(loaded.thread_names, snapshot.thread_names)
        self.assertEqual(loaded.statistics('thread'),
                         snapshot.statistics('thread'))
        del data

    def test_peak_snapshot(self):
        self.start(5)
        line = sys._getframe().f_lineno + 1
        big = [bytes(1000) for _ in range(1000)]
        del big
        small = [bytes(10) for _ in range(10)]
        current, peak = tracemalloc.get_traced_memory()
        snapshot = tracemalloc.take_snapshot(peak=True)
        self.assertEqual(sum(t.size for t in snapshot.traces), peak)
        top = snapshot.statistics('lineno')[0]
        self.assertEqual(top.traceback[0].lineno, line)
        self.assertGreaterEqual(top.count, 1000)
        # A normal Snapshot: filters and comparisons work.
        now = tracemalloc.take_snapshot()
        diff = now.compare_to(snapshot, 'lineno')
        self.assertTrue(diff)
        filtered = snapshot.filter_traces(
            [tracemalloc.Filter(True, __file__)])
        self.assertGreater(len(filtered.traces), 0)
        del small

    @support.requires_subprocess()
    def test_cli_run_peak(self):
        script = os_helper.TESTFN + '_peak.py'
        self.addCleanup(os_helper.unlink, script)
        with open(script, 'w') as f:
            f.write('def work():\n'
                    '    big = [bytes(1000) for _ in range(3000)]  # peak\n'
                    '    return len(big)\n'
                    'kept = [bytes(10) for _ in range(10)]  # at exit\n'
                    'work()\n')
        res = script_helper.assert_python_ok('-m', 'tracemalloc', 'run',
                                             '--peak', script)
        err = res.err.decode()
        self.assertIn('live at the peak of traced memory', err)
        first = [line for line in err.splitlines() if line.startswith('#1')]
        self.assertTrue(first and ':2:' in first[0], err)
        res = script_helper.assert_python_ok('-m', 'tracemalloc', 'run',
                                             script)
        err = res.err.decode()
        first = [line for line in err.splitlines() if line.startswith('#1')]
        self.assertTrue(first and ':4:' in first[0], err)


if __name__ == '__main__':
    unittest.main()
