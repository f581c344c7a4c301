"""Closures captured by callbacks: each registered callback keeps the
variables of the call that created it."""

_listeners = []


def subscribe(callback):
    _listeners.append(callback)


def run():
    scratch = bytearray(700)  # LEAK: captured by the callback below
    subscribe(lambda event: scratch.extend(event))


def reset():
    _listeners.clear()
