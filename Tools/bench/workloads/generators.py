"""Generators.

Lazy pipelines of generator functions, generator expressions, ``yield
from`` delegation, send()-driven coroutine-style generators and itertools
glue.  Each generator object and its frame is a heap allocation.
"""
import itertools

from _common import main


def numbers(start, stop):
    i = start
    while i < stop:
        yield i
        i += 1


def windows(it, size):
    buf = []
    for x in it:
        buf.append(x)
        if len(buf) == size:
            yield tuple(buf)
            buf.pop(0)


def flatten(nested):
    for item in nested:
        if isinstance(item, list):
            yield from flatten(item)
        else:
            yield item


def averager():
    total = 0
    count = 0
    avg = None
    while True:
        value = yield avg
        total += value
        count += 1
        avg = total / count


def run(n):
    check = 0
    for r in range(n):
        evens = (x for x in numbers(0, 3000) if x % 2 == 0)
        sums = (sum(w) for w in windows(evens, 4))
        check += sum(itertools.islice(sums, 1000))
        nested = [[i, [i + 1, [i + 2]]] for i in range(300)]
        check += sum(flatten(nested))
        avg = averager()
        next(avg)
        for v in range(500):
            last = avg.send(v)
        check += int(last)
        pairs = itertools.groupby(sorted(numbers(0, 600), key=lambda v: v % 7), key=lambda v: v % 7)
        check += sum(len(list(g)) for _, g in pairs)
        check %= 1000000007
    return check


if __name__ == "__main__":
    main("generators", run, 520, __doc__)
