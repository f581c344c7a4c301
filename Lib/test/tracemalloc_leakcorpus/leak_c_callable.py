"""A C callable given directly as the workload: the list method extend,
through functools.partial, adds 200 items to a list on every call.  No
Python frame of the target runs: the memory is allocated under the
checker's call line, which must count as the workload's."""

import functools

_items = []

run = functools.partial(_items.extend, range(200))


def reset():
    _items.clear()
