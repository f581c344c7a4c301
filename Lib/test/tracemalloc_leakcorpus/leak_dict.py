"""A dict that grows with every call: sessions that are never expired."""

_sessions = {}


def run():
    session_id = len(_sessions)
    _sessions[session_id] = {"id": session_id, "token": bytes(300)}  # LEAK


def reset():
    _sessions.clear()
