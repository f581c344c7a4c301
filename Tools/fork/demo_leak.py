"""The README's demo: a small service with a real leak, found by tracemalloc.

Run it as `python -X tracemalloc=25 Tools/fork/demo_leak.py`.  It handles
requests, takes a snapshot after a warm-up, handles more requests, and prints
the allocation sites that grew, largest first.  The leak is the session
cache in remember(), which keeps every request forever.
"""

import sys
import tracemalloc

sessions = {}


def parse(raw):
    # Temporary objects: freed when the request is done.
    fields = raw.split(";")
    return {key: value for key, value in (f.split("=") for f in fields)}


def remember(request_id, request):
    sessions[request_id] = repr(sorted(request.items())).encode()  # <- leak


def render(request):
    body = " ".join(f"{k}:{v}" for k, v in sorted(request.items()))
    return body.encode()


def handle(request_id):
    request = parse(f"user=u{request_id % 97};path=/item/{request_id};q=abc")
    remember(request_id, request)
    return len(render(request))


def serve(first, count):
    return sum(handle(i) for i in range(first, first + count))


def main():
    if not tracemalloc.is_tracing():
        sys.exit("run me with: python -X tracemalloc=25 " + sys.argv[0])
    serve(0, 1000)                          # warm-up: caches, interning
    before = tracemalloc.take_snapshot()
    serve(1000, 20000)
    after = tracemalloc.take_snapshot()
    ignore = [tracemalloc.Filter(False, tracemalloc.__file__)]
    stats = after.filter_traces(ignore).compare_to(
        before.filter_traces(ignore), "lineno")
    print(f"traced with up to {tracemalloc.get_traceback_limit()} frames; "
          "top allocation sites that grew during 20000 requests:")
    for stat in stats[:5]:
        print(" ", stat)
    # The same growth grouped by whole traceback shows how it was reached.
    site = stats[0].traceback[0]
    for stat in after.compare_to(before, "traceback"):
        if stat.traceback[-1] == site:
            print("\nthe biggest grower, most recent call first:")
            for line in stat.traceback.format(most_recent_first=True):
                print(" ", line)
            break


if __name__ == "__main__":
    main()
