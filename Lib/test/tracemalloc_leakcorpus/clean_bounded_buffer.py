"""A bounded buffer: a list of at most 4 items, cleared when full.  Its
level goes up for three rounds, then drops: the growth between the drops
is given back."""

_buffer = []


def run():
    if len(_buffer) >= 4:
        _buffer.clear()
    _buffer.append(bytes(1024))
