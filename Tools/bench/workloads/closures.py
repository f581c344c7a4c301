"""Closures and higher-order functions.

Creates closures over cells in loops, counters with ``nonlocal``, decorator
wrappers, lambdas used as sort keys, functools.partial and function
composition: each call site creates new function and cell objects.
"""
import functools

from _common import main


def make_counter(start):
    count = start

    def inc(step=1):
        nonlocal count
        count += step
        return count
    return inc


def compose(*fns):
    def composed(x):
        for f in reversed(fns):
            x = f(x)
        return x
    return composed


def logged(fn):
    calls = []

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        calls.append(args)
        return fn(*args, **kwargs)
    wrapper.calls = calls
    return wrapper


def run(n):
    check = 0
    for r in range(n):
        counters = [make_counter(i) for i in range(200)]
        for c in counters:
            c()
            c(3)
        check += sum(c(0) for c in counters)
        adders = [(lambda k: (lambda x: x + k))(k) for k in range(100)]
        f = compose(*adders[:10], lambda x: x * 2)
        check += sum(f(i) for i in range(100))

        @logged
        def area(w, h):
            return w * h
        for i in range(300):
            area(i, i + 1)
        check += len(area.calls)
        mods = [functools.partial(pow, base, 2) for base in range(100)]
        check += sum(m() for m in mods)
        data = [(i * 37 % 101, i) for i in range(300)]
        data.sort(key=lambda t: (t[0], -t[1]))
        check += data[0][1]
        check %= 1000000007
    return check


if __name__ == "__main__":
    main("closures", run, 1300, __doc__)
