"""The leak checker's wrong answers of issue 29 (section 2), each a test
that failed before its fix.

2.5: a coroutine function, a generator function or an asynchronous
generator function as the target got a clean verdict: its body never ran.
It now runs to its end in each round.

2.1: an async test method of an IsolatedAsyncioTestCase never ran under
@no_leaks or LeakCheckMixin (a failing one passed), and asyncSetUp() and
asyncTearDown() did not run again between rounds.

2.7: @unittest.expectedFailure on a leaking test that passed: the leak's
AssertionError counted as the expected failure.  Now a body that fails is
the expected failure (no leak check verdict), and a body that passes every
round but leaks is a failure with the leak report.

2.15: under LeakCheckMixin a failing subTest was reported once per round
(7 times), and unittest's record of those failures was reported as a leak.
Now the check stops at the first round in which a subTest failed: the
failure is reported once, with no leak verdict.

2.6: a leak at a line that a bounded buffer also allocates at was masked:
the site's level went up and down.  Each traceback is judged too.

2.8: what a workload kept of tracemalloc's own API (every snapshot it
took, every statistics() list) was taken for the checker's memory.  Now
a trace is the workload's when workload code called the package.

Issue 43, item 1: a check inside a checked workload or test (a test that
runs its own check, under pytest --tracemalloc-leaks; check(lambda:
check(work))) reported its own per-round totals as leaking: an outer
check's call line was older in their traceback.  Now each check knows
the stack that called it, and what its own code allocates is its own.
"""

import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

from tracemalloc import leaks
from tracemalloc.testing import LeakCheckMixin, no_leaks

KEEP = []


async def coroutine_leak():
    import asyncio
    await asyncio.sleep(0)
    KEEP.append([0] * 1000)


async def coroutine_clean():
    import asyncio
    await asyncio.sleep(0)
    local = [0] * 1000
    del local


def generator_leak():
    KEEP.append([0] * 1000)
    yield 1
    KEEP.append([0] * 1000)


async def async_generator_leak():
    KEEP.append([0] * 1000)
    yield 1


def generator_raises():
    yield 1
    raise ValueError("raised by the body")


class AsyncCallable:
    async def __call__(self):
        KEEP.append([0] * 1000)


class GeneratorCallable:
    def __call__(self):
        KEEP.append([0] * 1000)
        yield 1


class AsyncGeneratorCallable:
    async def __call__(self):
        KEEP.append([0] * 1000)
        yield 1


class Awaitable:
    def __await__(self):
        KEEP.append([0] * 1000)
        return iter(())


class TargetKindsTest(unittest.TestCase):

    def tearDown(self):
        KEEP.clear()

    def test_coroutine_function_leak_found(self):
        self.assertTrue(leaks.check(coroutine_leak))

    def test_coroutine_function_clean(self):
        self.assertFalse(leaks.check(coroutine_clean))

    def test_generator_function_leak_found(self):
        report = leaks.check(generator_leak)
        self.assertTrue(report)

    def test_async_generator_function_leak_found(self):
        self.assertTrue(leaks.check(async_generator_leak))

    def test_generator_body_exception_propagates(self):
        with self.assertRaises(ValueError):
            leaks.check(generator_raises)

    # A callable that is not a coroutine or generator function but whose
    # call returns a coroutine, a generator or an awaitable: the result
    # runs to its end (review of issue 29, finding 1).

    def check_ran(self, target):
        # Exactly 1 + 3 runs: no rounds added to confirm the leak.
        report = leaks.check(target, warmup=1, rounds=3, extend=0)
        self.assertEqual(len(KEEP), 4)
        self.assertTrue(report)

    def test_object_with_async_call_runs(self):
        self.check_ran(AsyncCallable())

    def test_lambda_returning_coroutine_runs(self):
        self.check_ran(lambda: coroutine_leak())

    def test_object_with_generator_call_runs(self):
        self.check_ran(GeneratorCallable())

    def test_object_with_async_generator_call_runs(self):
        self.check_ran(AsyncGeneratorCallable())

    def test_lambda_returning_awaitable_runs(self):
        self.check_ran(lambda: Awaitable())

    def test_cli_async_callable_object_leak_exits_1(self):
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "amod.py"), "w") as f:
                f.write(textwrap.dedent("""\
                    keep = []
                    class Handler:
                        async def __call__(self):
                            keep.append([0] * 1000)
                    handler = Handler()
                    """))
            env = dict(os.environ)
            env.pop("PYTHONTRACEMALLOC", None)
            proc = subprocess.run(
                [sys.executable, "-m", "tracemalloc", "leaks", "-q",
                 "amod:handler"], cwd=tmp, env=env, text=True,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("amod.py:4", proc.stderr)
        self.assertNotIn("never awaited", proc.stderr)

    def test_cli_coroutine_function_leak_exits_1(self):
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "amod.py"), "w") as f:
                f.write(textwrap.dedent("""\
                    import asyncio
                    keep = []
                    async def leak():
                        await asyncio.sleep(0)
                        keep.append([0] * 1000)
                    """))
            env = dict(os.environ)
            env.pop("PYTHONTRACEMALLOC", None)
            proc = subprocess.run(
                [sys.executable, "-m", "tracemalloc", "leaks", "-q",
                 "amod:leak"], cwd=tmp, env=env, text=True,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("amod.py:5", proc.stderr)
        self.assertNotIn("never awaited", proc.stderr)


def run_case(case_class, *names):
    """Run the tests *names* of *case_class*; return the TestResult."""
    suite = unittest.TestSuite(case_class(name) for name in names)
    result = unittest.TestResult()
    suite.run(result)
    return result


class AsyncTestsTest(unittest.TestCase):
    """2.1: async test methods run in each round, on the test's loop."""

    def make_case(self, base):
        events = []

        # Exactly 1 + 3 runs (no rounds added to confirm a suspect): the
        # events list that these tests fill grows, by design.
        class Case(*base, unittest.IsolatedAsyncioTestCase):
            leak_check_warmup = 1
            leak_check_rounds = 3
            leak_check_extend = 0

            async def asyncSetUp(self):
                import asyncio
                events.append("asyncSetUp")
                self.loop = asyncio.get_running_loop()

            async def asyncTearDown(self):
                events.append("asyncTearDown")

            async def test_fails(self):
                events.append("test")
                self.fail("the body of the async test ran")

            async def test_passes(self):
                events.append("test")

            async def test_leaks(self):
                KEEP.append([0] * 1000)

            @no_leaks(warmup=1, rounds=3, extend=0)
            async def test_decorated_fails(self):
                events.append("test")
                self.fail("the body of the async test ran")

            @no_leaks(warmup=1, rounds=3, extend=0)
            async def test_decorated_passes(self):
                events.append("test")

            @no_leaks(warmup=1, rounds=3, extend=0)
            async def test_decorated_on_test_loop(self):
                import asyncio
                self.assertIs(asyncio.get_running_loop(), self.loop)

            async def test_on_test_loop(self):
                import asyncio
                self.assertIs(asyncio.get_running_loop(), self.loop)

            @no_leaks(warmup=1, rounds=3, extend=0)
            async def test_decorated_leaks(self):
                KEEP.append([0] * 1000)

        return Case, events

    def tearDown(self):
        KEEP.clear()

    def test_mixin_async_failure_propagates(self):
        Case, events = self.make_case((LeakCheckMixin,))
        result = run_case(Case, "test_fails")
        self.assertEqual(len(result.failures), 1, result.errors)
        self.assertIn("the body of the async test ran",
                      result.failures[0][1])
        self.assertEqual(events.count("test"), 1)

    def test_mixin_async_rounds_rerun_fixtures(self):
        Case, events = self.make_case((LeakCheckMixin,))
        result = run_case(Case, "test_passes")
        self.assertTrue(result.wasSuccessful(),
                        result.failures + result.errors)
        self.assertEqual(events, ["asyncSetUp", "test", "asyncTearDown"] * 4)

    def test_mixin_async_leak_found(self):
        Case, events = self.make_case((LeakCheckMixin,))
        result = run_case(Case, "test_leaks")
        self.assertEqual(len(result.failures), 1, result.errors)
        self.assertIn("leak", result.failures[0][1])

    def test_no_leaks_async_failure_propagates(self):
        Case, events = self.make_case(())
        result = run_case(Case, "test_decorated_fails")
        self.assertEqual(len(result.failures), 1, result.errors)
        self.assertIn("the body of the async test ran",
                      result.failures[0][1])

    def test_no_leaks_async_runs_each_round(self):
        Case, events = self.make_case(())
        result = run_case(Case, "test_decorated_passes")
        self.assertTrue(result.wasSuccessful(),
                        result.failures + result.errors)
        self.assertEqual(events.count("test"), 4)
        self.assertNotIn("never awaited", str(result.errors))

    def test_no_leaks_async_runs_on_test_loop(self):
        Case, events = self.make_case(())
        result = run_case(Case, "test_decorated_on_test_loop")
        self.assertTrue(result.wasSuccessful(),
                        result.failures + result.errors)

    def test_mixin_async_runs_on_test_loop(self):
        Case, events = self.make_case((LeakCheckMixin,))
        result = run_case(Case, "test_on_test_loop")
        self.assertTrue(result.wasSuccessful(),
                        result.failures + result.errors)

    def test_no_leaks_async_leak_found(self):
        Case, events = self.make_case(())
        result = run_case(Case, "test_decorated_leaks")
        self.assertEqual(len(result.failures), 1, result.errors)
        self.assertIn("leak", result.failures[0][1])


class AsyncContextTest(unittest.TestCase):
    """Review of issue 29, finding 2: under the checks, asyncSetUp(), the
    test and asyncTearDown() share their context variables, as unittest
    runs them in one context (a variable set by the rerun asyncSetUp() was
    not seen by the test, one set by the test not by asyncTearDown())."""

    def make_cases(self, base):
        import contextvars
        variable = contextvars.ContextVar("variable")

        class SetUpSets(*base, unittest.IsolatedAsyncioTestCase):
            leak_check_warmup = 1
            leak_check_rounds = 3

            async def asyncSetUp(self):
                self.value = object()
                variable.set(self.value)

            async def test_sees_setup_variable(self):
                self.assertIs(variable.get(None), self.value)

            @no_leaks(warmup=1, rounds=3)
            async def test_decorated_sees_setup_variable(self):
                self.assertIs(variable.get(None), self.value)

        class TestSets(*base, unittest.IsolatedAsyncioTestCase):
            leak_check_warmup = 1
            leak_check_rounds = 3

            async def asyncSetUp(self):
                variable.set("from asyncSetUp")

            async def test_sets(self):
                self.assertEqual(variable.get(None), "from asyncSetUp")
                variable.set("from the test")

            @no_leaks(warmup=1, rounds=3)
            async def test_decorated_sets(self):
                variable.set("from the test")

            async def asyncTearDown(self):
                self.assertEqual(variable.get(None), "from the test")

        return SetUpSets, TestSets

    def assert_passes(self, case_class, name):
        result = run_case(case_class, name)
        self.assertTrue(result.wasSuccessful(),
                        result.failures + result.errors)
        self.assertEqual(result.testsRun, 1)

    def test_mixin_setup_variable_seen_by_test(self):
        SetUpSets, _ = self.make_cases((LeakCheckMixin,))
        self.assert_passes(SetUpSets, "test_sees_setup_variable")

    def test_mixin_test_variable_seen_by_teardown(self):
        _, TestSets = self.make_cases((LeakCheckMixin,))
        self.assert_passes(TestSets, "test_sets")

    def test_no_leaks_setup_variable_seen_by_test(self):
        SetUpSets, _ = self.make_cases(())
        self.assert_passes(SetUpSets, "test_decorated_sees_setup_variable")

    def test_no_leaks_test_variable_seen_by_teardown(self):
        _, TestSets = self.make_cases(())
        self.assert_passes(TestSets, "test_decorated_sets")


class UntracedBlocksTest(unittest.TestCase):
    """Review of issue 29, finding 9: a clean IsolatedAsyncioTestCase whose
    asyncSetUp() registers cleanups was reported leaking under
    LeakCheckMixin, at unittest's line that appends a cleanup.  Its first
    fixture, set up before the check started tracing, is untraced; the
    rerun fixtures took those blocks back from the free lists, and one
    more of them was traced at each measured round.  The free lists are
    now emptied between a fixture's teardown and the next setup, and after
    each warm-up round as after each measured one, so that the warm-up
    rounds replace untraced blocks as measured rounds do."""

    def setUp(self):
        import tracemalloc
        if tracemalloc.is_tracing():
            self.skipTest("needs the check to start tracing")

    def test_mixin_async_fixture_with_cleanups_clean(self):
        import asyncio
        import contextlib

        @contextlib.asynccontextmanager
        async def resource():
            yield bytearray(100)

        class Case(LeakCheckMixin, unittest.IsolatedAsyncioTestCase):
            async def asyncSetUp(self):
                self.conn = await self.enterAsyncContext(resource())
                self.addAsyncCleanup(asyncio.sleep, 0)
                for _ in range(5):
                    self.addCleanup(lambda: None)

            async def test_clean(self):
                await asyncio.sleep(0)

        result = run_case(Case, "test_clean")
        self.assertTrue(result.wasSuccessful(),
                        result.failures + result.errors)

    def test_warmup_rounds_replace_untraced_blocks(self):
        # Entries made before tracing starts, and a free list full of
        # untraced tuples; each round replaces one entry.
        store = [(object(), 1, 2) for _ in range(3)]
        junk = [(object(), 1, 2) for _ in range(1000)]
        del junk
        count = [0]

        def replace_one():
            store[count[0] % 3] = (object(), 1, 2)
            count[0] += 1

        report = leaks.check(replace_one, warmup=4, rounds=5)
        self.assertFalse(report, report.format())


class ReturnedValueTest(unittest.TestCase):
    """Review of issue 29, finding 8: an async def or generator test method
    of a plain TestCase never runs, and unittest warns that it returned a
    value (DeprecationWarning); the checks dropped the value and hid the
    warning.  Now the check stops and the value goes back to unittest."""

    def make_cases(self):
        class Base(unittest.TestCase):
            async def test_async(self):
                self.fail("the body ran")

            def test_generator(self):
                self.fail("the body ran")
                yield

        class Mixin(LeakCheckMixin, Base):
            pass

        class Decorated(unittest.TestCase):
            @no_leaks(warmup=1, rounds=3)
            async def test_async(self):
                self.fail("the body ran")

            @no_leaks(warmup=1, rounds=3)
            def test_generator(self):
                self.fail("the body ran")
                yield

        return Mixin, Decorated

    def run_warning(self, case_class, name, action):
        import gc
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter(action, DeprecationWarning)
            warnings.simplefilter("ignore", RuntimeWarning)
            result = run_case(case_class, name)
            gc.collect()
        return result, [str(w.message) for w in caught
                        if issubclass(w.category, DeprecationWarning)]

    def check_case(self, case_class, name):
        result, messages = self.run_warning(case_class, name, "always")
        self.assertTrue(result.wasSuccessful(),
                        result.failures + result.errors)
        self.assertEqual(len(messages), 1, messages)
        self.assertIn("deprecated to return a value", messages[0])
        result, messages = self.run_warning(case_class, name, "error")
        self.assertEqual(len(result.errors), 1, result.failures)
        self.assertIn("DeprecationWarning", result.errors[0][1])

    def test_mixin_async_method(self):
        Mixin, _ = self.make_cases()
        self.check_case(Mixin, "test_async")

    def test_mixin_generator_method(self):
        Mixin, _ = self.make_cases()
        self.check_case(Mixin, "test_generator")

    def test_no_leaks_async_method(self):
        _, Decorated = self.make_cases()
        self.check_case(Decorated, "test_async")

    def test_no_leaks_generator_method(self):
        _, Decorated = self.make_cases()
        self.check_case(Decorated, "test_generator")


class RegrtestSamplingTest(unittest.TestCase):
    """Review of issue 29, finding 4: regrtest -R in a sampling process
    reported a clean module failed (LeakCheckError, uncaught).  Its counts
    still judge the test; the tracer says that the sites need exact
    tracing."""

    def test_clean_module_passes_under_sampling(self):
        from test.support import os_helper, script_helper
        directory = self.enterContext(os_helper.temp_dir())
        script_helper.make_script(directory, "test_tm_sampled_clean",
                                  textwrap.dedent("""\
            import unittest


            class CleanTest(unittest.TestCase):
                def test_clean(self):
                    [bytes(100) for _ in range(100)]
            """))
        env = dict(os.environ)
        for name in ("PYTHONTRACEMALLOC", "PYTHONTRACEMALLOCSAMPLE"):
            env.pop(name, None)
        proc = subprocess.run(
            [sys.executable, "-X", "tracemalloc=5",
             "-X", "tracemalloc_sample=4096", "-m", "test",
             "--testdir", directory, "-R", "3:3", "test_tm_sampled_clean"],
            cwd=directory, env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.assertEqual(proc.returncode, 0, proc.stdout)
        self.assertNotIn("LeakCheckError", proc.stdout)
        self.assertIn("tracemalloc: test_tm_sampled_clean: no allocation "
                      "sites: tracemalloc is sampling", proc.stdout)
        self.assertIn("needs exact tracing", proc.stdout)


class OptionsTest(unittest.TestCase):
    """Review of issue 29, finding 6: LeakCheck took any nframe (the pytest
    plugin's validator of its options and markers)."""

    def test_bad_nframe_refused(self):
        for nframe in (0, -1, 65536):
            with self.subTest(nframe=nframe):
                with self.assertRaisesRegex(ValueError, "nframe"):
                    leaks.LeakCheck(nframe=nframe)

    def test_nframe_limits_accepted(self):
        leaks.LeakCheck(nframe=1)
        leaks.LeakCheck(nframe=65535)


class ExpectedFailureTest(unittest.TestCase):
    """2.7: a leak is not swallowed as the expected failure."""

    def make_case(self, base):
        class Case(*base, unittest.TestCase):
            leak_check_warmup = 1
            leak_check_rounds = 3

            @unittest.expectedFailure
            def test_leaks(self):
                KEEP.append([0] * 1000)

            @unittest.expectedFailure
            def test_fails(self):
                KEEP.append([0] * 1000)
                self.fail("expected")

            @unittest.expectedFailure
            def test_clean(self):
                pass

        class Decorated(unittest.TestCase):
            @unittest.expectedFailure
            @no_leaks(warmup=1, rounds=3)
            def test_leaks(self):
                KEEP.append([0] * 1000)

            @unittest.expectedFailure
            @no_leaks(warmup=1, rounds=3)
            def test_fails(self):
                KEEP.append([0] * 1000)
                self.fail("expected")

            @unittest.expectedFailure
            @no_leaks(warmup=1, rounds=3)
            def test_clean(self):
                pass

        return Case if base else Decorated

    def tearDown(self):
        KEEP.clear()

    def check_kinds(self, case):
        result = run_case(case, "test_leaks")
        self.assertEqual(len(result.failures), 1,
                         (result.expectedFailures, result.errors))
        self.assertIn("test_leaks", result.failures[0][1])
        self.assertIn("leak", result.failures[0][1])
        self.assertEqual(result.expectedFailures, [])
        self.assertEqual(result.unexpectedSuccesses, [])

        result = run_case(case, "test_fails")
        self.assertEqual(len(result.expectedFailures), 1,
                         (result.failures, result.errors))
        self.assertTrue(result.wasSuccessful())

        result = run_case(case, "test_clean")
        self.assertEqual(len(result.unexpectedSuccesses), 1,
                         (result.failures, result.errors))
        self.assertEqual(result.failures, [])

    def test_mixin(self):
        self.check_kinds(self.make_case((LeakCheckMixin,)))

    def test_no_leaks(self):
        self.check_kinds(self.make_case(()))


class SubTestTest(unittest.TestCase):
    """2.15: a failing subTest is reported once, and is no leak."""

    def make_case(self, base):
        events = []

        class Case(*base, unittest.TestCase):
            def test_subtests(self):
                events.append("test")
                for i in range(3):
                    with self.subTest(i=i):
                        self.assertNotEqual(i, 1)

            def test_subtests_pass(self):
                events.append("test")
                for i in range(3):
                    with self.subTest(i=i):
                        self.assertLess(i, 3)

        class Decorated(unittest.TestCase):
            @no_leaks
            def test_subtests(self):
                events.append("test")
                for i in range(3):
                    with self.subTest(i=i):
                        self.assertNotEqual(i, 1)

            @no_leaks
            def test_subtests_pass(self):
                events.append("test")
                for i in range(3):
                    with self.subTest(i=i):
                        self.assertLess(i, 3)

        return (Case if base else Decorated), events

    def check_kinds(self, base):
        case, events = self.make_case(base)
        result = run_case(case, "test_subtests")
        self.assertEqual(len(result.failures), 1,
                         [text for _, text in result.failures])
        self.assertEqual(result.errors, [])
        text = result.failures[0][1]
        self.assertIn("1 == 1", text)
        self.assertNotIn("site leaked", text)
        self.assertFalse(result.wasSuccessful())
        self.assertEqual(events, ["test"])

        case, events = self.make_case(base)
        result = run_case(case, "test_subtests_pass")
        self.assertTrue(result.wasSuccessful(),
                        result.failures + result.errors)
        self.assertEqual(len(events), leaks.DEFAULT_WARMUP
                         + leaks.DEFAULT_ROUNDS)

    def test_mixin(self):
        self.check_kinds((LeakCheckMixin,))

    def test_no_leaks(self):
        self.check_kinds(())


import json

# Preallocated: the leak is the parsed documents, not the list's growth.
FOREVER = [None] * 1000
FOREVER_USED = [0]
BATCH = [None] * 6
BATCH_USED = [0]
DOCUMENT = '{"a": [1, 2, 3], "b": "some text of a document", "c": {"d": 4}}'


def parse(text):
    # The line that both callers allocate at.  A bytes object, not the
    # dicts and lists of json.loads(): those are reused from free lists
    # without a new allocation, so which traceback a kept one has depends
    # on what was freed before.
    return json.dumps(json.loads(text)).encode() * 20


def keep_forever():
    FOREVER[FOREVER_USED[0]] = parse(DOCUMENT)
    FOREVER_USED[0] += 1


def keep_in_batch():
    BATCH[BATCH_USED[0]] = parse(DOCUMENT)
    BATCH_USED[0] += 1
    if BATCH_USED[0] == len(BATCH):
        BATCH[:] = [None] * len(BATCH)
        BATCH_USED[0] = 0


def masked_leak():
    keep_forever()
    keep_in_batch()


class SharedLineTest(unittest.TestCase):
    """2.6: judged per traceback, a leak beside a bounded buffer is found."""

    def tearDown(self):
        FOREVER[:] = [None] * len(FOREVER)
        BATCH[:] = [None] * len(BATCH)
        FOREVER_USED[0] = BATCH_USED[0] = 0

    def test_leak_beside_bounded_buffer_found(self):
        report = leaks.check(masked_leak)
        self.assertTrue(report, report.format())
        text = report.format(limit=None)
        self.assertIn("keep_forever", text)

    def test_bounded_buffer_alone_clean(self):
        report = leaks.check(keep_in_batch)
        self.assertFalse(report, report.format(limit=None))


import tracemalloc

SNAPSHOTS = []


def keep_snapshots():
    SNAPSHOTS.append(tracemalloc.take_snapshot())


def keep_statistics():
    SNAPSHOTS.append(tracemalloc.take_snapshot().statistics('lineno'))


def drop_snapshot():
    snapshot = tracemalloc.take_snapshot()
    snapshot.statistics('lineno')
    del snapshot


class OwnAPITest(unittest.TestCase):
    """2.8: memory kept through tracemalloc's API is the workload's."""

    def tearDown(self):
        SNAPSHOTS.clear()

    def test_kept_snapshots_found(self):
        report = leaks.check(keep_snapshots, warmup=1, rounds=4)
        self.assertTrue(report, report.format())
        self.assertIn("tracemalloc", report.format(limit=None))

    def test_kept_statistics_found(self):
        report = leaks.check(keep_statistics, warmup=1, rounds=4)
        self.assertTrue(report, report.format())

    def test_dropped_snapshot_clean(self):
        report = leaks.check(drop_snapshot, warmup=1, rounds=4)
        self.assertFalse(report, report.format(limit=None))



def clean_work():
    data = [bytearray(1024) for _ in range(10)]
    del data


def leaking_work():
    KEEP.append(bytearray(1024))


# The inner checks' reports that were wrong, as text (nothing kept when
# they were right: what the outer check's workload keeps is a leak).
WRONG = []


def note_wrong(report):
    if report:
        WRONG.append(report.format(limit=None))


def check_clean_inside():
    note_wrong(leaks.check(clean_work, warmup=1, rounds=4))


class NestedCheckTest(unittest.TestCase):
    """Issue 43, item 1: a leak check inside a checked workload or test
    does not report the inner checker's own bookkeeping."""

    def tearDown(self):
        WRONG.clear()
        KEEP.clear()

    def test_check_in_check(self):
        report = leaks.check(check_clean_inside, warmup=1, rounds=4)
        self.assertEqual(WRONG, [])
        self.assertFalse(report, report.format(limit=None))

    def test_check_in_lambda_in_check(self):
        # The issue's own form: check(lambda: check(work)).
        report = leaks.check(lambda: note_wrong(leaks.check(clean_work)))
        self.assertEqual(WRONG, [])
        self.assertFalse(report, report.format(limit=None))

    def test_iterated_check_in_check(self):
        def iterated():
            with leaks.LeakCheck(warmup=1, rounds=4) as inner:
                for _ in inner:
                    clean_work()

        report = leaks.check(iterated, warmup=1, rounds=4)
        self.assertFalse(report, report.format(limit=None))

    def test_inner_check_still_finds_leak(self):
        found = []

        def outer():
            found.append(bool(leaks.check(leaking_work, warmup=1,
                                          rounds=4)))

        leaks.check(outer, warmup=1, rounds=4)
        self.assertTrue(found)
        self.assertTrue(all(found), found)

    def test_unittest_checks_in_checked_tests(self):
        class NoLeaks(unittest.TestCase):
            @no_leaks(warmup=1, rounds=4)
            def test_assert_no_leaks(self):
                leaks.assert_no_leaks(clean_work, warmup=1, rounds=4)

            @no_leaks(warmup=1, rounds=4)
            def test_check(self):
                report = leaks.check(clean_work, warmup=1, rounds=4)
                self.assertFalse(report, report.format(limit=None))

        class Mixin(LeakCheckMixin, unittest.TestCase):
            leak_check_warmup = 1
            leak_check_rounds = 4

            def test_assert_no_leaks(self):
                leaks.assert_no_leaks(clean_work, warmup=1, rounds=4)

            def test_check(self):
                report = leaks.check(clean_work, warmup=1, rounds=4)
                self.assertFalse(report, report.format(limit=None))

        for case in (NoLeaks, Mixin):
            with self.subTest(case=case.__name__):
                result = unittest.TestResult()
                unittest.defaultTestLoader.loadTestsFromTestCase(case).run(
                    result)
                self.assertEqual(result.testsRun, 2)
                self.assertTrue(result.wasSuccessful(),
                                result.failures + result.errors)

    def test_checks_in_pytest_leak_check(self):
        from test.test_tracemalloc_pytest import PytestHarness

        class Harness(PytestHarness, unittest.TestCase):
            def runTest(self):
                pass

        harness = Harness()
        harness.setUp()
        self.addCleanup(harness.doCleanups)
        harness.write("test_nested.py", """\
            import unittest
            from tracemalloc import leaks
            from tracemalloc.testing import LeakCheckMixin, no_leaks


            def work():
                data = [bytearray(1024) for _ in range(10)]
                del data


            class NoLeaks(unittest.TestCase):
                @no_leaks
                def test_no_leaks(self):
                    work()


            class Mixin(LeakCheckMixin, unittest.TestCase):
                def test_mixin(self):
                    work()


            def test_assert_no_leaks():
                leaks.assert_no_leaks(work)


            def test_check():
                report = leaks.check(work)
                assert not report, report.format()
            """)
        rc, output = harness.run_pytest("--tracemalloc-leaks", "-q")
        self.assertEqual(rc, 0, output)
        self.assertIn("4 passed", output)


if __name__ == "__main__":
    unittest.main()
