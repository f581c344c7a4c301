"""Tests of the fork's additions to the tracemalloc module.

test_tracemalloc checks the API shared with upstream CPython.  This file
covers what the fork adds or changes: the snapshot file format (round trip,
rejection of bad files, atomic writes), the statistics fast paths (checked
against a naive reference computation) and the ``python -m tracemalloc``
leak report.
"""

import gc
import os
import pickle
import random
import stat
import tempfile
import textwrap
import tracemalloc
import unittest
import zlib
from unittest import mock

from tracemalloc import _snapshotfile
from test.support import os_helper
from test.support.script_helper import (assert_python_ok,
                                        assert_python_failure,
                                        make_script)
# Upstream CPython 3.11 to pickle with, or None (the system's 3.11 is
# checked not to be this fork).
from test.test_tracemalloc_badinput import pristine_python


MAGIC = b"tracemalloc-snapshot\n"


def make_raw_traces(count, seed, distinct=40, max_depth=6):
    """Return *count* raw traces drawn from *distinct* call contexts.

    Like the C engine, most traces of one call context share one frames
    tuple; a few get an equal but distinct tuple, which the statistics must
    still merge.  Some tracebacks contain a frame twice (recursion).
    """
    rng = random.Random(seed)
    filenames = ["a.py", "b.py", "pkg/c.py", "d.pyc", "<unknown>",
                 "caf\xe9.py"]
    contexts = []
    for _ in range(distinct):
        depth = rng.randint(1, max_depth)
        frames = tuple((rng.choice(filenames), rng.randint(0, 6))
                       for _ in range(depth))
        contexts.append(frames)
    traces = []
    for _ in range(count):
        frames = rng.choice(contexts)
        if rng.random() < 0.1:
            frames = tuple(list(frames))
            frames = tuple(tuple(list(frame)) for frame in frames)
        total_nframe = len(frames) + rng.choice((0, 0, 3))
        traces.append((rng.choice((0, 0, 0, 1, 7)), rng.randint(1, 10_000),
                       frames, total_nframe))
    return traces


def damaged_copies(valid, seed, count=300):
    """*count* copies of the bytes *valid*, each with 1 to 4 random bytes
    changed, and a third of them cut short."""
    rng = random.Random(seed)
    for _ in range(count):
        data = bytearray(valid)
        for _ in range(rng.randint(1, 4)):
            position = rng.randrange(len(data))
            data[position] = rng.randrange(256)
        if rng.random() < 0.3:
            del data[rng.randrange(len(data)):]
        yield bytes(data)


def naive_group(raw_traces, key_type, cumulative):
    """Reference grouping: {key frames tuple: [size, count]}."""
    groups = {}
    for domain, size, frames, total_nframe in raw_traces:
        if cumulative:
            if key_type == 'lineno':
                keys = [(frame,) for frame in frames]
            else:
                keys = [((frame[0], 0),) for frame in frames]
        elif key_type == 'traceback':
            keys = [frames]
        elif key_type == 'lineno':
            keys = [frames[:1]]
        else:
            keys = [((frames[0][0], 0),)]
        for key in keys:
            group = groups.setdefault(key, [0, 0])
            group[0] += size
            group[1] += 1
    return groups


def stat_map(stats):
    """{oldest-first frames tuple: (size, count)} of Statistic objects."""
    result = {}
    for statistic in stats:
        key = tuple((frame.filename, frame.lineno)
                    for frame in statistic.traceback)
        result[key] = (statistic.size, statistic.count)
    return result


class SnapshotFileTestCase(unittest.TestCase):
    def setUp(self):
        self.filename = os_helper.TESTFN
        self.addCleanup(os_helper.unlink, self.filename)

    def write(self, data):
        with open(self.filename, 'wb') as fp:
            fp.write(data)

    def read(self):
        with open(self.filename, 'rb') as fp:
            return fp.read()

    def dump_bytes(self, snapshot):
        snapshot.dump(self.filename)
        return self.read()

    def assertRejected(self, data, *fragments):
        """Loading *data* must fail with ValueError mentioning *fragments*."""
        self.write(data)
        with self.assertRaises(ValueError) as cm:
            tracemalloc.Snapshot.load(self.filename)
        message = str(cm.exception)
        self.assertIn(repr(self.filename), message)
        for fragment in fragments:
            self.assertIn(fragment, message)
        return message

    def payload_document(self, data):
        """Decode a snapshot file's header and JSON document (for tests)."""
        import json
        header_end = data.index(b"\n", len(MAGIC)) + 1
        return (data[:header_end],
                json.loads(zlib.decompress(data[header_end:])))

    def file_from_document(self, header, document):
        import json
        return header + zlib.compress(json.dumps(document).encode())


class TestDumpLoadRoundTrip(SnapshotFileTestCase):
    def test_round_trip_synthetic(self):
        raw = make_raw_traces(3000, seed=1)
        # Values the engine may produce: huge sizes, big domains, no
        # total_nframe, undecodable filenames (surrogate escapes).
        raw.append((2**32 - 1, 2**63 + 5, (("x\udcff.py", 2**31),), None))
        raw.append((0, 0, (("", 0),), 0))
        snapshot = tracemalloc.Snapshot(raw, 17)
        snapshot.dump(self.filename)

        loaded = tracemalloc.Snapshot.load(self.filename)
        self.assertIsInstance(loaded, tracemalloc.Snapshot)
        self.assertEqual(loaded.traceback_limit, 17)
        self.assertEqual(loaded.traces, snapshot.traces)
        self.assertEqual(loaded.traces._traces, raw)
        for original, copy in zip(raw, loaded.traces._traces):
            self.assertIs(type(copy), tuple)
            self.assertIs(type(copy[2]), tuple)
        self.assertEqual(loaded.traces[-2].traceback.total_nframe, None)
        self.assertEqual(loaded.statistics('traceback'),
                         snapshot.statistics('traceback'))

    def test_loaded_tracebacks_are_shared(self):
        frames = (("a.py", 1), ("b.py", 2))
        equal_copy = tuple(list(frames))
        raw = [(0, 10, frames, 2), (0, 20, frames, 2),
               (1, 30, equal_copy, 2)]
        tracemalloc.Snapshot(raw, 2).dump(self.filename)
        loaded = tracemalloc.Snapshot.load(self.filename)
        first, second, third = loaded.traces._traces
        # Equal tracebacks come back as one tuple object, as from the engine.
        self.assertIs(first[2], second[2])
        self.assertIs(first[2], third[2])

    def test_round_trip_real_snapshot(self):
        # With PYTHONTRACEMALLOC, tracing is on already: use it as it is.
        was_tracing = tracemalloc.is_tracing()
        if not was_tracing:
            tracemalloc.start(10)
        try:
            data = [bytes(100) for _ in range(100)]
            snapshot = tracemalloc.take_snapshot()
        finally:
            if not was_tracing:
                tracemalloc.stop()
        del data
        snapshot.dump(self.filename)
        loaded = tracemalloc.Snapshot.load(self.filename)
        self.assertEqual(loaded.traceback_limit, snapshot.traceback_limit)
        self.assertGreater(len(loaded.traces), 100)
        self.assertEqual(loaded.traces, snapshot.traces)

    def test_round_trip_attributes(self):
        snapshot = tracemalloc.Snapshot([(0, 1, (("a.py", 1),), 1)], 1)
        values = {
            "none": None, "flag": True, "number": -12345678901234567890,
            "ratio": 0.25, "text": "caf\xe9 \udcff", "raw": b"\x00\xff",
            "items": [1, "two", (3, 4.5)], "pair": (None, False),
            "unique": {1, "x", (2, 3)}, "frozen": frozenset({b"a"}),
            "mapping": {"k": [1], 2: {"nested": ()}, (1, 2): frozenset()},
            "empty": [],
        }
        for name, value in values.items():
            setattr(snapshot, name, value)
        snapshot.dump(self.filename)

        loaded = tracemalloc.Snapshot.load(self.filename)
        for name, value in values.items():
            with self.subTest(name=name):
                self.assertEqual(getattr(loaded, name), value)
                self.assertIs(type(getattr(loaded, name)), type(value))
        self.assertIs(type(loaded.items[2]), tuple)
        self.assertIs(type(loaded.mapping[2]["nested"]), tuple)

    def test_dump_rejects_unsupported_attribute(self):
        snapshot = tracemalloc.Snapshot([], 1)
        snapshot.callback = print
        with self.assertRaises(TypeError) as cm:
            snapshot.dump(self.filename)
        self.assertIn("'callback'", str(cm.exception))
        self.assertFalse(os.path.exists(self.filename))

    def test_dump_rejects_bad_traces(self):
        for raw in ([(0, 1, (("a.py", 1),))],          # no total_nframe
                    [(0, 1.5, (("a.py", 1),), 1)],     # float size
                    [(0, 1, ((b"a.py", 1),), 1)]):     # bytes filename
            with self.subTest(raw=raw):
                with self.assertRaises(TypeError):
                    tracemalloc.Snapshot(raw, 1).dump(self.filename)
                self.assertFalse(os.path.exists(self.filename))

    def test_load_subclass(self):
        class MySnapshot(tracemalloc.Snapshot):
            def __init__(self):     # another signature than Snapshot's
                raise AssertionError("load() must not call __init__()")

        tracemalloc.Snapshot([(0, 5, (("a.py", 1),), 1)], 3).dump(
            self.filename)
        loaded = MySnapshot.load(self.filename)
        self.assertIs(type(loaded), MySnapshot)
        self.assertEqual(loaded.traceback_limit, 3)
        self.assertEqual(len(loaded.traces), 1)

    def test_file_layout(self):
        raw = [(3, 100, (("a.py", 1), ("b.py", 2)), 5),
               (0, 2**40, (("a.py", 1),), None),
               (3, 7, (("a.py", 1), ("b.py", 2)), 5)]
        data = self.dump_bytes(tracemalloc.Snapshot(raw, 5))
        document, columns = split_v2(data)
        self.assertEqual(document["traceback_limit"], 5)
        self.assertEqual(document["count"], 3)
        self.assertEqual(document["filenames"], ["a.py", "b.py"])
        self.assertEqual(document["frames"], [0, 1, 1, 2])
        self.assertEqual(document["tracebacks"], [[0, 1], [0]])
        self.assertEqual(document["total_nframe"], [5, None])
        self.assertIsNone(document["threads"])
        self.assertEqual(columns, b"".join([
            (3).to_bytes(4, "little"), (0).to_bytes(4, "little"),
            (3).to_bytes(4, "little"),
            (100).to_bytes(8, "little"), (2**40).to_bytes(8, "little"),
            (7).to_bytes(8, "little"),
            (0).to_bytes(4, "little"), (1).to_bytes(4, "little"),
            (0).to_bytes(4, "little")]))

    def test_narrow_columns(self):
        # Every domain 0: the domain column is left out.
        raw = [(0, 100, (("a.py", 1),), 1), (0, 2**40, (("b.py", 2),), 1)]
        data = self.dump_bytes(tracemalloc.Snapshot(raw, 1))
        document, columns = split_v2(data)
        self.assertEqual(document["domains"], "zero")
        # 2**40 does not fit in 4 bytes: sizes take 8.
        self.assertNotIn("size_bytes", document)
        self.assertEqual(len(columns), 12 * 2)
        loaded = tracemalloc.Snapshot.load(self.filename)
        self.assertEqual(loaded.traces._traces, raw)
        # Sizes that all fit take 4 bytes each ("size_bytes": 4), with
        # 2**32 - 1 as the largest.
        raw = [(0, 7, (("a.py", 1),), 1), (0, 2**32 - 1, (("a.py", 1),), 1),
               (0, 0, (("a.py", 1),), 1)]
        document, columns = split_v2(self.dump_bytes(
            tracemalloc.Snapshot(raw, 1)))
        self.assertEqual(document["size_bytes"], 4)
        # The sizes (little-endian), then the indexes.
        self.assertEqual(columns, b"".join(
            [(7).to_bytes(4, "little"), (2**32 - 1).to_bytes(4, "little"),
             bytes(4), bytes(12)]))
        loaded = tracemalloc.Snapshot.load(self.filename)
        self.assertEqual(loaded.traces._traces, raw)
        # A size of 8 bytes per trace loads as well.
        wide = b"".join(size.to_bytes(8, "little") for size in (7, 2**32 - 1,
                                                                 0))
        wide_document = {key: value for key, value in document.items()
                         if key != "size_bytes"}
        self.write(make_v2(wide_document, wide + columns[12:]))
        loaded = tracemalloc.Snapshot.load(self.filename)
        self.assertEqual(loaded.traces._traces, raw)
        for bad in (dict(document, size_bytes=2), dict(document,
                                                       size_bytes="4"),
                    dict(document, domains="none"),
                    wide_document):     # wrong length
            with self.subTest(bad=bad):
                self.assertRejected(make_v2(bad, columns), "corrupt payload")

    def test_version_1_for_values_out_of_column_range(self):
        # A domain or size that does not fit the columns (made-up traces
        # only) is written in version 1, which keeps any int.
        for raw in ([(2**32, 1, (("a.py", 1),), 1)],
                    [(0, 2**64, (("a.py", 1),), 1)],
                    [(0, -1, (("a.py", 1),), 1)]):
            with self.subTest(raw=raw):
                data = self.dump_bytes(tracemalloc.Snapshot(raw, 1))
                self.assertTrue(data.startswith(MAGIC + b"version 1\n"))
                loaded = tracemalloc.Snapshot.load(self.filename)
                self.assertEqual(loaded.traces._traces, raw)

    def test_version_1_files_load(self):
        # Files written by earlier versions of the fork.
        raw = make_raw_traces(500, seed=3)
        raw5 = [trace + (i % 3,) for i, trace in enumerate(raw)]
        for traces in (raw, raw5):
            snapshot = tracemalloc.Snapshot(traces, 6)
            snapshot.note = "old"
            self.write(_snapshotfile.encode(snapshot, version=1))
            loaded = tracemalloc.Snapshot.load(self.filename)
            self.assertEqual(loaded.traces._traces, traces)
            self.assertEqual(loaded.note, "old")

    def test_round_trip_real_snapshot_columns(self):
        # take_snapshot() keeps columns; dump() writes them as they are and
        # load() gives columns back, for the plain, peak and thread views.
        was_tracing = tracemalloc.is_tracing()
        if not was_tracing:
            tracemalloc.start(10)
        try:
            data = [bytes(100) for _ in range(100)]
            snapshots = [tracemalloc.take_snapshot(),
                         tracemalloc.take_snapshot(peak=True),
                         tracemalloc.take_snapshot(threads=True)]
        finally:
            if not was_tracing:
                tracemalloc.stop()
        del data
        for snapshot in snapshots:
            self.assertIsNotNone(snapshot.traces._columns)
            snapshot.dump(self.filename)
            loaded = tracemalloc.Snapshot.load(self.filename)
            self.assertIsNotNone(loaded.traces._columns)
            for key in ('lineno', 'traceback', 'thread'):
                self.assertEqual(loaded.statistics(key),
                                 snapshot.statistics(key))
            self.assertEqual(loaded.thread_names, snapshot.thread_names)
            self.assertEqual(loaded.traces._traces, snapshot.traces._traces)


def split_v2(data):
    """(document, column bytes) of a version 2 snapshot file."""
    import json
    header = MAGIC + b"version 2\n"
    assert data.startswith(header), data[:40]
    declared = int.from_bytes(data[len(header):len(header) + 8], "little")
    payload = zlib.decompress(data[len(header) + 8:])
    assert len(payload) == declared
    length = int.from_bytes(payload[:8], "little")
    return json.loads(payload[8:8 + length]), payload[8 + length:]


def index_column_offset(document):
    """Where the column of call context indexes starts in a version 2
    file's column bytes."""
    domain_bytes = 0 if document.get("domains") == "zero" else 4
    return document["count"] * (domain_bytes + document.get("size_bytes", 8))


def make_v2(document, columns, declared=None, length=None):
    """A version 2 file; *declared* and *length* override the sizes."""
    import json
    text = json.dumps(document).encode()
    payload = ((len(text) if length is None else length).to_bytes(8, "little")
               + text + columns)
    declared = len(payload) if declared is None else declared
    return (MAGIC + b"version 2\n" + declared.to_bytes(8, "little")
            + zlib.compress(payload))


class TestLoadRejects(SnapshotFileTestCase):
    """Version 1 files (JSON), and what every version shares."""

    def valid_file(self):
        raw = make_raw_traces(200, seed=2)
        snapshot = tracemalloc.Snapshot(raw, 6)
        snapshot.note = "hello"
        return _snapshotfile.encode(snapshot, version=1)

    def test_empty_file(self):
        self.assertRejected(b"", "empty")

    def test_not_a_snapshot(self):
        self.assertRejected(b"hello world\n" * 10, "not a snapshot file")
        self.assertRejected(b"\x89PNG\r\n\x1a\n" + bytes(100),
                            "not a snapshot file")

    def test_pickle_file(self):
        # A snapshot pickled by upstream CPython's Snapshot.dump().
        data = pickle.dumps(tracemalloc.Snapshot([], 1),
                            pickle.HIGHEST_PROTOCOL)
        self.assertRejected(data, "not a snapshot file", "pickle")

    def test_malicious_pickle_is_not_executed(self):
        marker = os_helper.TESTFN + "_pwned"
        self.addCleanup(os_helper.unlink, marker)

        class Exploit:
            def __reduce__(self):
                return (open, (marker, "w"))

        self.assertRejected(pickle.dumps(Exploit(), 4), "pickle")
        self.assertFalse(os.path.exists(marker))

    def test_unsupported_version(self):
        valid = self.valid_file()
        body = valid[len(MAGIC + b"version 1\n"):]
        message = self.assertRejected(MAGIC + b"version 3\n" + body,
                                      "unsupported", "version 3")
        self.assertIn("versions 1 and 2", message)
        self.assertRejected(MAGIC + b"version 1000\n" + body,
                            "unsupported", "version 1000")

    def test_corrupt_version_line(self):
        body = self.valid_file()[len(MAGIC + b"version 1\n"):]
        for line in (b"version\n", b"version x\n", b"version -1\n",
                     b"Version 1\n", b"version 1 extra\n",
                     b"v" * 100 + b"\n"):
            with self.subTest(line=line):
                self.assertRejected(MAGIC + line + body, "corrupt header")

    def test_truncated(self):
        valid = self.valid_file()
        header_length = len(MAGIC + b"version 1\n")
        cuts = [1, len(MAGIC) - 1, len(MAGIC), len(MAGIC) + 3,
                header_length, header_length + 1, header_length + 10,
                (header_length + len(valid)) // 2, len(valid) - 1]
        for cut in cuts:
            with self.subTest(cut=cut):
                self.assertRejected(valid[:cut], "truncated")

    def test_corrupt_compressed_payload(self):
        valid = self.valid_file()
        header_length = len(MAGIC + b"version 1\n")
        for position in (header_length, header_length + 1,
                         len(valid) - 2):
            data = bytearray(valid)
            data[position] ^= 0xFF
            with self.subTest(position=position):
                self.assertRejected(bytes(data), "corrupt")

    def test_trailing_data(self):
        self.assertRejected(self.valid_file() + b"junk", "corrupt",
                            "trailing")

    def test_payload_not_json(self):
        header = MAGIC + b"version 1\n"
        self.assertRejected(header + zlib.compress(b"{not json"),
                            "corrupt payload")
        self.assertRejected(header + zlib.compress(b"\xff\xfe"),
                            "corrupt payload")
        self.assertRejected(header + zlib.compress(b"[" * 100_000),
                            "corrupt payload")

    def test_payload_wrong_structure(self):
        header, document = self.payload_document(self.valid_file())
        traces = document["traces"]
        count = len(traces["size"])

        def changed(**changes):
            new = dict(document, traces=dict(traces))
            for key, value in changes.items():
                if key in traces:
                    new["traces"][key] = value
                else:
                    new[key] = value
            return new

        bad_documents = {
            "not an object": [1, 2, 3],
            "missing key": {k: v for k, v in document.items()
                            if k != "filenames"},
            "extra key": dict(document, extra=1),
            "limit type": changed(traceback_limit="25"),
            "limit bool": changed(traceback_limit=True),
            "filename type": changed(filenames=[1]),
            "tracebacks type": changed(tracebacks={}),
            "odd traceback": changed(tracebacks=[[0, 1, 0]]
                                     + document["tracebacks"][1:]),
            "filename index": changed(tracebacks=[[10**6, 1]]
                                      + document["tracebacks"][1:]),
            "negative filename index": changed(
                tracebacks=[[-1, 1]] + document["tracebacks"][1:]),
            "lineno type": changed(tracebacks=[[0, "1"]]
                                   + document["tracebacks"][1:]),
            "size type": changed(size=["1"] * count),
            "size bool": changed(size=[True] * count),
            "domain null": changed(domain=[None] * count),
            "column length": changed(size=traces["size"][:-1]),
            "traceback index": changed(traceback=[10**6] * count),
            "negative traceback index": changed(traceback=[-1] * count),
            "traces layout": changed(traces=[]),
            "attributes type": changed(attributes=[]),
            "attribute tag": changed(attributes={"x": ["pickle", "..."]}),
            "attribute shape": changed(attributes={"x": [1, 2, 3]}),
            "attribute object": changed(attributes={"x": {"a": 1}}),
            "unhashable key": changed(
                attributes={"x": ["dict", [[["list", []], 1]]]}),
            "unhashable item": changed(
                attributes={"x": ["set", [["list", []]]]}),
            "bad hex": changed(attributes={"x": ["bytes", "zz"]}),
            "reserved name": changed(attributes={"traces": 1}),
        }
        for name, bad in bad_documents.items():
            with self.subTest(name):
                self.assertRejected(self.file_from_document(header, bad),
                                    "corrupt payload")

    def test_random_damage_only_raises_value_error(self):
        # Whatever the damage, load() either succeeds or raises ValueError:
        # never another exception, never a crash.
        for data in damaged_copies(self.valid_file(), seed=5):
            self.write(data)
            try:
                tracemalloc.Snapshot.load(self.filename)
            except ValueError:
                pass

    def test_random_documents_only_raise_value_error(self):
        # Well-formed compressed JSON with random content.
        header = MAGIC + b"version 1\n"
        rng = random.Random(6)
        atoms = [None, True, 0, -1, 2**70, 1.5, "", "a.py", [], {}]

        def random_value(depth):
            if depth > 3 or rng.random() < 0.4:
                return rng.choice(atoms)
            if rng.random() < 0.5:
                return [random_value(depth + 1)
                        for _ in range(rng.randint(0, 4))]
            keys = ["traceback_limit", "filenames", "tracebacks", "traces",
                    "attributes", "domain", "size", "traceback",
                    "total_nframe", "x"]
            return {rng.choice(keys): random_value(depth + 1)
                    for _ in range(rng.randint(0, 6))}

        for _ in range(300):
            self.write(self.file_from_document(header, random_value(0)))
            try:
                tracemalloc.Snapshot.load(self.filename)
            except ValueError:
                pass

    def test_missing_file(self):
        with self.assertRaises(FileNotFoundError):
            tracemalloc.Snapshot.load(self.filename)


class TestLoadRejectsVersion2(SnapshotFileTestCase):
    """Version 2 files: the JSON document and the packed columns."""

    def valid_snapshot(self):
        raw = make_raw_traces(200, seed=4)
        snapshot = tracemalloc.Snapshot(raw, 6)
        snapshot.note = "hello"
        return snapshot

    def valid_file(self):
        data = self.dump_bytes(self.valid_snapshot())
        self.assertTrue(data.startswith(MAGIC + b"version 2\n"))
        return data

    def test_valid(self):
        self.write(self.valid_file())
        loaded = tracemalloc.Snapshot.load(self.filename)
        self.assertEqual(loaded.traces._traces,
                         self.valid_snapshot().traces._traces)

    def test_truncated(self):
        valid = self.valid_file()
        header_length = len(MAGIC + b"version 2\n")
        for cut in (header_length, header_length + 4, header_length + 8,
                    header_length + 9, len(valid) // 2, len(valid) - 1):
            with self.subTest(cut=cut):
                self.assertRejected(valid[:cut], "truncated")

    def test_trailing_data(self):
        self.assertRejected(self.valid_file() + b"junk", "corrupt",
                            "trailing")

    def test_declared_size(self):
        document, columns = split_v2(self.valid_file())
        # A declared size far beyond what zlib can expand to: refused
        # before anything is decompressed.
        self.assertRejected(make_v2(document, columns, declared=2**60),
                            "decompression bomb")
        self.assertRejected(make_v2(document, columns, declared=2**64 - 1),
                            "decompression bomb")
        payload_size = 8 + len(__import__("json").dumps(document).encode()) \
            + len(columns)
        self.assertRejected(make_v2(document, columns,
                                    declared=payload_size - 1),
                            "declared size")
        self.assertRejected(make_v2(document, columns,
                                    declared=payload_size + 1),
                            "shorter than declared")

    def test_real_bomb(self):
        # 16 MiB of zeros compresses to about 16 KiB: a file that declares
        # it honestly is within deflate's limit, but the count it declares
        # does not match, and the columns are never allocated.
        document, _ = split_v2(self.valid_file())
        document["count"] = 2**40
        self.assertRejected(make_v2(document, bytes(16 * 2**20)),
                            "traces declared")

    def test_document_length(self):
        document, columns = split_v2(self.valid_file())
        self.assertRejected(make_v2(document, columns, length=2**40),
                            "document length")
        self.assertRejected(make_v2(document, columns, length=3),
                            "corrupt payload")

    def test_count(self):
        document, columns = split_v2(self.valid_file())
        for count in (document["count"] + 1, document["count"] - 1, 2**62,
                      -1, "200", None, True):
            with self.subTest(count=count):
                bad = dict(document, count=count)
                self.assertRejected(make_v2(bad, columns), "corrupt payload")

    def test_index_out_of_range(self):
        document, columns = split_v2(self.valid_file())
        start = index_column_offset(document)
        data = bytearray(columns)
        data[start:start + 4] = len(
            document["tracebacks"]).to_bytes(4, "little")
        self.assertRejected(make_v2(document, bytes(data)),
                            "traceback index out of range")
        data[start:start + 4] = b"\xff" * 4
        self.assertRejected(make_v2(document, bytes(data)),
                            "traceback index out of range")

    def test_document_wrong_structure(self):
        document, columns = split_v2(self.valid_file())
        n = len(document["tracebacks"])
        bad_documents = {
            "not an object": [1],
            "missing key": {k: v for k, v in document.items()
                            if k != "frames"},
            "extra key": dict(document, traces={}),
            "limit type": dict(document, traceback_limit=None),
            "filenames type": dict(document, filenames="a.py"),
            "odd frames": dict(document, frames=document["frames"] + [0]),
            "filename index": dict(document, frames=[10**6, 1]
                                   + document["frames"][2:]),
            "lineno type": dict(document, frames=[0, 1.5]
                                + document["frames"][2:]),
            "frame index": dict(document, tracebacks=[[10**6]]
                                + document["tracebacks"][1:]),
            "negative frame index": dict(document, tracebacks=[[-1]]
                                         + document["tracebacks"][1:]),
            "traceback type": dict(document, tracebacks=[{}]
                                   + document["tracebacks"][1:]),
            "tracebacks type": dict(document, tracebacks={}),
            "total_nframe short": dict(document,
                                       total_nframe=[1] * (n - 1)),
            "total_nframe type": dict(document, total_nframe=["1"] * n),
            "threads short": dict(document, threads=[1] * (n - 1)),
            "threads type": dict(document, threads=[None] * n),
            "attributes": dict(document, attributes=[]),
            "reserved attribute": dict(document, attributes={"traces": 1}),
        }
        for name, bad in bad_documents.items():
            with self.subTest(name):
                self.assertRejected(make_v2(bad, columns), "corrupt payload")

    def test_random_damage_only_raises_value_error(self):
        for data in damaged_copies(self.valid_file(), seed=7):
            self.write(data)
            try:
                snapshot = tracemalloc.Snapshot.load(self.filename)
            except ValueError:
                continue
            # What loads is usable.
            snapshot.statistics('traceback')
            len(snapshot.traces._traces)

    def test_random_columns(self):
        # Random column bytes under a valid document: any domain and size
        # is valid, an index is checked.
        document, columns = split_v2(self.valid_file())
        count = document["count"]
        n = len(document["tracebacks"])
        rng = random.Random(8)
        for attempt in range(50):
            data = bytearray(rng.randrange(256) for _ in range(len(columns)))
            if attempt % 2:
                # Indexes in range: this must load.
                data[index_column_offset(document):] = b"".join(
                    rng.randrange(n).to_bytes(4, "little")
                    for _ in range(count))
            data = bytes(data)
            self.write(make_v2(document, data))
            try:
                snapshot = tracemalloc.Snapshot.load(self.filename)
            except ValueError as exc:
                self.assertFalse(attempt % 2)
                self.assertIn("index out of range", str(exc))
                continue
            self.assertEqual(len(snapshot.traces), count)
            self.assertEqual(sum(trace.size for trace in snapshot.traces),
                             sum(stat.size for stat in
                                 snapshot.statistics('traceback')))


class TestDumpHelpers(unittest.TestCase):
    """The C helpers behind dump(): _frame_table() and _narrow_columns()."""

    def test_frame_table_numbers_frames_by_value(self):
        from _tracemalloc import _frame_table
        import json
        a1 = ("a.py", 1)
        shared = (a1, ("b.py", 2))
        contexts = [shared, shared, (("a.py", 1), ("c.py", 3)), (),
                    [("b.py", 2)],       # a list works like a tuple
                    tuple(("d.py", n) for n in range(12))]
        frames, text = _frame_table(contexts)
        self.assertIs(type(text), bytes)
        self.assertEqual(frames, [("a.py", 1), ("b.py", 2), ("c.py", 3)]
                         + [("d.py", n) for n in range(12)])
        # Equal frames get one number, whatever object holds them.
        self.assertEqual(json.loads(text), [
            [0, 1], [0, 1], [0, 2], [], [1], list(range(3, 15))])
        self.assertEqual(_frame_table([]), ([], b"[]"))

    def test_frame_table_many_frames(self):
        # Past the first growth of the identity table, and numbers of
        # several digits.
        from _tracemalloc import _frame_table
        import json
        contexts = [tuple(("f.py", 10 * i + j) for j in range(10))
                    for i in range(500)]
        contexts += contexts[::-1]
        frames, text = _frame_table(contexts)
        self.assertEqual(len(frames), 5000)
        numbers = json.loads(text)
        self.assertEqual([tuple(frames[k] for k in row) for row in numbers],
                         contexts)

    def test_frame_table_rejects_bad_frames(self):
        from _tracemalloc import _frame_table

        class Str(str):
            pass

        for bad in [(("a.py", True),), (("a.py", 1.0),), ((b"a.py", 1),),
                    ((Str("a.py"), 1),), (("a.py", 1, 2),), (["a.py", 1],),
                    ("a.py",), (None,)]:
            with self.subTest(bad=bad):
                with self.assertRaisesRegex(TypeError, "frames must be"):
                    _frame_table([(("ok.py", 1),), bad])
        for bad in ["a.py", None, 3]:
            with self.subTest(bad=bad):
                with self.assertRaisesRegex(TypeError, "tuple of frames"):
                    _frame_table([bad])
        with self.assertRaises(TypeError):
            _frame_table(((("a.py", 1),),))     # not a list

    def test_narrow_columns(self):
        from array import array
        from _tracemalloc import _narrow_columns
        zero, narrow = _narrow_columns(array('I', [0] * 5),
                                       array('Q', [0, 1, 2**32 - 1, 5, 6]))
        self.assertIs(zero, True)
        self.assertEqual(narrow, b"".join(
            n.to_bytes(4, "little") for n in (0, 1, 2**32 - 1, 5, 6)))
        for position in range(5):
            domains = array('I', [0] * 5)
            domains[position] = 1 << (8 * (position % 4))
            sizes = array('Q', [7] * 5)
            sizes[position] = 2**32 + (position == 4)
            with self.subTest(position=position):
                self.assertEqual(_narrow_columns(domains, sizes),
                                 (False, None))
        self.assertEqual(_narrow_columns(b"", b""), (True, b""))
        with self.assertRaises(ValueError):
            _narrow_columns(b"\0" * 3, b"")
        with self.assertRaises(ValueError):
            _narrow_columns(b"", b"\0" * 12)

    def test_dump_of_a_large_snapshot_round_trips(self):
        # Engine-like sharing: one frames tuple per context, reused by
        # many traces, sizes that fit in 4 bytes.
        raw = make_raw_traces(20000, seed=9, distinct=300, max_depth=30)
        snapshot = tracemalloc.Snapshot(raw, 30)
        data = _snapshotfile.encode(snapshot)
        document, _ = split_v2(data)
        self.assertEqual(document["size_bytes"], 4)
        loaded = _snapshotfile.decode(tracemalloc.Snapshot, data)
        self.assertEqual(loaded.traces._traces, raw)


class TestAtomicDump(SnapshotFileTestCase):
    def setUp(self):
        # A directory of its own: other test processes dump (through their
        # own temporary files) into the shared working directory, and the
        # tests compare the directory's listing.
        directory = tempfile.mkdtemp()
        self.addCleanup(os_helper.rmtree, directory)
        self.filename = os.path.join(directory, os_helper.TESTFN)

    def directory_entries(self):
        directory = os.path.dirname(os.path.abspath(self.filename))
        return set(os.listdir(directory))

    def test_failed_write_keeps_old_file(self):
        old = tracemalloc.Snapshot([(0, 1, (("old.py", 1),), 1)], 1)
        old.dump(self.filename)
        before = self.read()
        entries = self.directory_entries()

        new = tracemalloc.Snapshot(make_raw_traces(100, seed=3), 5)
        with mock.patch("os.fsync", side_effect=OSError("disk full")):
            with self.assertRaises(OSError):
                new.dump(self.filename)
        # The previous file is intact and no temporary file is left over.
        self.assertEqual(self.read(), before)
        self.assertEqual(self.directory_entries(), entries)

        failing = tracemalloc.Snapshot([], 1)
        failing.bad = object()
        with self.assertRaises(TypeError):
            failing.dump(self.filename)
        self.assertEqual(self.read(), before)
        self.assertEqual(self.directory_entries(), entries)

    def test_interrupted_write_leaves_no_file(self):
        snapshot = tracemalloc.Snapshot(make_raw_traces(100, seed=4), 5)
        entries = self.directory_entries()
        with mock.patch("os.replace", side_effect=KeyboardInterrupt):
            with self.assertRaises(KeyboardInterrupt):
                snapshot.dump(self.filename)
        self.assertFalse(os.path.exists(self.filename))
        self.assertEqual(self.directory_entries(), entries)

    def test_replaces_existing_file(self):
        self.write(b"previous content")
        tracemalloc.Snapshot([(0, 1, (("a.py", 1),), 1)], 4).dump(
            self.filename)
        self.assertEqual(tracemalloc.Snapshot.load(self.filename)
                         .traceback_limit, 4)

    @unittest.skipUnless(os.name == 'posix', 'POSIX permissions')
    def test_permissions(self):
        snapshot = tracemalloc.Snapshot([], 1)
        old_umask = os.umask(0o022)
        try:
            snapshot.dump(self.filename)
        finally:
            os.umask(old_umask)
        # Like open(): 0o666 less the umask, not mkstemp()'s 0o600.
        self.assertEqual(stat.S_IMODE(os.stat(self.filename).st_mode),
                         0o644)
        # The mode of a replaced file is kept.
        os.chmod(self.filename, 0o640)
        snapshot.dump(self.filename)
        self.assertEqual(stat.S_IMODE(os.stat(self.filename).st_mode),
                         0o640)

    @os_helper.skip_unless_symlink
    def test_symlink_is_followed(self):
        target = self.filename + "_target"
        link = self.filename + "_link"
        self.addCleanup(os_helper.unlink, target)
        self.addCleanup(os_helper.unlink, link)
        with open(target, "wb"):
            pass
        os.symlink(os.path.abspath(target), link)
        tracemalloc.Snapshot([], 9).dump(link)
        self.assertTrue(os.path.islink(link))
        self.assertEqual(tracemalloc.Snapshot.load(target).traceback_limit,
                         9)


class TestStatistics(unittest.TestCase):
    # A snapshot over a list of raw tuples, as Snapshot() makes it;
    # TestStatisticsColumns runs the same tests over columns.
    def snapshot(self, raw, limit):
        return tracemalloc.Snapshot(raw, limit)

    def check_statistics(self, raw):
        snapshot = self.snapshot(raw, 6)
        for key_type, cumulative in (('lineno', False), ('filename', False),
                                     ('traceback', False), ('lineno', True),
                                     ('filename', True)):
            with self.subTest(key_type=key_type, cumulative=cumulative):
                stats = snapshot.statistics(key_type, cumulative)
                expected = {
                    tuple(reversed(key)): tuple(value) for key, value
                    in naive_group(raw, key_type, cumulative).items()}
                self.assertEqual(stat_map(stats), expected)
                self.assertEqual(len(stats), len(expected))
                # Biggest first, ties broken by count then traceback.
                keys = [(s.size, s.count, s.traceback) for s in stats]
                self.assertEqual(keys, sorted(keys, reverse=True))
                for statistic in stats:
                    self.assertIsNone(statistic.traceback.total_nframe)

    def test_statistics_match_reference(self):
        for seed in range(3):
            self.check_statistics(make_raw_traces(4000, seed=seed))

    def test_statistics_empty(self):
        snapshot = self.snapshot([], 1)
        self.assertEqual(snapshot.statistics('lineno'), [])
        self.assertEqual(snapshot.compare_to(snapshot, 'lineno'), [])

    def test_recursion_counts_each_frame(self):
        raw = [(0, 10, (("a.py", 1), ("a.py", 1), ("b.py", 2)), 3)]
        stats = self.snapshot(raw, 3).statistics('lineno', True)
        self.assertEqual(stat_map(stats), {(("a.py", 1),): (20, 2),
                                           (("b.py", 2),): (10, 1)})

    def test_compare_to_matches_reference(self):
        old_raw = make_raw_traces(3000, seed=10)
        new_raw = old_raw[:2000] + make_raw_traces(1500, seed=11)
        old = self.snapshot(old_raw, 6)
        new = self.snapshot(new_raw, 6)
        for key_type, cumulative in (('lineno', False), ('filename', False),
                                     ('traceback', False), ('lineno', True)):
            with self.subTest(key_type=key_type, cumulative=cumulative):
                old_groups = naive_group(old_raw, key_type, cumulative)
                new_groups = naive_group(new_raw, key_type, cumulative)
                expected = {}
                for key in old_groups.keys() | new_groups.keys():
                    size, count = new_groups.get(key, (0, 0))
                    old_size, old_count = old_groups.get(key, (0, 0))
                    expected[tuple(reversed(key))] = (
                        size, size - old_size, count, count - old_count)

                diffs = new.compare_to(old, key_type, cumulative)
                got = {tuple((f.filename, f.lineno) for f in d.traceback):
                       (d.size, d.size_diff, d.count, d.count_diff)
                       for d in diffs}
                self.assertEqual(got, expected)
                self.assertEqual(len(diffs), len(expected))
                keys = [(abs(d.size_diff), d.size, abs(d.count_diff),
                         d.count, d.traceback) for d in diffs]
                self.assertEqual(keys, sorted(keys, reverse=True))

    def test_filter_traces_matches_reference(self):
        raw = make_raw_traces(4000, seed=20)
        snapshot = self.snapshot(raw, 6)

        class SizeFilter(tracemalloc.BaseFilter):
            # A custom filter may depend on anything, not only the frames.
            def _match(self, trace):
                return trace[1] % 2 == 0

        filter_sets = [
            [tracemalloc.Filter(False, "a.py")],
            [tracemalloc.Filter(True, "*.py", lineno=3)],
            [tracemalloc.Filter(True, "b.py", all_frames=True),
             tracemalloc.Filter(True, "pkg/*")],
            [tracemalloc.Filter(False, "<unknown>", all_frames=True),
             tracemalloc.DomainFilter(False, 7)],
            [tracemalloc.Filter(False, "d.py", domain=1)],
            [tracemalloc.DomainFilter(True, 0), SizeFilter(True)],
        ]
        for filters in filter_sets:
            with self.subTest(filters=filters):
                include = [f for f in filters if f.inclusive]
                exclude = [f for f in filters if not f.inclusive]
                expected = [
                    trace for trace in raw
                    if (not include or any(f._match(trace) for f in include))
                    and all(f._match(trace) for f in exclude)]
                got = snapshot.filter_traces(filters).traces._traces
                self.assertEqual(got, expected)

    def test_no_filter_copies(self):
        raw = make_raw_traces(500, seed=21)
        snapshot = self.snapshot(raw, 6)
        copy = snapshot.filter_traces([])
        self.assertIsNot(copy.traces, snapshot.traces)
        self.assertEqual(copy.traces._traces, raw)

    def test_sequence_access(self):
        raw = make_raw_traces(300, seed=22)
        traces = self.snapshot(raw, 6).traces
        self.assertEqual(len(traces), len(raw))
        for index in (0, 1, 150, -1, -300):
            self.assertEqual(traces[index], tracemalloc.Trace(raw[index]))
        for bad in (300, -301):
            with self.assertRaises(IndexError):
                traces[bad]
        self.assertEqual(traces[10:20:3],
                         tuple(map(tracemalloc.Trace, raw[10:20:3])))
        self.assertEqual(list(traces), list(map(tracemalloc.Trace, raw)))
        self.assertIn(tracemalloc.Trace(raw[5]), traces)

    def test_format_size(self):
        cases = [
            (0, '0 B', '+0 B'), (66, '66 B', '+66 B'),
            (9999, '9999 B', '+9999 B'), (10240, '10.0 KiB', '+10.0 KiB'),
            (10 * 1024 ** 2, '10.0 MiB', '+10.0 MiB'),
            (123456789, '118 MiB', '+118 MiB'),
            (5 * 2 ** 40, '5120 GiB', '+5120 GiB'),
            (2 ** 60, '1048576 TiB', '+1048576 TiB'),
            (-66, '-66 B', '-66 B'), (2501.5, '2502 B', '+2502 B'),
        ]
        for size, plain, signed in cases:
            with self.subTest(size=size):
                self.assertEqual(tracemalloc._format_size(size, False),
                                 plain)
                self.assertEqual(tracemalloc._format_size(size, True),
                                 signed)


class TestStatisticsColumns(TestStatistics):
    """The same checks on snapshots kept as columns, the way take_snapshot()
    and load() keep them (statistics, compare_to and filter_traces work on
    the columns without building the trace tuples)."""

    def snapshot(self, raw, limit):
        columns = _snapshotfile._columns_from_traces(raw)
        snapshot = tracemalloc.Snapshot._from_columns(columns, limit)
        self.assertIsNotNone(snapshot.traces._columns)
        return snapshot

    def test_columns_are_kept(self):
        raw = make_raw_traces(1000, seed=23)
        snapshot = self.snapshot(raw, 6)
        snapshot.statistics('lineno', cumulative=True)
        snapshot.compare_to(self.snapshot(raw[:500], 6), 'traceback')
        filtered = snapshot.filter_traces([tracemalloc.Filter(False,
                                                              "a.py")])
        len(snapshot.traces)
        snapshot.traces[3]
        self.assertIsNotNone(snapshot.traces._columns)
        self.assertIsNotNone(filtered.traces._columns)
        # The list is built when asked for, and is then the only copy.
        self.assertEqual(snapshot.traces._traces, raw)
        self.assertIsNone(snapshot.traces._columns)

    def test_pickle(self):
        # Snapshots pickled as upstream's (its dump() used pickle): the
        # columns come back as the list of raw tuples.
        raw = make_raw_traces(500, seed=24)
        snapshot = self.snapshot(raw, 6)
        snapshot.statistics('lineno')
        for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
            copy = pickle.loads(pickle.dumps(snapshot, protocol))
            self.assertEqual(copy.traceback_limit, 6)
            self.assertEqual(copy.traces._traces, raw)
            self.assertEqual(copy.statistics('traceback'),
                             snapshot.statistics('traceback'))

    def test_threads(self):
        raw = [(0, 10, (("a.py", 1),), 1, 7), (0, 5, (("a.py", 1),), 1, 8),
               (1, 1, (("b.py", 2),), 1, 7)]
        snapshot = self.snapshot(raw, 1)
        snapshot.thread_names = {7: "main"}
        self.assertEqual(len(snapshot.traces._columns.frames), 3)
        stats = {s.traceback[0].filename: (s.size, s.count)
                 for s in snapshot.statistics('thread')}
        self.assertEqual(stats, {"<thread main>": (11, 2),
                                 "<thread 8>": (5, 1)})
        self.assertEqual(stat_map(snapshot.statistics('lineno')),
                         {(("a.py", 1),): (15, 2), (("b.py", 2),): (1, 1)})
        self.assertEqual(snapshot.traces[1].thread, 8)
        self.assertEqual(snapshot.traces._traces, raw)

    def test_bad_index(self):
        # Columns whose index points past the call contexts: an error, not
        # a crash or a wrong answer.
        columns = _snapshotfile._columns_from_traces(
            [(0, 1, (("a.py", 1),), 1)])
        columns.indexes[0] = 5
        snapshot = tracemalloc.Snapshot._from_columns(columns, 1)
        with self.assertRaises(ValueError):
            snapshot.statistics('lineno')
        with self.assertRaises(ValueError):
            snapshot.traces._traces


@unittest.skipUnless(os.name == 'posix', 'POSIX special files')
class TestDumpInPlace(SnapshotFileTestCase):
    """dump() replaces a regular file atomically and writes anything else
    in place: a rename would replace a device or a FIFO by a regular file,
    and cannot reach the file behind /dev/stdout."""

    def snapshot(self):
        return tracemalloc.Snapshot([(0, 10, (("a.py", 1),), 1),
                                     (0, 20, (("b.py", 2),), 1)], 3)

    def temp_dir(self):
        directory = os.path.abspath(self.filename + "_dir")
        os.mkdir(directory)
        self.addCleanup(os_helper.rmtree, directory)
        return directory

    def test_fifo(self):
        fifo = os.path.join(self.temp_dir(), "fifo")
        os.mkfifo(fifo)
        # A non-blocking reader opened first: the writer's open() then does
        # not wait, and the snapshot fits in the pipe's buffer.
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        self.addCleanup(os.close, reader)
        snapshot = self.snapshot()
        snapshot.dump(fifo)
        self.assertTrue(stat.S_ISFIFO(os.lstat(fifo).st_mode))
        chunks = []
        while chunk := os.read(reader, 1 << 16):
            chunks.append(chunk)
        data = b"".join(chunks)
        self.assertEqual(data, _snapshotfile.encode(snapshot))

    def test_character_device(self):
        # A node for the device of /dev/null, in a directory of the test's
        # own: dump(os.devnull) must not turn a device into a file.
        device = os.path.join(self.temp_dir(), "null")
        try:
            os.mknod(device, stat.S_IFCHR | 0o666,
                     os.stat(os.devnull).st_rdev)
            with open(device, "wb"):
                pass
        except (AttributeError, OSError) as exc:
            # Not root, or a file system mounted nodev.
            self.skipTest(f"cannot make a usable device node: {exc}")
        self.snapshot().dump(device)
        self.assertTrue(stat.S_ISCHR(os.lstat(device).st_mode))
        with open(device, "rb") as fp:
            self.assertEqual(fp.read(), b"")

    @unittest.skipUnless(os.path.exists("/dev/stdout"), "needs /dev/stdout")
    def test_stdout_pipe(self):
        import subprocess
        import sys
        proc = subprocess.run(
            [sys.executable, "-c",
             "import tracemalloc\n"
             "tracemalloc.Snapshot([(0, 10, (('a.py', 1),), 1)], 3)"
             ".dump('/dev/stdout')"],
            stdout=subprocess.PIPE, check=True)
        self.write(proc.stdout)
        loaded = tracemalloc.Snapshot.load(self.filename)
        self.assertEqual(loaded.traces._traces,
                         [(0, 10, (("a.py", 1),), 1)])

    @unittest.skipUnless(os.path.exists("/dev/stdout"), "needs /dev/stdout")
    def test_stdout_redirected_to_a_file(self):
        # /dev/stdout names the file the process has open: it is written
        # there, not replaced by another file of the same name.
        import subprocess
        import sys
        with open(self.filename, "wb") as out:
            before = os.fstat(out.fileno())
            subprocess.run(
                [sys.executable, "-c",
                 "import tracemalloc\n"
                 "tracemalloc.Snapshot([(0, 10, (('a.py', 1),), 1)], 3)"
                 ".dump('/dev/stdout')"],
                stdout=out, check=True)
        after = os.stat(self.filename)
        self.assertTrue(os.path.samestat(before, after))
        self.assertEqual(tracemalloc.Snapshot.load(self.filename)
                         .traceback_limit, 3)

    def test_hard_link(self):
        # Documented: a regular file is replaced, so the other names of a
        # hard-linked file keep the previous snapshot.
        link = self.filename + "_link"
        self.addCleanup(os_helper.unlink, link)
        tracemalloc.Snapshot([], 1).dump(self.filename)
        os.link(self.filename, link)
        tracemalloc.Snapshot([], 2).dump(self.filename)
        self.assertEqual(tracemalloc.Snapshot.load(self.filename)
                         .traceback_limit, 2)
        self.assertEqual(tracemalloc.Snapshot.load(link).traceback_limit, 1)
        self.assertFalse(os.path.samefile(self.filename, link))

    def test_regular_file_is_replaced(self):
        self.write(b"previous content")
        before = os.stat(self.filename)
        self.snapshot().dump(self.filename)
        self.assertFalse(os.path.samestat(before, os.stat(self.filename)))


# Pickles made by upstream CPython 3.11.2's tracemalloc (its Lib/tracemalloc
# is the same in 3.11.7), so with upstream's class layout: Snapshot and
# _Traces pickled as their __dict__, the others as their __slots__.  Made
# with:
#
#     frames_a = (('a.py', 2), ('b.py', 4))
#     frames_c = (('c.py', 7),)
#     snapshot = tracemalloc.Snapshot([(0, 10, frames_a, 3),
#                                      (0, 10, frames_a, 3),
#                                      (2, 5, frames_c, 1)], 5)
#     UPSTREAM_SNAPSHOT_PROTOCOL_0 = pickle.dumps(snapshot, 0)
#     objects = [snapshot, snapshot.traces[2], snapshot.traces[0].traceback,
#                snapshot.traces[0].traceback[0],
#                snapshot.statistics('lineno')[0]]
#     UPSTREAM_OBJECTS_PROTOCOL_5 = pickle.dumps(objects, 5)
UPSTREAM_RAW_TRACES = [(0, 10, (('a.py', 2), ('b.py', 4)), 3),
                       (0, 10, (('a.py', 2), ('b.py', 4)), 3),
                       (2, 5, (('c.py', 7),), 1)]
UPSTREAM_SNAPSHOT_PROTOCOL_0 = (
    b'ccopy_reg\n_reconstructor\np0\n(ctracemalloc\nSnapshot\np1\n'
    b'c__builtin__\nobject\np2\nNtp3\nRp4\n(dp5\nVtraces\np6\ng0\n'
    b'(ctracemalloc\n_Traces\np7\ng2\nNtp8\nRp9\n(dp10\nV_traces\np11\n'
    b'(lp12\n(I0\nI10\n((Va.py\np13\nI2\ntp14\n(Vb.py\np15\nI4\ntp16\n'
    b'tp17\nI3\ntp18\na(I0\nI10\ng17\nI3\ntp19\na(I2\nI5\n((Vc.py\np20\n'
    b'I7\ntp21\ntp22\nI1\ntp23\nasbsVtraceback_limit\np24\nI5\nsb.')
UPSTREAM_OBJECTS_PROTOCOL_5 = (
    b'\x80\x05\x95y\x01\x00\x00\x00\x00\x00\x00]\x94(\x8c\x0btracemalloc'
    b'\x94\x8c\x08Snapshot\x94\x93\x94)\x81\x94}\x94(\x8c\x06traces\x94h'
    b'\x01\x8c\x07_Traces\x94\x93\x94)\x81\x94}\x94\x8c\x07_traces\x94]'
    b'\x94((K\x00K\n\x8c\x04a.py\x94K\x02\x86\x94\x8c\x04b.py\x94K\x04'
    b'\x86\x94\x86\x94K\x03t\x94(K\x00K\nh\x11K\x03t\x94(K\x02K\x05\x8c'
    b'\x04c.py\x94K\x07\x86\x94\x85\x94K\x01t\x94esb\x8c\x0ftraceback_limit'
    b'\x94K\x05ubh\x01\x8c\x05Trace\x94\x93\x94)\x81\x94N}\x94\x8c\x06_trace'
    b'\x94h\x17s\x86\x94bh\x01\x8c\tTraceback\x94\x93\x94)\x81\x94N}\x94('
    b'\x8c\x07_frames\x94h\x10h\x0e\x86\x94\x8c\r_total_nframe\x94K\x03u'
    b'\x86\x94bh\x01\x8c\x05Frame\x94\x93\x94)\x81\x94N}\x94\x8c\x06_frame'
    b'\x94h\x10s\x86\x94bh\x01\x8c\tStatistic\x94\x93\x94)\x81\x94N}\x94('
    b'\x8c\ttraceback\x94h )\x81\x94N}\x94(h#h\x0e\x85\x94h%Nu\x86\x94b'
    b'\x8c\x04size\x94K\x14\x8c\x05count\x94K\x02u\x86\x94be.')


class TestUpstreamPickles(unittest.TestCase):
    """Snapshots pickled by upstream 3.11 (whose dump() used pickle) work
    in full once unpickled here."""

    def check_snapshot(self, snapshot):
        self.assertEqual(snapshot.traceback_limit, 5)
        self.assertEqual(len(snapshot.traces), 3)
        self.assertEqual(snapshot.traces[2].size, 5)
        self.assertEqual(snapshot.traces[2].domain, 2)
        self.assertEqual(list(snapshot.traces),
                         list(map(tracemalloc.Trace, UPSTREAM_RAW_TRACES)))
        self.assertIn(tracemalloc.Trace(UPSTREAM_RAW_TRACES[2]),
                      snapshot.traces)
        expected = tracemalloc.Snapshot(UPSTREAM_RAW_TRACES, 5)
        self.assertEqual(snapshot.traces, expected.traces)
        for key_type in ('lineno', 'filename', 'traceback', 'thread'):
            with self.subTest(key_type=key_type):
                self.assertEqual(snapshot.statistics(key_type),
                                 expected.statistics(key_type))
        self.assertEqual(snapshot.compare_to(expected, 'lineno')[0].size_diff,
                         0)
        filtered = snapshot.filter_traces([tracemalloc.Filter(False,
                                                              "c.py")])
        self.assertEqual(len(filtered.traces), 2)
        self.assertEqual(snapshot.thread_names, {})
        # And it dumps to a file that loads back.
        filename = os_helper.TESTFN
        self.addCleanup(os_helper.unlink, filename)
        snapshot.dump(filename)
        self.assertEqual(tracemalloc.Snapshot.load(filename).traces,
                         expected.traces)
        # Pickled again, here.
        self.assertEqual(pickle.loads(pickle.dumps(snapshot)).traces,
                         expected.traces)

    def test_snapshot_protocol_0(self):
        self.check_snapshot(pickle.loads(UPSTREAM_SNAPSHOT_PROTOCOL_0))

    def test_objects_protocol_5(self):
        snapshot, trace, traceback, frame, statistic = pickle.loads(
            UPSTREAM_OBJECTS_PROTOCOL_5)
        self.check_snapshot(snapshot)
        self.assertEqual(trace, tracemalloc.Trace(UPSTREAM_RAW_TRACES[2]))
        self.assertEqual(trace.traceback[0].filename, 'c.py')
        self.assertEqual(traceback, tracemalloc.Traceback(
            UPSTREAM_RAW_TRACES[0][2], 3))
        self.assertEqual(traceback.total_nframe, 3)
        self.assertEqual([str(f) for f in traceback], ['b.py:4', 'a.py:2'])
        self.assertEqual(frame, tracemalloc.Frame(('b.py', 4)))
        self.assertEqual(statistic, tracemalloc.Statistic(
            tracemalloc.Traceback((('a.py', 2),)), 20, 2))

    def pristine(self):
        python = pristine_python()
        if python is None:
            self.skipTest("no pristine 3.11 (make bench-pristine, or "
                          "TRACEMALLOC_PRISTINE_PYTHON)")
        return python

    def test_pickled_by_pristine(self):
        # Differential: a snapshot of real traces, taken and pickled by
        # upstream, against upstream's own statistics of it.
        import json
        import subprocess
        python = self.pristine()
        code = textwrap.dedent("""
            import json, pickle, sys, tracemalloc
            tracemalloc.start(4)
            data = [bytes(100 + i) for i in range(500)]
            snapshot = tracemalloc.take_snapshot()
            tracemalloc.stop()
            stats = [[[[f.filename, f.lineno] for f in s.traceback],
                      s.size, s.count]
                     for s in snapshot.statistics('traceback')]
            sys.stdout.write(json.dumps({
                "pickle": pickle.dumps(snapshot, pickle.HIGHEST_PROTOCOL
                                       ).hex(),
                "stats": stats, "count": len(snapshot.traces),
                "version": list(sys.version_info[:3]),
                "columns": hasattr(tracemalloc, "_get_columns")}))
        """)
        proc = subprocess.run([python, "-I", "-c", code],
                              capture_output=True, check=True)
        result = json.loads(proc.stdout)
        if result["columns"] or result["version"][:2] != [3, 11]:
            self.skipTest(f"{python} is not an upstream 3.11")
        snapshot = pickle.loads(bytes.fromhex(result["pickle"]))
        self.assertEqual(len(snapshot.traces), result["count"])
        stats = [[[[f.filename, f.lineno] for f in s.traceback],
                  s.size, s.count]
                 for s in snapshot.statistics('traceback')]
        self.assertEqual(stats, result["stats"])
        self.assertEqual(sum(s.count for s in
                             snapshot.statistics('thread')),
                         result["count"])

    def test_unpickled_by_pristine(self):
        # And the other way: a snapshot kept as columns here, pickled here,
        # loads in upstream with the same statistics.
        import json
        import subprocess
        python = self.pristine()
        raw = make_raw_traces(500, seed=33)
        columns = _snapshotfile._columns_from_traces(raw)
        snapshot = tracemalloc.Snapshot._from_columns(columns, 6)
        code = textwrap.dedent("""
            import json, pickle, sys, tracemalloc
            snapshot = pickle.loads(sys.stdin.buffer.read())
            sys.stdout.write(json.dumps({
                "stats": [[[[f.filename, f.lineno] for f in s.traceback],
                           s.size, s.count]
                          for s in snapshot.statistics('traceback')],
                "version": list(sys.version_info[:3]),
                "columns": hasattr(tracemalloc, "_get_columns")}))
        """)
        proc = subprocess.run([python, "-I", "-c", code],
                              input=pickle.dumps(snapshot, 4),
                              capture_output=True, check=True)
        result = json.loads(proc.stdout)
        if result["columns"] or result["version"][:2] != [3, 11]:
            self.skipTest(f"{python} is not an upstream 3.11")
        expected = [[[[f.filename, f.lineno] for f in s.traceback],
                     s.size, s.count]
                    for s in snapshot.statistics('traceback')]
        self.assertEqual(result["stats"], expected)
        self.assertIsNotNone(snapshot.traces._columns)


class TestTracesStayPacked(unittest.TestCase):
    """The public operations on a snapshot's traces read the columns as
    they are: only private code that reads ``_traces`` gets the list of
    tuples (about 76 bytes per trace more)."""

    COUNT = 20_000

    def snapshot(self, raw):
        columns = _snapshotfile._columns_from_traces(raw)
        return tracemalloc.Snapshot._from_columns(columns, 6)

    def public_operations(self, snapshot, raw):
        traces = snapshot.traces
        self.assertIn(tracemalloc.Trace(raw[-1]), traces)
        self.assertNotIn(tracemalloc.Trace((0, 1, (("nowhere.py", 1),), 1)),
                         traces)
        self.assertEqual(traces, self.snapshot(raw).traces)
        self.assertEqual(traces, tracemalloc.Snapshot(raw, 6).traces)
        self.assertNotEqual(traces, self.snapshot(raw[:-1]).traces)
        altered = list(raw)
        altered[5] = (altered[5][0], altered[5][1] + 1) + altered[5][2:]
        self.assertNotEqual(traces, self.snapshot(altered).traces)
        self.assertEqual(pickle.loads(pickle.dumps(snapshot)).traces,
                         traces)
        self.assertEqual(sum(trace.size for trace in traces),
                         sum(trace[1] for trace in raw))

    def test_columns_are_kept(self):
        raw = make_raw_traces(2000, seed=30)
        snapshot = self.snapshot(raw)
        self.public_operations(snapshot, raw)
        self.assertIsNotNone(snapshot.traces._columns)
        # Threads: a fifth item per trace.
        raw = [trace + (7,) for trace in raw]
        snapshot = self.snapshot(raw)
        self.public_operations(snapshot, raw)
        self.assertIsNotNone(snapshot.traces._columns)

    def test_traced_memory(self):
        # Measured with tracemalloc itself: what the operations leave
        # allocated, against what the list of tuples costs.
        raw = make_raw_traces(self.COUNT, seed=31)
        snapshot = self.snapshot(raw)
        expected = self.snapshot(raw)
        probe = tracemalloc.Trace(raw[-1])
        was_tracing = tracemalloc.is_tracing()
        if not was_tracing:
            tracemalloc.start()
            self.addCleanup(tracemalloc.stop)
        # No collection in between: freeing the garbage of earlier tests
        # would hide what is allocated.
        gc.collect()
        if gc.isenabled():
            gc.disable()
            self.addCleanup(gc.enable)
        base = tracemalloc.get_traced_memory()[0]
        self.assertIn(probe, snapshot.traces)
        self.assertEqual(snapshot.traces, expected.traces)
        pickle.dumps(snapshot)
        left = tracemalloc.get_traced_memory()[0] - base
        snapshot.traces._traces
        unpacked = tracemalloc.get_traced_memory()[0] - base
        # At least the list's item pointers.
        self.assertGreater(unpacked, self.COUNT * 8)
        self.assertLess(left, unpacked // 10)

    def test_index_object(self):
        class Index:
            def __init__(self, value):
                self.value = value

            def __index__(self):
                return self.value

        raw = make_raw_traces(10, seed=32)
        for snapshot in (self.snapshot(raw), tracemalloc.Snapshot(raw, 6)):
            traces = snapshot.traces
            self.assertEqual(traces[Index(3)], tracemalloc.Trace(raw[3]))
            self.assertEqual(traces[Index(-1)], tracemalloc.Trace(raw[-1]))
            with self.assertRaises(IndexError):
                traces[Index(10)]
            with self.assertRaises(TypeError):
                traces[3.0]


class TestTakeSnapshotSource(unittest.TestCase):
    """take_snapshot() takes its traces from tracemalloc._get_traces(), as
    upstream's does (upstream's test_create_snapshot replaces it), asking
    for the packed columns: code that wraps the function keeps them."""

    def test_wrapped_get_traces_keeps_columns(self):
        was_tracing = tracemalloc.is_tracing()
        if not was_tracing:
            tracemalloc.start()
            self.addCleanup(tracemalloc.stop)
        data = [bytes(64) for _ in range(100)]
        spy = mock.Mock(wraps=tracemalloc._get_traces)
        with mock.patch.object(tracemalloc, '_get_traces', spy):
            snapshot = tracemalloc.take_snapshot()
        spy.assert_called_once()
        self.assertIsNotNone(snapshot.traces._columns)
        self.assertGreaterEqual(len(snapshot.traces), len(data))

    def test_made_up_traces(self):
        raw = [(0, 5, (('a.py', 2),), 10)]
        with mock.patch.object(tracemalloc, 'is_tracing', return_value=True), \
             mock.patch.object(tracemalloc, '_get_traces', return_value=raw):
            snapshot = tracemalloc.take_snapshot()
        self.assertEqual(snapshot.traces._traces, raw)


class TestLeakReport(unittest.TestCase):
    """python -m tracemalloc"""

    LEAK_SCRIPT = textwrap.dedent("""
        import sys

        _cache = []

        def handle(n):
            payload = "x" * 1000 + str(n)
            _cache.append(payload)
            return len(payload)

        def main():
            for n in range(3000):
                handle(n)
            scratch = [bytes(500) for _ in range(500)]
            print("argv", sys.argv[1:])

        main()
    """)
    LEAK_LINE = 7       # payload = "x" * 1000 + str(n)

    def setUp(self):
        self.directory = self.enterContext(os_helper.temp_dir())

    def script(self, source=None, name="leaky"):
        return make_script(self.directory, name,
                           self.LEAK_SCRIPT if source is None else source)

    def child_env(self, env):
        # The child must run the tracemalloc module under test, even when it
        # is not the one of the interpreter's standard library (tests run
        # against a source tree): put its directory first on the path.
        paths = [os.path.dirname(os.path.abspath(tracemalloc.__file__))]
        if os.environ.get("PYTHONPATH"):
            paths.append(os.environ["PYTHONPATH"])
        # The tool's own start-up is under test: the child does not inherit
        # PYTHONTRACEMALLOC (an empty value means unset).
        env = dict({"PYTHONTRACEMALLOC": ""}, **env)
        return dict(env, PYTHONPATH=os.pathsep.join(paths),
                    __isolated=False)

    def run_ok(self, *args, **env):
        return assert_python_ok(*args, **self.child_env(env))

    def run_failure(self, *args, **env):
        return assert_python_failure(*args, **self.child_env(env))

    def report_lines(self, stderr):
        return [line for line in stderr.decode().splitlines()
                if line.startswith("#")]

    def test_leak_first_with_x_option(self):
        script = self.script()
        rc, out, err = self.run_ok('-X', 'tracemalloc=25',
                                   '-m', 'tracemalloc', script)
        lines = self.report_lines(err)
        self.assertTrue(lines, err)
        self.assertTrue(lines[0].startswith(f"#1: {script}:{self.LEAK_LINE}:"),
                        err)
        # About 3000 blocks of 1 KiB.
        self.assertIn("count=3000", lines[0])
        self.assertIn(b'payload = "x" * 1000 + str(n)', err)
        # The report goes to stderr, the script's output stays on stdout.
        self.assertEqual(out.strip(), b"argv []")
        self.assertNotIn(b"#1:", out)
        # Freed memory (the scratch list) is not reported.
        self.assertNotIn(f"{script}:14:", err.decode())

    def test_tool_starts_tracing(self):
        script = self.script()
        rc, out, err = self.run_ok('-m', 'tracemalloc', '--top', '1',
                                   script)
        lines = self.report_lines(err)
        self.assertEqual(len(lines), 1, err)
        self.assertTrue(lines[0].startswith(f"#1: {script}:{self.LEAK_LINE}:"),
                        err)
        self.assertIn(b"(traceback limit: 25)", err)
        self.assertIn(b"other sites", err)
        self.assertIn(b"Total:", err)

    def test_nframe_option(self):
        script = self.script()
        rc, out, err = self.run_ok('-m', 'tracemalloc', '-n', '3', script)
        self.assertIn(b"(traceback limit: 3)", err)

    def test_group_by_filename(self):
        script = self.script()
        rc, out, err = self.run_ok('-m', 'tracemalloc', '--group-by',
                                   'filename', script)
        lines = self.report_lines(err)
        self.assertTrue(lines[0].startswith(f"#1: {script}: "), err)

    def test_group_by_traceback(self):
        script = self.script()
        rc, out, err = self.run_ok('-m', 'tracemalloc', '--group-by',
                                   'traceback', '--top', '1', script)
        text = err.decode()
        self.assertIn("#1: size=", text)
        # The traceback shows the whole call chain of the leak.
        self.assertIn(f'File "{script}", line {self.LEAK_LINE}', text)
        self.assertIn(f'File "{script}", line 13', text)   # handle(n)

    def test_script_arguments(self):
        script = self.script()
        rc, out, err = self.run_ok('-m', 'tracemalloc', script,
                                   'a', '--top', '-n')
        self.assertEqual(out.strip(), b"argv ['a', '--top', '-n']")

    def test_exception(self):
        source = textwrap.dedent("""
            kept = [bytearray(10000) for _ in range(100)]

            def fail():
                big_local = [bytes(1000) for _ in range(1000)]
                raise RuntimeError("boom")

            fail()
        """)
        script = self.script(source)
        rc, out, err = self.run_failure('-m', 'tracemalloc', script)
        self.assertEqual(rc, 1)
        text = err.decode()
        self.assertIn("RuntimeError: boom", text)
        self.assertIn(f'File "{script}", line 8, in <module>', text)
        # Module globals stay alive as in a normal run...
        lines = self.report_lines(err)
        self.assertTrue(lines[0].startswith(f"#1: {script}:2:"), text)
        # ... but not the locals of the failed function.
        self.assertNotIn(f"{script}:5:", text)
        # The error comes before the report.
        self.assertLess(text.index("RuntimeError"), text.index("#1:"))

    def test_system_exit(self):
        source = textwrap.dedent("""
            import sys
            table = {n: str(n) * 20 for n in range(5000)}
            sys.exit(3)
        """)
        script = self.script(source)
        rc, out, err = self.run_failure('-m', 'tracemalloc', script)
        self.assertEqual(rc, 3)
        self.assertNotIn(b"Traceback", err)
        lines = self.report_lines(err)
        self.assertTrue(lines[0].startswith(f"#1: {script}:3:"), err)

    def test_module_mode(self):
        self.script(name="leaky_module")
        rc, out, err = self.run_ok('-m', 'tracemalloc', '-m', 'leaky_module',
                                   'x', __cwd=self.directory)
        self.assertEqual(out.strip(), b"argv ['x']")
        lines = self.report_lines(err)
        self.assertTrue(lines[0].startswith("#1: "), err)
        self.assertIn(f"leaky_module.py:{self.LEAK_LINE}: ", lines[0])

    def test_output_file(self):
        script = self.script()
        output = os.path.join(self.directory, "leak.snapshot")
        rc, out, err = self.run_ok('-m', 'tracemalloc', '--output', output,
                                   script)
        self.assertIn(b"snapshot written to", err)
        snapshot = tracemalloc.Snapshot.load(output)
        top = snapshot.statistics('lineno')[0]
        self.assertEqual((top.traceback[0].filename,
                          top.traceback[0].lineno),
                         (script, self.LEAK_LINE))
        # The tool's own allocations are not in the dumped snapshot.
        own_file = tracemalloc.__file__
        self.assertFalse(any(trace.traceback[-1].filename == own_file
                             for trace in snapshot.traces))

    def test_nothing_left(self):
        # No print(): the first print() of a process keeps a small cache
        # block allocated at its line, which is correctly reported.
        script = self.script("x = len([0] * 1000)\ndel x\n")
        rc, out, err = self.run_ok('-m', 'tracemalloc', script)
        self.assertIn(b"is still held at exit", err)

    def test_target_stops_tracing(self):
        script = self.script("import tracemalloc\ntracemalloc.stop()\n")
        rc, out, err = self.run_ok('-m', 'tracemalloc', script)
        self.assertIn(b"the program stopped tracing, no report", err)
        self.assertNotIn(b"Traceback", err)

    def test_report_survives_stderr_replacement(self):
        source = textwrap.dedent("""
            import io, sys
            kept = [bytearray(10000) for _ in range(100)]
            sys.stderr = io.StringIO()
        """)
        script = self.script(source)
        rc, out, err = self.run_ok('-m', 'tracemalloc', script)
        lines = self.report_lines(err)
        self.assertTrue(lines and lines[0].startswith(f"#1: {script}:3:"),
                        err)

    def test_usage_errors(self):
        script = self.script()
        bad_command_lines = [
            (),
            ('--top', '0', script),
            ('--top', 'many', script),
            ('-n', '-1', script),
            ('--group-by', 'function', script),
            ('--no-such-option', script),
            (os.path.join(self.directory, "missing.py"),),
            ('-m',),
            ('-m', 'no_such_module_for_tracemalloc'),
        ]
        for args in bad_command_lines:
            with self.subTest(args=args):
                rc, out, err = self.run_failure('-m', 'tracemalloc', *args)
                self.assertEqual(rc, 2)
                self.assertIn(b"usage: python -m tracemalloc", err)
                self.assertIn(b"error:", err)
                self.assertNotIn(b"Traceback", err)

    def test_help(self):
        rc, out, err = self.run_ok('-m', 'tracemalloc', '--help')
        for option in (b"--nframe", b"--top", b"--group-by", b"--output"):
            self.assertIn(option, out)


if __name__ == "__main__":
    unittest.main()
