"""Targets that break tracing under the checker: with tracing stopped,
its traces cleared or restarted, the checker cannot see any growth, and
must give no verdict (an error) instead of a clean one."""

import tracemalloc

_kept = []


def run():
    """Stop tracing (a leak too: the checker cannot see it)."""
    _kept.append(bytes(1000))
    tracemalloc.stop()


def clear():
    _kept.append(bytes(1000))
    tracemalloc.clear_traces()


def restart():
    _kept.append(bytes(1000))
    limit = tracemalloc.get_traceback_limit()
    tracemalloc.stop()
    tracemalloc.start(limit)


def reset():
    _kept.clear()
