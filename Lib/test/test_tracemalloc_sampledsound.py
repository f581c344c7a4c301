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
    # This file is in the fork's Lib/test, or in build/BASE/src/Lib/test.
    lib_parent = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    for candidate in (lib_parent, os.path.dirname(os.path.dirname(
            os.path.dirname(lib_parent)))):
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

    def test_sampled_peak_labelled_upper_bound(self):
        # 2.12: the sampled peak is the running maximum of a noisy
        # estimate; the report says so.
        report = self.run_peak()
        self.assertIn("sampled peak of traced memory (an upper bound",
                      report.splitlines()[0])

    def test_exact_peak_not_labelled(self):
        process = subprocess.run(
            [sys.executable, "-X", "tracemalloc", "-m", "tracemalloc", "run",
             "--peak", "--top", "1", self.target],
            cwd=self.directory, env=child_env(),
            stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=300)
        self.assertEqual(process.returncode, 0, process.stderr)
        self.assertIn("live at the peak of traced memory", process.stderr)
        self.assertNotIn("upper bound", process.stderr)

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
        # 2.12: the sampled peak is labelled as the upper bound it is.
        self.assertIn("sampled peak (an upper bound)", html)
        sizes = [int(size) for size in re.findall(r'"size":\s*(\d+)', html)]
        self.assertTrue(sizes, "no size in the HTML report")
        self.assertGreater(max(sizes), 6_000_000)


# --------------------------------------------------------------------------
# 2.10, 2.11: the pprof string table is valid UTF-8

def string_table(message):
    """The raw bytes of the string_table entries (field 6) of a Profile,
    read by test_tracemalloc_pprof's decoder."""
    from test.test_tracemalloc_pprof import read_fields
    return [value for field, wire_type, value in read_fields(message)
            if field == 6 and wire_type == 2]


def protobuf_python():
    """An interpreter with Google's protobuf library (Debian's
    python3-protobuf), or None."""
    for candidate in ('/usr/bin/python3', shutil.which('python3')):
        if not candidate or not os.access(candidate, os.X_OK):
            continue
        try:
            subprocess.run([candidate, '-c', 'import google.protobuf'],
                           check=True, capture_output=True, env=child_env(),
                           timeout=60)
        except (subprocess.SubprocessError, OSError):
            continue
        return candidate
    return None


UNDECODABLE = os.fsdecode(b'/srv/app/caf\xe9-\xff.py')
LONE_SURROGATE = '/srv/app/caf\ud800.py'


class PprofUTF8Tests(unittest.TestCase):

    def profile(self, filename):
        snapshot = tracemalloc.Snapshot(
            [(0, 100, ((filename, 3), ('/srv/app/main.py', 7)), 2),
             (0, 50, (('/srv/app/ok-\u00e9.py', 4),), 1)], 5)
        return _pprof.encode(snapshot)

    def assertValidStrings(self, message, *expected):
        strings = string_table(message)
        texts = [raw.decode('utf-8') for raw in strings]  # strict
        for text in expected:
            self.assertIn(text, texts)
        return texts

    def test_undecodable_bytes_escaped(self):
        message = self.profile(UNDECODABLE)
        self.assertValidStrings(message, '/srv/app/caf\\xe9-\\xff.py',
                                'caf\\xe9-\\xff.py:3',
                                '/srv/app/ok-\u00e9.py')

    def test_lone_surrogate_escaped(self):
        message = self.profile(LONE_SURROGATE)
        self.assertValidStrings(message, '/srv/app/caf\\ud800.py',
                                'caf\\ud800.py:3')

    def test_dump_pprof_lone_surrogate(self):
        snapshot = tracemalloc.Snapshot(
            [(0, 100, ((LONE_SURROGATE, 3),), 1)], 1)
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, 'p.pb.gz')
            snapshot.dump_pprof(path)
            with open(path, 'rb') as file:
                message = gzip.decompress(file.read())
        self.assertValidStrings(message, '/srv/app/caf\\ud800.py')

    def test_cli_pprof_lone_surrogate(self):
        snapshot = tracemalloc.Snapshot(
            [(0, 100, ((LONE_SURROGATE, 3),), 1),
             (0, 60, ((UNDECODABLE, 5),), 1)], 1)
        with tempfile.TemporaryDirectory() as directory:
            source = os.path.join(directory, 'in.tracemalloc')
            output = os.path.join(directory, 'out.pb.gz')
            snapshot.dump(source)
            process = subprocess.run(
                [sys.executable, '-m', 'tracemalloc', 'pprof', source,
                 '-o', output], env=child_env(), capture_output=True,
                text=True, timeout=120, stdin=subprocess.DEVNULL)
            self.assertEqual(process.returncode, 0, process.stderr)
            self.assertNotIn('Traceback', process.stderr)
            with open(output, 'rb') as file:
                message = gzip.decompress(file.read())
        self.assertValidStrings(message, '/srv/app/caf\\ud800.py',
                                '/srv/app/caf\\xe9-\\xff.py')

    @unittest.skipUnless(READERS and shutil.which('protoc'),
                         "protoc is missing (Debian's protobuf-compiler; "
                         "Tools/fork/pprof/install-readers.sh)")
    def test_protoc_decodes(self):
        for filename in (UNDECODABLE, LONE_SURROGATE):
            with self.subTest(filename=ascii(filename)):
                process = subprocess.run(
                    ['protoc', f'--proto_path={READERS}', '--decode',
                     'perftools.profiles.Profile', 'profile.proto'],
                    input=self.profile(filename), capture_output=True,
                    timeout=120)
                self.assertEqual(process.returncode, 0,
                                 process.stderr.decode(errors='replace'))
                self.assertNotIn(b'invalid UTF-8', process.stderr)
                self.assertIn(b'string_table', process.stdout)

    def test_google_protobuf_parses(self):
        python = protobuf_python()
        if python is None or not READERS or not shutil.which('protoc'):
            self.skipTest("needs protoc and Google's protobuf for Python "
                          "(Debian's protobuf-compiler, python3-protobuf)")
        with tempfile.TemporaryDirectory() as directory:
            subprocess.run(['protoc', f'--proto_path={READERS}',
                            f'--python_out={directory}', 'profile.proto'],
                           check=True, timeout=120)
            for name, filename in (('undecodable', UNDECODABLE),
                                   ('surrogate', LONE_SURROGATE)):
                path = os.path.join(directory, name + '.pb')
                with open(path, 'wb') as file:
                    file.write(self.profile(filename))
            code = textwrap.dedent("""
                import sys
                import profile_pb2
                for path in sys.argv[1:]:
                    profile = profile_pb2.Profile()
                    with open(path, 'rb') as file:
                        profile.ParseFromString(file.read())
                    print(len(profile.string_table), len(profile.sample))
                """)
            process = subprocess.run(
                [python, '-c', code,
                 os.path.join(directory, 'undecodable.pb'),
                 os.path.join(directory, 'surrogate.pb')],
                cwd=directory, env=child_env(PYTHONPATH=directory),
                capture_output=True, text=True, timeout=120)
        self.assertEqual(process.returncode, 0, process.stderr)
        self.assertEqual(process.stdout.split(), ['14', '2', '14', '2'])


# --------------------------------------------------------------------------
# 2.19: compare_to() of snapshots sampled differently

def synthetic(sample=None):
    traces = [(0, 4096, (('a.py', 1),), 1), (0, 100, (('b.py', 2),), 1),
              (0, 100, (('b.py', 2),), 1)]
    return tracemalloc.Snapshot(traces, 1, sample=sample)


class CompareSamplingTests(unittest.TestCase):

    def test_exact_against_exact_unchanged(self):
        old = tracemalloc.Snapshot([(0, 10, (('a.py', 1),), 1)], 1)
        new = synthetic()
        diffs = new.compare_to(old, 'lineno')
        self.assertEqual(
            [(str(d.traceback), d.size, d.size_diff, d.count, d.count_diff)
             for d in diffs],
            [('a.py:1', 4096, 4086, 1, 0), ('b.py:2', 200, 200, 2, 2)])

    def test_same_interval_allowed(self):
        diffs = synthetic(4096).compare_to(synthetic(4096), 'lineno')
        self.assertTrue(diffs)
        self.assertTrue(all(d.size_diff == 0 for d in diffs))

    def test_mixed_sampling_refused(self):
        for new, old in ((synthetic(4096), synthetic()),
                         (synthetic(), synthetic(4096)),
                         (synthetic(4096), synthetic(512 * 1024))):
            for key_type in ('lineno', 'filename', 'traceback'):
                with self.subTest(new=new.sample, old=old.sample,
                                  key_type=key_type):
                    with self.assertRaisesRegex(ValueError,
                                                "sampled|exact"):
                        new.compare_to(old, key_type)

    def test_pprof_base_mixed_sampling_refused(self):
        with self.assertRaisesRegex(ValueError, "sampled"):
            _pprof.encode(synthetic(4096), base=synthetic())
        _pprof.encode(synthetic(4096), base=synthetic(4096))

    def test_cli_refuses_with_usage_error(self):
        with tempfile.TemporaryDirectory() as directory:
            sampled = os.path.join(directory, 'sampled.tracemalloc')
            exact = os.path.join(directory, 'exact.tracemalloc')
            synthetic(4096).dump(sampled)
            synthetic().dump(exact)
            for command in (['diff', exact, sampled],
                            ['pprof', sampled, '--base', exact, '-o',
                             os.path.join(directory, 'd.pb.gz')],
                            ['html', sampled, '--base', exact, '-o',
                             os.path.join(directory, 'd.html')]):
                with self.subTest(command=command[0]):
                    process = subprocess.run(
                        [sys.executable, '-m', 'tracemalloc', *command],
                        env=child_env(), capture_output=True, text=True,
                        timeout=120, stdin=subprocess.DEVNULL)
                    self.assertEqual(process.returncode, 2, process.stderr)
                    self.assertNotIn('Traceback', process.stderr)
                    self.assertIn('sampled with one sample per 4096 bytes',
                                  process.stderr)


# --------------------------------------------------------------------------
# 2.9: dump_on_signal() and fork

SIGNAL = getattr(signal, 'SIGUSR2', None)

FORK_SCRIPT = r"""
import importlib.abc, importlib.machinery, json, os, signal, sys, threading, time
import tracemalloc

directory, pattern, mode = sys.argv[1:4]
PARENT = os.getpid()
importing = threading.Event()
release = threading.Event()


class SlowLoader(importlib.abc.Loader):
    # Runs the module's code only once the parent has forked: the module is
    # half imported meanwhile, its import lock held by the dump's thread.
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        importing.set()
        release.wait(60)
        self.loader.exec_module(module)


class SlowImport(importlib.abc.MetaPathFinder):
    # Slows the import of the writer modules by the dump's thread in the
    # parent, so that the fork happens in the middle of it.
    def find_spec(self, name, path=None, target=None):
        if (name in ('tracemalloc._pprof', 'tracemalloc._snapshotfile')
                and os.getpid() == PARENT
                and threading.current_thread().name == 'tracemalloc-dump'):
            spec = importlib.machinery.PathFinder.find_spec(name, path,
                                                            target)
            if spec is not None:
                spec.loader = SlowLoader(spec.loader)
            return spec
        return None


def wait_for_dumps():
    for thread in threading.enumerate():
        if thread.name == 'tracemalloc-dump':
            thread.join(15)
            if thread.is_alive():
                return False
    return True


sys.meta_path.insert(0, SlowImport())
tracemalloc.start()
tracemalloc.dump_on_signal(signal.SIGUSR2, os.path.join(directory, pattern))
signal.raise_signal(signal.SIGUSR2)
if mode == 'during':
    # Fork while the first dump is being written (its thread importing
    # the writer), if it is; else once it is done.
    while not importing.is_set() and not all(
            t.name != 'tracemalloc-dump' for t in threading.enumerate()):
        time.sleep(0.01)
else:
    wait_for_dumps()
pid = os.fork()
if pid == 0:
    signal.raise_signal(signal.SIGUSR2)
    os._exit(0 if wait_for_dumps() else 3)
release.set()
_, status = os.waitpid(pid, 0)
wait_for_dumps()
signal.raise_signal(signal.SIGUSR2)
wait_for_dumps()
print(json.dumps({'child': os.waitstatus_to_exitcode(status),
                  'files': sorted(os.listdir(directory))}))
"""


@unittest.skipUnless(SIGNAL is not None and hasattr(os, 'fork'),
                     "needs SIGUSR2 and os.fork()")
class DumpOnSignalForkTests(unittest.TestCase):

    def run_script(self, pattern, mode):
        import json
        with tempfile.TemporaryDirectory() as directory:
            process = subprocess.run(
                [sys.executable, '-c', FORK_SCRIPT, directory, pattern,
                 mode], env=child_env(), capture_output=True, text=True,
                timeout=120, stdin=subprocess.DEVNULL)
        self.assertEqual(process.returncode, 0, process.stderr)
        return json.loads(process.stdout), process.stderr

    def test_writer_modules_imported_at_install(self):
        code = textwrap.dedent("""
            import signal, sys, tempfile, tracemalloc
            tracemalloc.dump_on_signal(signal.SIGUSR2,
                                       tempfile.gettempdir() + '/x-{n}.pb')
            print(all(name in sys.modules for name in (
                'tracemalloc._pprof', 'tracemalloc._snapshotfile', 'json',
                'zlib', 'gzip')))
            """)
        process = subprocess.run([sys.executable, '-c', code],
                                 env=child_env(), capture_output=True,
                                 text=True, timeout=120)
        self.assertEqual(process.returncode, 0, process.stderr)
        self.assertEqual(process.stdout.strip(), 'True')

    def test_child_forked_during_first_dump_can_dump(self):
        for pattern in ('p-{pid}-{n}.pb.gz', 's-{pid}-{n}.tracemalloc'):
            with self.subTest(pattern=pattern):
                result, stderr = self.run_script(pattern, 'during')
                self.assertEqual(result['child'], 0, stderr)
                # The parent's two dumps and the child's one.
                self.assertEqual(len(result['files']), 3, (result, stderr))
                self.assertNotIn('cannot write', stderr)

    def test_child_and_parent_write_distinct_names(self):
        for pattern in ('dump-{n}.pb.gz', 'dump-{n}.tracemalloc'):
            with self.subTest(pattern=pattern):
                result, stderr = self.run_script(pattern, 'after')
                self.assertEqual(result['child'], 0, stderr)
                files = result['files']
                self.assertEqual(len(files), 3, (files, stderr))
                suffix = pattern.split('}', 1)[1]
                parent = [name for name in files if '-pid' not in name]
                self.assertEqual(parent, sorted(['dump-1' + suffix,
                                                 'dump-2' + suffix]))
                child = [name for name in files if '-pid' in name]
                self.assertEqual(len(child), 1, files)
                self.assertRegex(child[0],
                                 r'^dump-1-pid\d+' + re.escape(suffix) + '$')


class DumpPatternDirectoryTests(unittest.TestCase):
    """The directory that dump_on_signal() checks up front is that of this
    process's first dump: {pid} is this process's, and a directory named
    after {n} or {time} cannot be checked before a dump."""

    def check(self, pattern):
        code = textwrap.dedent("""
            import os, signal, sys, tracemalloc
            top = sys.argv[1]
            os.mkdir(os.path.join(top, f'prof-{os.getpid()}'))
            try:
                tracemalloc.dump_on_signal(signal.SIGUSR2,
                                           os.path.join(top, sys.argv[2]))
            except ValueError as exc:
                print('ValueError', exc)
            else:
                print('accepted')
            """)
        with tempfile.TemporaryDirectory() as directory:
            process = subprocess.run(
                [sys.executable, '-c', code, directory, pattern],
                env=child_env(), capture_output=True, text=True,
                timeout=120)
        self.assertEqual(process.returncode, 0, process.stderr)
        return process.stdout.split()[0]

    def test_pid_directory_of_this_process(self):
        self.assertEqual(self.check('prof-{pid}/heap-{n}.pb.gz'),
                         'accepted')

    def test_directory_of_each_dump(self):
        self.assertEqual(self.check('run-{n}/heap.pb.gz'), 'accepted')

    def test_missing_directory_refused(self):
        self.assertEqual(self.check('missing/heap-{n}.pb.gz'), 'ValueError')
        self.assertEqual(self.check('prof-{pid}x/heap-{n}.pb.gz'),
                         'ValueError')


if __name__ == "__main__":
    unittest.main()
