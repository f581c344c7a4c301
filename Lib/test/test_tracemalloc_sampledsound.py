"""Soundness of sampled snapshots, of the pprof export and of
dump_on_signal() (issue 29, items 2.4, 2.9, 2.10, 2.11, 2.12, 2.19).

- a sampled peak snapshot keeps the weight of each trace through pickle,
  copy.deepcopy() and the ``run --peak`` report, dump and HTML report;
- compare_to() refuses snapshots taken with different sampling;
- the pprof string table is valid UTF-8 whatever the file names hold, as a
  real reader (protoc, Python's google.protobuf) checks;
- dump_on_signal() keeps working in a child forked while a dump is being
  written, and a child never writes the names that its parent writes.
"""

import copy
import gzip
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import unittest

import tracemalloc
from tracemalloc import _pprof


def _repository():
    here = os.path.dirname(os.path.abspath(__file__))
    for candidate in (os.path.dirname(os.path.dirname(here)),
                      os.path.dirname(os.path.dirname(
                          os.path.dirname(os.path.dirname(here))))):
        if os.path.isfile(os.path.join(candidate, "Tools", "fork", "pprof",
                                       "profile.proto")):
            return candidate
    return None


REPO = _repository()
READERS = os.path.join(REPO, "Tools", "fork", "pprof") if REPO else None


def child_env(**extra):
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("PYTHON")}
    env.update(extra)
    return env


def start_sampled(testcase, sample=4096, nframe=1):
    if tracemalloc.is_tracing():
        testcase.skipTest("tracing is already on")
    try:
        tracemalloc.start(nframe, sample=sample)
    except TypeError as exc:
        testcase.skipTest(f"no sampled mode in this build: {exc}")
    testcase.addCleanup(tracemalloc.stop)


def allocate_blocks(count):
    return [bytes(100) for _ in range(count)]


def total_size(snapshot):
    return sum(stat.size for stat in snapshot.statistics('traceback'))


# --------------------------------------------------------------------------
# 2.4: the weights of a sampled peak snapshot

class SampledPeakWeightsTests(unittest.TestCase):

    def peak_snapshot(self):
        start_sampled(self)
        kept = allocate_blocks(50_000)
        snapshot = tracemalloc.take_snapshot(peak=True)
        del kept
        tracemalloc.stop()
        self.assertEqual(snapshot.sample, 4096)
        # About 50,000 blocks of 133 bytes: estimates, but far above 1 MB.
        self.assertGreater(total_size(snapshot), 3_000_000)
        return snapshot

    def assertSameStatistics(self, copied, snapshot):
        self.assertEqual(copied.sample, snapshot.sample)
        for key_type in ('traceback', 'lineno', 'filename'):
            self.assertEqual(copied.statistics(key_type),
                             snapshot.statistics(key_type))

    def test_pickle_keeps_weights(self):
        snapshot = self.peak_snapshot()
        for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
            with self.subTest(protocol=protocol):
                copied = pickle.loads(pickle.dumps(snapshot, protocol))
                self.assertSameStatistics(copied, snapshot)
                # And again, from the unpickled columns.
                again = pickle.loads(pickle.dumps(copied, protocol))
                self.assertSameStatistics(again, snapshot)

    def test_deepcopy_keeps_weights(self):
        snapshot = self.peak_snapshot()
        self.assertSameStatistics(copy.deepcopy(snapshot), snapshot)
        self.assertSameStatistics(copy.copy(snapshot), snapshot)

    def test_pickle_then_filter_keeps_weights(self):
        snapshot = self.peak_snapshot()
        copied = pickle.loads(pickle.dumps(snapshot))
        everything = tracemalloc.Filter(True, '*')
        self.assertSameStatistics(copied.filter_traces([everything]),
                                  snapshot)

    def test_exact_snapshot_pickles_as_upstream(self):
        # Without weights the pickle stays a list of raw tuples, which
        # upstream's _Traces reads.
        snapshot = tracemalloc.Snapshot([(0, 10, (('a.py', 1),), 1)], 1)
        copied = pickle.loads(pickle.dumps(snapshot))
        self.assertIs(type(copied.traces._data), list)
        self.assertEqual(copied.statistics('lineno'),
                         snapshot.statistics('lineno'))


class RunPeakCLITests(unittest.TestCase):
    """python -m tracemalloc run --peak of a sampled process."""

    def setUp(self):
        try:
            subprocess.run([sys.executable, "-X", "tracemalloc_sample=4096",
                            "-c", "pass"], check=True,
                           env=child_env(), capture_output=True)
        except subprocess.CalledProcessError:
            self.skipTest("no -X tracemalloc_sample in this build")
        self.directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.directory)
        self.target = os.path.join(self.directory, "target.py")
        with open(self.target, "w", encoding="utf-8") as file:
            file.write("kept = [bytes(100) for _ in range(100000)]\n"
                       "del kept\n")

    def run_peak(self, *options):
        process = subprocess.run(
            [sys.executable, "-X", "utf8", "-X", "tracemalloc_sample=4096",
             "-m", "tracemalloc", "run", "--peak", "--top", "1", *options,
             self.target],
            cwd=self.directory, env=child_env(),
            stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=300)
        self.assertEqual(process.returncode, 0, process.stderr)
        return process.stderr

    def assertPeakInReport(self, report):
        # 100,000 blocks of about 133 bytes: 12-14 MiB, an estimate.
        match = re.search(r"#1: .*size=([0-9.]+) MiB", report)
        self.assertIsNotNone(match, report)
        self.assertGreater(float(match.group(1)), 6.0, report)
        self.assertIn("target.py", report.split("#1:", 1)[1]
                      .split("\n#2", 1)[0].split("other sites")[0])

    def test_group_by_traceback(self):
        self.assertPeakInReport(self.run_peak("--group-by", "traceback"))

    def test_output_file(self):
        output = os.path.join(self.directory, "peak.tracemalloc")
        self.assertPeakInReport(self.run_peak("-o", output))
        snapshot = tracemalloc.Snapshot.load(output)
        self.assertEqual(snapshot.sample, 4096)
        top = snapshot.statistics('lineno')[0]
        self.assertEqual(os.path.basename(top.traceback[0].filename),
                         "target.py")
        self.assertGreater(top.size, 6_000_000)
        self.assertGreater(top.count, 40_000)

    def test_html(self):
        output = os.path.join(self.directory, "peak.html")
        self.assertPeakInReport(self.run_peak("--html", output))
        with open(output, encoding="utf-8") as file:
            html = file.read()
        sizes = [int(size) for size in re.findall(r'"size":\s*(\d+)', html)]
        self.assertTrue(sizes, "no size in the HTML report")
        self.assertGreater(max(sizes), 6_000_000)


if __name__ == "__main__":
    unittest.main()
