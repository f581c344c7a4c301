"""An unbounded functools.lru_cache called with a new argument each time."""

import functools
import itertools

_requests = itertools.count()


@functools.lru_cache(maxsize=None)
def render(item_id):
    return ("<li>item %d</li>" % item_id) * 20  # LEAK


def run():
    return len(render(next(_requests)))


def reset():
    render.cache_clear()
