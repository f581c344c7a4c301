"""Integer arithmetic beyond the small-int cache.

Three kernels: a 64-bit style linear congruential generator and hashing
(single-digit ints above 256), a Collatz walk, and multi-digit bignum work
(Fibonacci by doubling modulo a large prime and exact factorial products).
"""
from _common import main

MASK = (1 << 61) - 1


def lcg_hash(n):
    x = 88172645463325252
    acc = 0
    for i in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        acc = (acc ^ (x >> 17)) * 31 % MASK
        acc += i * 1000
    return acc


def collatz(limit):
    best = 0
    for start in range(1000, 1000 + limit):
        k = start
        steps = 0
        while k != 1:
            k = k // 2 if k % 2 == 0 else 3 * k + 1
            steps += 1
        best = max(best, steps)
    return best


def fib_pair(k, mod):
    # Fast doubling, returns (F(k), F(k+1)) mod `mod`.
    if k == 0:
        return (0, 1)
    a, b = fib_pair(k >> 1, mod)
    c = a * ((2 * b - a) % mod) % mod
    d = (a * a + b * b) % mod
    return (d, (c + d) % mod) if k & 1 else (c, d)


def bignum(rounds):
    mod = 2 ** 521 - 1
    acc = 0
    for r in range(rounds):
        acc ^= fib_pair(10 ** 12 + r, mod)[0]
        prod = 1
        for j in range(2, 120):
            prod *= j + r
        acc = (acc + prod) % mod
    return acc


def run(n):
    a = lcg_hash(n * 400)
    b = collatz(n * 12)
    c = bignum(n * 4)
    return (a ^ b ^ c) % 1000000007


if __name__ == "__main__":
    main("int_arith", run, 650, __doc__)
