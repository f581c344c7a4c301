"""Replay the snapshot-file fuzzing corpus through Snapshot.load().

Lib/test/tracemalloc_fuzz/ holds the seeds of Tools/fork/fuzz_snapshot.py
(`make fuzz`) and every input that once broke the loader's contract
(crashes/).  Each file must load or raise ValueError, within a time and a
memory bound per file; a snapshot that loads must be usable; decompression
bombs (seeds named bomb-*) must be refused with ValueError before they are
expanded.  (The seeds were written by an earlier dump(): they also check
that files from before a new attribute still load into usable snapshots.)

The files are loaded in a child process, so that a crash names its file
instead of killing the test runner.
"""

import json
import os
import subprocess
import sys
import unittest

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "tracemalloc_fuzz")

# Per file.  The memory bound is the peak of traced memory during load():
# the loader refuses payloads that expand more than 256 times (dump()
# compresses about 230 times at best), and the objects of a snapshot take
# about 16 bytes per byte of JSON.
TIME_LIMIT = 10
FLOOR = 64 * 1024 * 1024
PER_FILE_BYTE = 4096

CHILD = r"""
import json, signal, sys, time, tracemalloc

class Deadline(Exception):
    pass

def on_alarm(signum, frame):
    raise Deadline

signal.signal(signal.SIGALRM, on_alarm)
tracemalloc.start(1)
for path in sys.argv[2:]:
    print("START " + json.dumps(path), flush=True)
    tracemalloc.reset_peak()
    start = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, float(sys.argv[1]))
    try:
        try:
            snapshot = tracemalloc.Snapshot.load(path)
        except ValueError as exc:
            outcome = "ValueError"
        else:
            # A snapshot that loads must be usable (with what needs no frame
            # in a traceback: a snapshot built by hand may have tracebacks
            # without frames, on which 3.11's statistics('filename') fails
            # too).
            outcome = "loaded"
            try:
                snapshot.statistics("lineno")
                snapshot.statistics("traceback")
                snapshot.compare_to(snapshot, "lineno")
                snapshot.filter_traces([tracemalloc.DomainFilter(False, 1)])
            except Deadline:
                raise
            except BaseException as exc:
                outcome = (f"loaded, then unusable: {type(exc).__name__}: "
                           f"{exc}")[:300]
            del snapshot
    except Deadline:
        outcome = "timeout"
    except BaseException as exc:
        outcome = f"{type(exc).__name__}: {exc}"[:300]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    peak = tracemalloc.get_traced_memory()[1]
    print("OUTCOME " + json.dumps([path, outcome, peak,
                                   time.monotonic() - start]), flush=True)
"""


def corpus_files():
    files = []
    for sub in ("seeds", "crashes"):
        directory = os.path.join(CORPUS, sub)
        if os.path.isdir(directory):
            files.extend(os.path.join(directory, name)
                         for name in sorted(os.listdir(directory)))
    return files


class FuzzCorpusReplayTest(unittest.TestCase):

    def replay(self, files):
        """{path: (outcome, peak, seconds)}; a crash is an outcome."""
        results = {}
        while files:
            env = {k: v for k, v in os.environ.items()
                   if k != "PYTHONTRACEMALLOC"}
            proc = subprocess.run(
                [sys.executable, "-X", "faulthandler", "-c", CHILD,
                 str(TIME_LIMIT), *files],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                env=env, timeout=TIME_LIMIT * len(files) + 300)
            started = None
            for line in proc.stdout.splitlines():
                if line.startswith("START "):
                    started = json.loads(line[6:])
                elif line.startswith("OUTCOME "):
                    path, outcome, peak, seconds = json.loads(line[8:])
                    results[path] = (outcome, peak, seconds)
                    started = None
            if proc.returncode == 0 and started is None:
                break
            if started is None:
                self.fail(f"replay child failed: {proc.stderr[-2000:]}")
            results[started] = (f"interpreter died (status "
                                f"{proc.returncode}): "
                                f"{proc.stderr.strip()[-300:]}", 0, 0)
            files = files[files.index(started) + 1:]
        return results

    def test_corpus(self):
        files = corpus_files()
        self.assertGreater(len(files), 5, "the corpus is missing")
        results = self.replay(list(files))
        problems = []
        counts = {"loaded": 0, "ValueError": 0}
        for path in files:
            outcome, peak, seconds = results[path]
            name = os.path.relpath(path, CORPUS)
            size = os.path.getsize(path)
            if outcome in counts:
                counts[outcome] += 1
            else:
                problems.append(f"{name}: {outcome}")
            if peak > FLOOR + PER_FILE_BYTE * size:
                problems.append(f"{name}: peak of {peak} bytes for a file "
                                f"of {size} bytes")
            if os.path.basename(path).startswith("bomb-") \
                    and outcome != "ValueError":
                problems.append(f"{name}: a decompression bomb was not "
                                f"refused ({outcome}, peak {peak} bytes)")
        print(f"ITERATIONS fuzz corpus: {len(files)} files replayed, "
              f"{counts['loaded']} loaded, {counts['ValueError']} refused",
              flush=True)
        self.assertEqual(problems, [])


if __name__ == "__main__":
    unittest.main()
