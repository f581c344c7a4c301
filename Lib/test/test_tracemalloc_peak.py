"""Peak snapshots against a brute-force oracle.

The oracle takes a full snapshot every time traced memory reaches a new
peak.  To know exactly when that happens, the test's own Python code runs
untraced (_testtracemalloc.suspend()) and every traced change is a single
allocator call made from C (_testtracemalloc.alloc_op()): after each one,
a new peak is the state right now.  At the end, the engine's peak snapshot
must equal the oracle's last snapshot: totals, per-line and per-traceback
statistics, for every domain, with threads and with realloc.
"""

import queue
import random
import threading
import tracemalloc
import unittest

from test.support import import_helper

_tracemalloc = import_helper.import_module('_tracemalloc')
_testtracemalloc = import_helper.import_module('_testtracemalloc')

KINDS = (0, 1, 2, 3)      # raw (no GIL), mem, obj, PyTraceMalloc_Track
NBLOCKS = 300


# Call sites: different lines and depths give different tracebacks.
def site_a(*args):
    _testtracemalloc.alloc_op(*args)


def site_b(*args):
    site_a(*args)


def site_c(*args):
    _testtracemalloc.alloc_op(*args)


SITES = (site_a, site_b, site_c)


def by_traceback(traces):
    """(domain, frames) -> (total size, count)."""
    groups = {}
    for domain, size, frames, total in traces:
        size0, count0 = groups.get((domain, frames), (0, 0))
        groups[(domain, frames)] = (size0 + size, count0 + 1)
    return groups


def stats(traces, key_type):
    snapshot = tracemalloc.Snapshot(traces, tracemalloc.get_traceback_limit())
    return sorted((str(s.traceback), s.size, s.count)
                  for s in snapshot.statistics(key_type))


class Oracle:

    def __init__(self):
        self.peak = 0
        self.traces = []

    def after_op(self):
        current, peak = tracemalloc.get_traced_memory()
        if peak > self.peak:
            # One allocator call since the last check: the peak it made
            # is the state now.
            assert current == peak, (current, peak)
            self.peak = peak
            self.traces = _tracemalloc._get_traces()


class PeakOracleTest(unittest.TestCase):

    def setUp(self):
        was = tracemalloc.is_tracing()
        tracemalloc.stop()
        self.addCleanup(self.restore, was)
        _testtracemalloc.suspend()
        self.addCleanup(_testtracemalloc.resume)

    def restore(self, was):
        _testtracemalloc.free_all()
        tracemalloc.stop()
        if was:
            tracemalloc.start()

    def random_op(self, rng, live, run):
        index = rng.randrange(NBLOCKS)
        site = rng.choice(SITES)
        if index in live:
            if rng.random() < 0.5:
                run(site, 'free', index, 0, 0)
                del live[index]
            else:
                kind = live[index]
                size = rng.choice((8, 64, 500, 600, 5000, 70000))
                run(site, 'realloc', index, size, kind)
        else:
            kind = rng.choice(KINDS)
            op = 'calloc' if rng.random() < 0.2 else 'malloc'
            size = rng.choice((1, 16, 100, 512, 513, 4096, 100000))
            run(site, op, index, size, kind)
            live[index] = kind

    def check(self, oracle, nops):
        peak_traces = _tracemalloc._get_traces_ex(peak=True)
        current, peak = tracemalloc.get_traced_memory()
        self.assertEqual(peak, oracle.peak)
        self.assertEqual(sum(t[1] for t in peak_traces), peak)
        self.assertEqual(by_traceback(peak_traces),
                         by_traceback(oracle.traces))
        for key_type in ('lineno', 'traceback', 'filename'):
            self.assertEqual(stats(peak_traces, key_type),
                             stats(oracle.traces, key_type), key_type)
        # Not a vacuous comparison: blocks of the default domain and of
        # the tracking API's were live at the peak.
        self.assertGreaterEqual(len(oracle.traces), min(nops, 20))
        domains = {t[0] for t in oracle.traces}
        if nops > 100:
            self.assertEqual(domains, {0, 7})

    def run_program(self, seed, nframe, run, nops=3000,
                    reset_every=None):
        rng = random.Random(seed)
        tracemalloc.start(nframe)
        oracle = Oracle()
        live = {}
        for i in range(nops):
            if reset_every and i and i % reset_every == 0:
                tracemalloc.reset_peak()
                current, peak = tracemalloc.get_traced_memory()
                oracle.peak = peak
                oracle.traces = _tracemalloc._get_traces()
            self.random_op(rng, live, run)
            oracle.after_op()
        self.check(oracle, nops)
        # The peak snapshot is a normal Snapshot.
        snapshot = tracemalloc.take_snapshot(peak=True) \
            if 'peak' in tracemalloc.take_snapshot.__code__.co_varnames \
            else None
        if snapshot is not None:
            self.assertEqual(sum(t.size for t in snapshot.traces),
                             oracle.peak)

    def test_random_programs(self):
        for seed in range(4):
            for nframe in (1, 5):
                with self.subTest(seed=seed, nframe=nframe):
                    self.run_program(seed, nframe,
                                     lambda site, *args: site(*args))
                    _testtracemalloc.free_all()
                    tracemalloc.stop()

    def test_reset_peak(self):
        self.run_program(10, 5, lambda site, *args: site(*args),
                         reset_every=400)

    def test_threads(self):
        # Each operation runs in one of three threads, in lock step with
        # this one, so that the oracle still sees every step.
        requests = [queue.Queue() for _ in range(3)]
        done = queue.Queue()

        def worker(inbox):
            _testtracemalloc.suspend()
            while True:
                item = inbox.get()
                if item is None:
                    return
                site, args = item
                try:
                    site(*args)
                    done.put(None)
                except BaseException as exc:
                    done.put(exc)

        threads = [threading.Thread(target=worker, args=(q,))
                   for q in requests]
        for t in threads:
            t.start()
        rng = random.Random(99)

        def run(site, *args):
            rng.choice(requests).put((site, args))
            exc = done.get()
            if exc is not None:
                raise exc

        try:
            self.run_program(5, 5, run, nops=1500)
        finally:
            for q in requests:
                q.put(None)
            for t in threads:
                t.join()

    def test_compactions_keep_the_peak(self):
        # The peak's nodes survive a compaction even when their blocks are
        # gone: allocate at fresh call paths after the peak.
        tracemalloc.start(5)
        oracle = Oracle()
        for i in range(50):
            site_b('malloc', i, 1000, 1)
            oracle.after_op()
        for i in range(50):
            site_a('free', i, 0, 0)
        before = _testtracemalloc.engine_stats()['compactions']
        src = '\n'.join(f'def f{i}(n):\n    if n: return f{i}(n - 1)\n'
                        f'    _testtracemalloc.alloc_op("malloc", 299, 8, 2)'
                        f'\n    _testtracemalloc.alloc_op("free", 299, 0, 0)'
                        for i in range(300))
        namespace = {'_testtracemalloc': _testtracemalloc}
        exec(src, namespace)
        for i in range(300):
            namespace[f'f{i}'](30)
        self.assertGreater(_testtracemalloc.engine_stats()['compactions'],
                           before)
        self.check(oracle, 50)


if __name__ == '__main__':
    unittest.main()
