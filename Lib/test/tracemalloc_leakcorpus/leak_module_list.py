"""A module-level list that grows with every call: a history never pruned."""

_history = []


def run():
    _history.append("request %d: " % len(_history) + "x" * 200)  # LEAK


def reset():
    _history.clear()
