"""Engine soundness: the wrong answers of issue 29's section 1, each one a
test that failed on the engine before its fix.

Item 1.1: a thread other than the one that starts tracing (or reseeds the
sampler) kept the countdown it drew in an earlier run, so a worker that had
drawn a distance of 2**40 bytes was estimated at 0 bytes for the whole next
run.
"""

import threading
import unittest

import tracemalloc
import _tracemalloc

BLOCKS = 200_000
BLOCK = 100


def sampling_supported():
    try:
        tracemalloc.start(sample=4096)
    except (TypeError, ValueError):
        return False
    tracemalloc.stop()
    return True


@unittest.skipUnless(sampling_supported(), "the engine has no sampling mode")
class StaleCountdownTest(unittest.TestCase):
    """1.1: every thread draws afresh for each run and each seed."""

    def tearDown(self):
        tracemalloc.stop()

    def run_worker(self, between):
        """A worker draws its countdown under start(sample=2**40), then
        *between* runs on the main thread, then the worker allocates
        BLOCKS blocks it keeps: the estimate of the traced memory."""
        drawn = threading.Event()
        go = threading.Event()
        done = threading.Event()
        keep = []

        def worker():
            keep.append(bytes(BLOCK))      # draws under the first run
            drawn.set()
            go.wait()
            for _ in range(BLOCKS):
                keep.append(bytes(BLOCK))
            done.set()

        tracemalloc.start(sample=1 << 40)
        thread = threading.Thread(target=worker)
        thread.start()
        try:
            drawn.wait()
            between()
            go.set()
            done.wait()
            current, _ = tracemalloc.get_traced_memory()
        finally:
            go.set()
            thread.join()
        return current

    def assert_estimated(self, current):
        # The worker holds at least BLOCKS * BLOCK bytes (more with the
        # object headers and the list).  At an interval of 4096 the
        # estimate's standard deviation is about sqrt(4096 * 3e7) = 350 KB,
        # so half of that lower bound is far outside the noise.
        self.assertGreater(current, BLOCKS * BLOCK // 2)

    def test_restart_with_new_interval(self):
        def restart():
            tracemalloc.stop()
            tracemalloc.start(sample=4096)
        self.assert_estimated(self.run_worker(restart))

    def test_reseed(self):
        def reseed():
            tracemalloc.stop()
            tracemalloc.start(sample=4096)
            _tracemalloc._set_sample_seed(12345)
        self.assert_estimated(self.run_worker(reseed))


if __name__ == "__main__":
    unittest.main()
