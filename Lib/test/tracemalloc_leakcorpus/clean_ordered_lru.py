"""An LRU cache of 8 entries made of a collections.OrderedDict, fed one
new key per call: once full, each call evicts the oldest entry
(popitem(last=False)).  As for clean_evicting_lru, the dict is rebuilt
once at a bigger size in the rounds added to confirm a suspect site, but
the number of blocks stops rising once it is full: no leak."""

import collections
import itertools

_keys = itertools.count()
_cache = collections.OrderedDict()
MAXSIZE = 8


def get(key):
    try:
        _cache.move_to_end(key)
        return _cache[key]
    except KeyError:
        value = _cache[key] = "<li>%d</li>" % key
        if len(_cache) > MAXSIZE:
            _cache.popitem(last=False)
        return value


def run():
    get(next(_keys))


def reset():
    global _keys
    _cache.clear()
    _keys = itertools.count()
