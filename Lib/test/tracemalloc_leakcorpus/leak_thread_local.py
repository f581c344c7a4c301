"""A threading.local whose per-thread list keeps growing."""

import threading

_state = threading.local()


def run():
    events = getattr(_state, "events", None)
    if events is None:
        events = _state.events = []
    events.append(("event", bytes(200)))  # LEAK


def reset():
    _state.__dict__.clear()
