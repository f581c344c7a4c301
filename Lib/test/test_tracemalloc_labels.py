"""Context labels (issue 33 item 5): tracemalloc.label(), label_tasks(),
take_snapshot(labels=True), statistics('label') and pprof labels.

Each allocation under test is a bytearray of a size no other allocation
has, so that its trace is found by size and its labels checked one by one.
"""

import asyncio
import contextlib
import contextvars
import gc
import io
import itertools
import os
import pickle
import sys
import tempfile
import threading
import tracemalloc
import unittest

from test.support import import_helper, script_helper

_testtracemalloc = import_helper.import_module('_testtracemalloc')

_next_size = [100_003]


def marker():
    """A bytearray of a size of its own: its trace is size + 1 bytes."""
    _next_size[0] += 8
    return bytearray(_next_size[0])


def labels_of(snapshot, obj):
    """The labels of OBJ's buffer's trace in SNAPSHOT."""
    size = len(obj) + 1
    found = [trace for trace in snapshot.traces if trace.size == size]
    if len(found) != 1:
        raise AssertionError(f"{len(found)} traces of {size} bytes")
    return found[0].labels


def churn(n, tag=[0]):
    """Make N call paths that nothing keeps: compaction follows."""
    tag[0] += 1
    src = "\n".join(f"def f{i}(): return [{i}, {tag[0]}] * 3"
                    for i in range(n))
    ns = {}
    exec(compile(src, f"<churn {tag[0]}>", "exec"), ns)
    for i in range(n):
        ns[f"f{i}"]()


def compactions():
    return _testtracemalloc.engine_stats()['compactions']


class LabelTestCase(unittest.TestCase):
    nframe = 25
    sample = None

    def setUp(self):
        if tracemalloc.is_tracing():
            self.skipTest("tracemalloc must be stopped before the test")
        tracemalloc.start(self.nframe, sample=self.sample)
        self.addCleanup(tracemalloc.stop)
        self.addCleanup(tracemalloc.label_tasks, False)

    def snapshot(self, **kwargs):
        return tracemalloc.take_snapshot(labels=True, **kwargs)


class LabelAPITest(LabelTestCase):

    def test_nested_and_restored(self):
        kept = {}

        def callee(name):
            kept[name] = marker()

        kept['before'] = marker()
        callee('call_before')
        with tracemalloc.label(endpoint="/users"):
            _next_size[0] += 8
            kept['own'] = bytearray(_next_size[0])
            callee('call')
            with tracemalloc.label(tenant="acme", endpoint="/inner"):
                _next_size[0] += 8
                kept['inner_own'] = bytearray(_next_size[0])
                callee('inner_call')
                self.assertEqual(tracemalloc.get_labels(),
                                 {'endpoint': '/inner', 'tenant': 'acme'})
            _next_size[0] += 8
            kept['after_inner'] = bytearray(_next_size[0])
            callee('after_inner_call')
        _next_size[0] += 8
        kept['after'] = bytearray(_next_size[0])
        callee('after_call')
        self.assertEqual(tracemalloc.get_labels(), {})
        snap = self.snapshot()
        users = {'endpoint': '/users'}
        inner = {'endpoint': '/inner', 'tenant': 'acme'}
        expected = {'before': {}, 'call_before': {}, 'own': users,
                    'call': users, 'inner_own': inner, 'inner_call': inner,
                    'after_inner': users, 'after_inner_call': users,
                    'after': {}, 'after_call': {}}
        got = {name: labels_of(snap, obj) for name, obj in kept.items()}
        self.assertEqual(got, expected)

    def test_loop_same_line(self):
        # The frame's memo of its last allocation line must not carry a
        # label in or out of the block.
        kept = []
        for i in range(6):
            if i % 2:
                with tracemalloc.label(i=str(i)):
                    _next_size[0] += 8
                    kept.append((i, bytearray(_next_size[0])))
            _next_size[0] += 8
            kept.append((None, bytearray(_next_size[0])))
        snap = self.snapshot()
        for i, obj in kept:
            self.assertEqual(labels_of(snap, obj),
                             {} if i is None else {'i': str(i)})

    def test_tracebacks_unchanged(self):
        def where():
            return marker(), sys._getframe().f_lineno - 0

        plain, _ = where()
        with tracemalloc.label(a="1"):
            labelled, _ = where()
        tb_plain = tracemalloc.get_object_traceback(plain)
        tb_label = tracemalloc.get_object_traceback(labelled)
        # Same frames but the caller's line.
        self.assertEqual(len(tb_plain), len(tb_label))
        self.assertEqual(tb_plain[0], tb_label[0])
        self.assertEqual(tb_plain.total_nframe, tb_label.total_nframe)
        self.assertEqual([f.filename for f in tb_plain],
                         [f.filename for f in tb_label])
        snap = self.snapshot()
        for trace in snap.traces:
            self.assertNotIn('<label', str(trace.traceback))

    def test_decorator(self):
        kept = {}

        @tracemalloc.label(job="sync")
        def work():
            kept['sync'] = marker()

        @tracemalloc.label(job="async")
        async def awork():
            await asyncio.sleep(0)
            kept['async'] = marker()

        work()
        asyncio.run(awork())
        snap = self.snapshot()
        self.assertEqual(labels_of(snap, kept['sync']), {'job': 'sync'})
        self.assertEqual(labels_of(snap, kept['async']), {'job': 'async'})
        self.assertEqual(work.__name__, 'work')

    def test_exit_stack_and_contextmanager(self):
        # label() entered from another frame than the one that then runs.
        kept = {}

        @contextlib.contextmanager
        def scope(name):
            with tracemalloc.label(scope=name):
                yield

        def own(name):
            # Allocated by this frame itself, not a callee.
            _next_size[0] += 8
            kept[name] = bytearray(_next_size[0])

        with scope("cm"):
            kept['cm'] = marker()
            _next_size[0] += 8
            kept['cm_own'] = bytearray(_next_size[0])
        _next_size[0] += 8
        kept['after_cm_own'] = bytearray(_next_size[0])
        kept['after_cm'] = marker()
        with contextlib.ExitStack() as stack:
            stack.enter_context(tracemalloc.label(scope="stack"))
            kept['stack'] = marker()
            _next_size[0] += 8
            kept['stack_own'] = bytearray(_next_size[0])
        kept['after_stack'] = marker()
        _next_size[0] += 8
        kept['after_stack_own'] = bytearray(_next_size[0])
        with tracemalloc.label(scope="plain"):
            _next_size[0] += 8
            kept['plain_own'] = bytearray(_next_size[0])
        snap = self.snapshot()
        expected = {'cm': 'cm', 'cm_own': 'cm', 'after_cm': None,
                    'after_cm_own': None, 'stack': 'stack',
                    'stack_own': 'stack', 'after_stack': None,
                    'after_stack_own': None, 'plain_own': 'plain'}
        got = {name: labels_of(snap, obj).get('scope')
               for name, obj in kept.items()}
        self.assertEqual(got, expected)

    def test_generators_follow_the_consumer(self):
        def gen():
            while True:
                yield marker()

        g = gen()
        outside = next(g)
        with tracemalloc.label(consumer="a"):
            inside = next(g)
            made_inside = gen()
        later = next(made_inside)
        snap = self.snapshot()
        self.assertEqual(labels_of(snap, outside), {})
        self.assertEqual(labels_of(snap, inside), {'consumer': 'a'})
        self.assertEqual(labels_of(snap, later), {})

    def test_context_run_is_a_boundary(self):
        # A function run in another context has that context's labels,
        # and its caller keeps its own afterwards.
        kept = {}
        empty = contextvars.Context()

        def in_empty():
            kept['empty'] = marker()

        with tracemalloc.label(outer="1"):
            kept['before'] = marker()
            empty.run(in_empty)
            kept['after'] = marker()
            copy = contextvars.copy_context()
        copy.run(lambda: kept.__setitem__('copy', marker()))
        snap = self.snapshot()
        self.assertEqual(labels_of(snap, kept['before']), {'outer': '1'})
        self.assertEqual(labels_of(snap, kept['empty']), {})
        self.assertEqual(labels_of(snap, kept['after']), {'outer': '1'})
        self.assertEqual(labels_of(snap, kept['copy']), {'outer': '1'})

    def test_threads_start_without_labels(self):
        kept = {}

        def run():
            kept['thread'] = marker()
            with tracemalloc.label(worker="own"):
                kept['thread_own'] = marker()

        with tracemalloc.label(main="1"):
            t = threading.Thread(target=run)
            t.start()
            t.join()
            kept['main'] = marker()
        snap = self.snapshot()
        self.assertEqual(labels_of(snap, kept['thread']), {})
        self.assertEqual(labels_of(snap, kept['thread_own']),
                         {'worker': 'own'})
        self.assertEqual(labels_of(snap, kept['main']), {'main': '1'})
        trace = [t for t in snap.traces
                 if t.size == len(kept['thread']) + 1][0]
        self.assertEqual(trace.thread, t.native_id)

    def test_compaction_inside_labels(self):
        # Compaction renumbers every node and unlinks every frame; the
        # frames relinked afterwards get their own labels back, across a
        # C boundary too.
        kept = {}
        empty = contextvars.Context()

        def deep(n, name):
            if n:
                return deep(n - 1, name)
            before = compactions()
            churn(3000)
            self.assertGreater(compactions(), before)
            kept[name] = marker()

        def in_empty():
            deep(5, 'empty_after')
            kept['empty_tail'] = marker()

        def middle():
            deep(5, 'deep')
            kept['middle'] = marker()
            empty.run(in_empty)
            kept['middle_after_run'] = marker()

        with tracemalloc.label(outer="x"):
            with tracemalloc.label(inner="y"):
                middle()
                kept['inner'] = marker()
            kept['outer'] = marker()
            churn(3000)
            kept['outer_after'] = marker()
        churn(3000)
        kept['none'] = marker()
        snap = self.snapshot()
        xy = {'outer': 'x', 'inner': 'y'}
        expected = {'deep': xy, 'middle': xy, 'empty_after': {},
                    'empty_tail': {}, 'middle_after_run': xy, 'inner': xy,
                    'outer': {'outer': 'x'}, 'outer_after': {'outer': 'x'},
                    'none': {}}
        got = {name: labels_of(snap, obj) for name, obj in kept.items()}
        self.assertEqual(got, expected)
        _testtracemalloc.check_consistency()

    def test_one_node_per_label_change(self):
        # Entering a label adds one label node per call path that
        # allocates under it, not one per allocation.
        def work(keep):
            keep.append(bytearray(50))

        def rounds(n):
            # repeat(): no int objects past the small ints' cache.
            for _ in itertools.repeat(None, n):
                with tracemalloc.label(a="1"):
                    work(keep)

        keep = []
        work(keep)
        nodes = [_testtracemalloc.engine_stats()['nodes']]
        runs = [0]
        for n in (1, 200, 1000):
            # From one line: the paths of rounds() are the same each time.
            runs.append(compactions())
            rounds(n)
            nodes.append(_testtracemalloc.engine_stats()['nodes'])
        first = nodes[1] - nodes[0]
        # Once the label's paths exist, entering it again adds none (the
        # list that keeps the blocks grows, from lines seen already); a
        # compaction meanwhile drops paths that are then made again.
        grown = nodes[3] - nodes[2]
        if compactions() == runs[3]:
            self.assertEqual(grown, 0)
        self.assertLess(grown, 50)   # for 2000 label switches
        # The first time: the label node, and below it the paths of this
        # frame and of work(), and of the label's own code.
        self.assertLessEqual(first, 40)

    def test_statistics_and_compare(self):
        keep = []
        old = self.snapshot()
        for name, n in (("a", 3), ("b", 5)):
            with tracemalloc.label(shard=name):
                keep.extend(bytearray(1000) for _ in range(n))
        new = self.snapshot()
        stats = {str(s.traceback[0].filename): s
                 for s in new.statistics('label')}
        self.assertIn('<label shard=a>', stats)
        self.assertIn('<label shard=b>', stats)
        # Each bytearray is two blocks, its object and its buffer.
        for name, n in (("a", 3), ("b", 5)):
            stat = stats[f'<label shard={name}>']
            self.assertGreaterEqual(stat.size, n * 1001)
            self.assertLess(stat.size, n * 1001 + 2000)
            self.assertGreaterEqual(stat.count, 2 * n)
        diffs = {str(d.traceback[0].filename): d
                 for d in new.compare_to(old, 'label')}
        self.assertEqual(diffs['<label shard=b>'].size_diff,
                         stats['<label shard=b>'].size)
        # A snapshot without labels: one group.
        plain = tracemalloc.take_snapshot()
        self.assertEqual([str(s.traceback[0].filename)
                          for s in plain.statistics('label')],
                         ['<no label>'])
        self.assertIsNone(plain.traces[0].labels)
        # Sum over labels is the total.
        self.assertEqual(sum(s.size for s in new.statistics('label')),
                         sum(t.size for t in new.traces))

    def test_peak_and_allocated(self):
        tracemalloc.stop()
        tracemalloc.start(10, allocations=True)
        with tracemalloc.label(phase="churn"):
            for _ in range(100):
                bytearray(5000)
        with tracemalloc.label(phase="peak"):
            big = [bytearray(10000) for _ in range(20)]
            tracemalloc.reset_peak()
            del big
        alloc = tracemalloc.take_snapshot(allocated=True, labels=True)
        stats = {str(s.traceback[0].filename): s
                 for s in alloc.statistics('label')}
        self.assertGreaterEqual(stats['<label phase=churn>'].size,
                                100 * 5000)
        peak = tracemalloc.take_snapshot(peak=True, labels=True)
        stats = {str(s.traceback[0].filename): s
                 for s in peak.statistics('label')}
        self.assertGreaterEqual(stats['<label phase=peak>'].size,
                                20 * 10000)

    def test_keep_through_pickle_dump_and_filters(self):
        keep = []
        with tracemalloc.label(k="v"):
            keep.append(marker())
        snap = self.snapshot()
        self.assertEqual(labels_of(snap, keep[0]), {'k': 'v'})
        copy = pickle.loads(pickle.dumps(snap))
        self.assertEqual(labels_of(copy, keep[0]), {'k': 'v'})
        filtered = snap.filter_traces([tracemalloc.Filter(True, __file__)])
        self.assertEqual(labels_of(filtered, keep[0]), {'k': 'v'})
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, 'snap')
            snap.dump(path)
            loaded = tracemalloc.Snapshot.load(path)
        self.assertEqual(labels_of(loaded, keep[0]), {'k': 'v'})
        self.assertEqual(
            [str(s.traceback) for s in loaded.statistics('label')],
            [str(s.traceback) for s in snap.statistics('label')])

    def test_bad_input(self):
        with self.assertRaisesRegex(TypeError, "values must be str, not int"):
            tracemalloc.label(user=1)
        with self.assertRaisesRegex(TypeError, "names must be str"):
            tracemalloc.label({1: "x"})
        with self.assertRaisesRegex(ValueError, "cannot be empty"):
            tracemalloc.label({"": "x"})
        with self.assertRaisesRegex(TypeError, "takes a mapping"):
            tracemalloc.label(5)
        with self.assertRaisesRegex(RuntimeError, "exit without an enter"):
            tracemalloc.label(a="b").__exit__(None, None, None)
        with self.assertRaisesRegex(ValueError, "unknown key_type"):
            self.snapshot().statistics('labels')
        with self.assertRaisesRegex(ValueError, "cumulative"):
            self.snapshot().statistics('label', cumulative=True)

    def test_unicode_and_odd_values(self):
        keep = []
        odd = {"http.route": "/ü/\"x\"\n", "empty": "", "z": "=, >"}
        with tracemalloc.label(odd):
            keep.append(marker())
        snap = self.snapshot()
        self.assertEqual(labels_of(snap, keep[0]), odd)

    def test_not_tracing(self):
        tracemalloc.stop()
        with tracemalloc.label(a="1"):
            self.assertEqual(tracemalloc.get_labels(), {'a': '1'})
            tracemalloc.start(5)
            keep = marker()
        snap = self.snapshot()
        self.assertEqual(labels_of(snap, keep), {'a': '1'})


class LabelReviewTest(LabelTestCase):
    """What the adversarial review of labels found wrong (issue 33, session
    39: /work/review-s39-labels/)."""

    def test_context_run_of_a_c_function(self):
        # f13: Context.run() of a C function allocates under the caller's
        # frame, whose link was made in the other context.
        kept, want = {}, {}
        empty = contextvars.Context()
        with tracemalloc.label(b="inner"):
            labelled = contextvars.copy_context()

        def record(tag, ctx, func):
            _next_size[0] += 8
            want[tag] = ctx.run(tracemalloc.get_labels)
            kept[tag] = ctx.run(func, _next_size[0])

        record('in_labelled', labelled, bytearray)
        with tracemalloc.label(a="outer"):
            record('in_empty', empty, bytearray)
            record('python_in_empty', empty, lambda n: bytearray(n))
            _next_size[0] += 8
            kept['after'] = bytearray(_next_size[0])
            want['after'] = {'a': 'outer'}
        snap = self.snapshot()
        got = {tag: labels_of(snap, obj) for tag, obj in kept.items()}
        self.assertEqual(got, want)

    def test_to_thread_of_a_c_function(self):
        # f14: asyncio.to_thread() copies the context into the worker.
        async def main():
            with tracemalloc.label(endpoint="/upload"):
                _next_size[0] += 8
                return await asyncio.to_thread(bytearray, _next_size[0])

        obj = asyncio.run(main())
        self.assertEqual(tracemalloc.get_object_labels(obj),
                         {'endpoint': '/upload'})

    def test_empty_label_nested(self):
        # f19, f20: an empty label in another one raised, and the failed
        # enter left the outer label on for good.
        for empty in (tracemalloc.label(), tracemalloc.label({})):
            with tracemalloc.label(a="1"):
                with empty:
                    self.assertEqual(tracemalloc.get_labels(), {'a': '1'})
                    obj = marker()
                self.assertEqual(tracemalloc.get_labels(), {'a': '1'})
            self.assertEqual(tracemalloc.get_labels(), {})
            self.assertEqual(tracemalloc.get_object_labels(obj), {'a': '1'})
            after = marker()
            self.assertEqual(tracemalloc.get_object_labels(after), {})

    def test_exit_misuse_raises(self):
        # f17: a second exit, or an outer one first, changed another label.
        outer = tracemalloc.label(a="1")
        inner = tracemalloc.label(b="2")
        outer.__enter__()
        inner.__enter__()
        with self.assertRaisesRegex(RuntimeError, "not the innermost"):
            outer.__exit__(None, None, None)
        inner.__exit__(None, None, None)
        with self.assertRaisesRegex(RuntimeError, "not the innermost"):
            inner.__exit__(None, None, None)
        self.assertEqual(tracemalloc.get_labels(), {'a': '1'})
        outer.__exit__(None, None, None)
        self.assertEqual(tracemalloc.get_labels(), {})
        # The same object nested in itself.
        same = tracemalloc.label(c="3")
        with same:
            with same:
                self.assertEqual(tracemalloc.get_labels(), {'c': '3'})
            self.assertEqual(tracemalloc.get_labels(), {'c': '3'})
        self.assertEqual(tracemalloc.get_labels(), {})

    def test_generator_functions_refused(self):
        # f26: the label would end before the body runs.
        def gen():
            yield 1

        async def agen():
            yield 1

        for func in (gen, agen):
            with self.assertRaisesRegex(TypeError, "generator function"):
                tracemalloc.label(a="1")(func)

    def test_rename_inside_a_label_sticks(self):
        # f27: leaving the label brought the old name back.
        seen = {}

        async def handler():
            with tracemalloc.label(step="parse"):
                asyncio.current_task().set_name("renamed")
                await asyncio.sleep(0)
                seen['inside'] = tracemalloc.get_labels()
            await asyncio.sleep(0)
            seen['after'] = tracemalloc.get_labels()
            return marker()

        async def main():
            tracemalloc.label_tasks()
            return await asyncio.create_task(handler(), name="before")

        obj = asyncio.run(main())
        self.assertEqual(seen['inside']['task'], 'renamed')
        self.assertEqual(seen['inside']['step'], 'parse')
        self.assertEqual(seen['after']['task'], 'renamed')
        self.assertNotIn('step', seen['after'])
        self.assertEqual(tracemalloc.get_object_labels(obj)['task'],
                         'renamed')

    def test_rename_leaves_other_contexts_alone(self):
        # f15: a task given a context (a copy of its creator's, or the
        # creator's own) and renamed relabelled that context.
        seen = {}

        async def child(key):
            await asyncio.sleep(0)
            asyncio.current_task().set_name(f"{key}-renamed")
            seen[key] = tracemalloc.get_labels()

        async def parent():
            me = asyncio.current_task()
            copy = asyncio.create_task(child("copy"), name="copy-child",
                                       context=contextvars.copy_context())
            await copy
            if hasattr(me, 'get_context'):
                shared = asyncio.create_task(child("shared"),
                                             name="shared-child",
                                             context=me.get_context())
                await shared
            seen['parent'] = tracemalloc.get_labels()

        async def main():
            tracemalloc.label_tasks()
            await asyncio.create_task(parent(), name="parent")

        asyncio.run(main())
        parent_labels = {'task': 'parent', 'coroutine': (
            'LabelReviewTest.test_rename_leaves_other_contexts_alone.'
            '<locals>.parent')}
        self.assertEqual(seen['parent'], parent_labels)
        self.assertEqual(seen['copy'], parent_labels)
        if 'shared' in seen:
            self.assertEqual(seen['shared'], parent_labels)

    def test_files_refuse_what_label_refuses(self):
        # f10: reserved and empty names loaded from a file.
        from tracemalloc import _labels
        for pairs in ([["thread", "x"]], [["", "x"]], [["pprof::x", "y"]],
                      [["a", 1]]):
            text = __import__('json').dumps(pairs, separators=(',', ':'))
            self.assertFalse(_labels.is_canonical(text), text)
        self.assertTrue(_labels.is_canonical('[["a","1"]]'))


class LabelTaskTest(LabelTestCase):

    def test_tasks_inherit_and_interleave(self):
        kept = {}

        async def worker(name, rounds):
            for i in range(rounds):
                await asyncio.sleep(0)
                kept[(name, i)] = marker()

        async def main():
            with tracemalloc.label(request="r1"):
                t1 = asyncio.create_task(worker("a", 4))
            with tracemalloc.label(request="r2"):
                t2 = asyncio.create_task(worker("b", 4))
            t3 = asyncio.create_task(worker("c", 4))
            await asyncio.gather(t1, t2, t3)
            kept['main'] = marker()

        asyncio.run(main())
        snap = self.snapshot()
        expected = {"a": {'request': 'r1'}, "b": {'request': 'r2'}, "c": {}}
        for key, obj in kept.items():
            want = {} if key == 'main' else expected[key[0]]
            self.assertEqual(labels_of(snap, obj), want, key)

    def test_label_tasks(self):
        kept = {}

        async def handler(i):
            await asyncio.sleep(0)
            kept[i] = marker()
            await asyncio.sleep(0)
            kept[i, 'again'] = marker()

        async def main():
            tracemalloc.label_tasks()
            self.assertTrue(tracemalloc.is_labelling_tasks())
            with tracemalloc.label(svc="api"):
                tasks = [asyncio.create_task(handler(i), name=f"req-{i}")
                         for i in range(3)]
            unnamed = asyncio.create_task(handler('u'))
            own_ctx = asyncio.create_task(handler('ctx'),
                                          context=contextvars.Context())
            await asyncio.gather(*tasks, unnamed, own_ctx)
            tracemalloc.label_tasks(False)
            await asyncio.create_task(handler('off'))
            return unnamed.get_name()

        unnamed_name = asyncio.run(main())
        snap = self.snapshot()
        coro = 'LabelTaskTest.test_label_tasks.<locals>.handler'
        for i in range(3):
            want = {'svc': 'api', 'task': f'req-{i}', 'coroutine': coro}
            self.assertEqual(labels_of(snap, kept[i]), want)
            self.assertEqual(labels_of(snap, kept[i, 'again']), want)
        # asyncio.run()'s main task is labelled too.
        self.assertEqual(labels_of(snap, kept['u']),
                         {'task': unnamed_name, 'coroutine': coro,
                          })
        self.assertEqual(labels_of(snap, kept['ctx']), {})
        self.assertEqual(labels_of(snap, kept['off']), {})
        by_task = {str(s.traceback[0].filename)
                   for s in snap.statistics('label')}
        self.assertIn(f'<label coroutine={coro}, svc=api, task=req-0>',
                      by_task)

    def test_eager_tasks(self):
        if not hasattr(asyncio, 'eager_task_factory'):
            self.skipTest("no eager tasks before 3.12")
        kept = {}

        async def handler():
            kept['eager'] = marker()
            await asyncio.sleep(0)
            kept['later'] = marker()

        async def main():
            asyncio.get_running_loop().set_task_factory(
                asyncio.eager_task_factory)
            tracemalloc.label_tasks()
            await asyncio.create_task(handler(), name="eager-1")

        asyncio.run(main())
        snap = self.snapshot()
        # asyncio names a task made by a task factory after the factory
        # returned, once its first (eager) step ran under its first name.
        self.assertRegex(labels_of(snap, kept['eager'])['task'],
                         r'^Task-\d+$')
        self.assertEqual(labels_of(snap, kept['later'])['task'], 'eager-1')

    def test_task_renamed(self):
        kept = {}

        async def handler():
            kept['first'] = marker()
            asyncio.current_task().set_name("renamed")
            kept['own_rename'] = marker()
            await asyncio.sleep(0)
            kept['later'] = marker()

        async def main():
            tracemalloc.label_tasks()
            task = asyncio.create_task(handler(), name="before")
            await task

        asyncio.run(main())
        snap = self.snapshot()
        self.assertEqual(labels_of(snap, kept['first'])['task'], 'before')
        self.assertEqual(labels_of(snap, kept['own_rename'])['task'],
                         'renamed')
        self.assertEqual(labels_of(snap, kept['later'])['task'], 'renamed')

    def test_hook_failure_is_reported_not_raised(self):
        # A hook that fails costs the task its labels, never the task.
        import _tracemalloc
        from test import support

        def bad_hook(task, coro):
            raise RuntimeError("hook failed")

        async def handler():
            return marker()

        async def main():
            return await asyncio.create_task(handler(), name="t")

        _tracemalloc._set_task_hook(bad_hook)
        with support.catch_unraisable_exception() as cm:
            obj = asyncio.run(main())
            self.assertIsInstance(cm.unraisable.exc_value, RuntimeError)
        snap = self.snapshot()
        self.assertEqual(labels_of(snap, obj), {})


def raw_functions_without_gil():
    """PyMem_RawMalloc() called through ctypes with the GIL released (a
    CDLL, not the PyDLL pythonapi), and PyMem_RawFree().  The malloc has no
    argtypes: its int argument is passed as a C int.  Called with *ARGS, a
    tuple made before, the call makes no Python object before the GIL is
    released (a converted argument, or the tuple of the arguments, would
    be allocated with the GIL, in the calling frame)."""
    ctypes = import_helper.import_module('ctypes')
    raw_malloc = ctypes.CDLL(ctypes.pythonapi._name).PyMem_RawMalloc
    raw_malloc.restype = ctypes.c_void_p
    raw_free = ctypes.pythonapi.PyMem_RawFree
    raw_free.restype, raw_free.argtypes = None, [ctypes.c_void_p]
    return raw_malloc, raw_free


SUBINTERPRETER_LABELS = """
import threading, tracemalloc
try:
    import _interpreters as interpreters
    def create(kind):
        return interpreters.create(interpreters.new_config(kind))
    def run(interp, code):
        interpreters.exec(interp, code)
    KINDS = ['legacy', 'isolated']
except ImportError:
    import _xxsubinterpreters as interpreters
    def create(kind):
        return interpreters.create()
    def run(interp, code):
        interpreters.run_string(interp, code)
    KINDS = ['legacy']
# A context of its own (a ContextVar set), then a new frame linked under
# the running one: the engine reads the context's labels.
CODE = '''
import contextvars
contextvars.ContextVar('x').set(1)
def f():
    return bytearray(%d)
globals()['kept%d'] = f()
'''
# Isolated interpreters never read the labels (their threads hold a GIL
# of their own) and are slower to enter: a few execs show that.
EXECS = {'legacy': 64, 'isolated': 4}
tracemalloc.start(25)
sizes = {}
size = [200_003]
interps = []

def execs(kind, where):
    # Each exec has a thread state of its own: their ids go past the
    # labelled thread's.
    interp = create(kind)
    interps.append(interp)
    for i in range(EXECS[kind]):
        size[0] += 8
        run(interp, CODE % (size[0], i))
        sizes[f'{kind} from the {where} {i}'] = size[0]

def labelled_thread(kind):
    with tracemalloc.label(who='main'):
        execs(kind, 'labelled thread')

def other_thread(kind):
    inside, done = threading.Event(), threading.Event()
    def labelled():
        with tracemalloc.label(who='main'):
            inside.set()
            done.wait()
    t = threading.Thread(target=labelled)
    t.start()
    inside.wait()
    u = threading.Thread(target=execs, args=(kind, 'other thread'))
    u.start()
    u.join()
    done.set()
    t.join()

with tracemalloc.label(who='main'):
    mine = bytearray(size[0])
    sizes['main'] = size[0]
for kind in KINDS:
    with tracemalloc.label(who='main'):
        execs(kind, 'main thread')
    t = threading.Thread(target=labelled_thread, args=(kind,))
    t.start()
    t.join()
    other_thread(kind)
snapshot = tracemalloc.take_snapshot(labels=True)
for name, size in sizes.items():
    print(name, [t.labels for t in snapshot.traces if t.size == size + 1])
for interp in interps:
    interpreters.destroy(interp)
"""


class LabelSoundnessTest(LabelTestCase):
    """Issue 43, section 1: labels that went to the wrong allocations."""

    def test_allocation_without_gil_keeps_the_label(self):
        # 1.1: an allocation without the GIL in a frame that a label
        # switch unlinked linked it (it cannot read its context), and the
        # allocations made with the GIL afterwards in the same frame lost
        # the label.  Not marker(): a callee's frame is linked anew, with
        # the label.
        raw_malloc, raw_free = raw_functions_without_gil()
        args = (64,)
        with tracemalloc.label(req="A"):
            block = raw_malloc(*args)
            after = bytearray(123_457)
        raw_free(block)
        with tracemalloc.label(req="B"):
            with tracemalloc.label(sub="C"):
                block = raw_malloc(*args)
                nested = bytearray(123_465)
            raw_free(block)
            outer = bytearray(123_473)
        snap = self.snapshot()
        self.assertEqual(labels_of(snap, after), {'req': 'A'})
        self.assertEqual(labels_of(snap, nested), {'req': 'B', 'sub': 'C'})
        self.assertEqual(labels_of(snap, outer), {'req': 'B'})

    def test_subinterpreters_carry_no_labels(self):
        # 1.2: thread-state ids and context versions count per
        # interpreter, and the label ContextVar's cache is keyed by them: a
        # subinterpreter's thread state with the pair of the labelled
        # thread got its labels, whichever thread ran the subinterpreter.
        # In a child: an isolated interpreter changes the engine lock's
        # mode for the process.
        try:
            import_helper.import_module('_interpreters')
        except unittest.SkipTest:
            import_helper.import_module('_xxsubinterpreters')
        res = script_helper.assert_python_ok("-c", SUBINTERPRETER_LABELS)
        lines = res.out.decode().splitlines()
        self.assertEqual(lines[0], "main [{'who': 'main'}]")
        self.assertGreaterEqual(len(lines), 3 * 64 + 1)
        wrong = [line for line in lines[1:] if not line.endswith(" [{}]")]
        self.assertEqual(wrong, [])


class SampledLabelTest(LabelTestCase):
    sample = 4096

    def test_sampled_estimates_by_label(self):
        keep = []
        with tracemalloc.label(kind="big"):
            keep.extend(bytearray(512) for _ in range(4000))
        with tracemalloc.label(kind="small"):
            keep.extend(bytearray(512) for _ in range(1000))
        snap = self.snapshot()
        stats = {str(s.traceback[0].filename): s.size
                 for s in snap.statistics('label')}
        big, small = stats['<label kind=big>'], stats['<label kind=small>']
        # About 2 MB and 0.5 MB: within 6 standard deviations (the
        # estimate of B bytes drawn every 4096 has sd ~ sqrt(B * 4096)).
        for est, true in ((big, 4000 * 513), (small, 1000 * 513)):
            self.assertLess(abs(est - true), 6 * (true * 4096) ** 0.5)


class PprofLabelTest(LabelTestCase):

    def test_pprof_labels(self):
        from test.test_tracemalloc_pprof import decode_profile
        keep = []
        with tracemalloc.label(endpoint="/users", tenant="acme"):
            keep.extend(bytearray(1000) for _ in range(10))
        snap = self.snapshot()
        expected = {str(s.traceback[0].filename): s.size
                    for s in snap.statistics('label')}
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, 'heap.pb.gz')
            snap.dump_pprof(path)
            with open(path, 'rb') as file:
                profile = decode_profile(file.read())
        totals = {}
        for sample in profile['samples']:
            labels = {key: value for key, value in sample['labels'].items()
                      if key not in ('thread', 'thread_id')}
            key = ('<label ' + ', '.join(f'{k}={v}' for k, v in
                                         sorted(labels.items())) + '>'
                   if labels else '<no label>')
            totals[key] = totals.get(key, 0) + sample['values'][1]
            self.assertIn('thread', sample['labels'])
        self.assertEqual(totals, expected)
        self.assertGreaterEqual(
            totals['<label endpoint=/users, tenant=acme>'], 10 * 1000)



from tracemalloc import leaks   # noqa: E402 (its tests only)


class LabelLeakCheckTest(unittest.TestCase):
    """Issue 43, item 2: the package's own caches of label sets are no
    leak of a labelled workload, and clear_caches() empties them."""

    def setUp(self):
        self.addCleanup(tracemalloc.label_tasks, False)

    def test_labelled_handler_clean(self):
        # A new label set per call, as a request id gives.
        numbers = itertools.count()

        def handler():
            with tracemalloc.label(request=str(next(numbers))):
                data = [bytearray(100) for _ in range(10)]
                del data

        report = leaks.check(handler)
        self.assertFalse(report, report.format(limit=None))

    def test_labelled_tasks_clean(self):
        # label_tasks(): each task's name, Task-N, is a new label set.
        async def handler():
            await asyncio.sleep(0)
            data = [bytearray(100) for _ in range(10)]
            del data

        async def serve():
            await asyncio.gather(*(asyncio.create_task(handler())
                                   for _ in range(3)))

        tracemalloc.label_tasks()
        report = leaks.check(serve)
        self.assertFalse(report, report.format(limit=None))

    def test_labelled_leak_still_found(self):
        numbers = itertools.count()
        kept = []

        def handler():
            with tracemalloc.label(request=str(next(numbers))):
                kept.append(bytearray(1000))

        report = leaks.check(handler)
        self.assertTrue(report)
        self.assertIn(__file__, [site.filename for site in report.sites])

    def test_clear_caches_empties_label_caches(self):
        from tracemalloc import _labels
        with tracemalloc.label(request="cached"):
            pass
        _labels.format_labels('[["request","cached"]]')
        self.assertGreater(_labels._canonical.cache_info().currsize, 0)
        leaks.clear_caches()
        self.assertEqual(_labels._canonical.cache_info().currsize, 0)
        self.assertEqual(_labels._decode_pairs.cache_info().currsize, 0)


if __name__ == "__main__":
    unittest.main()
