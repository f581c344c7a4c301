"""Generator pipelines run to exhaustion."""


def numbers(count):
    for n in range(count):
        yield n


def squares(source):
    for n in source:
        yield n * n


def run():
    return sum(squares(n for n in numbers(500) if n % 3))
