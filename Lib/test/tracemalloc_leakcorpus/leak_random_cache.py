"""The random bounded cache of clean_random_cache, with a leak beside it:
each call also keeps a record that is never dropped.  The leak must be
found through the cache's ups and downs, with each of the fixed SEEDS."""

from test.tracemalloc_leakcorpus import clean_random_cache

SEEDS = clean_random_cache.SEEDS
_history = []


def seed(value):
    clean_random_cache.seed(value)


def run():
    clean_random_cache.run()
    _history.append(b"request %d" % len(_history) * 40)  # LEAK


def reset():
    _history.clear()
