"""A bounded mutation fuzzer for tracemalloc.Snapshot.load().

    python Tools/fork/fuzz_snapshot.py --seconds 60        (make fuzz)
    python Tools/fork/fuzz_snapshot.py --write-seeds       refresh the seeds

Only the public API is used: every input is written to a file and given to
tracemalloc.Snapshot.load().  The contract checked on each input: load()
returns a snapshot or raises ValueError, within TIME_LIMIT seconds and
with a peak of traced memory below memory_limit(file size); a snapshot it
returns must be usable (statistics, compare_to, filter_traces, its traces,
and a dump that loads back equal).

Both file format versions are fuzzed (see Lib/tracemalloc/_snapshotfile.py).
Inputs are mutated at several levels: the raw bytes of a file (bit flips,
insertions, deletions, truncation, splices); for version 1, the JSON
document inside the zlib payload; for version 2, the JSON document (as
text, or as decoded data changed where it matters: call contexts, frames,
threads, count) and the packed columns (bytes, indexes and sizes set to
edge values, columns truncated, extended, resized consistently or
byte-swapped), then packed again with a correct or a deliberately wrong
declared size and document length.  Payloads are recompressed, so that
mutations reach the decoder instead of dying on the compressed stream.
A mutant whose rejection message was not seen before joins the pool of
parents (the message stands in for coverage).

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
HEADER_V1 = MAGIC + b"version 1\n"
HEADER_V2 = MAGIC + b"version 2\n"
# Version 2 columns: bytes per trace of the domain, size and call-context
# index columns, in this order.
COLUMN_WIDTHS = (4, 8, 4)
TRACE_WIDTH = sum(COLUMN_WIDTHS)
# Per input: TIME_LIMIT seconds, plus one per MiB of file (reading a big
# file is not hanging).
TIME_LIMIT = 10.0
# Mutants bigger than this are not tried: they cost time, not coverage.
MAX_INPUT = 4 << 20


def time_limit(file_size):
    return TIME_LIMIT + file_size / (1 << 20)


def memory_limit(file_size):
    """Peak of traced memory allowed while loading a file of this size.

    The loader refuses JSON that expands more than 256 times (dump()
    compresses it about 230 times at best; version 2's columns may expand
    1100 times, but take one byte of memory per byte), and a snapshot's
    objects take about 16 bytes per byte of JSON (the loader refuses
    documents with more containers or strings per byte than dump() writes:
    empty ones cost more).  The same bound as the corpus replay
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
        rejection = None
        try:
            snapshot = tracemalloc.Snapshot.load(path)
        except ValueError as exc:
            snapshot = None
            rejection = str(exc)
        except Deadline:
            return (f"load() took more than {time_limit(len(data)):.0f}s "
                    f"for {len(data)} bytes"), None
        except RecursionError:
            return "load() raised RecursionError", None
        except MemoryError:
            return "load() raised MemoryError", None
        except Exception as exc:
            return f"load() raised {type(exc).__name__}: {exc}"[:300], None
        # The memory bound holds for files that are refused too.
        peak = tracemalloc.get_traced_memory()[1]
        if peak > memory_limit(len(data)):
            return (f"load() peaked at {peak} bytes for a file of "
                    f"{len(data)} bytes"), None
        if snapshot is None:
            return None, rejection
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
    if len(traces) > 10000:
        return      # big but valid: using it is not load()'s business
    traces = list(traces)
    if sum(len(trace.traceback) for trace in traces) > 100000:
        return
    for key_type in ("lineno", "filename", "traceback", "thread"):
        snapshot.statistics(key_type)
    snapshot.statistics("lineno", cumulative=True)
    snapshot.compare_to(snapshot, "lineno")
    snapshot.filter_traces([tracemalloc.Filter(False, "*a*"),
                            tracemalloc.DomainFilter(False, 1)])
    for trace in traces:
        str(trace)
        trace.traceback.format()
    if traces:
        # Indexing and slicing read the columns of a loaded snapshot.
        if snapshot.traces[-1] != traces[-1]:
            raise AssertionError("traces[-1] is not the last trace")
        if list(snapshot.traces[::2]) != traces[::2]:
            raise AssertionError("traces[::2] differs from the list")
    snapshot.dump(path)
    again = tracemalloc.Snapshot.load(path)
    if list(again.traces) != traces:
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
    # Made-up traces that do not fit version 2's columns: dump() writes
    # version 1.
    wide = tracemalloc.Snapshot(
        [(2**32, 1, frames_a, 3), (0, 2**64, frames_b, None)], 3)
    only_here = [tracemalloc.Filter(True, __file__)]
    tracemalloc.start(10)
    try:
        data = [str(i) * (i % 7) for i in range(300)]
        real = tracemalloc.take_snapshot().filter_traces(only_here)
        threads = take_threads_snapshot(tracemalloc).filter_traces(only_here)
        big = [bytes(1000) for _ in range(100)]
        del big
        peak = tracemalloc.take_snapshot(peak=True).filter_traces(only_here)
        del data
    finally:
        tracemalloc.stop()
    return [("empty", tracemalloc.Snapshot([], 1)),
            ("synthetic", synthetic),
            ("attributes", with_attributes),
            ("wide", wide),
            ("real", real),
            ("real-threads", threads),
            ("real-peak", peak)]


def take_threads_snapshot(tracemalloc):
    """A snapshot taken with threads=True while a second thread holds
    memory it allocated."""
    import threading
    ready = threading.Event()
    done = threading.Event()
    held = []

    def worker():
        held.append([str(i) * 3 for i in range(50)])
        ready.set()
        done.wait()

    thread = threading.Thread(target=worker, name="fuzz-seed-worker")
    thread.start()
    try:
        ready.wait()
        return tracemalloc.take_snapshot(threads=True)
    finally:
        done.set()
        thread.join()


def crafted_seeds():
    """Hostile version 1 files written by hand: (name, bytes)."""
    header = HEADER_V1
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


def pack_v2(text, columns, declared=None, length=None, level=1,
            header=HEADER_V2):
    """A version 2 file; *declared* (the expanded payload size) and
    *length* (the document's) override the true sizes, modulo 2**64."""
    if length is None:
        length = len(text)
    payload = (length % 2**64).to_bytes(8, "little") + text + columns
    if declared is None:
        declared = len(payload)
    return (header + (declared % 2**64).to_bytes(8, "little")
            + zlib.compress(payload, level))


def split_v2(data, limit=None):
    """(document text, column bytes) of a version 2 file whose payload
    expands to at most *limit* bytes, else None.  The declared sizes are
    not checked: mutants are split too."""
    if not data.startswith(HEADER_V2):
        return None
    decompressor = zlib.decompressobj()
    limit = (1 << 18) if limit is None else limit
    try:
        payload = decompressor.decompress(data[len(HEADER_V2) + 8:],
                                          limit + 1)
    except zlib.error:
        return None
    if len(payload) > limit or len(payload) < 8:
        return None
    length = int.from_bytes(payload[:8], "little")
    if length > len(payload) - 8:
        return None
    return payload[8:8 + length], payload[8 + length:]


def crafted_seeds_v2(tracemalloc):
    """Hostile version 2 files, made from a real dump: (name, bytes)."""
    frames = (("a.py", 1), ("b.py", 2))
    snapshot = tracemalloc.Snapshot(
        [(0, 10, frames, 2), (1, 20, frames[1:], 1), (0, 30, (), 0)], 5)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "snapshot")
        snapshot.dump(path)
        with open(path, "rb") as f:
            valid = f.read()
    text, columns = split_v2(valid)
    document = json.loads(text)
    count = document["count"]
    contexts = len(document["tracebacks"])

    def with_document(**changes):
        return json.dumps(dict(document, **changes)).encode()

    def column(i):
        start = sum(COLUMN_WIDTHS[:i]) * count
        return columns[start:start + COLUMN_WIDTHS[i] * count]

    def swapped(i):
        width = COLUMN_WIDTHS[i]
        data = column(i)
        return b"".join(data[j:j + width][::-1]
                        for j in range(0, len(data), width))

    bad_index = bytearray(columns)
    bad_index[-4:] = contexts.to_bytes(4, "little")
    zeros = bytes(16 * 2**20)
    return [
        ("v2-empty-payload", HEADER_V2 + (0).to_bytes(8, "little")
         + zlib.compress(b"")),
        ("v2-header-only", HEADER_V2 + b"\x00\x01\x02\x03"),
        # The declared size is checked before anything is expanded.
        ("bomb-v2-declared", pack_v2(text, columns, declared=2**63)),
        ("bomb-v2-declared-max", pack_v2(text, columns, declared=2**64 - 1)),
        # 16 MiB of zeros, declared honestly (within deflate's ratio), as
        # the columns of 2**40 traces: the count does not match, and the
        # columns are never allocated.
        ("bomb-v2-zeros", pack_v2(with_document(count=2**40), zeros,
                                  level=9)),
        ("v2-declared-short", pack_v2(text, columns,
                                      declared=8 + len(text) + len(columns)
                                      - 1)),
        ("v2-declared-long", pack_v2(text, columns,
                                     declared=8 + len(text) + len(columns)
                                     + 1)),
        ("v2-count-plus-one", pack_v2(with_document(count=count + 1),
                                      columns)),
        ("v2-count-minus-one", pack_v2(with_document(count=count - 1),
                                       columns)),
        ("v2-count-huge", pack_v2(with_document(count=2**62), columns)),
        ("v2-count-negative", pack_v2(with_document(count=-1), columns)),
        ("v2-count-string", pack_v2(with_document(count=str(count)),
                                    columns)),
        ("v2-columns-truncated", pack_v2(text, columns[:-3])),
        ("v2-columns-extended", pack_v2(text, columns + bytes(16))),
        ("v2-index-out-of-range", pack_v2(text, bytes(bad_index))),
        ("v2-document-length-beyond", pack_v2(text, columns,
                                              length=2**40)),
        ("v2-document-length-max", pack_v2(text, columns,
                                           length=2**64 - 1)),
        ("v2-document-length-short", pack_v2(text, columns,
                                             length=len(text) - 1)),
        # What a writer on a big-endian machine that forgot to swap would
        # produce: the declared size, or the columns, in big-endian order.
        ("v2-big-endian-declared", HEADER_V2
         + (8 + len(text) + len(columns)).to_bytes(8, "big")
         + zlib.compress(len(text).to_bytes(8, "little") + text + columns)),
        ("v2-big-endian-columns", pack_v2(text, swapped(0) + swapped(1)
                                          + swapped(2))),
        ("v2-trailing-data", valid + b"junk"),
        # The other version's payload behind each header.
        ("v2-header-v1-payload", HEADER_V1 + valid[len(HEADER_V2) + 8:]),
        ("v2-header-v2-json-only", pack_v2(b'{"traceback_limit": 1}', b"")),
    ]


def write_seeds():
    """Write the seeds.  Version 1 snapshot seeds are files an earlier
    dump() wrote: kept as they are (they check that old files still load),
    written with version 1 only when missing."""
    import tracemalloc
    from tracemalloc import _snapshotfile
    os.makedirs(SEEDS, exist_ok=True)
    for name, snapshot in seed_snapshots(tracemalloc):
        if not os.path.exists(os.path.join(SEEDS, name)):
            save(SEEDS, name, _snapshotfile.encode(snapshot, version=1))
        if name != "wide":
            save(SEEDS, "v2-" + name, dump_bytes(snapshot))
    for name, data in crafted_seeds() + crafted_seeds_v2(tracemalloc):
        save(SEEDS, name, data)


def dump_bytes(snapshot):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "snapshot")
        snapshot.dump(path)
        with open(path, "rb") as f:
            return f.read()


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


# Edge values for the fields of version 2 columns.
EDGE_DOMAINS = (0, 1, 2**31 - 1, 2**31, 2**32 - 1)
EDGE_SIZES = (0, 1, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1)
# Wrong sizes for the header and payload of version 2 (relative to the
# true size n, and absolute).
EDGE_SIZE_DELTAS = (-1, 1, -8, 8, 16)
EDGE_SIZES_ABSOLUTE = (0, 1, 7, 8, 2**31, 2**32, 2**63, 2**64 - 1)


def column_layout(text, columns):
    """(count, number of call contexts) read from a version 2 document,
    falling back to what the column bytes can hold."""
    count = len(columns) // TRACE_WIDTH
    contexts = 0
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        return count, contexts
    if type(document) is dict:
        if (type(document.get("count")) is int
                and TRACE_WIDTH * document["count"] == len(columns)):
            count = document["count"]
        if type(document.get("tracebacks")) is list:
            contexts = len(document["tracebacks"])
    return count, contexts


def set_count(text, count):
    """*text* with its "count" replaced (by text, so that the rest of a
    broken document stays as broken as it was)."""
    value = count if isinstance(count, bytes) else str(count).encode()
    new, n = re.subn(rb'"count"\s*:\s*[^,}\]]*', b'"count": ' + value, text,
                     count=1)
    return new if n else text


def mutate_columns(rng, text, columns):
    """Mutate the packed columns of a version 2 payload; the document's
    count is changed too when the mutation resizes the columns on
    purpose.  Return (text, columns)."""
    count, contexts = column_layout(text, columns)
    data = bytearray(columns)
    starts = [0, 4 * count, 12 * count]
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        op = rng.randrange(10)
        if op == 0 and data:
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        elif op == 1 and count:
            # A call-context index at an edge: the last valid one, the
            # first invalid ones, the largest.
            value = rng.choice((0, contexts - 1, contexts, contexts + 1,
                                2**31 - 1, 2**31, 2**32 - 1)) % 2**32
            i = starts[2] + 4 * rng.randrange(count)
            data[i:i + 4] = value.to_bytes(4, "little")
        elif op == 2 and count:
            i = starts[1] + 8 * rng.randrange(count)
            data[i:i + 8] = rng.choice(EDGE_SIZES).to_bytes(8, "little")
        elif op == 3 and count:
            i = starts[0] + 4 * rng.randrange(count)
            data[i:i + 4] = rng.choice(EDGE_DOMAINS).to_bytes(4, "little")
        elif op == 4 and data:
            # Truncate: by part of an item, an item, a trace, or a column.
            cut = rng.choice((1, 3, 4, 8, 12, 16, 4 * count, 8 * count,
                              rng.randrange(len(data) + 1)))
            del data[max(0, len(data) - cut):]
        elif op == 5:
            data += rng.choice((bytes(rng.choice((1, 4, 8, 16, 32))),
                                b"\xff" * rng.choice((4, 16, 64)),
                                rng.randbytes(rng.randrange(1, 48))))
        elif op == 6 and count and len(data) == TRACE_WIDTH * count:
            # Resize consistently: rows repeated or dropped in every
            # column, and the count updated, so that the file gets past
            # the count check.
            new_count = rng.choice((0, 1, count - 1, count + 1, 2 * count,
                                    count + rng.randrange(1, 2000)))
            rows = [rng.randrange(count) for _ in range(new_count)]
            resized = bytearray()
            for start, width in zip(starts, COLUMN_WIDTHS):
                for row in rows:
                    i = start + width * row
                    resized += data[i:i + width]
            data = resized
            text = set_count(text, new_count)
            count = new_count
            starts = [0, 4 * count, 12 * count]
        elif op == 7:
            text = set_count(text, rng.choice(
                (count + 1, count - 1, 0, -1, 2**32, 2**61, 2**62, 2**64,
                 b'"1"', b"null", b"1.0", b"true", b"[]",
                 len(data) // TRACE_WIDTH + 1)))
        elif op == 8 and count:
            # Byte-swap every item: big-endian-looking columns.
            swapped = bytearray()
            for start, width in zip(starts, COLUMN_WIDTHS):
                for i in range(start, start + width * count, width):
                    swapped += data[i:i + width][::-1]
            data = swapped + data[len(swapped):]
        elif op == 9 and count:
            # Swap the domain and index columns (the same width).
            domains = data[starts[0]:starts[1]]
            indexes = data[starts[2]:starts[2] + 4 * count]
            data[starts[0]:starts[1]] = indexes
            data[starts[2]:starts[2] + 4 * count] = domains
    return text, bytes(data)


def mutate_document(rng, text):
    """Change the decoded version 2 document where its parts refer to each
    other (call contexts, frames, filenames, threads, count); None if the
    text is not a JSON object."""
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if type(document) is not dict:
        return None

    def a_list(name):
        value = document.get(name)
        return value if type(value) is list else None

    for _ in range(rng.choice((1, 1, 2))):
        op = rng.randrange(10)
        tracebacks = a_list("tracebacks")
        total_nframe = a_list("total_nframe")
        threads = a_list("threads")
        frames = a_list("frames")
        filenames = a_list("filenames")
        if op == 0 and tracebacks:
            # Drop the last call context (indexes to it now dangle), with
            # or without its per-context items.
            tracebacks.pop()
            if rng.random() < 0.8:
                for items in (total_nframe, threads):
                    if items:
                        items.pop()
        elif op == 1 and tracebacks is not None:
            nframe = len(frames) // 2 if frames else 0
            tracebacks.append(rng.choice(
                ([], [0], [nframe - 1], [nframe], [-1], [2**32],
                 list(range(nframe)) * rng.choice((1, 100)))))
            if rng.random() < 0.8:
                if total_nframe is not None:
                    total_nframe.append(rng.choice((None, 0, -1, 2**70)))
                if threads is not None:
                    threads.append(rng.choice((0, 1, -1, 2**64)))
        elif op == 2:
            # Threads present or not, of the right length or not.
            if threads is None and tracebacks is not None:
                n = len(tracebacks) + rng.choice((0, 0, 0, -1, 1))
                document["threads"] = [rng.choice((0, 1, 12345, -1, 2**64))
                                       for _ in range(max(n, 0))]
            else:
                document["threads"] = rng.choice((None, {}, "x", [None]))
        elif op == 3 and total_nframe:
            i = rng.randrange(len(total_nframe))
            total_nframe[i] = rng.choice((None, 0, -1, 2**31, 2**70, 1.5,
                                          "1", True))
        elif op == 4 and frames:
            i = rng.randrange(len(frames))
            frames[i] = rng.choice((0, -1, 2**31, 2**63, 2**64, 10**30,
                                    len(filenames or ()), None, 1.0))
        elif op == 5 and frames is not None:
            frames.extend(rng.choice(([0], [0, 0], [0, 1] * 500)))
        elif op == 6 and filenames is not None:
            filenames.append(rng.choice(("", "\udcff", "\x00", "x" * 10000,
                                         "<unknown>", 0, None)))
        elif op == 7:
            attributes = document.get("attributes")
            if type(attributes) is dict:
                name, value = rng.choice((
                    ("thread_names", ["dict", [[1, "main"]]]),
                    ("thread_names", ["dict", [["1", "main"]]]),
                    ("thread_names", ["list", []]),
                    ("traces", None), ("traceback_limit", 1),
                    ("x", ["bytes", "zz"]), ("x", ["set", [["list", []]]]),
                    ("x", ["dict", [[["tuple", [1]], 2]]])))
                attributes[name] = value
            else:
                document["attributes"] = rng.choice(({}, [], None))
        elif op == 8:
            # Drop a key, or add one.
            if document and rng.random() < 0.5:
                del document[rng.choice(sorted(document))]
            else:
                document[rng.choice(("traces", "version", "extra"))] = 0
        else:
            document["traceback_limit"] = rng.choice(
                (0, -1, 1, 2**31, 2**70, None, 1.5, "25"))
    return json.dumps(document, ensure_ascii=rng.random() < 0.9).encode(
        "utf-8", "surrogatepass")


def wrong_size(rng, true_size):
    if rng.random() < 0.5:
        return max(true_size + rng.choice(EDGE_SIZE_DELTAS), 0)
    return rng.choice(EDGE_SIZES_ABSOLUTE)


def mutate_v2(rng, text, columns, pool):
    """A mutant of a version 2 file from its document and columns."""
    r = rng.random()
    if r < 0.3:
        text = mutate_json(rng, text)
    elif r < 0.55:
        text = mutate_document(rng, text) or mutate_json(rng, text)
    elif r < 0.95:
        text, columns = mutate_columns(rng, text, columns)
    else:
        # Both.
        text = mutate_document(rng, text) or text
        text, columns = mutate_columns(rng, text, columns)
    length = None if rng.random() < 0.9 else wrong_size(rng, len(text))
    level = rng.choice((0, 1, 6, 9))
    data = pack_v2(text, columns, length=length, level=level)
    if rng.random() < 0.1:
        # A wrong declared size; the edges of the loader's bound (what
        # deflate can expand to) included.
        compressed = len(data) - len(HEADER_V2) - 8
        declared = rng.choice((
            wrong_size(rng, 8 + len(text) + len(columns)),
            1100 * compressed + (1 << 20), 1100 * compressed + (1 << 20) + 1,
            1032 * compressed))
        data = pack_v2(text, columns, declared=declared, length=length,
                       level=level)
    if rng.random() < 0.05:
        data = mutate_bytes(rng, data[:len(HEADER_V2)], pool) \
            + data[len(HEADER_V2):]
    return data


def convert(rng, data):
    """The payload of one version behind the other's header; None if
    *data* has no payload to convert."""
    parts = split_v2(data)
    if parts is not None:
        text, columns = parts
        return HEADER_V1 + zlib.compress(text + (columns if rng.random()
                                                 < 0.2 else b""))
    parts = split_payload(data)
    if parts is not None and parts[0] == HEADER_V1:
        text = parts[1]
        return pack_v2(text, rng.choice((b"", bytes(16), rng.randbytes(32))))
    return None


def mutate(rng, data, pool):
    # Big inputs (the bombs) only get byte-level mutations: decompressing,
    # scanning and recompressing them would take most of the budget.
    small = len(data) < 16384
    if small and rng.random() < 0.8:
        if rng.random() < 0.03:
            converted = convert(rng, data)
            if converted is not None:
                return converted
        parts = split_v2(data)
        if parts is not None:
            return mutate_v2(rng, *parts, pool)
        parts = split_payload(data)
        if parts is not None:
            header, text = parts
            if rng.random() < 0.1:
                header = mutate_bytes(rng, header, pool)
            return header + zlib.compress(mutate_json(rng, text),
                                          rng.choice((0, 1, 6, 9)))
    return mutate_bytes(rng, data, pool)


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
        if os.path.exists(os.path.join(CRASHES, name)):
            # An open finding already in the corpus, found again.
            print(f"fuzz: already in the corpus: {name}: {problem}")
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
