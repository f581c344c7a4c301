"""List, dict and set building.

Comprehensions, append loops, dict grouping (setdefault / get), dict merges,
set algebra, sorting with keys and tuple packing: the bread and butter of
data-munging Python.
"""
from _common import main


def one_round(seed, size):
    nums = [(seed * 7919 + i * 104729) % 100003 for i in range(size)]
    pairs = list(zip(nums, range(size)))
    pairs.sort(key=lambda p: (p[0] % 101, p[1]))
    groups = {}
    for value, idx in pairs:
        groups.setdefault(value % 257, []).append(idx)
    counts = {}
    for value in nums:
        key = value % 1000
        counts[key] = counts.get(key, 0) + 1
    merged = {**counts, **{k: len(v) for k, v in groups.items()}}
    evens = {v for v in nums if v % 2 == 0}
    threes = {v for v in nums if v % 3 == 0}
    both = evens & threes
    either = evens | threes
    rows = [(k, v, str(k)) for k, v in sorted(merged.items())]
    matrix = [[i * j for j in range(20)] for i in range(size // 20)]
    flat = [x for row in matrix for x in row if x % 5]
    return len(both) + len(either) + len(rows) + len(flat) + sum(counts.values())


def run(n):
    check = 0
    for r in range(n):
        check = (check * 131 + one_round(r, 2000)) % 1000000007
    return check


if __name__ == "__main__":
    main("containers", run, 190, __doc__)
