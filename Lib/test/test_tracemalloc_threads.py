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

from test.support import import_helper
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


if __name__ == '__main__':
    unittest.main()
