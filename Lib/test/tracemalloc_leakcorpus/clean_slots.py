"""Instances of a class with __slots__, created and dropped in bulk."""


class Vector:
    __slots__ = ("x", "y", "z")

    def __init__(self, x, y, z):
        self.x = x
        self.y = y
        self.z = z

    def __add__(self, other):
        return Vector(self.x + other.x, self.y + other.y, self.z + other.z)


def run():
    total = Vector(0, 0, 0)
    vectors = [Vector(n, n * 2, n * 3) for n in range(300)]
    for vector in vectors:
        total = total + vector
    return total.x + total.y + total.z
