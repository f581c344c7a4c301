"""Leak checks for unittest: a test method decorator and a TestCase mixin.

    import unittest
    from tracemalloc.testing import no_leaks, LeakCheckMixin

    class ServiceTest(unittest.TestCase):
        @no_leaks
        def test_request(self):
            handle_one_request()

    class ParserTest(LeakCheckMixin, unittest.TestCase):
        leak_check_rounds = 5           # every test of the class is checked

        def test_parse(self):
            parse("...")

A checked test runs warmup + rounds times (see tracemalloc.leaks); it fails
when the memory of some allocation site kept rising over the measured
rounds.  The failure message is the leak report, titled with the test's
id(), cut to the largest sites and a few frames of each (about 30 lines)
unless full_report is set; the exception's *report* attribute is the whole
LeakReport.  With the mixin and with the decorator alike, the first round
runs on the TestCase instance that unittest set up, and each later round on
a fresh instance of the class, set up and torn down (setUp(), tearDown(),
the cleanups) within the round, as unittest runs separate tests and as the
pytest plugin runs its rounds: state left on ``self`` does not carry over,
and what a test's fixture holds is released between rounds.  A test that
fails or errs for an ordinary reason fails with its own exception, whose
traceback starts at the test's code (with a note naming the round, when it
was not the first); it has no leak verdict.
"""

import contextvars
import functools
import inspect
import os
import unittest

from tracemalloc import _leakcore, leaks

__all__ = ['no_leaks', 'skip_leak_check', 'LeakCheckMixin', 'memory_limit']

# unittest leaves the frames of modules that define __unittest out of the
# tracebacks of failures: the report is the failure, not this module.
__unittest = True

# A failure message shows this many sites, with this many frames of each
# traceback: about 30 lines (one frame fewer when the sites show the chain
# that holds their objects).  The option full_report=True shows it all.
MESSAGE_SITES = 3
MESSAGE_FRAMES = 3


def _check_or_fail(test_case, func, options, rounds=None):
    """Run the leak check of *func*; fail *test_case* with the report.

    An exception that a round raised (the test failed, or erred) is
    raised again with its traceback starting at the test's code."""
    options = dict(options)
    full = options.pop('full_report', False)
    check = leaks.LeakCheck(**options)
    try:
        report = check.run(func)
    except (_FailedInRound, _Returned, leaks.LeakCheckError):
        raise
    except Exception as error:
        raise _from_the_test(error, rounds, check.planned_rounds)
    if report:
        if full:
            message = report.format(limit=None)
        else:
            # One chain of what holds each site's objects (two lines),
            # in the place of one frame (two lines): the same length.
            chained = any(site.retention is not None
                          for site in report.sites[:MESSAGE_SITES])
            message = report.format(
                limit=MESSAGE_SITES, chains=1,
                frames=MESSAGE_FRAMES - 1 if chained else MESSAGE_FRAMES,
                more="(the whole report, every site and frame: "
                     "full_report=True, as an option of no_leaks() or "
                     "as leak_check_full_report = True in a "
                     "LeakCheckMixin class)")
        failure = getattr(test_case, 'failureException', AssertionError)
        if failure is AssertionError:
            error = leaks.LeakError(report, message)
        else:
            error = failure(message)
            error.report = report
        _not_an_expected_failure(test_case)
        raise error
    return report


def _not_an_expected_failure(test_case):
    """Make the leak about to be raised a failure of *test_case* even when
    the test is decorated with unittest.expectedFailure.

    The body passed every round (a body that fails is the expected failure,
    and no leak verdict is given): that is an unexpected success, and the
    leak must not be taken for the failure that was expected.  unittest
    counts any exception raised while it expects a failure as the expected
    one, so the expectation is withdrawn for the test's method: the leak is
    then recorded as a failure, with its report.
    """
    outcome = getattr(test_case, '_outcome', None)
    if outcome is not None and getattr(outcome, 'expecting_failure', False):
        outcome.expecting_failure = False


class _Rounds:
    """The rounds of one checked test method, called once per round
    through call_workload().

    The first round runs on the TestCase instance that unittest made and
    set up.  Before the second, that instance's fixtures are torn down
    (tearDown(), the cleanups) and its tearDown() is made a no-op, so
    that unittest does not run it a second time; each later round runs on
    a fresh instance of the test's class, made, set up, run and torn down
    within the round, as unittest runs separate tests and as the pytest
    plugin runs each round.  State that a test leaves on ``self`` does not
    carry over to the next round.  *function* is the test's function
    (unbound), called with the instance and *args*.

    The fresh instances share the first one's outcome (what unittest
    records subTest failures in) and, for an IsolatedAsyncioTestCase, its
    event loop.  A class whose constructor does not take the method name
    alone gets the first instance again, set up again, in each round.
    """

    def __init__(self, test_case, function, args=(), kwargs=None):
        self.test_case = test_case
        self.function = function
        self.args = args
        self.kwargs = kwargs or {}
        self.index = 0
        self.failing_round = None

    def __call__(self):
        index = self.index
        self.index += 1
        self.failing_round = index
        test_case = self.test_case
        if index == 0:
            self._run(test_case)
        else:
            if index == 1:
                _tear_down(test_case)
                _disarm_tear_down(test_case)
            fresh = self._fresh()
            if fresh is None:
                fresh = test_case       # torn down again after its round
            _fresh_blocks()
            _set_up(fresh)
            try:
                self._run(fresh)
            finally:
                try:
                    _tear_down(fresh)
                finally:
                    if fresh is not test_case and _is_async_case(fresh):
                        # Its loop is the first instance's: not to be
                        # closed when the fresh one is deleted.
                        fresh._asyncioRunner = None
            del fresh
            _stop_if_failed(test_case)
        self.failing_round = None

    def _run(self, instance):
        _returned(_call_test_method(instance, functools.partial(
            self.function, instance, *self.args, **self.kwargs)))
        _stop_if_failed(self.test_case)

    def _fresh(self):
        test_case = self.test_case
        try:
            fresh = _leakcore.call_workload(_new_instance, type(test_case),
                                            test_case._testMethodName)
        except TypeError:
            return None
        fresh._outcome = test_case._outcome
        if _is_async_case(test_case):
            fresh._asyncioRunner = test_case._asyncioRunner
        return fresh


def _new_instance(cls, name):
    # A fresh instance whose test method is not wrapped again by the
    # mixin: the rounds call the test's function themselves.
    token = _MAKING_FRESH.set(True)
    try:
        return cls(name)
    finally:
        _MAKING_FRESH.reset(token)


_MAKING_FRESH = contextvars.ContextVar('_MAKING_FRESH', default=False)


def _set_up(test_case):
    call = _leakcore.call_workload
    call(test_case.setUp)
    if _is_async_case(test_case):
        call(_run_async, test_case, test_case.asyncSetUp)


def _tear_down(test_case):
    call = _leakcore.call_workload
    if _is_async_case(test_case):
        # asyncTearDown(), the async cleanups too, on the test's own loop.
        call(_run_async, test_case, test_case.asyncTearDown)
        call(test_case.tearDown)
        call(_async_cleanups, test_case)
    else:
        call(test_case.tearDown)
        call(test_case.doCleanups)


def _disarm_tear_down(test_case):
    """Make unittest's own tearDown() of *test_case*, after the rounds, a
    no-op: the rounds tore its fixtures down already."""
    test_case.tearDown = _nothing
    if _is_async_case(test_case):
        test_case.asyncTearDown = _async_nothing


def _nothing():
    pass


async def _async_nothing():
    pass


def _from_the_test(error, rounds, total):
    """Prepare *error*, raised by a round of a checked test for an
    ordinary reason, to be raised again from the check: its traceback
    starts at the test's own code (the checker's frames left out), and a
    note says in which round it failed when it was not the first."""
    own = _leakcore.package_files()
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename in own:
        tb = tb.tb_next
    if tb is not None:
        error = error.with_traceback(tb)
    index = rounds.failing_round if rounds is not None else None
    if index and hasattr(error, 'add_note'):
        error.add_note(
            f"tracemalloc leak check: the test ran {total} times, each "
            f"time with a fresh instance of its TestCase and its "
            f"fixtures; it passed {index} time{'s' if index > 1 else ''}, "
            f"then failed in run {index + 1}, so it has no leak verdict.  "
            f"A test that passes alone but fails when run again depends "
            f"on state that an earlier run left behind; to leave it "
            f"unchecked: skip_leak_check.")
    return error


def _fresh_blocks():
    """Empty the free lists between the teardown of a round's fixture and
    the setup of the next one.

    The first fixture was set up before the check started tracing: its
    objects are untraced.  Freed by the teardown, they would go to the free
    lists, and the next fixture would take some of them back, untraced, and
    some traced blocks -- one more traced at each round as the async rerun
    of the fixture mixes them, which looked like a leak of the fixture's
    objects (unittest's list of cleanups).  From the free lists emptied,
    each new fixture is traced in full.
    """
    _leakcore.clear_free_lists()


class _FailedInRound(Exception):
    """A round of a test failed without raising (a subTest): stop."""


class _Returned(Exception):
    """The test method returned something: stop, with no verdict."""

    def __init__(self, value):
        super().__init__()
        self.value = value


def _returned(value):
    """Raise _Returned when the test method returned *value*, not None.

    An async def or generator test method of a plain TestCase returns a
    coroutine or a generator, and its body never runs: unittest warns
    about the value (a DeprecationWarning, an error under -W error).  The
    check stops at once, and the checked method returns the value to
    unittest, so that the warning is not hidden behind a clean verdict.
    """
    if value is not None:
        raise _Returned(value)


def _stop_if_failed(test_case):
    """Raise _FailedInRound when the round that just ran failed without
    raising: a subTest failed (unittest recorded it and went on), or, under
    expectedFailure, the expected failure happened in a subTest.

    Running more rounds would record the same failure once per round, and
    unittest's record of those failures would grow like a leak.  The check
    stops there, with no verdict: the failure is the test's, reported once.
    """
    outcome = getattr(test_case, '_outcome', None)
    if outcome is None:
        return
    if (not getattr(outcome, 'success', True)
            or getattr(outcome, 'expectedFailure', None)):
        raise _FailedInRound


def _is_async_case(test_case):
    return getattr(test_case, '_asyncioRunner', None) is not None


@_leakcore.calls_workload
def _run_async(test_case, func, *args, **kwargs):
    """Run the coroutine function *func* to its end on the loop of the
    IsolatedAsyncioTestCase *test_case*.  unittest calls the (synchronous)
    checked method inside the test's context, which a task cannot enter a
    second time: the task runs in a copy of it, and what it set there is
    then set in the test's context.  So asyncSetUp(), the test and
    asyncTearDown() see one another's context variables, as unittest runs
    them all in that one context."""
    context = contextvars.copy_context()
    try:
        return test_case._asyncioRunner.run(func(*args, **kwargs),
                                            context=context)
    finally:
        _adopt_context(context)


_UNSET = object()


def _adopt_context(context):
    # Not a line that calls the workload: the current context's new
    # mappings are the tool's memory.
    for variable, value in context.items():
        if variable.get(_UNSET) is not value:
            variable.set(value)


@_leakcore.calls_workload
def _async_cleanups(test_case):
    """The cleanups of an IsolatedAsyncioTestCase, last added first, the
    async ones on its loop (doCleanups() would enter the test's context
    again)."""
    while test_case._cleanups:
        function, args, kwargs = test_case._cleanups.pop()
        if inspect.iscoroutinefunction(function):
            _run_async(test_case, function, *args, **kwargs)
        else:
            function(*args, **kwargs)


def _call_test_method(test_case, method, *args, **kwargs):
    """Call the test *method* through call_workload(); an async one (of an
    IsolatedAsyncioTestCase) runs to its end on the test's own loop, as
    unittest runs it: not a coroutine made and dropped."""
    call = _leakcore.call_workload
    if inspect.iscoroutinefunction(method) and _is_async_case(test_case):
        return call(_run_async, test_case, method, *args, **kwargs)
    return call(method, *args, **kwargs)


def no_leaks(method=None, **options):
    """Decorate a test method (or any function) so that it is leak checked.

    Use it bare (``@no_leaks``) or with the options of LeakCheck
    (``@no_leaks(rounds=10, threshold=1024)``).  The decorated method runs
    warmup + rounds times and raises the test's failureException (an
    AssertionError) if something leaked.  Its message is the report,
    titled with the test's id(), cut to the top sites with a few frames
    of each; with the option ``full_report=True`` it is the whole report.
    The exception's *report* attribute is the LeakReport.
    """
    if method is None:
        return functools.partial(no_leaks, **options)

    @functools.wraps(method)
    def checked(*args, **kwargs):
        test_case = args[0] if args else None
        check_options = dict(options)
        # Titled as the mixin titles it: the test's id().
        if isinstance(test_case, unittest.TestCase):
            check_options.setdefault('title', test_case.id())
        else:
            check_options.setdefault('title',
                                     getattr(method, '__qualname__', None))
        rounds = None
        if isinstance(test_case, unittest.TestCase):
            # Each round after the first on a fresh instance, set up and
            # torn down (_Rounds); an async test method of an
            # IsolatedAsyncioTestCase runs on the test's loop (the rounds
            # of a plain coroutine function run with asyncio.run():
            # LeakCheck.run()).
            func = rounds = _Rounds(test_case, method, args[1:], kwargs)
        else:
            func = functools.partial(method, *args, **kwargs)
        try:
            _check_or_fail(test_case, func, check_options, rounds)
        except _FailedInRound:
            pass
        except _Returned as returned:
            return returned.value

    checked.__tracemalloc_leak_check__ = True
    return checked


def skip_leak_check(method):
    """Exempt one test method of a LeakCheckMixin class from the check."""
    method.__tracemalloc_leak_check__ = False
    return method


class LeakCheckMixin:
    """Mix into a unittest.TestCase so that each of its tests is checked.

    Class attributes set the options of the check: leak_check_warmup,
    leak_check_rounds, leak_check_extend, leak_check_threshold, leak_check_min_rounds,
    leak_check_nframe (None: the defaults of tracemalloc.leaks), and
    leak_check_full_report (true: the failure message is the whole report,
    not its top sites).  A test decorated with skip_leak_check() (or
    no_leaks, which checks it its own way) is left alone.
    """

    leak_check_warmup = None
    leak_check_rounds = None
    leak_check_extend = None
    leak_check_threshold = None
    leak_check_min_rounds = None
    leak_check_nframe = None
    leak_check_full_report = False

    def leak_check_options(self):
        """The LeakCheck options of this test (override to compute them),
        and full_report."""
        options = {}
        for name in ('warmup', 'rounds', 'extend', 'threshold',
                     'min_rounds', 'nframe'):
            value = getattr(self, f'leak_check_{name}')
            if value is not None:
                options[name] = value
        options['title'] = self.id()
        if self.leak_check_full_report:
            options['full_report'] = True
        return options

    def __init__(self, methodName='runTest'):
        super().__init__(methodName)
        if _MAKING_FRESH.get():
            return          # a fresh instance for a round (_Rounds)
        method = getattr(self, methodName, None)
        if (method is None
                or getattr(method, '__tracemalloc_leak_check__', None)
                is not None):
            return
        # TestCase.run() looks the test method up on the instance: shadow
        # it with the checked version.
        setattr(self, methodName, self._leak_checked(method))

    def _leak_checked(self, method):
        function = getattr(method, '__func__', None)
        if function is None or getattr(method, '__self__', None) is not self:
            function = functools.partial(_call_bound, method)

        @functools.wraps(method)
        def checked():
            rounds = _Rounds(self, function)
            try:
                _check_or_fail(self, rounds, self.leak_check_options(),
                               rounds)
            except _FailedInRound:
                pass
            except _Returned as returned:
                return returned.value
        return checked


@_leakcore.calls_workload
def _call_bound(method, instance):
    # A test method that is not a function of the class (set on the
    # instance): the same callable in every round.
    return method()


def memory_limit(limit):
    """Decorate a test method (or a TestCase class: each of its test*
    methods, inherited ones included) with a memory budget: it fails (the
    test's failureException) when the peak of traced memory of its call,
    over the call's start, exceeds *limit*, a size such as ``"24 MB"``,
    ``"512KiB"`` or an int of bytes.  The message names the budget, the
    peak, and the top sites of a peak snapshot.  Tracing starts if it is
    off.  In sampling mode the peak is an estimate (an upper bound), and
    the message says so.  A bad *limit* raises ValueError at decoration.

    On a class, an inherited test method is limited in this class only
    (its base class is not changed), and this class's budget replaces the
    one that a decorated base class gave it; a budget given to the method
    itself still holds."""
    from tracemalloc import _budget
    size = _budget.parse_size(limit)

    def decorate(target):
        if isinstance(target, type):
            for name in dir(target):
                if not name.startswith('test'):
                    continue
                # The attribute as the class or its nearest base holds it
                # (a staticmethod object, not the function it gives).
                for owner in target.__mro__:
                    if name in vars(owner):
                        method = vars(owner)[name]
                        break
                else:
                    continue
                if not callable(method):
                    continue
                # A base class's budget: this class's replaces it.  (Only
                # the wrapper made below: functools.wraps() copies the
                # attribute to a wrapper of it.)
                unlimited = getattr(method, '_class_budget_of', None)
                if (unlimited is not None
                        and getattr(method, '__wrapped__', None)
                        is unlimited):
                    method = unlimited
                limited = decorate(method)
                limited._class_budget_of = method
                setattr(target, name, limited)
            return target

        def fail_over(measure, args):
            if not measure.over:
                return
            test_case = args[0] if args else None
            title = (test_case.id()
                     if isinstance(test_case, unittest.TestCase)
                     else getattr(target, '__qualname__', '?'))
            roots = [os.path.dirname(unittest.__file__)]
            message = measure.format(
                title, skip_frame=_budget.harness_skipper(roots))
            measure.snapshot = None
            exception = (test_case.failureException
                         if isinstance(test_case, unittest.TestCase)
                         else AssertionError)
            error = exception(message)
            error.peak = measure.peak
            raise error

        if inspect.iscoroutinefunction(target):
            # An async test method (IsolatedAsyncioTestCase): the wrapper
            # is a coroutine function too, so that unittest awaits it on
            # the test's loop; the budget covers the whole await.
            @functools.wraps(target)
            async def limited(*args, **kwargs):
                measure = _budget.Measure(size)
                with measure:
                    result = await target(*args, **kwargs)
                fail_over(measure, args)
                return result
            return limited

        @functools.wraps(target)
        def limited(*args, **kwargs):
            measure = _budget.Measure(size)
            with measure:
                result = target(*args, **kwargs)
            fail_over(measure, args)
            return result
        return limited
    return decorate
