"""FIFO caches made of plain dicts, of 6 to 11 entries, each fed one new
key per call: once full, each call deletes the oldest key.  The largest
is full after 11 calls, in the rounds added to confirm a suspect site;
the dummy slots that the deletions leave make each dict rebuild its table
once at a bigger size.  Their blocks stop rising once they are full: no
leak."""

import itertools

SIZES = range(6, 12)
_keys = itertools.count()
_caches = [({}, size) for size in SIZES]


def put(cache, size, key):
    cache[key] = bytes(100)
    if len(cache) > size:
        del cache[next(iter(cache))]


def run():
    key = next(_keys)
    for cache, size in _caches:
        put(cache, size, key)


def reset():
    global _keys
    for cache, _ in _caches:
        cache.clear()
    _keys = itertools.count()
