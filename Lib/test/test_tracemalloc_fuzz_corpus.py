"""Replay the snapshot-file fuzzing corpus through Snapshot.load().

Lib/test/tracemalloc_fuzz/ holds the seeds of Tools/fork/fuzz_snapshot.py
(`make fuzz`) and every input that once broke the loader's contract
(crashes/).  Each file must load or raise ValueError, within a time and a
memory bound per file; a snapshot that loads must be usable (and dump
again into a file that loads back equal); decompression bombs (seeds named
bomb-*) must be refused with ValueError before they are expanded.  Both
file format versions are in the corpus: the version 1 seeds were written by
an earlier dump() (they check that old files, from before version 2 or a
new attribute, still load into usable snapshots), the v2-* seeds by the
current one or by hand.

Files of crashes/ that break the contract and are not fixed yet are listed
in OPEN_FINDINGS: test_open_findings replays them and is skipped until the
loader is fixed (then remove them from the list).

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
MAGIC = b"tracemalloc-snapshot\n"

# Per file.  The memory bound is the peak of traced memory during load():
# the loader refuses payloads that expand more than 256 times (dump()
# compresses about 230 times at best), and the objects of a snapshot take
# about 16 bytes per byte of JSON.
TIME_LIMIT = 10
FLOOR = 64 * 1024 * 1024
PER_FILE_BYTE = 4096

# Contract violations saved in crashes/ but not fixed yet: name -> why.
OPEN_FINDINGS = {
    # None: crash-b67439bbac6a and crash-d0a2ae219d20 (JSON of empty
    # containers taking 6,600 bytes of objects per byte of file) are
    # refused since the loader bounds containers and strings per byte.
}

CHILD = r"""
import json, os, signal, sys, tempfile, time, tracemalloc

class Deadline(Exception):
    pass

def on_alarm(signum, frame):
    raise Deadline

signal.signal(signal.SIGALRM, on_alarm)
scratch = tempfile.mkdtemp()
again_path = os.path.join(scratch, "again")
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
                snapshot.statistics("thread")
                snapshot.compare_to(snapshot, "lineno")
                snapshot.filter_traces([tracemalloc.DomainFilter(False, 1)])
                if len(snapshot.traces) <= 10000:
                    traces = list(snapshot.traces)
                    snapshot.dump(again_path)
                    again = tracemalloc.Snapshot.load(again_path)
                    if list(again.traces) != traces:
                        raise AssertionError("dump() then load() changed "
                                             "the traces")
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
if os.path.exists(again_path):
    os.unlink(again_path)
os.rmdir(scratch)
"""


def corpus_files():
    files = []
    for sub in ("seeds", "crashes"):
        directory = os.path.join(CORPUS, sub)
        if os.path.isdir(directory):
            files.extend(os.path.join(directory, name)
                         for name in sorted(os.listdir(directory)))
    return files


def format_version(path):
    """The version line of a snapshot file ("version 2"), or "no magic"."""
    with open(path, "rb") as f:
        head = f.read(64)
    if not head.startswith(MAGIC):
        return "no magic"
    return head[len(MAGIC):].split(b"\n", 1)[0].decode("ascii", "replace")


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

    def check(self, files):
        """Replay *files*; return (problems, {path: outcome})."""
        results = self.replay(list(files))
        problems = []
        outcomes = {}
        for path in files:
            outcome, peak, seconds = results[path]
            outcomes[path] = outcome
            name = os.path.relpath(path, CORPUS)
            size = os.path.getsize(path)
            if outcome not in ("loaded", "ValueError"):
                problems.append(f"{name}: {outcome}")
            if peak > FLOOR + PER_FILE_BYTE * size:
                problems.append(f"{name}: peak of {peak} bytes for a file "
                                f"of {size} bytes")
            if os.path.basename(path).startswith("bomb-") \
                    and outcome != "ValueError":
                problems.append(f"{name}: a decompression bomb was not "
                                f"refused ({outcome}, peak {peak} bytes)")
        return problems, outcomes

    def test_corpus(self):
        files = [path for path in corpus_files()
                 if os.path.basename(path) not in OPEN_FINDINGS]
        problems, outcomes = self.check(files)
        # Not vacuous: each version has seeds that load and seeds that are
        # refused, and there are bombs.
        seen = {}
        for path in files:
            if os.path.basename(os.path.dirname(path)) == "seeds":
                key = (format_version(path), outcomes[path])
                seen[key] = seen.get(key, 0) + 1
        for version in ("version 1", "version 2"):
            for outcome in ("loaded", "ValueError"):
                self.assertGreaterEqual(
                    seen.get((version, outcome), 0), 3,
                    f"too few {version} seeds with outcome "
                    f"{outcome}: the corpus is missing (seen: {seen})")
        bombs = [path for path in files
                 if os.path.basename(path).startswith("bomb-")]
        self.assertGreaterEqual(len(bombs), 3, "the bomb seeds are missing")
        loaded = sum(outcome == "loaded" for outcome in outcomes.values())
        refused = sum(outcome == "ValueError"
                      for outcome in outcomes.values())
        by_version = ", ".join(
            f"{version} {outcome}: {n}"
            for (version, outcome), n in sorted(seen.items()))
        print(f"ITERATIONS fuzz corpus: {len(files)} files replayed, "
              f"{loaded} loaded, {refused} refused (seeds: {by_version})",
              flush=True)
        self.assertEqual(problems, [])

    def test_open_findings(self):
        if not OPEN_FINDINGS:
            self.skipTest("no open findings")
        files = [os.path.join(CORPUS, "crashes", name)
                 for name in OPEN_FINDINGS]
        problems, _ = self.check(files)
        self.assertEqual(problems, [])


if __name__ == "__main__":
    unittest.main()
