"""functools.lru_cache(maxsize=8) fed one new key per call: full after 8
calls, it then evicts one entry per call.  Each eviction leaves a dummy
slot in the cache's dict; when the dummies fill its table, the dict is
rebuilt once at a bigger size, on the caller's line, around the 11th call
(in the rounds added to confirm a suspect site), and the new entries'
strings grow by a byte when the keys gain a digit.  Its blocks stop
rising once it is full: no leak."""

import functools
import itertools

_keys = itertools.count()


@functools.lru_cache(maxsize=8)
def render(item_id):
    return "<li>%d</li>" % item_id


def run():
    render(next(_keys))


def reset():
    global _keys
    render.cache_clear()
    _keys = itertools.count()
