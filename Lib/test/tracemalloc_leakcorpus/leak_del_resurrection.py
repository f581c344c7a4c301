"""Reference cycles kept alive by __del__: the finalizer resurrects them.

The garbage collector finds each cycle unreachable and calls __del__,
which stores the object in a global list: the whole cycle stays alive.
"""

_graveyard = []


class Node:
    def __init__(self, data):
        self.data = data
        self.peer = None

    def __del__(self):
        _graveyard.append(self)


def run():
    first = Node(bytes(400))  # LEAK
    second = Node(None)
    first.peer, second.peer = second, first


def reset():
    for node in _graveyard:
        node.peer = None
    _graveyard.clear()
