"""Deep recursion.

Recursive functions that run hundreds of frames deep and allocate at every
level: building a cons list recursively, folding it back, a recursive-descent
parser over a deeply nested expression, and a recursive structural copy.
(Upstream tracemalloc walks the whole Python stack on every allocation, so
this is where its cost per allocation grows with depth.)
"""
import sys

from _common import main

DEPTH = 400


def build(k):
    if k == 0:
        return None
    return (k, [k, k + 1], build(k - 1))


def fold(cell):
    if cell is None:
        return 0
    k, pair, rest = cell
    return k + pair[1] + fold(rest)


def nested_expr(depth):
    return "(" * depth + "1" + "".join(f"+{i})" for i in range(depth))


class Parser:
    def __init__(self, text):
        self.text = text
        self.pos = 0

    def expr(self):
        ch = self.text[self.pos]
        if ch == "(":
            self.pos += 1
            left = self.expr()
            values = [left]
            while self.text[self.pos] == "+":
                self.pos += 1
                values.append(self.number())
            assert self.text[self.pos] == ")"
            self.pos += 1
            return sum(values)
        return self.number()

    def number(self):
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos].isdigit():
            self.pos += 1
        return int(self.text[start:self.pos])


def deep_copy(obj):
    if isinstance(obj, tuple):
        return tuple(deep_copy(x) for x in obj)
    if isinstance(obj, list):
        return [deep_copy(x) for x in obj]
    return obj


def run(n):
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 4 * DEPTH + 100))
    check = 0
    text = nested_expr(DEPTH)
    for r in range(n):
        chain = build(DEPTH)
        check += fold(chain)
        check += Parser(text).expr()
        copy = deep_copy(build(DEPTH // 2))
        check += fold(copy)
        check %= 1000000007
    return check


if __name__ == "__main__":
    main("recursion_deep", run, 220, __doc__)
