"""A bounded cache under random load: each call looks up 4 to 8 random
keys out of 40; a miss stores a value of a random size, evicting a random
entry when the cache holds 8.  The first call fills it (in the warm-up
rounds, with tracing on, so that the values that it later evicts were
traced); then it keeps 8 entries whose total size goes up and down at
random.  seed() picks one of SEEDS, the fixed seeds that the tests run it
with: the first four, and four (51 and on) with which the previous rule of
the checker, growth in 4 of 5 rounds, took the cache for a leak."""

import random

SEEDS = (0, 1, 2, 3, 51, 59, 81, 105)


class RandomCache:
    capacity = 8

    def __init__(self):
        self._random = random.Random()
        self._entries = {}
        self.seed(SEEDS[0])

    def seed(self, value):
        """Start again, empty, with the random sequence of *value*."""
        self._random.seed(value)
        self._entries.clear()

    def _value(self):
        return bytes(self._random.randint(200, 2000))

    def run(self):
        entries = self._entries
        if not entries:
            for key in self._random.sample(range(40), self.capacity):
                entries[key] = self._value()
        for _ in range(self._random.randint(4, 8)):
            key = self._random.randrange(40)
            if key not in entries:
                del entries[self._random.choice(list(entries))]
                entries[key] = self._value()


_cache = RandomCache()
seed = _cache.seed
run = _cache.run
