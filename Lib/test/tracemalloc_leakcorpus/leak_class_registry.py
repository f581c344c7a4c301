"""A class-level registry: every instance is remembered by its class."""


class Handler:
    instances = []          # never pruned

    def __init__(self, buffer):
        self.buffer = buffer
        Handler.instances.append(self)


def run():
    Handler(bytearray(512))  # LEAK


def reset():
    Handler.instances.clear()
