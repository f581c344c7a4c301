"""Generators started and left suspended in a container: each keeps its
frame, and the frame's local variables, alive."""

_pending = []


def consumer():
    buffer = bytearray(600)  # LEAK
    while True:
        item = yield
        buffer[:len(item)] = item


def run():
    generator = consumer()
    next(generator)
    _pending.append(generator)


def reset():
    for generator in _pending:
        generator.close()
    _pending.clear()
