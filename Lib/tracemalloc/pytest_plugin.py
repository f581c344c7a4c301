"""Leak checks for pytest: ``python -m pytest -p tracemalloc.pytest_plugin``.

* ``@pytest.mark.tracemalloc_leaks`` (or ``tracemalloc_leaks(rounds=10,
  threshold=1024)``, with the options of tracemalloc.leaks.LeakCheck)
  checks one test;
* ``--tracemalloc-leaks`` checks every test, except those marked
  ``@pytest.mark.no_tracemalloc_leaks``;
* ``--tracemalloc-warmup``, ``--tracemalloc-rounds``,
  ``--tracemalloc-threshold`` and ``--tracemalloc-nframe`` change the
  defaults, which a marker's arguments override.

A checked test function runs warmup + rounds times with the same fixtures
(they are set up once, as for any test), and fails with the leak report as
its message when some allocation site grew in (almost) every measured
round.  The end of the session lists the tests that leaked, each with its
biggest leaking site.  To enable the plugin for a project, add
``addopts = -p tracemalloc.pytest_plugin`` to its pytest configuration, or
``pytest_plugins = ["tracemalloc.pytest_plugin"]`` to its root conftest.py.
"""

import functools
import inspect

import pytest

from tracemalloc import leaks

MARKER = "tracemalloc_leaks"
SKIP_MARKER = "no_tracemalloc_leaks"

_leaking_tests_key = pytest.StashKey()


def pytest_addoption(parser):
    group = parser.getgroup("tracemalloc",
                            "memory leak checks (tracemalloc)")
    group.addoption(
        "--tracemalloc-leaks", action="store_true", default=False,
        help="leak check every test (except those marked "
             f"{SKIP_MARKER})")
    group.addoption(
        "--tracemalloc-warmup", type=int, default=None, metavar="W",
        help=f"warm-up rounds of a leak check (default: "
             f"{leaks.DEFAULT_WARMUP})")
    group.addoption(
        "--tracemalloc-rounds", type=int, default=None, metavar="R",
        help=f"measured rounds of a leak check (default: "
             f"{leaks.DEFAULT_ROUNDS})")
    group.addoption(
        "--tracemalloc-threshold", type=int, default=None, metavar="BYTES",
        help=f"minimum growth per round of a leaking site (default: "
             f"{leaks.DEFAULT_THRESHOLD})")
    group.addoption(
        "--tracemalloc-nframe", type=int, default=None, metavar="N",
        help=f"frames per traceback when the check starts tracing "
             f"(default: {leaks.DEFAULT_NFRAME})")


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        f"{MARKER}(warmup=W, rounds=R, threshold=BYTES, min_rounds=K): "
        f"run the test in rounds and fail it when an allocation site "
        f"grows in (almost) every round (tracemalloc.leaks)")
    config.addinivalue_line(
        "markers",
        f"{SKIP_MARKER}: do not leak check this test, even with "
        f"--tracemalloc-leaks")
    config.stash[_leaking_tests_key] = []


def _check_options(item):
    """The LeakCheck options for *item*, or None if it is not checked."""
    marker = item.get_closest_marker(MARKER)
    config = item.config
    if marker is None:
        if (not config.getoption("tracemalloc_leaks")
                or item.get_closest_marker(SKIP_MARKER) is not None):
            return None
    options = {}
    for name in ("warmup", "rounds", "threshold", "nframe"):
        value = config.getoption(f"tracemalloc_{name}")
        if value is not None:
            options[name] = value
    if marker is not None:
        if marker.args:
            raise TypeError(f"the {MARKER} marker takes keyword arguments "
                            f"only")
        options.update(marker.kwargs)
    options.setdefault("title", item.nodeid)
    return options


@leaks._calls_workload
def _call_test(function, arguments):
    function(**arguments)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    options = _check_options(pyfuncitem)
    if options is None:
        return None
    function = pyfuncitem.obj
    if (inspect.iscoroutinefunction(function)
            or inspect.isasyncgenfunction(function)):
        # Async tests belong to their own plugin (pytest-asyncio...).
        return None
    arguments = {name: pyfuncitem.funcargs[name]
                 for name in pyfuncitem._fixtureinfo.argnames}
    report = leaks.check(functools.partial(_call_test, function, arguments),
                         **options)
    if report:
        pyfuncitem.config.stash[_leaking_tests_key].append(
            (pyfuncitem.nodeid, report))
        pytest.fail(report.format(), pytrace=False)
    return True


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    leaking = config.stash.get(_leaking_tests_key, [])
    if not leaking:
        return
    plural = "s" if len(leaking) > 1 else ""
    terminalreporter.section(f"tracemalloc: {len(leaking)} leaking "
                             f"test{plural}")
    for nodeid, report in leaking:
        site = report.sites[0]
        more = len(report.sites) - 1
        terminalreporter.write_line(f"{nodeid}")
        terminalreporter.write_line(f"    {site.format()[0]}")
        if more:
            terminalreporter.write_line(f"    and {more} other leaking "
                                        f"site{'s' if more > 1 else ''}")
