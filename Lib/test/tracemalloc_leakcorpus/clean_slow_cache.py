"""A bounded cache that fills more slowly than the warm-up: a strong cache
of at most 8 entries whose blocks go 4, 4, 5, 5, 6, 7, 8, 8 over the first
calls, then stay flat (python-dateutil's tz cache under its weakref
tests).  The growth stops: no leak, though the first rounds rise."""

_LEVELS = (4, 4, 5, 5, 6, 7, 8, 8)
_cache = {}
_calls = 0


def run():
    global _calls
    level = _LEVELS[min(_calls, len(_LEVELS) - 1)]
    _calls += 1
    for key in range(level):
        if key not in _cache:
            _cache[key] = bytes(200)
    return [_cache[key] for key in range(level)]


def reset():
    global _calls
    _cache.clear()
    _calls = 0
