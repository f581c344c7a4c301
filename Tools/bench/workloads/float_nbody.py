"""Float arithmetic: an n-body style gravity simulation.

A handful of bodies held in plain lists of floats; every step computes
pairwise distances and updates velocities and positions.  Almost every
operation creates a new float object (many of which come from the float
free list, as in real numeric Python code).
"""
import math

from _common import main


def make_system():
    # Original toy system: a central mass and orbiting bodies.
    bodies = []
    for i in range(6):
        r = 1.0 + 1.7 * i
        angle = 0.9 * i
        speed = 0.0 if i == 0 else 1.0 / math.sqrt(r)
        mass = 40.0 if i == 0 else 0.01 * (i + 1)
        bodies.append([r * math.cos(angle) if i else 0.0,
                       r * math.sin(angle) if i else 0.0,
                       0.05 * i,
                       -speed * math.sin(angle),
                       speed * math.cos(angle),
                       0.0,
                       mass])
    return bodies


def energy(bodies):
    e = 0.0
    for i, (x, y, z, vx, vy, vz, m) in enumerate(bodies):
        e += 0.5 * m * (vx * vx + vy * vy + vz * vz)
        for (x2, y2, z2, _, _, _, m2) in bodies[i + 1:]:
            d = math.sqrt((x - x2) ** 2 + (y - y2) ** 2 + (z - z2) ** 2)
            e -= m * m2 / d
    return e


def advance(bodies, pairs, dt, steps):
    for _ in range(steps):
        for (b1, b2) in pairs:
            dx = b1[0] - b2[0]
            dy = b1[1] - b2[1]
            dz = b1[2] - b2[2]
            d2 = dx * dx + dy * dy + dz * dz + 1e-9
            mag = dt / (d2 * math.sqrt(d2))
            m1 = b1[6] * mag
            m2 = b2[6] * mag
            b1[3] -= dx * m2
            b1[4] -= dy * m2
            b1[5] -= dz * m2
            b2[3] += dx * m1
            b2[4] += dy * m1
            b2[5] += dz * m1
        for b in bodies:
            b[0] += dt * b[3]
            b[1] += dt * b[4]
            b[2] += dt * b[5]


def run(n):
    bodies = make_system()
    pairs = [(bodies[i], bodies[j])
             for i in range(len(bodies)) for j in range(i + 1, len(bodies))]
    e0 = energy(bodies)
    advance(bodies, pairs, 0.001, n)
    e1 = energy(bodies)
    return f"{e0:.9f} {e1:.9f}"


if __name__ == "__main__":
    main("float_nbody", run, 62000, __doc__)
