"""A bounded mutation fuzzer for tracemalloc.Snapshot.load().

    python Tools/fork/fuzz_snapshot.py --seconds 60        (make fuzz)
    python Tools/fork/fuzz_snapshot.py --write-seeds       refresh the seeds

Only the public API is used: every input is written to a file and given to
tracemalloc.Snapshot.load().  The contract checked on each input: load()
returns a snapshot or raises ValueError, within TIME_LIMIT seconds and
with a peak of traced memory below memory_limit(file size); a snapshot it
returns must be usable (statistics, compare_to, filter_traces, and a dump
that loads back equal).

Inputs are mutated at two levels: the raw bytes of a file (bit flips,
insertions, deletions, truncation, splices), and the JSON document inside
the zlib payload, which is recompressed afterwards so that mutations reach
the decoder instead of dying on the compressed stream.  A mutant whose
rejection message was not seen before joins the pool of parents (the
message stands in for coverage).

The fuzzing loop runs in a child process; the parent restarts it if it
dies, so that a crash of the interpreter is caught and its input saved.
Inputs that break the contract are saved in the corpus
(Lib/test/tracemalloc_fuzz/crashes/), which test_tracemalloc_fuzz_corpus
replays in `make test`.
"""

import argparse
import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(REPO, "Lib", "test", "tracemalloc_fuzz")
SEEDS = os.path.join(CORPUS, "seeds")
CRASHES = os.path.join(CORPUS, "crashes")

MAGIC = b"tracemalloc-snapshot\n"
# Per input: TIME_LIMIT seconds, plus one per MiB of file (reading a big
# file is not hanging).
TIME_LIMIT = 10.0
# Mutants bigger than this are not tried: they cost time, not coverage.
MAX_INPUT = 4 << 20


def time_limit(file_size):
    return TIME_LIMIT + file_size / (1 << 20)


def memory_limit(file_size):
    """Peak of traced memory allowed while loading a file of this size.

    The loader refuses payloads that expand more than 256 times (dump()
    compresses about 230 times at best), and a snapshot's objects take
    about 16 bytes per byte of JSON.  The same bound as the corpus replay
    (test_tracemalloc_fuzz_corpus).
    """
    return 64 * 1024 * 1024 + 4096 * file_size


class Deadline(Exception):
    pass


def _on_alarm(signum, frame):
    raise Deadline


def check_input(tracemalloc, data, path):
    """Load *data* through the public API; return None if the contract
    holds, else a short description of how it broke.  Also return the
    rejection message (for the pool)."""
    with open(path, "wb") as f:
        f.write(data)
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, time_limit(len(data)))
    tracemalloc.reset_peak()
    try:
        try:
            snapshot = tracemalloc.Snapshot.load(path)
        except ValueError as exc:
            return None, str(exc)
        except Deadline:
            return (f"load() took more than {time_limit(len(data)):.0f}s "
                    f"for {len(data)} bytes"), None
        except RecursionError:
            return "load() raised RecursionError", None
        except MemoryError:
            return "load() raised MemoryError", None
        except Exception as exc:
            return f"load() raised {type(exc).__name__}: {exc}"[:300], None
        finally:
            peak = tracemalloc.get_traced_memory()[1]
        if peak > memory_limit(len(data)):
            return (f"load() peaked at {peak} bytes for a file of "
                    f"{len(data)} bytes"), None
        try:
            exercise(tracemalloc, snapshot, path + ".again")
        except Deadline:
            return "the loaded snapshot is too slow to use", None
        except Exception as exc:
            return (f"the loaded snapshot is broken: "
                    f"{type(exc).__name__}: {exc}")[:300], None
        return None, "loaded"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def exercise(tracemalloc, snapshot, path):
    """Use a loaded snapshot the way a user would."""
    traces = snapshot.traces
    nframes = sum(len(trace.traceback) for trace in traces)
    if len(traces) > 10000 or nframes > 100000:
        return      # big but valid: using it is not load()'s business
    for key_type in ("lineno", "filename", "traceback"):
        snapshot.statistics(key_type)
    snapshot.statistics("lineno", cumulative=True)
    snapshot.compare_to(snapshot, "lineno")
    snapshot.filter_traces([tracemalloc.Filter(False, "*a*"),
                            tracemalloc.DomainFilter(False, 1)])
    for trace in traces:
        str(trace)
        trace.traceback.format()
    snapshot.dump(path)
    again = tracemalloc.Snapshot.load(path)
    if list(again.traces) != list(traces):
        raise AssertionError("dump() then load() changed the traces")
    if again.traceback_limit != snapshot.traceback_limit:
        raise AssertionError("dump() then load() changed the limit")


# ---------------------------------------------------------------------------
# Seeds

def seed_snapshots(tracemalloc):
    """(name, Snapshot) pairs, built with the public API."""
    frames_a = (("a.py", 1), ("b.py", 2), ("<unknown>", 0))
    frames_b = (("c\udcff.py", 3),)
    synthetic = tracemalloc.Snapshot(
        [(0, 10, frames_a, 3), (0, 20, frames_a, 3), (1, 30, frames_b, None),
         (2**32 - 1, 2**40, frames_b, 7), (0, 0, (), 0)], 25)
    with_attributes = tracemalloc.Snapshot([(0, 1, frames_a, 1)], 5)
    with_attributes.note = "text"
    with_attributes.values = [None, True, 1.5, float("inf"), b"\x00\xff",
                              (1, 2), {3}, frozenset({4}), {"k": [5]}]
    tracemalloc.start(10)
    try:
        data = [str(i) * (i % 7) for i in range(300)]
        real = tracemalloc.take_snapshot()
        real = real.filter_traces([tracemalloc.Filter(True, __file__)])
        del data
    finally:
        tracemalloc.stop()
    return [("empty", tracemalloc.Snapshot([], 1)),
            ("synthetic", synthetic),
            ("attributes", with_attributes),
            ("real", real)]


def crafted_seeds():
    """Hostile files written by hand: (name, bytes)."""
    header = MAGIC + b"version 1\n"
    document = {"traceback_limit": 1, "filenames": [], "tracebacks": [],
                "traces": {"domain": [], "size": [], "traceback": [],
                           "total_nframe": []},
                "attributes": {}}
    text = json.dumps(document).encode()
    return [
        # 64 MiB of JSON whitespace before a valid document: a
        # decompression bomb (64 KiB of file).
        ("bomb-whitespace", header + zlib.compress(
            b" " * (64 * 1024 * 1024) + text, 9)),
        # Deep nesting in an attribute value.
        ("deep-nesting", header + zlib.compress(
            text.replace(b'"attributes": {}', b'"attributes": {"x": '
                         + b"[" * 100000 + b"]" * 100000 + b"}"))),
        # An integer of 100000 digits.
        ("huge-integer", header + zlib.compress(
            text.replace(b'"traceback_limit": 1',
                         b'"traceback_limit": ' + b"9" * 100000))),
        # A pickle (standard CPython's format): refused, never unpickled.
        ("pickle", b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00N."),
        ("version-99", MAGIC + b"version 99\n" + zlib.compress(text)),
        ("truncated-payload", (header + zlib.compress(text))[:-5]),
    ]


def write_seeds():
    import tracemalloc
    os.makedirs(SEEDS, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, snapshot in seed_snapshots(tracemalloc):
            path = os.path.join(tmp, name)
            snapshot.dump(path)
            with open(path, "rb") as f:
                save(SEEDS, name, f.read())
    for name, data in crafted_seeds():
        save(SEEDS, name, data)


def save(directory, name, data):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)


def read_corpus():
    inputs = []
    for directory in (SEEDS, CRASHES):
        if os.path.isdir(directory):
            for name in sorted(os.listdir(directory)):
                with open(os.path.join(directory, name), "rb") as f:
                    inputs.append(f.read())
    return inputs


# ---------------------------------------------------------------------------
# Mutations

INTERESTING_NUMBERS = [b"0", b"-1", b"1", b"-0", b"65535", b"65536",
                       b"2147483648", b"4294967296", b"9223372036854775808",
                       b"18446744073709551616", b"-9223372036854775809",
                       b"1e308", b"1e999", b"-1e999", b"NaN", b"Infinity",
                       b"0.5", b"9" * 5000]
INTERESTING_VALUES = [b"null", b"true", b"false", b"{}", b"[]", b'""',
                      b'"x"', b"[null]", b"[[]]", b'{"": 0}', b"[-1]",
                      b"[0, 0]", b'["bytes", "zz"]', b'["dict", [[[], 1]]]',
                      b'["set", [[]]]', b'["nope", []]', b'"\\ud800"']
NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
VALUE = re.compile(rb"-?\d+|null|true|false|\"[^\"]*\"|\[\]|\{\}")


def split_payload(data):
    """(header, JSON text) if data holds a payload we can decompress."""
    end = data.find(b"\n", len(MAGIC))
    if not data.startswith(MAGIC) or end < 0:
        return None
    decompressor = zlib.decompressobj()
    try:
        text = decompressor.decompress(data[end + 1:], 65537)
    except zlib.error:
        return None
    if len(text) > 65536:
        return None         # too big to mutate as text (the bomb)
    return data[:end + 1], text


def mutate_bytes(rng, data, pool):
    data = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 4, 8))):
        op = rng.randrange(8)
        pos = rng.randrange(len(data) + 1)
        if op == 0 and data:
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        elif op == 1 and data:
            i = rng.randrange(len(data))
            data[i] = rng.choice((0, 1, 0x7f, 0x80, 0xff, ord("\n"),
                                  ord("["), ord('"'), ord("0")))
        elif op == 2:
            data[pos:pos] = bytes(rng.randrange(256)
                                  for _ in range(rng.randrange(1, 16)))
        elif op == 3 and data:
            del data[pos:pos + rng.randrange(1, 64)]
        elif op == 4:
            del data[pos:]
        elif op == 5 and data:
            chunk = data[pos:pos + rng.randrange(1, 64)]
            data[pos:pos] = chunk * rng.randrange(1, 8)
        elif op == 6:
            other = rng.choice(pool)
            cut = rng.randrange(len(other) + 1)
            data[pos:] = other[cut:]
        else:
            data += bytes(rng.randrange(256)
                          for _ in range(rng.randrange(1, 32)))
    return bytes(data)


def mutate_json(rng, text):
    for _ in range(rng.choice((1, 1, 2, 3))):
        op = rng.randrange(6)
        if op == 0:
            matches = list(NUMBER.finditer(text))
            if matches:
                m = rng.choice(matches)
                text = (text[:m.start()] + rng.choice(INTERESTING_NUMBERS)
                        + text[m.end():])
        elif op == 1:
            matches = list(VALUE.finditer(text))
            if matches:
                m = rng.choice(matches)
                text = (text[:m.start()] + rng.choice(INTERESTING_VALUES)
                        + text[m.end():])
        elif op == 2:
            # Repeat a list element: long columns, many tracebacks.
            starts = [m.start() for m in re.finditer(rb"\[", text)]
            if starts:
                i = rng.choice(starts) + 1
                end = text.find(b",", i)
                if end > i:
                    text = (text[:i] + (text[i:end] + b",")
                            * rng.choice((2, 10, 1000)) + text[i:])
        elif op == 3:
            # Nest a value deeply.
            matches = list(VALUE.finditer(text))
            if matches:
                m = rng.choice(matches)
                depth = rng.choice((10, 1000, 50000))
                text = (text[:m.start()] + b"[" * depth + m.group()
                        + b"]" * depth + text[m.end():])
        elif op == 4:
            # Drop or duplicate a key.
            keys = list(re.finditer(rb'"\w+":', text))
            if keys:
                m = rng.choice(keys)
                text = text[:m.start()] + m.group() + b"0," + text[m.start():]
        else:
            text = mutate_bytes(rng, text, [text])
    return text


def mutate(rng, data, pool):
    # Big inputs (the bomb) only get byte-level mutations: decompressing,
    # scanning and recompressing them would take most of the budget.
    small = len(data) < 16384
    parts = split_payload(data) if small and rng.random() < 0.7 else None
    if parts is None:
        return mutate_bytes(rng, data, pool)
    header, text = parts
    if rng.random() < 0.1:
        header = mutate_bytes(rng, header, pool)
    return header + zlib.compress(mutate_json(rng, text),
                                  rng.choice((0, 1, 6, 9)))


# ---------------------------------------------------------------------------
# The loop (child) and its supervisor (parent)

def fuzz_child(seconds, max_runs, seed, current_path, report_path):
    import tracemalloc
    rng = random.Random(seed)
    pool = read_corpus()
    if not pool:
        raise SystemExit("no seeds: run with --write-seeds first")
    seen_messages = set()
    runs = findings = 0
    deadline = time.monotonic() + seconds
    tracemalloc.start(1)    # only to measure each load's peak
    # The input is written to current_path, where the parent finds it if
    # the interpreter dies on it.
    path = current_path
    # The corpus as it is first, then mutants.
    unmutated = list(pool) if seed == 0 else []
    while time.monotonic() < deadline and runs < max_runs:
        if unmutated:
            data = unmutated.pop(0)
        else:
            parent = rng.choice(pool)
            if len(parent) > 16384 and rng.random() < 0.9:
                parent = rng.choice(pool)   # big inputs are slow: rarer
            data = mutate(rng, parent, pool)
            if len(data) > MAX_INPUT:
                continue
        problem, message = check_input(tracemalloc, data, path)
        runs += 1
        if problem is not None:
            findings += 1
            with open(report_path, "a") as f:
                f.write(json.dumps({"problem": problem,
                                    "input": data.hex()}) + "\n")
        elif message is not None:
            shape = re.sub(r"\d+", "N", message)
            shape = re.sub(r"'[^']*'", "S", shape)
            if shape not in seen_messages and len(data) < 1 << 20:
                seen_messages.add(shape)
                pool.append(data)
    print(json.dumps({"runs": runs, "findings": findings,
                      "pool": len(pool)}), flush=True)


# Findings understood and reported, with why: listed, not failing the run.
KNOWN_FINDINGS = [
    (re.compile(r"the loaded snapshot is broken: IndexError: tuple index"),
     "a trace whose traceback has no frames loads (dump() writes it, from "
     "a Snapshot built by hand); statistics('filename') then raises "
     "IndexError, exactly as 3.11's does for such a snapshot"),
]


def known(problem):
    for pattern, why in KNOWN_FINDINGS:
        if pattern.search(problem):
            return why
    return None


def signature(problem):
    """Findings that differ only in numbers are one finding."""
    return re.sub(r"\d+", "N", problem)[:120]


def supervise(args):
    python = sys.executable
    totals = {"runs": 0, "findings": 0, "crashes": 0}
    saved = {}
    deadline = time.monotonic() + args.seconds
    seed = args.seed
    with tempfile.TemporaryDirectory() as tmp:
        current = os.path.join(tmp, "current")
        report = os.path.join(tmp, "report")
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or totals["runs"] >= args.runs:
                break
            env = dict(os.environ)
            env.pop("PYTHONTRACEMALLOC", None)
            proc = subprocess.run(
                [python, "-X", "faulthandler", __file__, "--child",
                 str(left), str(args.runs - totals["runs"]), str(seed),
                 current, report],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                env=env, timeout=left + 4 * TIME_LIMIT + 60)
            seed += 1
            if proc.returncode == 0:
                stats = json.loads(proc.stdout.strip().splitlines()[-1])
                totals["runs"] += stats["runs"]
                totals["pool"] = stats["pool"]
                break
            # The child died on the input it was checking.
            totals["crashes"] += 1
            totals["runs"] += 1     # at least; the child's count is lost
            with open(current, "rb") as f:
                data = f.read()
            problem = (f"the interpreter died (status {proc.returncode}): "
                       f"{proc.stderr.strip()[-200:]}")
            saved.setdefault(signature(problem), (problem, data))
        if os.path.exists(report):
            with open(report) as f:
                for line in f:
                    finding = json.loads(line)
                    totals["findings"] += 1
                    saved.setdefault(signature(finding["problem"]),
                                     (finding["problem"],
                                      bytes.fromhex(finding["input"])))
    new = 0
    for problem, data in saved.values():
        name = "crash-" + hashlib.sha1(data).hexdigest()[:12]
        why = known(problem)
        if why is not None:
            print(f"fuzz: known: {problem} ({why})")
            continue
        new += 1
        if not args.no_save:
            save(CRASHES, name, data)
        print(f"fuzz: FINDING {name} ({len(data)} bytes): {problem}")
    print(f"fuzz: {totals['runs']} executions in {args.seconds:.0f}s, "
          f"{totals['findings'] + totals['crashes']} contract violations "
          f"({len(saved)} distinct, {new} new), {totals['crashes']} "
          f"interpreter crashes; {totals.get('pool', 0)} inputs in the pool")
    return 1 if new else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--runs", type=int, default=10**9)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-save", action="store_true",
                        help="do not write findings into the corpus")
    parser.add_argument("--write-seeds", action="store_true")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        seconds, runs, seed, current, report = args.child
        fuzz_child(float(seconds), int(runs), int(seed), current, report)
        return 0
    if args.write_seeds:
        write_seeds()
        print(f"fuzz: seeds written to {SEEDS}")
        return 0
    return supervise(args)


if __name__ == "__main__":
    sys.exit(main())
