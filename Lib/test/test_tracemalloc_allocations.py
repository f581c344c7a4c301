"""Allocation profiles (issue 33, item 3): what each call path allocated
since tracing started, freed or not.

tracemalloc.start(..., allocations=True) keeps the totals;
take_snapshot(allocated=True) reads them as a weighted snapshot whose
statistics(), compare_to() and filters work as for any snapshot;
Snapshot.dump_pprof(allocated=) writes Go's four heap sample types, read
back here by the decoder of test_tracemalloc_pprof and by `go tool pprof`.
"""

import os
import shutil
import tempfile
import unittest
import tracemalloc

from test.test_tracemalloc_pprof import (
    INSTALL_HINT, decode_profile, go_pprof_top)

try:
    import _testcapi
except ImportError:
    _testcapi = None

from test.support import import_helper

_testtracemalloc = import_helper.import_module('_testtracemalloc')

HERE = os.path.abspath(__file__)
BYTES_SIZE = 10_000


def line_of(function, marker):
    import inspect
    lines, first = inspect.getsourcelines(function)
    for offset, text in enumerate(lines):
        if marker in text:
            return first + offset
    raise AssertionError(marker)


def churn(count):
    for _ in range(count):
        data = bytes(BYTES_SIZE)  # CHURN
        del data


kept = []


def hold(count):
    for _ in range(count):
        kept.append(bytes(BYTES_SIZE))  # HOLD


def deep(depth):
    if depth:
        return deep(depth - 1)
    data = bytes(100)  # DEEP
    del data


# Call paths that differ near the root: one caller line per branch.
BRANCHES = 200
_source = ['def diverging_root(i, depth):']
for _i in range(BRANCHES):
    _source.append(f'    if i == {_i}: return deep(depth)')
exec('\n'.join(_source))
del _source, _i


def per_line(snapshot, filename=HERE):
    return {stat.traceback[0].lineno: (stat.count, stat.size)
            for stat in snapshot.statistics('lineno')
            if stat.traceback[0].filename == filename}


class AllocationTotalsTest(unittest.TestCase):

    def setUp(self):
        if tracemalloc.is_tracing():
            self.skipTest("tracemalloc must not be tracing already")
        kept.clear()
        self.addCleanup(tracemalloc.stop)
        self.addCleanup(kept.clear)

    def test_exact_totals(self):
        tracemalloc.start(5, allocations=True)
        self.assertTrue(tracemalloc.is_tracing_allocations())
        size = bytes(BYTES_SIZE).__sizeof__()
        churn(300)
        hold(40)
        allocated = tracemalloc.take_snapshot(allocated=True)
        live = tracemalloc.take_snapshot()
        lines = per_line(allocated)
        churn_line = line_of(churn, 'CHURN')
        hold_line = line_of(hold, 'HOLD')
        # Every bytes object is one block of its __sizeof__().
        self.assertEqual(lines[churn_line], (300, 300 * size))
        self.assertEqual(lines[hold_line][1] >= 40 * size, True)
        self.assertEqual(per_line(live).get(churn_line), None)
        live_hold = per_line(live)[hold_line]
        # The list's growth is on the same line: allocated covers live.
        self.assertGreaterEqual(lines[hold_line][0], live_hold[0])
        self.assertGreaterEqual(lines[hold_line][1], live_hold[1])

    def test_free_list_reuse_at_the_same_line(self):
        # A tuple taken from the free list where the previous one was
        # freed keeps its trace's call path; it is still an allocation.
        tracemalloc.start(5, allocations=True)

        def reuse(rounds):
            # Free tuples made while tracing: the free list holds traced
            # ones (those made before tracing have no trace to reuse).
            pairs = [(i, None) for i in range(5000)]
            del pairs
            for _ in range(rounds):
                for i in range(200):
                    pair = (i, None)  # REUSE
            return pair

        reuse(50)
        lines = per_line(tracemalloc.take_snapshot(allocated=True))
        count = lines[line_of(reuse, 'REUSE')][0]
        self.assertEqual(count, 10_000)

    def test_compare_to_is_what_was_allocated_between(self):
        tracemalloc.start(5, allocations=True)
        churn(10)
        before = tracemalloc.take_snapshot(allocated=True)
        churn(123)
        after = tracemalloc.take_snapshot(allocated=True)
        size = bytes(BYTES_SIZE).__sizeof__()
        churn_line = line_of(churn, 'CHURN')
        diffs = {stat.traceback[0].lineno: stat
                 for stat in after.compare_to(before, 'lineno')
                 if stat.traceback[0].filename == HERE}
        self.assertEqual(diffs[churn_line].count_diff, 123)
        self.assertEqual(diffs[churn_line].size_diff, 123 * size)

    def test_clear_traces_resets(self):
        tracemalloc.start(5, allocations=True)
        churn(50)
        tracemalloc.clear_traces()
        churn(7)
        lines = per_line(tracemalloc.take_snapshot(allocated=True))
        self.assertEqual(lines[line_of(churn, 'CHURN')][0], 7)

    def test_totals_survive_compaction(self):
        # The call-context tree drops the call paths that no live trace
        # names; with allocations=True those that allocated stay, with
        # their totals.
        tracemalloc.start(100, allocations=True)
        churn(5)
        before = _testtracemalloc.engine_stats()['compactions']
        for i in range(BRANCHES * 3):
            diverging_root(i % BRANCHES, 40)
        after = _testtracemalloc.engine_stats()['compactions']
        self.assertGreater(after, before, 'no compaction happened')
        lines = per_line(tracemalloc.take_snapshot(allocated=True))
        self.assertEqual(lines[line_of(churn, 'CHURN')][0], 5)
        self.assertEqual(lines[line_of(deep, 'DEEP')][0], BRANCHES * 3)
        # Each branch is a call path of its own, with its own total.
        paths = [stat for stat in tracemalloc.take_snapshot(
                     allocated=True).statistics('traceback')
                 if any(frame.lineno == line_of(deep, 'DEEP')
                        and frame.filename == HERE
                        for frame in stat.traceback)]
        self.assertEqual(len(paths), BRANCHES)
        self.assertEqual({stat.count for stat in paths}, {3})

    def test_untraced_without_allocations(self):
        tracemalloc.start(5)
        self.assertFalse(tracemalloc.is_tracing_allocations())
        with self.assertRaisesRegex(RuntimeError, 'allocations=True'):
            tracemalloc.take_snapshot(allocated=True)
        with self.assertRaisesRegex(RuntimeError, 'call stop'):
            tracemalloc.start(5, allocations=True)
        tracemalloc.start(5, allocations=False)    # the running mode: fine
        tracemalloc.start(5)
        tracemalloc.stop()
        tracemalloc.start(5, allocations=True)
        with self.assertRaisesRegex(RuntimeError, 'call stop'):
            tracemalloc.start(5, allocations=False)
        with self.assertRaisesRegex(ValueError, 'peak and allocated'):
            tracemalloc.take_snapshot(peak=True, allocated=True)
        tracemalloc.stop()
        self.assertFalse(tracemalloc.is_tracing_allocations())
        with self.assertRaises(RuntimeError):
            tracemalloc.take_snapshot(allocated=True)

    @unittest.skipIf(_testcapi is None or not hasattr(_testcapi,
                                                      'tracemalloc_track'),
                     "needs _testcapi.tracemalloc_track")
    def test_other_domains(self):
        tracemalloc.start(5, allocations=True)
        for address in range(0x1000, 0x1000 + 16 * 10, 16):
            _testcapi.tracemalloc_track(7, address, 100)
            _testcapi.tracemalloc_untrack(7, address)
        snapshot = tracemalloc.take_snapshot(allocated=True)
        domain = snapshot.filter_traces([tracemalloc.DomainFilter(True, 7)])
        total = sum(stat.size for stat in domain.statistics('lineno'))
        count = sum(stat.count for stat in domain.statistics('lineno'))
        self.assertEqual((count, total), (10, 1000))

    @unittest.skipIf(_testcapi is None or not hasattr(_testcapi,
                                                      'tracemalloc_track'),
                     "needs _testcapi.tracemalloc_track")
    def test_zero_byte_blocks(self):
        # Issue 33's review (s38), F1: 0-byte blocks are 0 bytes, not 1.
        tracemalloc.start(5, allocations=True)
        for address in range(0x2000, 0x2000 + 16 * 10, 16):
            _testcapi.tracemalloc_track(9, address, 0)
        _testcapi.tracemalloc_track(10, 0x3000, 0)
        _testcapi.tracemalloc_track(10, 0x3010, 1)
        snapshot = tracemalloc.take_snapshot(allocated=True)
        totals = {}
        for domain in (9, 10):
            stats = snapshot.filter_traces(
                [tracemalloc.DomainFilter(True, domain)]).statistics('lineno')
            totals[domain] = (sum(stat.size for stat in stats),
                              sum(stat.count for stat in stats))
        self.assertEqual(totals, {9: (0, 10), 10: (1, 2)})

    def test_sampled_estimates(self):
        interval = 64 * 1024
        tracemalloc.start(5, sample=interval, allocations=True)
        tracemalloc._tracemalloc._set_sample_seed(12345)
        count = 20_000
        churn(count)
        lines = per_line(tracemalloc.take_snapshot(allocated=True))
        size = bytes(BYTES_SIZE).__sizeof__()
        estimate = lines[line_of(churn, 'CHURN')]
        # Each block is sampled with probability p = 1 - exp(-size /
        # interval) and weighs 1 / p: the estimate's relative standard
        # deviation is sqrt((1 - p) / (count * p)); 6 of them.
        import math
        p = 1 - math.exp(-size / interval)
        tolerance = 6 * math.sqrt((1 - p) / (count * p))
        self.assertLess(abs(estimate[0] / count - 1), tolerance, estimate)
        self.assertLess(abs(estimate[1] / (count * size) - 1), tolerance,
                        estimate)

    def test_snapshot_file_round_trip(self):
        tracemalloc.start(5, allocations=True)
        churn(33)
        snapshot = tracemalloc.take_snapshot(allocated=True)
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, 'alloc.snap')
            snapshot.dump(path)
            loaded = tracemalloc.Snapshot.load(path)
        self.assertEqual(per_line(loaded), per_line(snapshot))


class AllocationProfileTest(unittest.TestCase):

    def setUp(self):
        if tracemalloc.is_tracing():
            self.skipTest("tracemalloc must not be tracing already")
        kept.clear()
        self.addCleanup(kept.clear)
        self.directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.directory)
        tracemalloc.start(5, allocations=True)
        churn(200)
        hold(30)
        self.allocated = tracemalloc.take_snapshot(allocated=True)
        self.live = tracemalloc.take_snapshot()
        tracemalloc.stop()
        self.path = os.path.join(self.directory, 'heap.pb.gz')
        self.live.dump_pprof(self.path, allocated=self.allocated)

    def expected(self):
        """{(file, line): (alloc_objects, alloc_space, inuse_objects,
        inuse_space)} of the two snapshots' statistics by line."""
        rows = {}
        for first, snapshot in ((0, self.allocated), (2, self.live)):
            for stat in snapshot.statistics('lineno'):
                frame = stat.traceback[0]
                row = rows.setdefault((frame.filename, frame.lineno),
                                      [0, 0, 0, 0])
                row[first] = stat.count
                row[first + 1] = stat.size
        return rows

    def test_sample_types_and_totals(self):
        with open(self.path, 'rb') as file:
            profile = decode_profile(file.read())
        self.assertEqual(profile['sample_types'],
                         [('alloc_objects', 'count'),
                          ('alloc_space', 'bytes'),
                          ('inuse_objects', 'count'),
                          ('inuse_space', 'bytes')])
        self.assertEqual(profile['default_sample_type'], 'inuse_space')
        totals = {}
        for sample in profile['samples']:
            row = totals.setdefault(sample['frames'][0], [0, 0, 0, 0])
            for i, value in enumerate(sample['values']):
                row[i] += value
        expected = {key: value for key, value in self.expected().items()}
        self.assertEqual(totals, expected)
        churn_line = (HERE, line_of(churn, 'CHURN'))
        self.assertEqual(totals[churn_line][2:], [0, 0])   # all freed
        self.assertEqual(totals[churn_line][0], 200)

    def test_base_and_allocated_together(self):
        with self.assertRaisesRegex(ValueError, 'base or allocated'):
            self.live.dump_pprof(os.path.join(self.directory, 'x.pb.gz'),
                                 base=self.live, allocated=self.allocated)

    @unittest.skipUnless(shutil.which('go'),
                         f"go is missing (Debian's golang-go; "
                         f"{INSTALL_HINT})")
    def test_go_tool_pprof_sample_index(self):
        expected = self.expected()
        for index, name in enumerate(('alloc_objects', 'alloc_space',
                                      'inuse_objects', 'inuse_space')):
            output, flat = go_pprof_top(['go', 'tool', 'pprof'], self.path,
                                        name)
            want = {key: value[index] for key, value in expected.items()
                    if value[index]}
            self.assertEqual(flat, want, output)
            self.assertIn(f'Type: {name}', output)


if __name__ == '__main__':
    unittest.main()
