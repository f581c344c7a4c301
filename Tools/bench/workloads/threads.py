"""Threads allocating concurrently.

Four threads each build and discard dicts, lists and strings while the
others do the same (they take turns on the GIL, so allocations from
different threads interleave), then hand results through a queue.Queue.
"""
import queue
import threading

from _common import main

THREADS = 4


def worker(tid, rounds, out):
    acc = 0
    for r in range(rounds):
        rows = [{"t": tid, "r": r, "i": i, "s": f"{tid}-{r}-{i}"} for i in range(200)]
        keys = sorted(row["s"] for row in rows)
        blob = "|".join(keys)
        acc = (acc * 131 + len(blob) + sum(row["i"] for row in rows)) % 1000000007
        if r % 10 == 0:
            out.put((tid, r, acc))
    out.put((tid, -1, acc))


def run(n):
    out = queue.Queue()
    threads = [threading.Thread(target=worker, args=(t, n, out)) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    finals = {}
    count = 0
    while not out.empty():
        tid, r, acc = out.get()
        count += 1
        if r == -1:
            finals[tid] = acc
    return (sum(finals.values()) + count) % 1000000007


if __name__ == "__main__":
    main("threads", run, 1100, __doc__)
