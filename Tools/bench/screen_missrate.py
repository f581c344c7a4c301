"""How often the leak check misses an irregular leak, with and without the
screen (LeakCheck's *screen*, the pytest plugin's --tracemalloc-screen).

    ./python Tools/bench/screen_missrate.py [--draws 20000] [--seed 1]

A site that leaks one 4000-byte block on a share *p* of the calls (each
call draws afresh) goes through the check's rounds as LeakCheck runs them,
with the verdict functions of tracemalloc._leakcore: *warmup* rounds, then
the screen's measured rounds (one more when the warm-up grew; when
nothing grew in them, the check ends: clean), then the rest of the
*rounds*, and *extend* more when the site is suspect after them (the
verdict then confirms with rule 6).  Prints the
share of checks that call the site clean, per *p* and per screen, the
phases of a leak every k-th call that are missed, and whether a leak
that starts at the k-th call is found.  A
simulation of the rules, not of the engine: it asserts nothing.
"""

import argparse
import random

from tracemalloc import _leakcore, leaks

SIZE = 4000


def verdict(grow, *, warmup, rounds, extend, screen, first_fills=False):
    """Whether the check finds the leak; *grow*() says whether the next
    call leaks.  *first_fills*: the first call also grows something that
    does not leak (a cache filled once), so the warm-up grew."""
    warmup_grew = first_fills
    for _ in range(warmup):
        warmup_grew |= grow()
    sizes, counts = [], []

    def measure(count):
        for _ in range(count):
            leaked = grow()
            sizes.append(SIZE if leaked else 0)
            counts.append(1 if leaked else 0)

    if screen and screen < rounds:
        # LeakCheck._end_screen(): one more run when the warm-up grew.
        measure(screen)
        if not any(sizes) and warmup_grew and screen + 1 < rounds:
            measure(1)
        if not any(sizes):
            return False            # the screen passed it
        measure(rounds - len(sizes))
    else:
        measure(rounds)
    confirm = False
    if extend and _leakcore.is_suspect(sizes, counts):
        measure(extend)
        confirm = True
    if not _leakcore.is_leak(sizes, counts):
        return False
    return not confirm or _leakcore._still_rising(sizes, counts)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    shares = (1.0, 0.9, 0.8, 0.7, 0.5)
    screens = (0, 1, 2)
    print("| leak on this share of calls | "
          + " | ".join(f"missed, screen {screen}" if screen
                       else "missed, no screen" for screen in screens)
          + " |")
    print("|---:|" + "---:|" * len(screens))
    for share in shares:
        cells = []
        for screen in screens:
            rng = random.Random(args.seed)
            missed = sum(
                not verdict(lambda: rng.random() < share,
                            warmup=leaks.DEFAULT_WARMUP,
                            rounds=leaks.DEFAULT_ROUNDS,
                            extend=leaks.DEFAULT_EXTEND, screen=screen)
                for _ in range(args.draws))
            cells.append(f"{100 * missed / args.draws:.1f}%")
        print(f"| {share:.0%} | " + " | ".join(cells) + " |")
    # A leak every k-th call, in each phase.
    print()
    print("| leak every k-th call | phases missed, no screen | "
          "screen 1 | screen 2 |")
    print("|---:|---:|---:|---:|")
    for period in (2, 3, 4):
        cells = []
        for screen in screens:
            missed = 0
            for phase in range(period):
                calls = iter(range(phase, 10**6))
                missed += not verdict(
                    lambda: next(calls) % period == 0,
                    warmup=leaks.DEFAULT_WARMUP,
                    rounds=leaks.DEFAULT_ROUNDS,
                    extend=leaks.DEFAULT_EXTEND, screen=screen)
            cells.append(f"{missed} of {period}")
        print(f"| {period} | " + " | ".join(cells) + " |")
    # A leak that starts late: on every call (or every other call) from
    # the k-th on, with and without a first call that fills a cache.
    print()
    print("| leak from call k on | no screen | screen 1 | screen 2 | "
          "screen 1, first call fills a cache | screen 2, first call "
          "fills a cache |")
    print("|---|---:|---:|---:|---:|---:|")
    for every in (1, 2):
        for start in range(2, 7):
            cells = []
            for screen, fills in ((0, False), (1, False), (2, False),
                                  (1, True), (2, True)):
                calls = iter(range(1, 10**6))
                found = verdict(
                    lambda: (lambda call: call >= start
                             and (call - start) % every == 0)(next(calls)),
                    warmup=leaks.DEFAULT_WARMUP,
                    rounds=leaks.DEFAULT_ROUNDS,
                    extend=leaks.DEFAULT_EXTEND, screen=screen,
                    first_fills=fills)
                cells.append("found" if found else "missed")
            kind = "every call" if every == 1 else "every other call"
            print(f"| {kind} from call {start} | " + " | ".join(cells)
                  + " |")
    print(f"\n{args.draws} draws per cell, seed {args.seed}; warmup "
          f"{leaks.DEFAULT_WARMUP}, rounds {leaks.DEFAULT_ROUNDS}, extend "
          f"{leaks.DEFAULT_EXTEND}")


if __name__ == "__main__":
    main()
