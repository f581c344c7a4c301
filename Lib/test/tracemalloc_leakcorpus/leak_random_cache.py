"""A random bounded cache, as in clean_random_cache (an instance of its
own), with a leak beside it: each call also keeps a record that is never
dropped.  The leak must be found through the cache's ups and downs, with
each of the fixed SEEDS."""

from test.tracemalloc_leakcorpus.clean_random_cache import RandomCache, SEEDS

_cache = RandomCache()
seed = _cache.seed
_history = []


def run():
    _cache.run()
    _history.append(b"request %d" % len(_history) * 40)  # LEAK


def reset():
    _history.clear()
