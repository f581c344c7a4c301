"""Leak checks for pytest: each checked test runs in rounds, and the
allocation sites whose memory keeps rising make it fail.

The fork's ``make install`` registers this plugin with pytest (a
``pytest11`` entry point), so it is loaded in every pytest session of the
installed interpreter and of its virtual environments; elsewhere enable it
with ``-p tracemalloc.pytest_plugin``.  It does nothing until asked:

* ``--tracemalloc-leaks`` checks every test that pytest collects (test
  functions and methods, parametrized or not, unittest.TestCase methods,
  doctests), except those marked ``@pytest.mark.no_tracemalloc_leaks``;
* ``@pytest.mark.tracemalloc_leaks`` checks one test, or every test of a
  class or module (``pytestmark``); its keyword arguments are those of
  tracemalloc.leaks.LeakCheck (``warmup``, ``rounds``, ``extend``,
  ``threshold``, ``min_rounds``, ``nframe``, ``ignore``, ``screen``);
* ``--tracemalloc-warmup``, ``--tracemalloc-rounds``,
  ``--tracemalloc-threshold`` (a size: ``1000``, ``1K``, ``2MB``) and
  ``--tracemalloc-nframe`` change the defaults, which a marker's arguments
  override; ``--tracemalloc-full-report`` shows every leaking site with its
  whole traceback instead of the top ones.

A checked test runs warmup + screen times (1 + 1 by default) when nothing
of it grew in its measured run (the screen; one more run when its warm-up
grew code of its own), warmup + rounds times otherwise (warmup + rounds +
extend when some site is suspect after them), each run as pytest runs a
test: setup, call, teardown.  Function-scoped fixtures are set up and torn down
in every round (a fresh tmp_path, monkeypatch undone, caplog emptied), and
so are unittest's setUp(), tearDown() and cleanups; fixtures of a wider
scope (class, module, package, session) stay set up across the rounds and
until the last round's snapshot, so that a leak into one of them counts
even when this test is its last user; then those that the next test does
not share are torn down, once, as after any test (an error there is the
test's teardown error).  A test that fails, errors or skips in some round
gets that round's reports, with a note saying which run it was; it has no
verdict.  After the last round, a leak turns the test's call report into a
failure whose message is the leak report: the top sites, each with its
traceback through the test's code.

A memory budget, ``@pytest.mark.tracemalloc_limit("24 MB")`` or
``--tracemalloc-limit SIZE`` for every test, fails a test whose call's peak
of traced memory, over the call's start, exceeds it (see _Budgets).

The session ends with one line, ``tracemalloc: N checked, N leaked, N not
checked (...)``, whenever some test was to be checked, with what the gate
cost (``gate: 1.6x the tests' own time``); under pytest-xdist the verdicts
and the costs travel with the test reports, so the controller prints it.
The search for what holds a leaking test's objects runs for the sites
that a report shows only, for each test, within a time budget (see
_HolderSearch).
"""

import contextlib
import functools
import os
import re
import sys
import warnings

import pytest
# The runner's building blocks: the protocol below is pytest's own
# runtestprotocol(), run once per round.
from _pytest.runner import CallInfo, call_and_report, show_test_item

from tracemalloc import _budget, _leakcore, leaks

__all__ = []

MARKER = "tracemalloc_leaks"
SKIP_MARKER = "no_tracemalloc_leaks"
LIMIT_MARKER = "tracemalloc_limit"
OPTION_NAMES = ("warmup", "rounds", "extend", "threshold", "min_rounds",
                "nframe", "ignore", "screen")
# The screen of a checked test (LeakCheck's *screen*): after its first run
# (the warm-up) and this many measured runs, a test in which nothing grew
# passes; the others run the whole rounds.  0: no screen.
DEFAULT_SCREEN = 1
# Seconds of holder search ("held by:" lines) per pytest run (per worker
# under xdist); past them, a leak's failure message says the search was
# skipped.
DEFAULT_SEARCH_BUDGET = 10.0
# The options that the command line and pyproject.toml also give, and that
# are not plain values: the marker's ignore adds to theirs.
CONFIG_TABLE = "tracemalloc"            # [tool.tracemalloc]

# What the failure message shows of a leak report, unless
# --tracemalloc-full-report: the biggest sites, the first with up to
# FIRST_SITE_FRAMES frames of its traceback through the test's code, the
# others with their most recent and oldest frames (about 30 lines).
SHOWN_SITES = 3
FIRST_SITE_FRAMES = 6
OTHER_SITE_FRAMES = 2
# Each site shows one chain of what holds its objects (two lines); the
# first site then shows fewer frames, to keep the message's length.
FIRST_SITE_FRAMES_WITH_CHAIN = 4

# Past this many leaking tests, failure messages are cut to their title
# and first site, and the session's summary names a few tests per site.
MAX_REPORTS = 10
# Tests named per site in the session's summary, past MAX_REPORTS.
SUMMARY_TESTS_PER_SITE = 3

# The attribute of a test's teardown report that carries the check's
# outcome, a dict of strings (serialisable: pytest-xdist ships reports from
# its workers to the controller).
VERDICT_ATTRIBUTE = "tracemalloc_verdict"

_marker_error_key = pytest.StashKey()
_leaking_tests_key = pytest.StashKey()
_search_key = pytest.StashKey()

def _size(text):
    """A number of bytes, as the command line takes it: 1000, 64K, 1.5MB
    (the grammar of the memory budgets' sizes, _budget.parse_size())."""
    import argparse
    match = _budget.SIZE_PATTERN.match(text.lower())
    if match is None or match[2] not in _budget.SIZE_SUFFIXES:
        raise argparse.ArgumentTypeError(
            f"must be a size in bytes such as 1000, 64KiB or 2MB, "
            f"not {text!r}")
    value = float(match[1]) * _budget.SIZE_SUFFIXES[match[2]]
    if not value < float('inf'):
        # int() of inf raised OverflowError, a traceback.
        raise argparse.ArgumentTypeError(
            f"must be a size in bytes such as 1000, 64KiB or 2MB, "
            f"not a number this large")
    return int(value)


def _seconds(text):
    """A number of seconds, 0 or more."""
    import argparse
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds (0 or more), not {text!r}")
    return value


def _nframe(text):
    """A number of frames per traceback, as tracemalloc.start() takes it."""
    import argparse
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= leaks.MAX_NFRAME:
        raise argparse.ArgumentTypeError(
            f"must be an integer between 1 and {leaks.MAX_NFRAME}, "
            f"not {text!r}")
    return value


def _count(minimum):
    """The type of a count option: an int of at least *minimum*, or a
    usage error naming the option (not every test erroring at setup)."""
    import argparse

    def count(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(
                f"must be an integer of at least {minimum}, not {text!r}")
        return value
    count.__name__ = f"count>={minimum}"
    return count


def _pattern(text):
    """An ignore pattern: a non-empty fnmatch pattern of FILE:LINE or
    FILE."""
    import argparse
    if not text:
        raise argparse.ArgumentTypeError(
            "must be a non-empty fnmatch pattern of FILE:LINE or FILE, "
            "such as 'pkg/cache.py:*'")
    return text


def pytest_addoption(parser):
    group = parser.getgroup("tracemalloc",
                            "memory leak checks (tracemalloc.leaks)")
    group.addoption(
        "--tracemalloc-leaks", action="store_true", default=False,
        help=f"leak check every test (except those marked {SKIP_MARKER}): "
             f"run it in rounds with fresh function-scoped fixtures, and "
             f"fail it when the memory allocated at some line keeps rising")
    group.addoption(
        "--tracemalloc-warmup", type=_count(0), default=None, metavar="W",
        help=f"warm-up rounds of a leak check (default: "
             f"{leaks.DEFAULT_WARMUP})")
    group.addoption(
        "--tracemalloc-rounds", type=_count(1), default=None, metavar="R",
        help=f"measured rounds of a leak check (default: "
             f"{leaks.DEFAULT_ROUNDS})")
    group.addoption(
        "--tracemalloc-extend", type=_count(0), default=None, metavar="E",
        help=f"rounds added to a leak check when some site looks like a "
             f"leak after the measured rounds, to confirm it; 0: none "
             f"(default: {leaks.DEFAULT_EXTEND})")
    group.addoption(
        "--tracemalloc-screen", type=_count(0), default=None, metavar="S",
        help=f"after a test's first run and S measured runs, a test in "
             f"which no site grew passes without the other rounds; 0: no "
             f"screen, every checked test runs warmup + rounds times "
             f"(default: {DEFAULT_SCREEN})")
    group.addoption(
        "--tracemalloc-threshold", type=_size, default=None,
        metavar="SIZE",
        help=f"minimum growth per round of a leaking site, in bytes; "
             f"suffixes K, KiB, MB... accepted (default: "
             f"{leaks.DEFAULT_THRESHOLD})")
    group.addoption(
        "--tracemalloc-nframe", type=_nframe, default=None, metavar="N",
        help=f"frames per traceback when the check starts tracing "
             f"(default: {leaks.DEFAULT_NFRAME})")
    group.addoption(
        "--tracemalloc-max-reports", type=int, default=MAX_REPORTS,
        metavar="N",
        help=f"past N leaking tests in a session (in each worker under "
             f"xdist), a leaking test's failure message is its title and "
             f"its first site only, and the session's summary names at "
             f"most a few tests per site; 0: no limit (default: "
             f"{MAX_REPORTS})")
    group.addoption(
        "--tracemalloc-ignore", action="append", default=[], type=_pattern,
        metavar="PATTERN",
        help="leave out the leaking sites that match PATTERN, an fnmatch "
             "pattern of FILE:LINE or FILE ('pkg/cache.py:*'); repeatable, "
             "added to the marker's ignore=[...] and to ignore = [...] in "
             "[tool.tracemalloc] of pyproject.toml; each ignored site is "
             "counted in the session line")
    group.addoption(
        "--tracemalloc-report", default=None, metavar="FILE.json",
        help="write every checked test's verdict, rounds and leaking sites "
             "(sizes, counts, tracebacks) to FILE.json (schema: 'JSON "
             "reports' in the tracemalloc docs)")
    group.addoption(
        "--tracemalloc-no-retention", action="store_true", default=False,
        help="do not search for what holds a leaking test's objects (the "
             "'held by:' chains of the failure and of the JSON report)")
    group.addoption(
        "--tracemalloc-search-budget", type=_seconds, default=None,
        metavar="SECONDS",
        help=f"seconds of the session (of each worker under xdist) that "
             f"the search for what holds leaking objects may take; past "
             f"them, a failure says 'holder search skipped: time budget' "
             f"(default: {DEFAULT_SEARCH_BUDGET:g})")
    group.addoption(
        "--tracemalloc-full-report", action="store_true", default=False,
        help=f"show every leaking site with its whole traceback (default: "
             f"the top {SHOWN_SITES} sites, a few frames each)")
    group.addoption(
        "--tracemalloc-limit", type=_limit, default=None, metavar="SIZE",
        help=f"memory budget of every test (a marker {LIMIT_MARKER}(SIZE) "
             f"overrides it): fail a test whose call's peak of traced "
             f"memory, over its start, exceeds SIZE ('24 MB', 512KiB)")


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        f"{MARKER}(warmup=W, rounds=R, extend=E, threshold=BYTES, "
        f"min_rounds=K, "
        f"nframe=N, screen=S): run the test in rounds and fail it when the memory "
        f"allocated at some line keeps rising (tracemalloc.leaks)")
    config.addinivalue_line(
        "markers",
        f"{SKIP_MARKER}: do not leak check this test, even with "
        f"--tracemalloc-leaks")
    config.addinivalue_line(
        "markers",
        f"{LIMIT_MARKER}(SIZE): fail the test when the peak of traced "
        f"memory of its call, over the call's start, exceeds SIZE ('24 "
        f"MB'); None: no limit, whatever --tracemalloc-limit says")
    _project_ignores(config)            # a wrong table: a usage error now
    config.pluginmanager.register(_Summary(config), "tracemalloc-summary")
    config.pluginmanager.register(_Budgets(config), "tracemalloc-budgets")
    import tracemalloc
    sample = tracemalloc.get_sample() if tracemalloc.is_tracing() else None
    if config.getoption("tracemalloc_leaks", False) and sample is not None:
        raise pytest.UsageError(
            f"--tracemalloc-leaks needs exact tracing, and tracemalloc is "
            f"sampling (one sample per {sample} bytes on average): run "
            f"without -X tracemalloc_sample/PYTHONTRACEMALLOCSAMPLE")


# --------------------------------------------------------------------------
# Which tests are checked, and how

def _check_options(item):
    """The LeakCheck options of *item*; None when it is not to be checked.

    Raise ValueError when its marker's arguments are wrong.
    """
    marker = item.get_closest_marker(MARKER)
    config = item.config
    if marker is None and not config.getoption("tracemalloc_leaks"):
        return None
    options = {}
    for name in OPTION_NAMES:
        if name == "ignore":
            continue
        value = config.getoption(f"tracemalloc_{name}", None)
        if value is not None:
            options[name] = value
    ignore = list(_project_ignores(config))
    ignore += config.getoption("tracemalloc_ignore", None) or []
    if marker is not None:
        if marker.args:
            raise ValueError(f"the {MARKER} marker takes keyword arguments "
                             f"only ({', '.join(OPTION_NAMES)}), not "
                             f"{marker.args!r}")
        unknown = set(marker.kwargs) - set(OPTION_NAMES)
        if unknown:
            raise ValueError(f"the {MARKER} marker has no argument "
                             f"{', '.join(sorted(unknown))} (it takes "
                             f"{', '.join(OPTION_NAMES)})")
        marker_options = dict(marker.kwargs)
        marked = marker_options.pop("ignore", ())
        if isinstance(marked, str):
            marked = [marked]
        if not isinstance(marked, (list, tuple)):
            raise ValueError(f"the {MARKER} marker's ignore must be a list "
                             f"of patterns, not {marked!r}")
        ignore += list(marked)
        options.update(marker_options)
    if ignore:
        options["ignore"] = ignore
    options.setdefault("screen", DEFAULT_SCREEN)
    options["title"] = item.nodeid
    if config.getoption("tracemalloc_no_retention", False):
        options["retention"] = False
    options["harness_directories"] = _thread_harness_directories()
    leaks.LeakCheck(**options)          # ValueError on a bad value
    return options


_project_key = pytest.StashKey()


def _project_ignores(config):
    """The ignore patterns of [tool.tracemalloc] in the pyproject.toml of
    the session's root directory (read once, with tomllib).  A wrong table
    is a usage error."""
    cached = config.stash.get(_project_key, None)
    if cached is not None:
        return cached
    patterns = ()
    path = os.path.join(str(config.rootpath), "pyproject.toml")
    if os.path.isfile(path):
        try:
            import tomllib
        except ImportError:         # 3.10 and older: no tomllib
            tomllib = None
        if tomllib is not None:
            with open(path, "rb") as file:
                try:
                    data = tomllib.load(file)
                except tomllib.TOMLDecodeError as error:
                    raise pytest.UsageError(
                        f"{path}: not valid TOML: {error}") from None
            table = data.get("tool", {}).get(CONFIG_TABLE, {})
            value = table.get("ignore", [])
            if (not isinstance(value, list)
                    or not all(isinstance(item, str) and item
                               for item in value)):
                raise pytest.UsageError(
                    f"{path}: [tool.{CONFIG_TABLE}] ignore must be a list "
                    f"of patterns (strings such as 'pkg/cache.py:*'), not "
                    f"{value!r}")
            patterns = tuple(value)
    config.stash[_project_key] = patterns
    return patterns


def _thread_harness_directories():
    """The directories of the harness code that allocates in threads of
    its own while a test runs: pytest-xdist's worker receives its
    controller's messages in an execnet thread, whose allocations are
    neither the test's nor leaks."""
    module = sys.modules.get("execnet")
    if module is None or getattr(module, "__file__", None) is None:
        return ()
    return (os.path.dirname(module.__file__),)


def _verdict(status, reason="", **fields):
    verdict = {"status": status}
    if reason:
        verdict["reason"] = reason
    verdict.update(fields)
    return verdict


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    exempt = item.get_closest_marker(SKIP_MARKER) is not None
    try:
        options = None if exempt else _check_options(item)
    except (TypeError, ValueError) as error:
        item.stash[_marker_error_key] = str(error)
        return _run_unchecked(item, nextitem, _verdict(
            "not checked", f"bad {MARKER} marker"))
    if options is None:
        if exempt and (item.config.getoption("tracemalloc_leaks")
                       or item.get_closest_marker(MARKER) is not None):
            return _run_unchecked(item, nextitem,
                                  _verdict("not checked", SKIP_MARKER))
        return None         # pytest's own protocol
    config = item.config
    if config.getoption("setuponly", False):
        return _run_unchecked(item, nextitem,
                              _verdict("not checked", "--setup-only"))
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid,
                                       location=item.location)
    reports = _run_checked(item, nextitem, options)
    for report in reports:
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid,
                                        location=item.location)
    return True


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    error = item.stash.get(_marker_error_key, None)
    if error is not None:
        pytest.fail(error, pytrace=False)


def _run_unchecked(item, nextitem, verdict):
    """Run *item* once, as pytest would; its teardown report carries
    *verdict* (why it was not checked)."""
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid,
                                       location=item.location)
    reports = _run_round(item, nextitem, True)
    setattr(reports[-1], VERDICT_ATTRIBUTE, verdict)
    for report in reports:
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid,
                                        location=item.location)
    return True


# --------------------------------------------------------------------------
# The rounds

def _run_round(item, nextitem, last, checked=False, caught=None):
    """Run *item* once as pytest's runtestprotocol() does, without logging
    the reports; return them.

    In a round of a check (*checked*) that passed, the teardown stops at
    the item: the fixtures of a wider scope stay set up for the next round
    and for the snapshot that ends this one, the last round's included
    (teardown_exact() keeps the nodes of the "next item"'s chain, here the
    item's parent's); _teardown_wider() tears them down after the check.
    Otherwise (a round that did not pass, a test run once unchecked), the
    teardown is pytest's.

    The warnings of a round of a check are caught, not given to pytest:
    pytest records each warning of a test until the test ends, so those of
    every round would add up (and be reported once per round).  With
    *caught* (a list), it is filled with those of this round, in place of
    the previous round's: _warn_again() gives the warnings of the last
    round to pytest once the check is done.  (Which round is the last is
    not known while it runs: the check adds rounds when a site is
    suspect.)
    """
    if last and caught is None:
        return _run_once(item, nextitem, checked)
    with warnings.catch_warnings(record=True) as log:
        reports = _run_once(item, nextitem, checked)
    if caught is not None:
        caught[:] = log
    return reports


def _warn_again(caught):
    """Emit again the warnings of the last round (see _run_round()), as
    they were first emitted, for pytest to record them as the test's."""
    for message in caught:
        warnings.warn_explicit(message.message, message.category,
                               message.filename, message.lineno,
                               source=message.source)
    caught.clear()


def _call_pytest(when, function, *args, **kwargs):
    """Return function(*args, **kwargs), a function of pytest called as
    the workload, in the phase *when* of a round.

    The call goes through call_workload(), whose line is the workload's
    root, rather than through lines of the plugin registered with
    calls_workload(): the frame objects of the plugin's functions, which a
    test that keeps its frames pins (f_back), are then allocated on lines
    of the tool, not on lines that count as the workload's.  It goes
    through pytest's CallInfo.from_call() (which re-raises any exception
    here), a function without ``*args`` or ``**kwargs``: the arguments
    that a function such as call_and_report() collects in a new tuple or
    dict are then allocated on pytest's line, not on call_workload()'s.
    """
    info = _leakcore.call_workload(
        CallInfo.from_call, functools.partial(function, *args, **kwargs),
        when, BaseException)
    return info.result


def _run_once(item, nextitem, keep_wider):
    if hasattr(item, "_request") and not item._request:
        _call_pytest("setup", item._initrequest)
    reports = [_call_pytest("setup", call_and_report, item, "setup",
                            log=False)]
    if reports[0].passed:
        if item.config.getoption("setupshow", False):
            _call_pytest("setup", show_test_item, item)
        reports.append(_call_pytest("call", call_and_report, item, "call",
                                    log=False))
    if keep_wider and all(report.passed for report in reports):
        nextitem = item.parent
    reports.append(_call_pytest("teardown", call_and_report, item,
                                "teardown", log=False, nextitem=nextitem))
    if hasattr(item, "_request"):
        item._request = False
        item.funcargs = None
    return reports


def _rebuild(table):
    """Give the dict *table* a new table with the same entries, in the
    same order, so that the deleted keys' slots no longer count towards
    its next resize.  The entries stay what they were: growth of the
    test's in them is still seen."""
    entries = list(table.items())
    table.clear()
    table.update(entries)


class _RoundState:
    """What a test run leaves on its item, put back before the next round:
    a rerun starts from what the first run saw.

    * the item's captured output and user properties (record_property),
      which pytest only ever appends to;
    * the item's markers and keywords, which a test adds to with
      request.node.add_marker() (request.applymarker()): kept, each
      round's would be growth in every round;
    * the item's stash (pytest's per-item store: caplog's records, the
      xfail evaluation...), whose keys pytest sets and deletes in every
      run: put back as a new dict, or the deleted keys' slots would make
      its table grow again in some later run, a step that is no leak;
    * a doctest's namespace, which the doctest runner empties when the
      examples are done (pytest then fills it again from a copy of the
      module's namespace made at collection).
    """

    def __init__(self, item):
        self.item = item
        self.user_properties = list(getattr(item, "user_properties", ()))
        markers = getattr(item, "own_markers", None)
        self.markers = list(markers) if isinstance(markers, list) else None
        # NodeKeywords keeps the item's own keywords in a dict, and looks
        # up its parent's for the others.
        keywords = getattr(getattr(item, "keywords", None), "_markers", None)
        self.keywords = (dict(keywords) if isinstance(keywords, dict)
                         else None)
        self.stash = self._stash_storage(item)
        if self.stash is not None:
            self.stash = dict(self.stash)
        dtest = getattr(item, "dtest", None)
        globs = getattr(dtest, "globs", None)
        self.globs = dict(globs) if isinstance(globs, dict) else None

    @staticmethod
    def _stash_storage(item):
        storage = getattr(getattr(item, "stash", None), "_storage", None)
        return storage if isinstance(storage, dict) else None

    def restore(self):
        item = self.item
        if hasattr(item, "user_properties"):
            item.user_properties[:] = self.user_properties
        if self.markers is not None:
            item.own_markers[:] = self.markers
        if self.stash is not None:
            storage = self._stash_storage(item)
            storage.clear()
            storage.update(self.stash)
        # pytest's stack of the nodes set up, which each run pushes the
        # item on and pops it off: rebuilt with the same entries (see
        # _rebuild()), so that every run starts from the same table, not
        # one whose deleted slots make it grow in some later run: a step
        # that is no leak, and would fail the screen.
        _rebuild(item.session._setupstate.stack)
        # pytest's log capture keeps the records of the last phase run
        # (a list that each phase replaces): emptied as each phase would,
        # so that every run replaces the same lists.
        logging_plugin = item.config.pluginmanager.get_plugin(
            "logging-plugin")
        for name in ("caplog_handler", "report_handler"):
            handler = getattr(logging_plugin, name, None)
            if callable(getattr(handler, "reset", None)):
                handler.reset()
        # os.environ's, in which pytest sets and deletes
        # PYTEST_CURRENT_TEST in every run, likewise.
        data = getattr(os.environ, "_data", None)
        if type(data) is dict:
            _rebuild(data)
        if self.keywords is not None:
            keywords = item.keywords._markers
            keywords.clear()
            keywords.update(self.keywords)
        sections = getattr(item, "_report_sections", None)
        if sections is not None:
            sections.clear()
        if self.globs is not None:
            globs = item.dtest.globs
            globs.clear()
            globs.update(self.globs)


def _finalizer_counts(item):
    """{node: number of finalizers} of the nodes set up for *item*."""
    return {node: len(finalizers) for node, (finalizers, _)
            in item.session._setupstate.stack.items()}


def _drop_stale_finalizers(item, counts):
    """Drop the finalizers that the last round of *item* left behind, on
    the fixtures and the nodes of a wider scope, and that only repeat one
    left by an earlier round.

    pytest registers a finalizer each time a test uses a fixture, and keeps
    those of a wider fixture until it is torn down, long after the test
    finished: when a test uses a session-scoped fixture (tmp_path_factory,
    doctest_namespace, a unittest class's setUpClass), the session keeps
    one more finalizer, and the fixture request it holds, per use; when a
    function-scoped fixture depends on a wider one (tmp_path on
    tmp_path_factory), the wider one keeps one more.  Over the rounds of
    one test that would be growth in every round.  The copies dropped here
    would only finish again a fixture that another finalizer finishes.
    *counts* (from _finalizer_counts() before the first round) tells the
    finalizers that were there before the check, which stay.
    """
    for node, (finalizers, _) in item.session._setupstate.stack.items():
        start = counts.get(node, 0)
        if len(finalizers) <= start:
            continue
        finishing = set()
        kept = finalizers[:start]
        for finalizer in finalizers[:start]:
            definition = _finalized_fixture(finalizer)
            if definition is not None:
                finishing.add(id(definition))
        for finalizer in finalizers[start:]:
            definition = _finalized_fixture(finalizer)
            if definition is not None:
                if id(definition) in finishing:
                    continue
                finishing.add(id(definition))
            kept.append(finalizer)
        finalizers[:] = kept
    manager = item.session._fixturemanager
    for definitions in manager._arg2fixturedefs.values():
        for definition in definitions:
            finalizers = getattr(definition, "_finalizers", None)
            if not finalizers or definition.scope == "function":
                continue
            kept = [finalizer for finalizer in finalizers
                    if not _finishes_finished_fixture(finalizer, item)]
            if len(kept) != len(finalizers):
                finalizers[:] = kept


def _finalized_fixture(finalizer):
    """The fixture definition that *finalizer* finishes, if it is one that
    pytest's FixtureRequest registers on a node (a lambda calling
    fixturedef.finish(request=subrequest)); else None."""
    code = getattr(finalizer, "__code__", None)
    if (code is None or code.co_name != "<lambda>"
            or code.co_freevars != ("fixturedef", "subrequest")):
        return None
    try:
        return finalizer.__closure__[0].cell_contents
    except (TypeError, IndexError, ValueError):
        return None


def _finishes_finished_fixture(finalizer, item):
    """Whether *finalizer* is a FixtureDef.finish() of a fixture of *item*
    that is already finished (a function-scoped one, torn down)."""
    if not isinstance(finalizer, functools.partial):
        return False
    owner = getattr(finalizer.func, "__self__", None)
    request = finalizer.keywords.get("request")
    return (getattr(finalizer.func, "__name__", None) == "finish"
            and owner is not None
            and getattr(owner, "cached_result", True) is None
            and getattr(request, "_pyfuncitem", None) is item)


class _HolderSearch:
    """The search for what holds a leaking test's objects, for a session
    (a worker under xdist): only for the sites that a failure message or
    the JSON report shows, and within a time budget.  Each test's sites
    are searched for that test: two tests that leak at the same line may
    keep their objects in different places, so a chain found for one is
    never shown for the other.  Called by the check, while tracing still
    holds the sites' traces."""

    # LeakSite.retention_skipped of a site past the budget: the failure
    # message says "holder search skipped: time budget", the JSON report
    # has it as "retention_skipped".
    SKIPPED = "time budget"

    def __init__(self, config):
        self.config = config
        budget = config.getoption("tracemalloc_search_budget", None)
        self.budget = DEFAULT_SEARCH_BUDGET if budget is None else budget
        self.spent = 0.0
        self.searched = 0           # sites searched
        self.skipped = 0            # sites past the budget

    @classmethod
    def of(cls, config):
        search = config.stash.get(_search_key, None)
        if search is None:
            search = config.stash[_search_key] = cls(config)
        return search

    def shown_sites(self, item, report):
        """The sites of *report* whose chains will be shown."""
        config = self.config
        if (config.getoption("tracemalloc_report", None)
                or config.getoption("tracemalloc_full_report", False)):
            return report.sites
        limit = config.getoption("tracemalloc_max_reports", None)
        leaking = item.session.stash.get(_leaking_tests_key, 0) + 1
        if limit and leaking > limit:
            return []           # the message is cut to the first site
        return report.sites[:SHOWN_SITES]

    def __call__(self, item, report):
        from time import perf_counter
        for site in self.shown_sites(item, report):
            if self.spent >= self.budget:
                site.retention_skipped = self.SKIPPED
                self.skipped += 1
                continue
            start = perf_counter()
            leaks._find_retention([site])
            self.spent += perf_counter() - start
            self.searched += 1


def _run_checked(item, nextitem, options):
    """Run the rounds of *item*'s leak check; return the reports to log,
    the last one carrying the verdict."""
    from time import perf_counter
    begin = perf_counter()
    check = leaks.LeakCheck(**options)
    search = _HolderSearch.of(item.config)
    skipped = search.skipped
    if check.retention is True:
        check.retention = functools.partial(search, item)
    # Ignore patterns match the location that the report shows (a
    # doctest's example by its file and line).
    check._locate = functools.partial(_located, item)
    state = _RoundState(item)
    caught = []             # the warnings of the last round
    counts = _finalizer_counts(item)
    reports = None
    index = 0
    own = 0.0               # the first run: the test's own time
    reruns = [0.0, 0.0, 0.0]    # the others: bodies, fixtures, the rest
    rounds = iter(check)
    try:
        # The collection that ends each round (the check's, when the loop
        # asks for the next round) frees the round's objects: their
        # warnings (a ResourceWarning for a file or an event loop left
        # open in a cycle) are the round's, caught here as _run_round()
        # catches those of the round's run.  Given to pytest, they would
        # be kept in its list of the test's warnings, their objects with
        # them, until the test ends: growth in every round.
        with warnings.catch_warnings(record=True) as collected:
            for index in rounds:
                # Those of the previous round: not the last round's.
                collected.clear()
                # Every round starts from the same state, the first too.
                state.restore()
                start = perf_counter()
                reports = _run_round(item, nextitem, False, checked=True,
                                     caught=caught)
                took = perf_counter() - start
                if index:
                    _add_rerun(reruns, reports, took)
                else:
                    own = took
                if not all(report.passed for report in reports):
                    if all(report.passed for report in reports[:-1]):
                        # Only the item's own teardown ran, and failed.
                        _finish_teardown(item, nextitem, reports[-1])
                    break
                # The last round's too: the snapshot that ends it sees the
                # fixtures of a wider scope set up.
                _drop_stale_finalizers(item, counts)
                # The reports of every round that passed are kept until the
                # next round replaces them: those of the last round are the
                # test's, and which round is the last is not known while it
                # runs (the check adds rounds when a site is suspect).  Kept in
                # the last round only, they were growth in it, enough to make
                # the test suspect; replaced each round, their level is flat.
            else:
                index = check.planned_rounds
            # The last round's (ended by a collection), given to pytest
            # with those of its run.
            caught.extend(collected)
    except leaks.LeakCheckError as error:
        if reports is None:
            # Refused before the first round (tracing is sampling): the
            # test runs once, unchecked, and the reason is its verdict.
            reports = _run_round(item, nextitem, True)
            setattr(reports[-1], VERDICT_ATTRIBUTE,
                    _verdict("not checked", f"no verdict ({error})"))
            return reports
        # The test stopped, cleared or restarted tracing.
        if reports is None or not reports[-1].passed:
            raise
        # The rounds ended with the item's own teardown: the fixtures of
        # a wider scope need theirs.
        reports[-1] = _teardown_wider(item, nextitem, reports[-1])
        setattr(reports[-1], VERDICT_ATTRIBUTE,
                _verdict("not checked", f"no verdict ({error})"))
        return reports
    finally:
        rounds.close()
        _warn_again(caught)
    total = check.planned_rounds
    if index < total:
        return _no_verdict(item, reports, index, total)
    # Every round passed, and ended with the item's own teardown: the
    # final snapshot saw the fixtures of a wider scope alive (a leak into
    # one whose last user is this test is growth like any other).  Now
    # they are torn down as pytest would have at the end of the test.
    reports[-1] = _teardown_wider(item, nextitem, reports[-1])
    report = check.report
    extra = {}
    if report.ignored:
        extra["ignored"] = "\n".join(pattern for pattern, _
                                     in report.ignored)
    if item.config.getoption("tracemalloc_report", None):
        import json
        extra["report"] = json.dumps(_report_dict(item, report))
    if not report:
        verdict = _verdict("checked", runs=str(total), **extra)
    else:
        call = reports[1]
        first = _display_site(item, report.sites[0])
        stash = item.session.stash
        leaking = stash.get(_leaking_tests_key, 0) + 1
        stash[_leaking_tests_key] = leaking
        limit = item.config.getoption("tracemalloc_max_reports", None)
        if limit and leaking > limit:
            text = "\n".join([
                *report.format(limit=0).splitlines()[:1],
                *first.format()[:2],
                f"(message cut: {limit} leaking tests of this session "
                f"were reported in full; every report: "
                f"--tracemalloc-max-reports=0)"])
        else:
            text = _format_report(item, report)
        call.outcome = "failed"
        call.longrepr = text
        _drop_xfail(call)
        verdict = _verdict("leaked", site=first.format()[0],
                           location=f"{first.filename}:{first.lineno}",
                           sites=str(len(report.sites)), runs=str(total),
                           **extra)
    verdict["cost"] = _cost(check, own, reruns, perf_counter() - begin)
    if search.skipped > skipped:
        verdict["search_skipped"] = str(search.skipped - skipped)
    setattr(reports[-1], VERDICT_ATTRIBUTE, verdict)
    return reports


# What a checked test's time went to (the verdict's "cost"): its first run
# ("own", as pytest would run it, traced), the other runs' test bodies,
# their fixtures (setup and teardown), and the rest of those runs (pytest's
# reports, the plugin's work between runs); the check's own work by kind
# (LeakCheck.timings); "total", the whole check.
COST_FIELDS = ("own", "total", "bodies", "fixtures", "runs_other",
               "collect", "totals", "caches", "freeze", "search")


def _add_rerun(reruns, reports, took):
    """Add a run after the first, which took *took* seconds and gave
    *reports*, to *reruns* (bodies, fixtures, the rest)."""
    body = fixtures = 0.0
    for report in reports:
        duration = getattr(report, "duration", 0.0) or 0.0
        if report.when == "call":
            body += duration
        else:
            fixtures += duration
    reruns[0] += body
    reruns[1] += fixtures
    reruns[2] += max(took - body - fixtures, 0.0)


def _cost(check, own, reruns, total):
    """The verdict's "cost": COST_FIELDS=seconds, space-separated."""
    timings = check.timings
    values = [own, total, *reruns,
              *(timings.get(kind, 0.0)
                for kind in ("collect", "totals", "caches", "freeze",
                             "search"))]
    return " ".join(f"{name}={value:.6f}"
                    for name, value in zip(COST_FIELDS, values))


def _drop_xfail(report):
    """Make a leaking test's failed call *report* an ordinary failure.

    A test marked xfail (not strict) that passes is an XPASS: its call
    report passed and carries ``wasxfail``.  pytest reads that attribute
    as "an expected outcome": a report that failed with it counts for no
    exit status, no -x / --maxfail, and junitxml records it as skipped.
    The leak is not the failure that the marker expected, so the report
    loses the attribute, and says what it was.  (A strict XPASS already
    failed in its first round; an xfail that failed as expected has no
    verdict: neither gets here.)
    """
    reason = getattr(report, "wasxfail", None)
    if reason is None:
        return
    del report.wasxfail
    note = "the test is marked xfail, and passed (XPASS): the leak fails it"
    if reason:
        note += f"; the marker's reason: {reason}"
    report.sections.append(("tracemalloc leak check", note))


def _passed_reports(item):
    """New reports of a round of *item* that passed (setup, call and
    teardown), for a round whose own reports were dropped."""
    from _pytest.reports import TestReport
    return [TestReport.from_item_and_call(
                item, CallInfo.from_call(lambda: None, when))
            for when in ("setup", "call", "teardown")]


def _teardown_wider(item, nextitem, report):
    """Tear down the fixtures and nodes of a wider scope that *nextitem*
    does not share, after the rounds of a check whose last teardown
    stopped at the item; return the test's teardown report: *report*, the
    last round's, or when this teardown fails (and *report* passed) a
    failed teardown report of its error, as pytest's own teardown gives.

    The output is captured into the test's report sections as in pytest's
    teardown phase.  pytest's own pytest_runtest_teardown hooks are not
    called a second time (its logging plugin's has already dropped the
    item's log handlers).
    """
    from _pytest.outcomes import Exit

    def teardown():
        item.session._setupstate.teardown_exact(nextitem)

    capture = item.config.pluginmanager.getplugin("capturemanager")
    context = (capture.item_capture("teardown", item)
               if capture is not None and hasattr(capture, "item_capture")
               else contextlib.nullcontext())
    with context:
        info = CallInfo.from_call(teardown, "teardown",
                                  reraise=(Exit, KeyboardInterrupt))
    if info.excinfo is None or not report.passed:
        if info.excinfo is not None:
            report.sections.append(
                ("tracemalloc leak check",
                 f"tearing down the fixtures of a wider scope also failed: "
                 f"{info.excinfo.typename}: {info.excinfo.value}"))
        return report
    return item.ihook.pytest_runtest_makereport(item=item, call=info)


def _finish_teardown(item, nextitem, report):
    """Tear down the fixtures of a wider scope that the next item does not
    share, after a round whose teardown stopped at the item; an error is
    added to the teardown *report*."""
    try:
        item.session._setupstate.teardown_exact(nextitem)
    except Exception as error:
        report.sections.append(
            ("tracemalloc leak check",
             f"tearing down the fixtures of a wider scope also failed: "
             f"{type(error).__name__}: {error}"))


def _no_verdict(item, reports, index, total):
    """The reports of a check stopped in round *index* (0-based) by a
    failure, an error or a skip."""
    failed = [report for report in reports if report.failed]
    if failed:
        reason = (f"failed in run {index + 1}" if index
                  else "failed")
    elif any(hasattr(report, "wasxfail") for report in reports):
        reason = "xfailed"
    else:
        reason = "skipped"
    if index and failed:
        note = (f"The leak check runs this test {total} times, each time "
                f"with fresh function-scoped fixtures; it passed "
                f"{index} time{'s' if index > 1 else ''}, then failed in "
                f"run {index + 1} (above), so it has no leak verdict.  A "
                f"test that passes alone but fails when run again depends "
                f"on state that an earlier run left behind, outside its "
                f"fixtures.  To leave it unchecked: "
                f"@pytest.mark.{SKIP_MARKER}.")
        for report in failed:
            report.sections.append(("tracemalloc leak check", note))
    setattr(reports[-1], VERDICT_ATTRIBUTE,
            _verdict("not checked", reason))
    return reports


# --------------------------------------------------------------------------
# The failure message

def _harness_directories():
    """Directories of the code that runs a test: pytest's, pluggy's, and
    the standard library's unittest and doctest."""
    import doctest
    import unittest
    import pluggy
    import _pytest
    roots = [os.path.dirname(module.__file__)
             for module in (_pytest, pluggy, unittest)]
    return roots, {os.path.abspath(doctest.__file__)}


_DOCTEST_FILENAME = re.compile(r"<doctest (?P<name>.+)\[(?P<index>\d+)\]>$")


def _doctest_location(item, filename, lineno):
    """Where the example that a '<doctest NAME[I]>' frame runs is written:
    (its file, line), or None."""
    match = _DOCTEST_FILENAME.match(filename)
    dtest = getattr(item, "dtest", None)
    if match is None or dtest is None or match["name"] != dtest.name:
        return None
    index = int(match["index"])
    if (not 0 <= index < len(dtest.examples) or dtest.filename is None
            or dtest.lineno is None):
        return None
    example = dtest.examples[index]
    return dtest.filename, dtest.lineno + example.lineno + lineno


def _located(item, filename, lineno):
    """(filename, lineno) as the report shows it: a doctest example's by
    its file and line."""
    return _doctest_location(item, filename, lineno) or (filename, lineno)


def _site_dict(item, site):
    """site.as_dict(), with the locations that the failure message and
    junitxml show (a doctest example's file and line)."""
    data = site.as_dict()
    data["filename"], data["lineno"] = _located(item, site.filename,
                                                site.lineno)
    data["traceback"] = [list(_located(item, filename, lineno))
                         for filename, lineno in data["traceback"]]
    return data


def _report_dict(item, report):
    """report.as_dict() with each site where the report shows it."""
    data = report.as_dict()
    data["sites"] = [_site_dict(item, site) for site in report.sites]
    data["ignored"] = [dict(_site_dict(item, site), pattern=pattern)
                       for pattern, site in report.ignored]
    return data


def _display_frames(item, traceback):
    """The raw frames (most recent first) of *traceback* to show: the
    harness's frames at the oldest end left out, doctest examples named by
    their file and line."""
    roots, files = _harness_directories()

    def is_harness(filename):
        if filename in files:
            return True
        return any(filename.startswith(root + os.sep) for root in roots)

    frames = [(frame.filename, frame.lineno) for frame in traceback]
    own = _leakcore.package_files()
    start = 0                               # oldest first
    while start < len(frames) - 1 and (frames[start][0] in own
                                       or is_harness(frames[start][0])):
        start += 1
    shown = []
    for filename, lineno in reversed(frames[start:]):
        location = _doctest_location(item, filename, lineno)
        shown.append(location if location is not None
                     else (filename, lineno))
    return tuple(shown)


def _display_site(item, site):
    """*site* as the failure message shows it."""
    filename, lineno = site.filename, site.lineno
    location = _doctest_location(item, filename, lineno)
    if location is not None:
        filename, lineno = location
    from tracemalloc import Traceback
    shown = leaks.LeakSite(filename, lineno, site.sizes, site.counts,
                           Traceback(_display_frames(item, site.traceback)),
                           site.domain, site.retention)
    # A search that failed is said in the message too (s38 review, G3).
    shown.retention_error = getattr(site, 'retention_error', None)
    shown.retention_skipped = getattr(site, 'retention_skipped', None)
    return shown


def _format_report(item, report):
    if item.config.getoption("tracemalloc_full_report", False):
        return report.format(limit=None)
    sites = [_display_site(item, site)
             for site in report.sites[:SHOWN_SITES]]
    # The title counts every leaking site, shown or not.
    lines = report.format(limit=0).splitlines()[:1]
    for index, site in enumerate(sites):
        frames = FIRST_SITE_FRAMES if index == 0 else OTHER_SITE_FRAMES
        if index == 0 and site.retention is not None:
            # Its chain's two lines take the place of two frames.
            frames = FIRST_SITE_FRAMES_WITH_CHAIN
        lines.extend(site.format(frames, chains=1))
    rest = report.sites[SHOWN_SITES:]
    if rest:
        size = sum(site.size for site in rest) / report.rounds
        lines.append(f"{len(rest)} other leaking site"
                     f"{'s' if len(rest) > 1 else ''}: "
                     f"size={_leakcore.format_size(size)} per round")
    lines.append("(every site, with its whole traceback through pytest's "
                 "own frames: --tracemalloc-full-report)")
    return "\n".join(lines)


# --------------------------------------------------------------------------
# The end of the session

class _Summary:
    """Collects the verdicts from the test reports (under pytest-xdist, on
    the controller, from the workers' reports) and prints them last."""

    def __init__(self, config):
        self.config = config
        self.checked = 0
        self.leaked = []            # (nodeid, FILE:LINE, first site line, sites)
        self.not_checked = {}       # reason: count
        self.runs = 0               # runs of the checked tests
        self.ignored = {}           # pattern: leaking sites it left out
        self.report_path = config.getoption("tracemalloc_report", None)
        self.json_tests = []        # the JSON report's "tests"
        self.cost = dict.fromkeys(COST_FIELDS, 0.0)  # seconds, summed
        self.search_skipped = 0     # sites past the search's time budget

    def pytest_runtest_logreport(self, report):
        verdict = getattr(report, VERDICT_ATTRIBUTE, None)
        if not verdict or report.when != "teardown":
            return
        status = verdict.get("status")
        if status in ("checked", "leaked"):
            self.runs += int(verdict.get("runs", 0))
            for field in verdict.get("cost", "").split():
                name, _, value = field.partition("=")
                if name in self.cost:
                    self.cost[name] += float(value)
            self.search_skipped += int(verdict.get("search_skipped", 0))
        for pattern in filter(None, verdict.get("ignored", "").split("\n")):
            self.ignored[pattern] = self.ignored.get(pattern, 0) + 1
        if self.report_path:
            self._record_json(report.nodeid, verdict)
        if status == "checked":
            self.checked += 1
        elif status == "leaked":
            self.checked += 1
            site = verdict.get("site", "")
            location = verdict.get("location") or site.partition(
                ": size=")[0]
            self.leaked.append((report.nodeid, location, site,
                                int(verdict.get("sites", 1))))
        else:
            reason = verdict.get("reason", "unknown")
            self.not_checked[reason] = self.not_checked.get(reason, 0) + 1

    def _record_json(self, nodeid, verdict):
        import json
        entry = {"nodeid": nodeid, "verdict": verdict.get("status")}
        if "reason" in verdict:
            entry["reason"] = verdict["reason"]
        if "runs" in verdict:
            entry["runs"] = int(verdict["runs"])
        report = verdict.get("report")
        if report:
            entry["report"] = json.loads(report)
        self.json_tests.append(entry)

    def _write_json(self, terminalreporter):
        import json
        data = {
            "schema": "tracemalloc-pytest-report",
            "version": 1,
            "summary": {
                "checked": self.checked,
                "leaked": len(self.leaked),
                "not_checked": sum(self.not_checked.values()),
                "not_checked_reasons": dict(self.not_checked),
                "runs": self.runs,
                "ignored": dict(self.ignored),
            },
            "tests": self.json_tests,
        }
        try:
            with open(self.report_path, "w", encoding="utf-8") as file:
                json.dump(data, file, indent=1)
                file.write("\n")
        except OSError as error:
            terminalreporter.write_line(
                f"tracemalloc: cannot write the JSON report "
                f"{self.report_path}: {error}", red=True)
            return
        terminalreporter.write_line(
            f"tracemalloc: JSON report written to {self.report_path}")

    def _write_sites(self, terminalreporter):
        """The leaking sites, each first site of a leaking test once (as
        the first of its tests reports it), with the tests that share it:
        pytest's own short summary already lists the failed tests, one a
        line."""
        by_site = {}
        for nodeid, location, site, _ in self.leaked:
            by_site.setdefault(location, (site, []))[1].append(nodeid)
        count = len(self.leaked)
        limit = self.config.getoption("tracemalloc_max_reports", None)
        cut = bool(limit) and count > limit
        terminalreporter.section(
            f"tracemalloc: {count} leaking test{'s' if count > 1 else ''}, "
            f"by first leaking site")
        order = sorted(by_site.items(),
                       key=lambda pair: (-len(pair[1][1]), pair[0]))
        shown = order[:limit] if cut else order
        for location, (site, nodeids) in shown:
            terminalreporter.write_line(site)
            names = nodeids
            if cut and len(nodeids) > SUMMARY_TESTS_PER_SITE:
                names = nodeids[:SUMMARY_TESTS_PER_SITE]
            tests = ", ".join(names)
            if len(names) < len(nodeids):
                tests += f" and {len(nodeids) - len(names)} more"
            terminalreporter.write_line(
                f"    first site of {len(nodeids)} test"
                f"{'s' if len(nodeids) > 1 else ''}: {tests}")
        rest = order[len(shown):]
        if rest:
            tests = sum(len(nodeids) for _, (_, nodeids) in rest)
            terminalreporter.write_line(
                f"{len(rest)} other site{'s' if len(rest) > 1 else ''}, "
                f"first of {tests} test{'s' if tests > 1 else ''} "
                f"(every site: --tracemalloc-max-reports=0)")

    def summary_line(self):
        not_checked = sum(self.not_checked.values())
        line = (f"tracemalloc: {self.checked} checked, {len(self.leaked)} "
                f"leaked, {not_checked} not checked")
        if not_checked:
            reasons = sorted(self.not_checked.items(),
                             key=lambda pair: (-pair[1], pair[0]))
            line += " (" + ", ".join(f"{count} {reason}"
                                     for reason, count in reasons) + ")"
        if self.ignored:
            # Nothing is hidden silently: each ignored site is counted.
            count = sum(self.ignored.values())
            line += (f"; {count} leaking site{'s' if count > 1 else ''} "
                     f"ignored (" + ", ".join(
                         f"{pattern}: {number}" for pattern, number
                         in sorted(self.ignored.items())) + ")")
        if self.checked and self.runs:
            # How much the adaptive rounds cost: a test runs warmup +
            # rounds times, more when a site was suspect.
            line += f"; {self.runs / self.checked:.1f} runs per checked test"
        cost = self.cost
        if cost["own"] > 0:
            # What the gate cost, as a factor of the checked tests' own
            # time (their first runs), and the holder search's share.
            factor = cost["total"] / cost["own"]
            line += f"; gate: {factor:.1f}x the tests' own time"
            if cost["search"] or self.search_skipped:
                share = cost["search"] / cost["total"] * 100
                line += f", holder search {share:.0f}% of it"
                if self.search_skipped:
                    line += (f" ({self.search_skipped} site"
                             f"{'s' if self.search_skipped > 1 else ''} "
                             f"skipped: time budget)")
        return line

    def cost_lines(self):
        """Where the checked tests' time went (-v), in seconds."""
        cost = self.cost
        other = cost["total"] - sum(cost[name] for name in COST_FIELDS
                                    if name != "total")
        parts = [("first runs", cost["own"]),
                 ("other runs' bodies", cost["bodies"]),
                 ("their fixtures", cost["fixtures"]),
                 ("their pytest reports", cost["runs_other"]),
                 ("collections", cost["collect"]),
                 ("live totals", cost["totals"]),
                 ("caches", cost["caches"]),
                 ("freeze", cost["freeze"]),
                 ("holder search", cost["search"]),
                 ("plugin", max(other, 0.0))]
        return [f"tracemalloc: gate cost {cost['total']:.2f} s: " + ", ".join(
            f"{name} {value:.2f} s" for name, value in parts)]

    def pytest_terminal_summary(self, terminalreporter):
        enabled = (self.config.getoption("tracemalloc_leaks")
                   or self.checked or self.not_checked)
        if not enabled:
            return
        if self.leaked:
            self._write_sites(terminalreporter)
        if self.report_path and not hasattr(self.config, "workerinput"):
            self._write_json(terminalreporter)
        if self.config.getoption("verbose", 0) > 0 and self.cost["own"]:
            for line in self.cost_lines():
                terminalreporter.write_line(line)
        terminalreporter.write_sep("-", self.summary_line())


# --------------------------------------------------------------------------
# Memory budgets

def _limit(text):
    """--tracemalloc-limit's SIZE."""
    import argparse
    try:
        return _budget.parse_size(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _item_limit(item):
    """The memory limit of *item* in bytes, or None; ValueError when its
    marker is wrong."""
    marker = item.get_closest_marker(LIMIT_MARKER)
    if marker is None:
        return item.config.getoption("tracemalloc_limit", None)
    if len(marker.args) != 1 or marker.kwargs:
        raise ValueError(f"the {LIMIT_MARKER} marker takes one argument, "
                         f"a size such as '24 MB' (or None), not "
                         f"{marker.args!r} {marker.kwargs!r}")
    if marker.args[0] is None:
        return None
    return _budget.parse_size(marker.args[0])


_limit_key = pytest.StashKey()


class _Budgets:
    """The memory budget of each test: the peak of traced memory of its
    call, over the call's start.  Under a leak check, the first round (a
    warm-up round) is the one measured, and the budget's failure is added
    to the call report once the check is done: the rounds and the leak
    verdict are not changed.  The measures travel with the reports (the
    call report fails; the teardown report carries the peak as user
    properties, as record_property() would, for --junitxml)."""

    def __init__(self, config):
        self.config = config
        self.measures = {}          # nodeid: the first round's Measure

    def pytest_runtest_logstart(self, nodeid, location):
        self.measures.pop(nodeid, None)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        try:
            item.stash[_limit_key] = _item_limit(item)
        except ValueError as error:
            item.stash[_limit_key] = None
            pytest.fail(str(error), pytrace=False)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        limit = item.stash.get(_limit_key, None)
        if limit is None or item.nodeid in self.measures:
            yield
            return
        measure = _budget.Measure(limit)
        with measure:
            yield
        if measure.peak is not None:
            if measure.over:
                roots, _ = _harness_directories()
                measure.message = measure.format(
                    item.nodeid,
                    skip_frame=_budget.harness_skipper(roots))
            measure.snapshot = None
            self.measures[item.nodeid] = measure

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report):
        verdict = getattr(report, VERDICT_ATTRIBUTE, None)
        if verdict and report.when == "teardown":
            _verdict_properties(report, verdict)
        measure = self.measures.get(report.nodeid)
        if measure is None:
            return
        if report.when == "call" and measure.over:
            if report.passed:
                report.outcome = "failed"
                report.longrepr = measure.message
                if hasattr(report, "wasxfail"):
                    # Not the failure that the xfail marker expected.
                    del report.wasxfail
            elif report.failed:
                report.sections.append(("tracemalloc memory limit",
                                        measure.message))
        if report.when == "teardown":
            report.user_properties.extend([
                ("tracemalloc_peak", measure.peak),
                ("tracemalloc_limit", measure.limit),
                ("tracemalloc_peak_over_limit", measure.over),
                ("tracemalloc_peak_estimated", measure.estimated),
            ])
            self.measures.pop(report.nodeid, None)


def _verdict_properties(report, verdict):
    """The leak check's verdict as user properties of the teardown
    *report* (junitxml writes them as <property> elements): once, in the
    worker under xdist (the controller sees them already there)."""
    properties = report.user_properties
    if any(name == "tracemalloc_verdict" for name, _ in properties):
        return
    properties.append(("tracemalloc_verdict", verdict.get("status")))
    for key in ("reason", "runs", "sites", "location"):
        if key in verdict:
            properties.append((f"tracemalloc_{key}", verdict[key]))

