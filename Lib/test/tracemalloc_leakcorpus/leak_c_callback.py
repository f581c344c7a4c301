"""A leak in a callback called from C: the key function that sorted()
calls remembers every key it computed."""

_seen = []


def sort_key(item):
    _seen.append(str(item) * 30)  # LEAK
    return -item


def run():
    return sorted(range(8), key=sort_key)


def reset():
    _seen.clear()
