"""A leak in every other call: the level rises by steps with flat rounds
between them, so that only half of the rounds grow."""

_calls = 0
_kept = []


def run():
    global _calls
    _calls += 1
    if _calls % 2:
        _kept.append(bytes(4000))  # LEAK


def reset():
    _kept.clear()
