"""Cost of a leak check (tracemalloc.leaks) in a process with many traces.

    ./python Tools/bench/leakcheck.py [--traces 100000] [--nframe 25]

Builds a process holding --traces live traced blocks, allocated from a few
thousand distinct call paths, then leak checks one small "test" (a leaking
one and a clean one) with the default 2 warm-up and 5 measured rounds.
Prints, per check, the time of each snapshot-and-compare step (the export
of every live trace, the per-traceback totals, the comparison with the
previous round) and of the whole check.  A benchmark, not a test: it
asserts nothing.
"""

import argparse
import statistics
import sys
import time
import tracemalloc

from tracemalloc import leaks


def build_live_data(count, distinct_paths=2000):
    """Allocate *count* blocks that stay alive, from *distinct_paths*
    different tracebacks (recursion depth and leaf line vary)."""
    kept = []

    def leaf(n, depth):
        if depth:
            return leaf(n, depth - 1)
        return bytes(8 + n % 32)            # one traced block

    per_path = max(1, count // distinct_paths)
    made = 0
    path = 0
    while made < count:
        depth = path % 20
        for n in range(min(per_path, count - made)):
            kept.append(leaf(n, depth))
        made += per_path
        path += 1
    return kept


class TimedCheck(leaks.LeakCheck):
    def _begin(self):
        self.snapshot_times = []
        self.snapshot_cpu = []
        super()._begin()

    def _snapshot(self):
        start = time.perf_counter()
        cpu = time.process_time()
        super()._snapshot()
        self.snapshot_times.append(time.perf_counter() - start)
        self.snapshot_cpu.append(time.process_time() - cpu)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=100_000)
    parser.add_argument("--nframe", type=int, default=25)
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()

    tracemalloc.start(options.nframe)
    live = build_live_data(options.traces)
    print(f"live traces: {len(tracemalloc._get_traces()):,} "
          f"(of which built here: {len(live):,}), traceback limit "
          f"{options.nframe}")

    kept = []

    def leaking_test():
        kept.append(bytes(100))
        sorted(range(100), key=lambda n: -n)

    def clean_test():
        sorted(range(100), key=lambda n: -n)

    results = []
    for name, test in (("leaking test", leaking_test),
                       ("clean test", clean_test)):
        for _ in range(options.repeat):
            check = TimedCheck()
            start = time.perf_counter()
            report = check.run(test)
            total = time.perf_counter() - start
            rounds = check.snapshot_times
            cpu = check.snapshot_cpu
            results.append((name, bool(report), total, rounds, cpu))
            print(f"{name}: leak={bool(report)}, check {total:.3f} s, "
                  f"{len(rounds)} snapshot+compare steps: "
                  f"mean {statistics.mean(rounds):.3f} s "
                  f"(CPU {statistics.mean(cpu):.3f} s), "
                  f"max {max(rounds):.3f} s")
    per_round = [step for *_, rounds, _ in results for step in rounds]
    per_round_cpu = [step for *_, cpu in results for step in cpu]
    print(f"snapshot+compare per round over all checks: median "
          f"{statistics.median(per_round):.3f} s (CPU "
          f"{statistics.median(per_round_cpu):.3f} s), max "
          f"{max(per_round):.3f} s")
    tracemalloc.stop()
    del live
    return 0


if __name__ == "__main__":
    sys.exit(main())
