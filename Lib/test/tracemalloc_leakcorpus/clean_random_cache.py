"""A bounded cache under random load: each call looks up 4 to 8 random
keys out of 40; a miss stores a value of a random size, evicting a random
entry when the cache holds 8.  Full after the warm-up, it keeps 8 entries
whose total size goes up and down at random.  seed() picks one of SEEDS,
the fixed seeds that the tests run it with."""

import random

CAPACITY = 8
SEEDS = tuple(range(8))

_random = random.Random(SEEDS[0])
_cache = {}


def seed(value):
    """Start again, with the random sequence of *value*."""
    _random.seed(value)
    _cache.clear()


def run():
    for _ in range(_random.randint(4, 8)):
        key = _random.randrange(40)
        if key not in _cache:
            if len(_cache) >= CAPACITY:
                del _cache[_random.choice(list(_cache))]
            _cache[key] = bytes(_random.randint(200, 2000))
