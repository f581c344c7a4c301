"""Exceptions stored with their tracebacks: each one pins the frames of the
failed call, and so their local variables."""

_errors = []


def parse(text):
    expanded = text * 200  # LEAK: pinned by the stored traceback
    raise ValueError("cannot parse %r" % text[:8])


def run():
    try:
        parse("abcdefgh")
    except ValueError as exc:
        _errors.append(exc)


def reset():
    _errors.clear()
