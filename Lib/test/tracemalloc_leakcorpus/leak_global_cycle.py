"""Reference cycles kept alive through a global: each new record refers to
the previous one and to itself, and the global holds the newest."""

_newest = None


def run():
    global _newest
    record = {"previous": _newest, "payload": bytes(300)}  # LEAK
    record["self"] = record
    _newest = record


def reset():
    global _newest
    _newest = None
