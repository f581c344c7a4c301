"""Dataclass instances created, compared, converted and dropped."""

import dataclasses


@dataclasses.dataclass(order=True)
class Point:
    x: int
    y: int
    label: str = ""


def run():
    points = [Point(n % 7, n, "p%d" % n) for n in range(200)]
    points.sort()
    moved = [dataclasses.replace(point, x=point.x + 1) for point in points]
    return sum(dataclasses.astuple(point)[0] for point in moved)
