"""Exceptions.

Raising and catching through several frames (each raise allocates the
exception and traceback objects), exception chaining, custom exception
hierarchies, try/finally, context managers and EAFP dictionary access.
"""
import contextlib

from _common import main


class AppError(Exception):
    def __init__(self, code, detail):
        super().__init__(f"error {code}: {detail}")
        self.code = code


class NotFound(AppError):
    pass


def lookup(table, key, depth):
    if depth:
        return lookup(table, key, depth - 1)
    try:
        return table[key]
    except KeyError as exc:
        raise NotFound(404, key) from exc


@contextlib.contextmanager
def guard(log):
    try:
        yield
    except ValueError as exc:
        log.append(str(exc))
    finally:
        log.append("done")


def run(n):
    table = {f"k{i}": i for i in range(0, 100, 2)}
    check = 0
    for r in range(n):
        log = []
        for i in range(100):
            key = f"k{i}"
            try:
                check += lookup(table, key, 5)
            except NotFound as exc:
                check += exc.code + len(exc.args[0])
                if exc.__cause__ is not None:
                    check += 1
            with guard(log):
                if i % 3 == 0:
                    raise ValueError(f"bad {i}")
            try:
                int(f"x{i}")
            except ValueError:
                check += 1
            try:
                getattr(log, "nope")
            except AttributeError:
                check += 1
        check = (check + len(log)) % 1000000007
    return check


if __name__ == "__main__":
    main("exceptions", run, 680, __doc__)
