"""A leak made by finalizers: objects in reference cycles whose __del__
keeps something, and weakref.finalize() callbacks that do the same.  The
cycles are freed by the garbage collector, so the finalizers run inside a
collection (the checker's own, before each snapshot)."""

import weakref

_kept = []


class Connection:
    def __init__(self):
        self.myself = self              # a cycle: only gc frees it

    def __del__(self):
        _kept.append(bytearray(3000))  # LEAK


def _closed(number):
    _kept.append(str(number) * 20)


class Session:
    pass


def run():
    Connection()
    session = Session()
    session.myself = session
    weakref.finalize(session, _closed, len(_kept))


def reset():
    _kept.clear()
