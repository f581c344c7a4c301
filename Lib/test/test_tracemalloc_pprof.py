"""Tests of the pprof export (Snapshot.dump_pprof(), tracemalloc._pprof,
``python -m tracemalloc pprof``) and of tracemalloc.dump_on_signal().

The profiles are read back three ways: by a minimal protobuf reader written
here, independent of the encoder; by real pprof readers, each skipped with
its reason when it is missing (Tools/fork/pprof/install-readers.sh installs
them): ``protoc --decode`` with Tools/fork/pprof/profile.proto (Debian's
protobuf-compiler), the JavaScript decoder pprof-format run by Debian's
nodejs (Tools/fork/pprof/read_profile.js), and pprof itself: ``go tool
pprof`` (Debian's golang-go) and pprof built from Debian's
golang-github-google-pprof-dev sources.  Each time the decoded totals per
line must equal the snapshot's statistics, and those of a difference must
equal new minus old.
"""

import codecs
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import tracemalloc
import unittest

from test.support import captured_stderr, os_helper, requires_fork
from tracemalloc import _ondemand, _pprof


def _repository():
    """The fork's repository: this file is in its Lib/test, or in the
    Lib/test of its build tree, build/BASE/src."""
    lib_parent = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    for candidate in (lib_parent,
                      os.path.dirname(os.path.dirname(
                          os.path.dirname(lib_parent)))):
        if os.path.isfile(os.path.join(candidate, "Tools", "fork",
                                       "pin.sh")):
            return candidate
    return lib_parent


REPO = _repository()
READERS = os.path.join(REPO, "Tools", "fork", "pprof")
PROTO = os.path.join(READERS, "profile.proto")
READ_PROFILE_JS = os.path.join(READERS, "read_profile.js")
CACHE = os.environ.get("TRACEMALLOC_FORK_CACHE",
                       os.path.expanduser("~/.cache/tracemalloc-fork"))
PPROF_FORMAT = os.path.join(CACHE, "npm", "node_modules", "pprof-format")
INSTALL_HINT = "run Tools/fork/pprof/install-readers.sh"

PACKAGE_DIRECTORY = os.path.dirname(os.path.abspath(tracemalloc.__file__))
LIB_DIRECTORY = os.path.dirname(PACKAGE_DIRECTORY)

LIMIT_FRAME = ('<older calls beyond the traceback limit>', 0)
UNKNOWN_FRAME = ('<unknown>', 0)


# --------------------------------------------------------------------------
# A minimal protobuf reader, independent of the encoder

def read_varint(data, pos):
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def read_fields(data):
    """[(field number, wire type, value)] of one message."""
    fields = []
    pos = 0
    while pos < len(data):
        key, pos = read_varint(data, pos)
        field, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, pos = read_varint(data, pos)
        elif wire_type == 2:
            size, pos = read_varint(data, pos)
            if pos + size > len(data):
                raise ValueError("truncated length-delimited field")
            value = bytes(data[pos:pos + size])
            pos += size
        else:
            raise ValueError(f"unexpected wire type {wire_type}")
        if field == 0:
            raise ValueError("field number 0")
        fields.append((field, wire_type, value))
    return fields


def int64(value):
    return value - (1 << 64) if value >= 1 << 63 else value


def repeated_ints(fields, number):
    """A repeated integer field, packed or not."""
    values = []
    for field, wire_type, value in fields:
        if field != number:
            continue
        if wire_type == 2:
            pos = 0
            while pos < len(value):
                item, pos = read_varint(value, pos)
                values.append(item)
        else:
            values.append(value)
    return values


def scalar(fields, number, default=0):
    values = [value for field, _, value in fields if field == number]
    return values[-1] if values else default


def messages(fields, number):
    return [read_fields(value) for field, wire_type, value in fields
            if field == number and wire_type == 2]


def decode_profile(data):
    """The profile *data* (gzip-compressed or not) as plain Python data."""
    if data[:2] == b'\x1f\x8b':
        data = gzip.decompress(data)
    profile = read_fields(data)
    strings = [value.decode('utf-8', 'surrogateescape')
               for field, _, value in profile if field == 6]
    if not strings or strings[0] != '':
        raise ValueError("string_table[0] is not ''")

    def string(index):
        return strings[int64(index)]

    def value_type(message):
        return (string(scalar(message, 1)), string(scalar(message, 2)))

    functions = {}
    for message in messages(profile, 5):
        functions[scalar(message, 1)] = {
            'name': string(scalar(message, 2)),
            'system_name': string(scalar(message, 3)),
            'filename': string(scalar(message, 4)),
            'start_line': int64(scalar(message, 5)),
        }
    locations = {}
    for message in messages(profile, 4):
        lines = messages(message, 4)
        if len(lines) != 1:
            raise ValueError(f"{len(lines)} lines in a location")
        function = functions[scalar(lines[0], 1)]
        locations[scalar(message, 1)] = {
            'mapping_id': scalar(message, 2),
            'frame': (function['filename'], int64(scalar(lines[0], 2))),
            'function': function,
        }
    samples = []
    for message in messages(profile, 2):
        labels = {}
        for label in messages(message, 3):
            labels[string(scalar(label, 1))] = string(scalar(label, 2))
        samples.append({
            'frames': [locations[location_id]['frame']
                       for location_id in repeated_ints(message, 1)],
            'values': [int64(value) for value in repeated_ints(message, 2)],
            'labels': labels,
        })
    period_types = messages(profile, 11)
    mappings = messages(profile, 3)
    return {
        'strings': strings,
        'sample_types': [value_type(message)
                         for message in messages(profile, 1)],
        'samples': samples,
        'locations': locations,
        'functions': functions,
        'mappings': [{'id': scalar(message, 1),
                      'filename': string(scalar(message, 5)),
                      'has_functions': scalar(message, 7),
                      'has_filenames': scalar(message, 8),
                      'has_line_numbers': scalar(message, 9)}
                     for message in mappings],
        'period_type': (value_type(period_types[0])
                        if period_types else None),
        'period': int64(scalar(profile, 12)),
        'comments': [string(index) for index in repeated_ints(profile, 13)],
        'default_sample_type': string(scalar(profile, 14)),
    }


def totals_per_line(samples):
    """{(filename, lineno): [count, size]}, summed over the samples' leaf
    locations (pprof's flat view by line)."""
    totals = {}
    for sample in samples:
        key = sample['frames'][0]
        count, size = totals.get(key, (0, 0))
        totals[key] = [count + sample['values'][0],
                       size + sample['values'][1]]
    return {key: value for key, value in totals.items() if value != [0, 0]}


def expected_per_line(snapshot):
    expected = {}
    for stat in snapshot.statistics('lineno'):
        key = ((stat.traceback[0].filename, stat.traceback[0].lineno)
               if len(stat.traceback) else UNKNOWN_FRAME)
        expected[key] = [stat.count, stat.size]
    return expected


def expected_diff_per_line(new, old):
    expected = {}
    for stat in new.compare_to(old, 'lineno'):
        if stat.count_diff or stat.size_diff:
            key = ((stat.traceback[0].filename, stat.traceback[0].lineno)
                   if len(stat.traceback) else UNKNOWN_FRAME)
            expected[key] = [stat.count_diff, stat.size_diff]
    return expected


# --------------------------------------------------------------------------
# Snapshots

def raw_trace(size, frames, domain=0):
    # Raw traces list their frames most recent first.
    return (domain, size, tuple(frames), len(frames))


def synthetic_snapshots(*, ascii_only=False):
    """(old, new): deterministic snapshots with several files, multi-frame
    tracebacks sharing frames, a line that shrinks, one that vanishes, one
    that appears, a non-ASCII file name (unless *ascii_only*), tracebacks
    as long as the limit and an empty one."""
    app = '/srv/app/service.py'
    lib = '/usr/lib/python3/json/decoder.py'
    other = '/srv/app/other.py' if ascii_only else '/srv/app/caf\u00e9.py'
    old = tracemalloc.Snapshot([
        raw_trace(100, [(app, 10), (app, 30)]),
        raw_trace(100, [(app, 10), (app, 30)]),
        raw_trace(4000, [(lib, 353), (app, 12), (app, 30)]),
        raw_trace(64, [(other, 5), (app, 31)]),
        raw_trace(50, [(app, 40)], domain=7),
    ], 3)
    new = tracemalloc.Snapshot([
        raw_trace(100, [(app, 10), (app, 30)]),
        raw_trace(100, [(app, 10), (app, 30)]),
        raw_trace(100, [(app, 10), (app, 30)]),
        raw_trace(2500, [(lib, 353), (app, 12), (app, 30)]),
        raw_trace(700, [(lib, 353), (app, 14), (app, 32)]),
        raw_trace(64, [(other, 5), (app, 31)]),
        raw_trace(1 << 40, [(app, 50)]),
        raw_trace(8, []),
    ], 3)
    return old, new


def sampled(snapshot, interval):
    """*snapshot* marked as sampled every *interval* bytes (its statistics
    stay what they are: the encoder must take whatever they give)."""
    try:
        snapshot.sample = interval
    except AttributeError as exc:
        raise unittest.SkipTest(f"Snapshot.sample cannot be set: {exc}")
    return snapshot


def allocate_here(count):
    return [bytearray(200) for _ in range(count)]   # ALLOCATE_HERE


ALLOCATE_LINE = allocate_here.__code__.co_firstlineno + 1


class TracingMixin:
    """Trace for the test if nothing traces already."""

    def start_tracing(self, nframe=5):
        if tracemalloc.is_tracing():
            return
        tracemalloc.start(nframe)
        self.addCleanup(tracemalloc.stop)


# --------------------------------------------------------------------------
# The encoder, read back by the reader above

class EncoderTest(TracingMixin, unittest.TestCase):

    def test_header(self):
        old, new = synthetic_snapshots()
        profile = decode_profile(_pprof.encode(new))
        self.assertEqual(profile['strings'][0], '')
        self.assertEqual(len(profile['strings']),
                         len(set(profile['strings'])))
        self.assertEqual(profile['sample_types'],
                         [('inuse_objects', 'count'),
                          ('inuse_space', 'bytes')])
        self.assertEqual(profile['default_sample_type'], 'inuse_space')
        self.assertEqual(profile['period_type'], ('space', 'bytes'))
        self.assertEqual(profile['period'], 1)
        self.assertEqual(len(profile['comments']), 1)
        self.assertIn('exact', profile['comments'][0])
        self.assertIn('traceback limit 3', profile['comments'][0])
        self.assertEqual(profile['mappings'],
                         [{'id': 1, 'filename': 'python',
                           'has_functions': 1, 'has_filenames': 1,
                           'has_line_numbers': 1}])

    def test_samples_are_the_tracebacks(self):
        old, new = synthetic_snapshots()
        profile = decode_profile(_pprof.encode(new))
        expected = []
        for stat in new.statistics('traceback'):
            frames = [(frame.filename, frame.lineno)
                      for frame in reversed(stat.traceback)]
            if not frames:
                frames = [UNKNOWN_FRAME]
            elif len(frames) >= new.traceback_limit:
                frames.append(LIMIT_FRAME)
            expected.append((frames, [stat.count, stat.size], {}))
        got = [(sample['frames'], sample['values'], sample['labels'])
               for sample in profile['samples']]
        self.assertEqual(sorted(got), sorted(expected))
        # The leaf first: the allocating line of the library, then the
        # application's lines that called it.
        self.assertIn(([('/usr/lib/python3/json/decoder.py', 353),
                        ('/srv/app/service.py', 14),
                        ('/srv/app/service.py', 32), LIMIT_FRAME],
                       [1, 700], {}), got)

    def test_functions_and_locations(self):
        old, new = synthetic_snapshots()
        profile = decode_profile(_pprof.encode(new))
        frames = [location['frame']
                  for location in profile['locations'].values()]
        # One location per (filename, lineno).
        self.assertEqual(len(frames), len(set(frames)))
        for location in profile['locations'].values():
            filename, lineno = location['frame']
            function = location['function']
            self.assertEqual(location['mapping_id'], 1)
            self.assertEqual(function['filename'], filename)
            self.assertEqual(function['system_name'], filename)
            self.assertEqual(function['start_line'], lineno)
            if (filename, lineno) in (LIMIT_FRAME, UNKNOWN_FRAME):
                self.assertEqual(function['name'], filename)
            else:
                self.assertEqual(function['name'],
                                 f"{os.path.basename(filename)}:{lineno}")
        self.assertIn(('/srv/app/caf\u00e9.py', 5), frames)

    def test_totals_per_line(self):
        for snapshot in synthetic_snapshots():
            profile = decode_profile(_pprof.encode(snapshot))
            self.assertEqual(totals_per_line(profile['samples']),
                             expected_per_line(snapshot))

    def test_totals_of_a_traced_process(self):
        self.start_tracing(10)
        kept = allocate_here(300)
        snapshot = tracemalloc.take_snapshot()
        del kept
        profile = decode_profile(_pprof.encode(snapshot))
        totals = totals_per_line(profile['samples'])
        self.assertEqual(totals, expected_per_line(snapshot))
        count, size = totals[(__file__, ALLOCATE_LINE)]
        self.assertGreaterEqual(count, 300)
        self.assertGreaterEqual(size, 300 * 200)

    def test_difference(self):
        old, new = synthetic_snapshots()
        profile = decode_profile(_pprof.encode(new, base=old))
        self.assertEqual(totals_per_line(profile['samples']),
                         expected_diff_per_line(new, old))
        base = [sample for sample in profile['samples']
                if sample['labels']]
        ours = [sample for sample in profile['samples']
                if not sample['labels']]
        self.assertEqual(len(ours), len(new.statistics('traceback')))
        self.assertEqual(len(base), len(old.statistics('traceback')))
        for sample in base:
            self.assertEqual(sample['labels'], {'pprof::base': 'true'})
            self.assertLess(sample['values'][0], 0)
            self.assertLess(sample['values'][1], 0)
        # The new snapshot's samples alone are its own profile.
        self.assertEqual(totals_per_line(ours), expected_per_line(new))
        self.assertEqual(len(profile['comments']), 2)
        self.assertIn('pprof::base=true', profile['comments'][1])

    def test_difference_of_a_traced_process(self):
        self.start_tracing(10)
        old = tracemalloc.take_snapshot()
        kept = allocate_here(100)
        new = tracemalloc.take_snapshot()
        del kept
        profile = decode_profile(_pprof.encode(new, base=old))
        totals = totals_per_line(profile['samples'])
        self.assertEqual(totals, expected_diff_per_line(new, old))
        count, size = totals[(__file__, ALLOCATE_LINE)]
        self.assertGreaterEqual(count, 100)

    def test_difference_from_itself_is_zero(self):
        old, new = synthetic_snapshots()
        profile = decode_profile(_pprof.encode(new, base=new))
        self.assertEqual(totals_per_line(profile['samples']), {})

    def test_sampled_snapshot(self):
        old, new = synthetic_snapshots()
        sampled(new, 512 * 1024)
        profile = decode_profile(_pprof.encode(new))
        self.assertEqual(profile['period_type'], ('space', 'bytes'))
        self.assertEqual(profile['period'], 512 * 1024)
        self.assertIn('sampled', profile['comments'][0])
        self.assertIn('524288', profile['comments'][0])
        self.assertIn('estimates', profile['comments'][0])
        self.assertEqual(totals_per_line(profile['samples']),
                         expected_per_line(new))

    def test_sampled_snapshot_of_the_engine(self):
        # Tracing in sampled mode, if this build has it: the values are
        # the estimates of statistics().
        if tracemalloc.is_tracing():
            self.skipTest("tracing is already on")
        try:
            tracemalloc.start(5, sample=4096)
        except TypeError as exc:
            self.skipTest(f"no sampled mode in this build: {exc}")
        try:
            kept = allocate_here(2000)
            snapshot = tracemalloc.take_snapshot()
            del kept
        finally:
            tracemalloc.stop()
        self.assertEqual(getattr(snapshot, 'sample', None), 4096)
        profile = decode_profile(_pprof.encode(snapshot))
        self.assertEqual(profile['period'], 4096)
        self.assertEqual(totals_per_line(profile['samples']),
                         expected_per_line(snapshot))

    def test_empty_snapshot(self):
        snapshot = tracemalloc.Snapshot([], 1)
        profile = decode_profile(_pprof.encode(snapshot))
        self.assertEqual(profile['samples'], [])
        self.assertEqual(profile['sample_types'],
                         [('inuse_objects', 'count'),
                          ('inuse_space', 'bytes')])

    def test_traceback_limit_of_one_has_no_marker(self):
        snapshot = tracemalloc.Snapshot(
            [raw_trace(10, [('a.py', 1)]), raw_trace(20, [('a.py', 2)])], 1)
        profile = decode_profile(_pprof.encode(snapshot))
        self.assertEqual(sorted(sample['frames']
                                for sample in profile['samples']),
                         [[('a.py', 1)], [('a.py', 2)]])

    def test_undecodable_file_name(self):
        name = 'bad-\udcff.py'
        snapshot = tracemalloc.Snapshot([raw_trace(10, [(name, 3)])], 1)
        profile = decode_profile(_pprof.encode(snapshot))
        # The string table must be valid UTF-8 (issue 29, item 2.10): the
        # undecodable byte is written as a backslash escape.
        self.assertEqual(profile['samples'][0]['frames'],
                         [('bad-\\xff.py', 3)])

    def test_bad_input(self):
        old, new = synthetic_snapshots()
        for bad in (None, 42, [], new.statistics('lineno')):
            with self.assertRaisesRegex(TypeError, "tracemalloc.Snapshot"):
                _pprof.encode(bad)
            with self.assertRaisesRegex(TypeError, "base must be"):
                _pprof.encode(new, base=bad if bad is not None else 42)
        with self.assertRaises(TypeError):
            _pprof.encode(new, old)       # base is keyword-only
        for traces, message in (
                ([(0, 10, ((b'a.py', 1),), 1)], "cannot encode the frame"),
                ([(0, 10, (('a.py', '1'),), 1)], "cannot encode the frame"),
                ([(0, 10, (('a.py', -1),), 1)], "cannot encode the frame"),
                ([(0, 1 << 70, (('a.py', 1),), 1)], "64-bit integer"),
                ([(0, -5, (('a.py', 1),), 1)], "non-negative")):
            with self.assertRaisesRegex(ValueError, message):
                _pprof.encode(tracemalloc.Snapshot(traces, 1))
        for interval in (0, -1, 1.5, '4096', True):
            snapshot = tracemalloc.Snapshot([], 1)
            sampled(snapshot, interval)
            with self.assertRaisesRegex(ValueError, "sampling interval"):
                _pprof.encode(snapshot)
            with self.assertRaisesRegex(ValueError, "sampling interval"):
                _pprof.encode(new, base=snapshot)


class DumpTest(unittest.TestCase):

    def setUp(self):
        self.directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.directory)

    def test_dump_pprof(self):
        old, new = synthetic_snapshots()
        path = os.path.join(self.directory, 'profile.pb.gz')
        new.dump_pprof(path)
        with open(path, 'rb') as fp:
            data = fp.read()
        self.assertEqual(data[:2], b'\x1f\x8b')
        self.assertEqual(gzip.decompress(data), _pprof.encode(new))
        # The same snapshot gives the same bytes.
        new.dump_pprof(path)
        with open(path, 'rb') as fp:
            self.assertEqual(fp.read(), data)
        new.dump_pprof(path, base=old)
        with open(path, 'rb') as fp:
            self.assertEqual(gzip.decompress(fp.read()),
                             _pprof.encode(new, base=old))
        # No temporary file left behind.
        self.assertEqual(os.listdir(self.directory), ['profile.pb.gz'])

    def test_dump_replaces_atomically(self):
        old, new = synthetic_snapshots()
        path = os.path.join(self.directory, 'profile.pb.gz')
        link = os.path.join(self.directory, 'hard-link')
        old.dump_pprof(path)
        os.link(path, link)
        new.dump_pprof(path)
        # A rename, not a rewrite: the other name keeps the old profile.
        with open(link, 'rb') as fp:
            self.assertEqual(gzip.decompress(fp.read()), _pprof.encode(old))
        with open(path, 'rb') as fp:
            self.assertEqual(gzip.decompress(fp.read()), _pprof.encode(new))

    def test_dump_to_a_device(self):
        old, new = synthetic_snapshots()
        new.dump_pprof(os.devnull)
        self.assertTrue(os.path.exists(os.devnull))

    def test_dump_errors(self):
        old, new = synthetic_snapshots()
        with self.assertRaises(FileNotFoundError):
            new.dump_pprof(os.path.join(self.directory, 'missing', 'x'))
        with self.assertRaisesRegex(TypeError, "filename"):
            new.dump_pprof(42)
        with self.assertRaisesRegex(TypeError, "tracemalloc.Snapshot"):
            _pprof.dump(None, os.path.join(self.directory, 'x.pb.gz'))
        self.assertEqual(os.listdir(self.directory), [])


# --------------------------------------------------------------------------
# Real readers

def run_reader(cmd, **kwargs):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=300, **kwargs)
    if proc.returncode:
        raise AssertionError(
            f"{cmd[0]} failed with status {proc.returncode}:\n"
            f"{proc.stderr.decode(errors='replace')}")
    return proc.stdout


def parse_text_format(text):
    """protoc's text format as nested lists of (name, value); a message is
    a list, a string is bytes, a number an int."""
    tokens = re.findall(r'"(?:[^"\\]|\\.)*"|-?[\w.]+|[{}:]', text)
    stack = [[]]
    pos = 0
    while pos < len(tokens):
        token = tokens[pos]
        if token == '}':
            message = stack.pop()
            stack[-1][-1] = (stack[-1][-1][0], message)
            pos += 1
        elif tokens[pos + 1] == '{':
            stack[-1].append((token, None))
            stack.append([])
            pos += 2
        else:
            assert tokens[pos + 1] == ':', tokens[pos:pos + 3]
            value = tokens[pos + 2]
            if value.startswith('"'):
                value = codecs.escape_decode(value[1:-1])[0]
            elif value in ('true', 'false'):
                value = value == 'true'
            else:
                value = int(value)
            stack[-1].append((token, value))
            pos += 3
    assert len(stack) == 1
    return stack[0]


def text_fields(message, name):
    return [value for key, value in message if key == name]


def text_scalar(message, name, default=0):
    values = text_fields(message, name)
    return values[-1] if values else default


class ReaderTestMixin:
    """Profiles of the synthetic snapshots and of this process, written
    to files, and what each reader must find in them."""

    def setUp(self):
        self.directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.directory)

    def profiles(self, *, ascii_only=False):
        """[(name, path, expected totals per line, base samples)]."""
        old, new = synthetic_snapshots(ascii_only=ascii_only)
        traced = self.traced_snapshots()
        cases = [('new', new, None), ('old', old, None),
                 ('difference', new, old),
                 ('sampled', sampled(synthetic_snapshots(
                     ascii_only=ascii_only)[1], 4096), None),
                 ('traced', traced[1], None),
                 ('traced difference', traced[1], traced[0])]
        result = []
        for number, (name, snapshot, base) in enumerate(cases):
            path = os.path.join(self.directory, f'{number}.pb.gz')
            snapshot.dump_pprof(path, base=base)
            expected = (expected_per_line(snapshot) if base is None
                        else expected_diff_per_line(snapshot, base))
            base_samples = (0 if base is None
                            else len(base.statistics('traceback')))
            result.append((name, path, expected, base_samples))
        return result

    def traced_snapshots(self):
        started = not tracemalloc.is_tracing()
        if started:
            tracemalloc.start(5)
        try:
            old = tracemalloc.take_snapshot()
            kept = allocate_here(50)
            new = tracemalloc.take_snapshot()
            del kept
        finally:
            if started:
                tracemalloc.stop()
        # Keep what a file name without spaces can say: go tool pprof's
        # text output is split on spaces.
        keep = [tracemalloc.Filter(False, '* *')]
        return old.filter_traces(keep), new.filter_traces(keep)


@unittest.skipUnless(shutil.which('protoc'),
                     f"protoc is missing (Debian's protobuf-compiler; "
                     f"{INSTALL_HINT})")
class ProtocReaderTest(ReaderTestMixin, unittest.TestCase):
    """protoc --decode perftools.profiles.Profile, with our .proto that
    states pprof's field numbers."""

    def decode(self, path):
        with open(path, 'rb') as fp:
            data = gzip.decompress(fp.read())
        text = run_reader(
            ['protoc', f'--proto_path={READERS}',
             '--decode=perftools.profiles.Profile', 'profile.proto'],
            input=data).decode('utf-8')
        return text, parse_text_format(text)

    def test_totals(self):
        for name, path, expected, base_samples in self.profiles():
            with self.subTest(profile=name):
                text, profile = self.decode(path)
                # Every field is known to our .proto: protoc would print
                # an unknown one by number ("15: 3").
                self.assertNotRegex(text, r'(?m)^\s*\d+:')
                strings = [value.decode('utf-8', 'surrogateescape')
                           for value in text_fields(profile,
                                                    'string_table')]
                self.assertEqual(strings[0], '')
                functions = {text_scalar(function, 'id'): function
                             for function in text_fields(profile,
                                                         'function')}
                frames = {}
                for location in text_fields(profile, 'location'):
                    line, = text_fields(location, 'line')
                    function = functions[text_scalar(line, 'function_id')]
                    frames[text_scalar(location, 'id')] = (
                        strings[text_scalar(function, 'filename')],
                        text_scalar(line, 'line'))
                samples = []
                for sample in text_fields(profile, 'sample'):
                    labels = {
                        strings[text_scalar(label, 'key')]:
                        strings[text_scalar(label, 'str')]
                        for label in text_fields(sample, 'label')}
                    samples.append({
                        'frames': [frames[location_id] for location_id
                                   in text_fields(sample, 'location_id')],
                        'values': text_fields(sample, 'value'),
                        'labels': labels})
                self.assertEqual(totals_per_line(samples), expected)
                self.assertEqual(
                    sum(1 for sample in samples if sample['labels']),
                    base_samples)
                sample_types = [
                    (strings[text_scalar(value_type, 'type')],
                     strings[text_scalar(value_type, 'unit')])
                    for value_type in text_fields(profile, 'sample_type')]
                self.assertEqual(sample_types,
                                 [('inuse_objects', 'count'),
                                  ('inuse_space', 'bytes')])
                self.assertEqual(
                    strings[text_scalar(profile, 'default_sample_type')],
                    'inuse_space')
                self.assertEqual(text_scalar(profile, 'period'),
                                 4096 if name == 'sampled' else 1)


@unittest.skipUnless(shutil.which('node'),
                     f"node is missing (Debian's nodejs; {INSTALL_HINT})")
@unittest.skipUnless(os.path.isdir(PPROF_FORMAT),
                     f"the pprof-format package is not in {PPROF_FORMAT} "
                     f"({INSTALL_HINT})")
class PprofFormatReaderTest(ReaderTestMixin, unittest.TestCase):
    """The JavaScript decoder pprof-format, through read_profile.js."""

    def test_totals(self):
        for name, path, expected, base_samples in self.profiles():
            with self.subTest(profile=name):
                env = dict(os.environ, TRACEMALLOC_FORK_CACHE=CACHE)
                result = json.loads(run_reader(
                    ['node', READ_PROFILE_JS, path], env=env))
                lines = {(filename, lineno): [count, size]
                         for filename, lineno, count, size
                         in result['lines']
                         if count or size}
                self.assertEqual(lines, expected)
                self.assertEqual(
                    sum(1 for sample in result['samples']
                        if sample['labels'] == {'pprof::base': 'true'}),
                    base_samples)
                self.assertEqual(result['sample_types'],
                                 [['inuse_objects', 'count'],
                                  ['inuse_space', 'bytes']])
                self.assertEqual(result['default_sample_type'],
                                 'inuse_space')
                self.assertEqual(result['period_type'], ['space', 'bytes'])
                self.assertEqual(result['period'],
                                 4096 if name == 'sampled' else 1)


def go_pprof_top(pprof, path, sample_index, *extra):
    """{(filename, lineno): flat value} of `pprof -top -lines`, where
    *pprof* is the command (a list)."""
    output = run_reader(
        [*pprof, '-top', '-lines', '-unit=B',
         '-nodecount=1000000', '-nodefraction=0', '-edgefraction=0',
         f'-sample_index={sample_index}', *extra, path],
        env=dict(os.environ, PPROF_TMPDIR=os.path.dirname(path))).decode()
    flat = {}
    # flat flat% sum% cum cum% NODE, where NODE is "FUNCTION FILE:LINE",
    # or the function alone for line 0.
    row = re.compile(r'^\s*(-?\d+)B?\s+\S+%\s+\S+%\s+-?\d+B?\s+\S+%\s+'
                     r'(?P<node>.+)$')
    for line in output.splitlines():
        match = row.match(line)
        if not match or not int(match[1]):
            continue
        node = re.fullmatch(r'\S+ (?P<file>.+):(?P<line>\d+)', match['node'])
        key = ((node['file'], int(node['line'])) if node
               else (match['node'], 0))
        flat[key] = int(match[1])
    return output, flat


class PprofReaderTestMixin(ReaderTestMixin):
    """pprof itself: `pprof -top -lines` sums per line."""

    # The command that runs pprof.
    pprof = None

    def check(self, path, expected, *extra):
        for index, sample_index in enumerate(('inuse_objects',
                                              'inuse_space')):
            output, flat = go_pprof_top(self.pprof, path, sample_index,
                                        *extra)
            want = {key: value[index] for key, value in expected.items()
                    if value[index]}
            self.assertEqual(flat, want, output)
        return output

    def test_totals(self):
        for name, path, expected, base_samples in self.profiles(
                ascii_only=True):
            with self.subTest(profile=name):
                output = self.check(path, expected)
                self.assertIn('Type: inuse_space', output)

    def test_diff_base_of_two_profiles_is_our_difference(self):
        # pprof -diff_base=OLD NEW on two full profiles gives the per-line
        # totals of our one-file difference.
        old, new = synthetic_snapshots(ascii_only=True)
        old_path = os.path.join(self.directory, 'old.pb.gz')
        new_path = os.path.join(self.directory, 'new.pb.gz')
        old.dump_pprof(old_path)
        new.dump_pprof(new_path)
        self.check(new_path, expected_diff_per_line(new, old),
                   f'-diff_base={old_path}')


@unittest.skipUnless(shutil.which('go'),
                     f"go is missing (Debian's golang-go, whose `go tool "
                     f"pprof` is pprof; {INSTALL_HINT})")
class GoToolPprofReaderTest(PprofReaderTestMixin, unittest.TestCase):
    """The pprof that Go ships: `go tool pprof`."""

    pprof = ['go', 'tool', 'pprof']


DEBIAN_PPROF = os.path.join(CACHE, 'pprof', 'pprof')


@unittest.skipUnless(os.access(DEBIAN_PPROF, os.X_OK),
                     f"{DEBIAN_PPROF} is missing (pprof built from "
                     f"Debian's golang-github-google-pprof-dev; "
                     f"{INSTALL_HINT})")
class DebianPprofReaderTest(PprofReaderTestMixin, unittest.TestCase):
    """pprof built from Debian's golang-github-google-pprof-dev."""

    pprof = [DEBIAN_PPROF]


# --------------------------------------------------------------------------
# python -m tracemalloc pprof

def child_env(**extra):
    env = dict(os.environ)
    paths = [LIB_DIRECTORY]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.pop("PYTHONTRACEMALLOC", None)
    env.update(extra)
    return env


class CommandTest(unittest.TestCase):

    def setUp(self):
        self.directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.directory)
        self.old, self.new = synthetic_snapshots()
        self.old_path = os.path.join(self.directory, 'old.tracemalloc')
        self.new_path = os.path.join(self.directory, 'new.tracemalloc')
        self.old.dump(self.old_path)
        self.new.dump(self.new_path)

    def run_command(self, *args):
        return subprocess.run(
            [sys.executable, '-m', 'tracemalloc', 'pprof', *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=child_env(), cwd=self.directory, timeout=300)

    def read(self, path):
        with open(path, 'rb') as fp:
            return decode_profile(fp.read())

    def test_default_output(self):
        proc = self.run_command(self.new_path)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        output = os.path.join(self.directory, 'new.pb.gz')
        self.assertIn(f"written to {output}", proc.stderr)
        profile = self.read(output)
        self.assertEqual(totals_per_line(profile['samples']),
                         expected_per_line(self.new))

    def test_output_and_base(self):
        output = os.path.join(self.directory, 'diff.pb.gz')
        proc = self.run_command(self.new_path, '--base', self.old_path,
                                '-o', output)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        profile = self.read(output)
        self.assertEqual(totals_per_line(profile['samples']),
                         expected_diff_per_line(self.new, self.old))

    def test_sampled_snapshot_file(self):
        # The interval that a sampled snapshot's file records is the
        # profile's period, and the values are the loaded snapshot's
        # estimates.
        if tracemalloc.is_tracing():
            self.skipTest("tracing is already on")
        try:
            tracemalloc.start(5, sample=4096)
        except TypeError as exc:
            self.skipTest(f"no sampled mode in this build: {exc}")
        try:
            kept = allocate_here(2000)
            snapshot = tracemalloc.take_snapshot()
            del kept
        finally:
            tracemalloc.stop()
        path = os.path.join(self.directory, 'sampled.tracemalloc')
        snapshot.dump(path)
        proc = self.run_command(path)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        profile = self.read(os.path.join(self.directory, 'sampled.pb.gz'))
        self.assertEqual(profile['period'], 4096)
        self.assertIn('sampled', profile['comments'][0])
        loaded = tracemalloc.Snapshot.load(path)
        self.assertEqual(totals_per_line(profile['samples']),
                         expected_per_line(loaded))
        count, size = totals_per_line(profile['samples'])[
            (__file__, ALLOCATE_LINE)]
        self.assertGreater(size, 0)

    def test_listed_in_the_help(self):
        proc = subprocess.run(
            [sys.executable, '-m', 'tracemalloc', 'pprof', '--help'],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=child_env(), timeout=300)
        self.assertEqual(proc.returncode, 0)
        self.assertIn('--base', proc.stdout)
        from tracemalloc import __main__ as command_line
        self.assertIn('pprof', command_line.COMMANDS)
        self.assertIn('  pprof ', command_line.__doc__)

    def test_errors(self):
        missing = os.path.join(self.directory, 'missing.tracemalloc')
        corrupt = os.path.join(self.directory, 'corrupt.tracemalloc')
        with open(corrupt, 'wb') as fp:
            fp.write(b'not a snapshot')
        cases = [
            ((missing,), 'missing.tracemalloc'),
            ((corrupt,), 'corrupt.tracemalloc'),
            ((self.new_path, '--base', missing), 'missing.tracemalloc'),
            ((self.new_path, '--base', corrupt), 'corrupt.tracemalloc'),
            ((self.new_path, '-o',
              os.path.join(self.directory, 'no', 'such', 'dir.pb.gz')),
             'cannot write'),
            ((), 'required'),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                proc = self.run_command(*args)
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertIn('python -m tracemalloc pprof: error:',
                              proc.stderr)
                self.assertIn(message, proc.stderr)
                self.assertNotIn('Traceback', proc.stderr)
        self.assertFalse(os.path.exists(
            os.path.join(self.directory, 'missing.pb.gz')))


# --------------------------------------------------------------------------
# dump_on_signal()

SIGNAL = signal.SIGUSR2

SERVICE = textwrap.dedent("""\
    import signal, sys, time, tracemalloc

    PATTERN, FORMAT, TRACE = sys.argv[1], sys.argv[2], sys.argv[3]
    if TRACE == 'trace':
        tracemalloc.start(10)
    previous = tracemalloc.dump_on_signal(
        signal.SIGUSR2, PATTERN, format=None if FORMAT == 'guess' else FORMAT)

    sessions = []

    def handle(request):
        sessions.append(bytearray(1000))   # SERVICE_LEAK

    # A service loop that ends by itself: on 'stop' on stdin, or after a
    # bound in time.
    import selectors
    selector = selectors.DefaultSelector()
    selector.register(sys.stdin, selectors.EVENT_READ)
    deadline = time.monotonic() + 60
    request = 0
    while time.monotonic() < deadline:
        request += 1
        handle(request)
        if request == 10:
            # Some requests are held when the test sends its signal.
            print('ready', previous, flush=True)
        if selector.select(timeout=0.01):
            break
    print('served', request, flush=True)
""")
SERVICE_LEAK_LINE = next(number for number, line
                         in enumerate(SERVICE.splitlines(), 1)
                         if 'SERVICE_LEAK' in line)


@unittest.skipUnless(hasattr(signal, 'SIGUSR2'), "needs SIGUSR2")
class DumpOnSignalServiceTest(unittest.TestCase):
    """A service in a child process, profiled with kill -USR2."""

    def setUp(self):
        self.directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.directory)
        self.script = os.path.join(self.directory, 'service.py')
        with open(self.script, 'w') as fp:
            fp.write(SERVICE)

    def start_service(self, pattern, format='guess', trace='trace'):
        proc = subprocess.Popen(
            [sys.executable, self.script, pattern, format, trace],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=child_env(),
            cwd=self.directory)
        self.addCleanup(self.stop_service, proc)
        line = proc.stdout.readline()
        self.assertTrue(line.startswith('ready'),
                        f"{line!r} {proc.stderr.read() if not line else ''}")
        return proc

    def stop_service(self, proc):
        if proc.poll() is None:
            try:
                proc.stdin.write('stop\n')
                proc.stdin.flush()
            except OSError:
                pass
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        out, err = proc.communicate()
        return out, err

    def wait_for(self, path, timeout=60):
        deadline = time.monotonic() + timeout
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                self.fail(f"{path} was not written within {timeout} s")
            time.sleep(0.05)

    def test_pprof_on_signal(self):
        proc = self.start_service(os.path.join(self.directory,
                                               'prof-{pid}-{n}.pb.gz'))
        first = os.path.join(self.directory, f'prof-{proc.pid}-1.pb.gz')
        second = os.path.join(self.directory, f'prof-{proc.pid}-2.pb.gz')
        os.kill(proc.pid, SIGNAL)
        self.wait_for(first)
        time.sleep(0.3)
        os.kill(proc.pid, SIGNAL)
        self.wait_for(second)
        out, err = self.stop_service(proc)
        self.assertEqual(proc.returncode, 0, err)
        self.assertIn('served', out)
        self.assertIn(f"SIGUSR2: pprof written to {first}", err)
        self.assertIn(f"SIGUSR2: pprof written to {second}", err)
        self.assertNotIn('Traceback', err)
        counts = []
        for path in (first, second):
            with open(path, 'rb') as fp:
                profile = decode_profile(fp.read())
            totals = totals_per_line(profile['samples'])
            count, size = totals[(self.script, SERVICE_LEAK_LINE)]
            self.assertGreater(count, 0)
            counts.append(count)
        # The service leaks one block per request: the second profile
        # holds more of them.
        self.assertGreater(counts[1], counts[0])

    def test_snapshot_file_on_signal(self):
        proc = self.start_service('service-{n}.tracemalloc')
        path = os.path.join(self.directory, 'service-1.tracemalloc')
        os.kill(proc.pid, SIGNAL)
        self.wait_for(path)
        out, err = self.stop_service(proc)
        self.assertEqual(proc.returncode, 0, err)
        self.assertIn(f"SIGUSR2: snapshot written to {path}", err)
        snapshot = tracemalloc.Snapshot.load(path)
        lines = {(stat.traceback[0].filename, stat.traceback[0].lineno)
                 for stat in snapshot.statistics('lineno')}
        self.assertIn((self.script, SERVICE_LEAK_LINE), lines)

    def test_not_tracing(self):
        proc = self.start_service('never-{n}.pb.gz', trace='no')
        os.kill(proc.pid, SIGNAL)
        deadline = time.monotonic() + 60
        # The message is the only sign that the signal was handled.
        err_lines = []
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            err_lines.append(line)
            if 'not tracing' in line or not line:
                break
        out, err = self.stop_service(proc)
        err = ''.join(err_lines) + err
        self.assertEqual(proc.returncode, 0, err)
        self.assertIn('served', out)
        self.assertEqual(
            [line for line in err.splitlines() if line],
            ["tracemalloc: SIGUSR2: not tracing, no profile written (start "
             "tracing with -X tracemalloc or tracemalloc.start())"])
        self.assertEqual([name for name in os.listdir(self.directory)
                          if name.startswith('never')], [])


@unittest.skipUnless(hasattr(signal, 'SIGUSR2'), "needs SIGUSR2")
class DumpOnSignalTest(TracingMixin, unittest.TestCase):
    """dump_on_signal() in this process, with signal.raise_signal()."""

    def setUp(self):
        self.directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.directory)
        self.original = signal.getsignal(SIGNAL)
        self.addCleanup(signal.signal, SIGNAL, self.original)
        self.addCleanup(tracemalloc.dump_on_signal, None)

    def wait_for_writers(self):
        for thread in threading.enumerate():
            if thread.name == 'tracemalloc-dump':
                thread.join(60)

    def raise_and_wait(self):
        signal.raise_signal(SIGNAL)
        self.wait_for_writers()

    def test_install_and_uninstall(self):
        pattern = os.path.join(self.directory, 'p-{n}.pb.gz')
        previous = tracemalloc.dump_on_signal(SIGNAL, pattern)
        self.assertEqual(previous, self.original)
        handler = signal.getsignal(SIGNAL)
        self.assertTrue(callable(handler))
        # Installing again replaces the pattern and keeps what to restore.
        self.assertIs(tracemalloc.dump_on_signal(SIGNAL, pattern), handler)
        self.assertIsNone(tracemalloc.dump_on_signal(None))
        self.assertEqual(signal.getsignal(SIGNAL), self.original)
        # Nothing installed: nothing to do.
        self.assertIsNone(tracemalloc.dump_on_signal(None))

    def test_dump(self):
        self.start_tracing()
        pattern = os.path.join(self.directory, 'p-{pid}-{n}-{time}.pb')
        tracemalloc.dump_on_signal(SIGNAL, pattern)
        kept = allocate_here(100)
        with captured_stderr() as stderr:
            self.raise_and_wait()
        del kept
        names = os.listdir(self.directory)
        self.assertEqual(len(names), 1, names)
        self.assertRegex(names[0],
                         rf'^p-{os.getpid()}-\d+-\d{{8}}T\d{{6}}Z\.pb$')
        path = os.path.join(self.directory, names[0])
        self.assertEqual(stderr.getvalue(),
                         f"tracemalloc: SIGUSR2: pprof written to {path}\n")
        with open(path, 'rb') as fp:
            profile = decode_profile(fp.read())
        totals = totals_per_line(profile['samples'])
        self.assertGreaterEqual(totals[(__file__, ALLOCATE_LINE)][0], 100)

    def test_relative_pattern_is_taken_at_install(self):
        self.start_tracing()
        with os_helper.change_cwd(self.directory):
            tracemalloc.dump_on_signal(SIGNAL, 'rel-{n}.tracemalloc')
        with captured_stderr():
            self.raise_and_wait()
        names = [name for name in os.listdir(self.directory)
                 if name.startswith('rel-')]
        self.assertEqual(len(names), 1)
        tracemalloc.Snapshot.load(os.path.join(self.directory, names[0]))

    def test_format(self):
        self.start_tracing()
        pattern = os.path.join(self.directory, 'explicit-{n}.data')
        tracemalloc.dump_on_signal(SIGNAL, pattern, format='pprof')
        with captured_stderr():
            self.raise_and_wait()
        name, = os.listdir(self.directory)
        with open(os.path.join(self.directory, name), 'rb') as fp:
            decode_profile(fp.read())

    def test_write_error_is_reported(self):
        self.start_tracing()
        subdirectory = os.path.join(self.directory, 'gone')
        os.mkdir(subdirectory)
        tracemalloc.dump_on_signal(
            SIGNAL, os.path.join(subdirectory, 'p-{n}.pb.gz'))
        os.rmdir(subdirectory)
        with captured_stderr() as stderr:
            self.raise_and_wait()       # raises nothing
        message = stderr.getvalue()
        self.assertRegex(message, r"^tracemalloc: cannot write the profile "
                                  r"to .*gone.*: FileNotFoundError")
        self.assertEqual(message.count('\n'), 1)

    def test_signal_during_a_dump_is_ignored(self):
        self.start_tracing()
        tracemalloc.dump_on_signal(
            SIGNAL, os.path.join(self.directory, 'p-{n}.pb.gz'))
        # As if a dump were under way.
        self.assertTrue(_ondemand._busy.acquire(blocking=False))
        try:
            with captured_stderr() as stderr:
                self.raise_and_wait()
        finally:
            _ondemand._busy.release()
        self.assertEqual(stderr.getvalue(),
                         "tracemalloc: SIGUSR2: a profile is still being "
                         "written; this signal is ignored\n")
        self.assertEqual(os.listdir(self.directory), [])

    @requires_fork()
    def test_forked_child_is_not_busy(self):
        # A fork while the parent writes a profile: the child can dump.
        self.assertTrue(_ondemand._busy.acquire(blocking=False))
        try:
            pid = os.fork()
            if pid == 0:
                free = _ondemand._busy.acquire(blocking=False)
                os._exit(0 if free else 1)
        finally:
            _ondemand._busy.release()
        self.assertEqual(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]),
                         0)

    def test_bad_arguments(self):
        cases = [
            ((SIGNAL, os.path.join(self.directory, '{foo}.pb.gz')),
             ValueError, r"unknown field \{foo\}"),
            ((SIGNAL, os.path.join(self.directory, '{}.pb.gz')),
             ValueError, "must be named"),
            ((SIGNAL, os.path.join(self.directory, '{n')),
             ValueError, "invalid path pattern"),
            ((SIGNAL, os.path.join(self.directory, '{time:d}')),
             ValueError, "invalid path pattern"),
            ((SIGNAL, os.path.join(self.directory, 'no', '{n}.pb.gz')),
             ValueError, "does not exist"),
            ((SIGNAL, ''), ValueError, "empty"),
            ((SIGNAL, 42), TypeError, "path must be"),
            (('SIGUSR2',), TypeError, "signum must be"),
            ((1.0,), TypeError, "signum must be"),
            ((100000,), ValueError, "invalid signal"),
        ]
        for args, exception, message in cases:
            with self.subTest(args=args):
                with self.assertRaisesRegex(exception, message):
                    tracemalloc.dump_on_signal(*args)
                self.assertEqual(signal.getsignal(SIGNAL), self.original)
        with self.assertRaisesRegex(ValueError, "format must be"):
            tracemalloc.dump_on_signal(
                SIGNAL, os.path.join(self.directory, 'x'), format='xml')
        self.assertEqual(signal.getsignal(SIGNAL), self.original)

    def test_main_thread_only(self):
        errors = []

        def install():
            try:
                tracemalloc.dump_on_signal(
                    SIGNAL, os.path.join(self.directory, 'x-{n}.pb.gz'))
            except ValueError as exc:
                errors.append(exc)

        thread = threading.Thread(target=install)
        thread.start()
        thread.join()
        self.assertEqual(len(errors), 1)
        self.assertIn('main thread', str(errors[0]))
        self.assertEqual(signal.getsignal(SIGNAL), self.original)


class ThreadLabelTest(unittest.TestCase):
    """A snapshot taken with threads=True: each sample carries the labels
    thread (the name, as statistics('thread') gives it) and thread_id."""

    def setUp(self):
        if tracemalloc.is_tracing():
            self.skipTest("tracemalloc must not be tracing already")
        self.directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.directory)

    def snapshots(self):
        kept = []
        ready = threading.Event()
        done = threading.Event()

        def work(count):
            for _ in range(count):
                kept.append(bytearray(1000))

        def worker():
            work(300)
            ready.set()
            done.wait()

        tracemalloc.start(5, allocations=True)
        try:
            thread = threading.Thread(target=worker, name='worker-1')
            thread.start()
            ready.wait()
            work(100)
            live = tracemalloc.take_snapshot(threads=True)
            allocated = tracemalloc.take_snapshot(allocated=True,
                                                  threads=True)
        finally:
            tracemalloc.stop()
            done.set()
            thread.join()
        return live, allocated

    def per_thread(self, profile, index):
        totals = {}
        for sample in profile['samples']:
            name = sample['labels'].get('thread')
            totals[name] = totals.get(name, 0) + sample['values'][index]
        return {name: value for name, value in totals.items() if value}

    def test_labels(self):
        live, allocated = self.snapshots()
        expected = {stat.traceback[0].filename[len('<thread '):-1]: stat.size
                    for stat in live.statistics('thread')}
        self.assertEqual(expected['worker-1'] >= 300 * 1000, True)
        path = os.path.join(self.directory, 'threads.pb.gz')
        live.dump_pprof(path)
        with open(path, 'rb') as file:
            profile = decode_profile(file.read())
        self.assertEqual(self.per_thread(profile, 1), expected)
        ids = {sample['labels']['thread']: sample['labels']['thread_id']
               for sample in profile['samples']}
        self.assertEqual(ids['MainThread'], str(threading.main_thread(
            ).native_id))
        # With the allocation totals: four values, labelled the same way.
        path = os.path.join(self.directory, 'heap.pb.gz')
        live.dump_pprof(path, allocated=allocated)
        with open(path, 'rb') as file:
            profile = decode_profile(file.read())
        self.assertEqual(self.per_thread(profile, 3), expected)
        allocated_expected = {
            stat.traceback[0].filename[len('<thread '):-1]: stat.size
            for stat in allocated.statistics('thread')}
        self.assertEqual(self.per_thread(profile, 1), allocated_expected)

    @unittest.skipUnless(shutil.which('go'),
                         f"go is missing (Debian's golang-go; "
                         f"{INSTALL_HINT})")
    def test_go_tool_pprof_tagfocus(self):
        live, _ = self.snapshots()
        path = os.path.join(self.directory, 'threads.pb.gz')
        live.dump_pprof(path)
        worker = {stat.traceback[0].filename: stat.size
                  for stat in live.statistics('thread')}['<thread worker-1>']
        output, flat = go_pprof_top(['go', 'tool', 'pprof'], path,
                                    'inuse_space', '-tagfocus=thread=worker-1')
        self.assertEqual(sum(flat.values()), worker, output)


if __name__ == "__main__":
    unittest.main()
