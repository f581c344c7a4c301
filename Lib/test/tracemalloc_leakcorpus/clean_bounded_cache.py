"""A bounded functools.lru_cache under a stream of new arguments: full
after the warm-up, it evicts as much as it adds."""

import functools
import itertools

_requests = itertools.count()


@functools.lru_cache(maxsize=64)
def render(item_id):
    return ("<li>item %d</li>" % item_id) * 20


def run():
    for _ in range(100):
        render(next(_requests))
