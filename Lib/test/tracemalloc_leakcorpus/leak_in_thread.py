"""A leak inside a thread: each call runs a worker thread that stores its
result in a global list."""

import threading

_results = []


def worker(n):
    _results.append([n] * 100)  # LEAK


def run():
    thread = threading.Thread(target=worker, args=(len(_results),))
    thread.start()
    thread.join()


def reset():
    _results.clear()
