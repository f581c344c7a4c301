"""A profile before the OOM killer (issue 33, item 4): tracemalloc.dump_over()
and dump_on_memory_error(), and their startup options.

Each case runs in a child process (the threshold is process-wide, and the
dumps are written by a thread of the child), and reads back what the child
wrote: the files, their mode, their contents with the pprof decoder of
test_tracemalloc_pprof, and the one-line reports on standard error.
"""

import os
import re
import stat
import subprocess
import sys
import tempfile
import textwrap
import tracemalloc
import unittest

from test.test_tracemalloc_pprof import decode_profile

MiB = 1024 * 1024

# Allocates COUNT MiB, one bytearray per step, in the main thread, then
# waits for the writer threads; prints nothing.
GROW = '''
import os, sys, time, tracemalloc
kept = []
def grow(count):
    for _ in range(count):
        kept.append(bytearray(1024 * 1024))  # GROW
        time.sleep(0.005)   # the writer thread gets the GIL
def wait_for(directory, count):
    # Until COUNT profiles are written (one dump at a time: the next
    # crossing must not find the previous one still being written).
    deadline = time.monotonic() + 60
    while len([name for name in os.listdir(directory)
               if not name.startswith('.')]) < count:
        if time.monotonic() > deadline:
            sys.exit(f"no profile {count} after 60 s")
        time.sleep(0.01)
'''
GROW_LINE = GROW.splitlines().index(
    '        kept.append(bytearray(1024 * 1024))  # GROW') + 1


def run(code, *args, env=None, check=True, argv=()):
    environment = dict(os.environ)
    for name in list(environment):
        if name.startswith('PYTHONTRACEMALLOC'):
            del environment[name]
    environment.update(env or {})
    process = subprocess.run(
        [sys.executable, *args, '-c', code, *argv], env=environment,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        timeout=120)
    if check and process.returncode:
        raise AssertionError(f"child failed ({process.returncode}):\n"
                             f"{process.stdout}\n{process.stderr}")
    return process


def in_use(path):
    """{line number of GROW's bytearray: bytes} and the total in use of
    the pprof profile at *path*."""
    with open(path, 'rb') as file:
        profile = decode_profile(file.read())
    index = [name for name, _ in profile['sample_types']].index(
        'inuse_space')
    total = sum(sample['values'][index] for sample in profile['samples'])
    return profile, total


class DumpOverTest(unittest.TestCase):

    def setUp(self):
        self.directory = tempfile.mkdtemp()
        self.addCleanup(lambda: __import__('shutil').rmtree(self.directory))
        self.pattern = os.path.join(self.directory, 'heap-{n}.pb.gz')

    def files(self):
        return sorted(os.listdir(self.directory),
                      key=lambda name: int(re.search(r'\d+', name)[0]))

    def test_threshold_and_doublings(self):
        code = GROW + textwrap.dedent(f'''
            import threading
            tracemalloc.start(5)
            before = threading.active_count()
            print(tracemalloc.dump_over("4 MiB", {self.pattern!r}))
            # No thread polls: nothing runs until the crossing.
            assert threading.active_count() == before
            grow(4)
            wait_for({self.directory!r}, 1)
            grow(4)
            wait_for({self.directory!r}, 2)
            grow(8)
            wait_for({self.directory!r}, 3)
            print(tracemalloc.dump_over(None))
            grow(20)
            time.sleep(0.3)
        ''')
        process = run(code)
        self.assertEqual(process.stdout.split(), ['None', '4194304'])
        files = self.files()
        # 4, 8 and 16 MiB; nothing after dump_over(None).
        self.assertEqual(files, ['heap-1.pb.gz', 'heap-2.pb.gz',
                                 'heap-3.pb.gz'], process.stderr)
        reports = [line for line in process.stderr.splitlines()
                   if line.startswith('tracemalloc:')]
        self.assertEqual(len(reports), 3, process.stderr)
        self.assertIn('(threshold 4096 KiB): pprof written to', reports[0])
        self.assertIn('next dump at 8192 KiB', reports[0])
        self.assertIn('(threshold 16.0 MiB)', reports[2])
        for name, threshold in zip(files, (4, 8, 16)):
            path = os.path.join(self.directory, name)
            profile, total = in_use(path)
            # The snapshot is taken when the main thread gets there: at
            # least the threshold, at most one more step of the loop.
            self.assertGreaterEqual(total, threshold * MiB)
            self.assertLess(total, (threshold + 2) * MiB)
            leaf_lines = {sample['frames'][0][1]
                          for sample in profile['samples']}
            self.assertIn(GROW_LINE, leaf_lines)
            mode = stat.S_IMODE(os.stat(path).st_mode)
            self.assertEqual(mode & 0o077, 0, oct(mode))

    def test_crossing_in_another_thread(self):
        # A thread crosses; the main thread writes the profile when it next
        # runs Python code.
        code = GROW + textwrap.dedent(f'''
            import threading
            tracemalloc.start(5)
            tracemalloc.dump_over(6 * 1024 * 1024, {self.pattern!r})
            worker = threading.Thread(target=grow, args=(8,))
            worker.start()
            worker.join()
            wait_for({self.directory!r}, 1)
        ''')
        process = run(code)
        self.assertEqual(self.files(), ['heap-1.pb.gz'], process.stderr)

    def test_snapshot_format(self):
        path = os.path.join(self.directory, 'heap-{n}.snap')
        code = GROW + textwrap.dedent(f'''
            tracemalloc.start(5)
            tracemalloc.dump_over("2MiB", {path!r})
            grow(3)
            wait_for({self.directory!r}, 1)
        ''')
        run(code)
        snapshot = tracemalloc.Snapshot.load(
            os.path.join(self.directory, 'heap-1.snap'))
        total = sum(stat.size for stat in snapshot.statistics('lineno'))
        self.assertGreaterEqual(total, 2 * MiB)

    def test_bad_input(self):
        code = textwrap.dedent(f'''
            import tracemalloc
            for size in (0, -1, "12XB", "", 2.5, True, [], 1 << 64):
                try:
                    tracemalloc.dump_over(size, {self.pattern!r})
                except (TypeError, ValueError) as exc:
                    print(type(exc).__name__)
                else:
                    print("accepted", size)
            try:
                tracemalloc.dump_over(10, "/nonexistent/dir/x-{{n}}.pb.gz")
            except ValueError as exc:
                print("ValueError", "does not exist" in str(exc))
            try:
                tracemalloc.dump_over(10, {self.pattern!r}, format="xml")
            except ValueError as exc:
                print("ValueError")
        ''')
        lines = run(code).stdout.split('\n')
        self.assertEqual(lines[:8], ['ValueError', 'ValueError',
                                     'ValueError', 'ValueError',
                                     'TypeError', 'TypeError', 'TypeError',
                                     'ValueError'])
        self.assertEqual(lines[8:10], ['ValueError True', 'ValueError'])

    def test_startup_option_alone_samples(self):
        code = GROW + textwrap.dedent('''
            print(tracemalloc.is_tracing(), tracemalloc.get_sample(),
                  tracemalloc.get_traceback_limit())
            grow(12)
            wait_for(sys.argv[1], 1)
        ''')
        for args, env in (
                ([], {'PYTHONTRACEMALLOCDUMPOVER': '8MiB',
                      'PYTHONTRACEMALLOCDUMP': self.pattern}),
                (['-X', 'tracemalloc_dump_over=8MiB', '-X',
                  f'tracemalloc_dump={self.pattern}'], {})):
            with self.subTest(args=args, env=env):
                for name in os.listdir(self.directory):
                    os.unlink(os.path.join(self.directory, name))
                process = run(code, *args, env=env, argv=[self.directory])
                self.assertEqual(process.stdout.split(),
                                 ['True', '524288', '25'])
                # What startup allocated counts too (sampled): the 16 MiB
                # doubling may be reached as well.
                self.assertEqual(self.files()[0], 'heap-1.pb.gz',
                                 process.stderr)
                self.assertIn('(threshold 8192 KiB): pprof written to',
                              process.stderr)

    def test_startup_option_with_tracing(self):
        code = GROW + textwrap.dedent('''
            print(tracemalloc.get_sample(), tracemalloc.get_traceback_limit())
            grow(5)
            wait_for(sys.argv[1], 1)
        ''')
        process = run(code, '-X', 'tracemalloc=3', env={
            'PYTHONTRACEMALLOCDUMPOVER': '4MiB',
            'PYTHONTRACEMALLOCDUMP': self.pattern}, argv=[self.directory])
        self.assertEqual(process.stdout.split(), ['None', '3'])
        self.assertEqual(self.files(), ['heap-1.pb.gz'], process.stderr)

    def test_startup_errors(self):
        for args, env, message in (
                (['-X', 'tracemalloc_dump_over=12XB'], {},
                 '-X tracemalloc_dump_over=12XB: '),
                ([], {'PYTHONTRACEMALLOCDUMPOVER': 'lots'},
                 'PYTHONTRACEMALLOCDUMPOVER=lots: '),
                ([], {'PYTHONTRACEMALLOCDUMPONMEMORYERROR': 'yes'},
                 'PYTHONTRACEMALLOCDUMPONMEMORYERROR=yes: expected 1'),
                ([], {'PYTHONTRACEMALLOCDUMPOVER': '1MiB',
                      'PYTHONTRACEMALLOCDUMP': '/nonexistent/x-{n}.pb.gz'},
                 'does not exist')):
            with self.subTest(args=args, env=env):
                process = run('print("ran")', *args, env=env, check=False)
                self.assertEqual(process.returncode, 1)
                self.assertNotIn('ran', process.stdout)
                self.assertIn(message, process.stderr)
                self.assertNotIn('Traceback', process.stderr)

    def test_ignore_environment(self):
        code = 'import tracemalloc; print(tracemalloc.is_tracing())'
        process = run(code, '-E', env={
            'PYTHONTRACEMALLOCDUMPOVER': '1MiB',
            'PYTHONTRACEMALLOCDUMP': self.pattern})
        self.assertEqual(process.stdout.split(), ['False'])


class MemoryErrorTest(unittest.TestCase):

    def setUp(self):
        self.directory = tempfile.mkdtemp()
        self.addCleanup(lambda: __import__('shutil').rmtree(self.directory))
        self.pattern = os.path.join(self.directory, 'oom-{n}.pb.gz')

    CODE = GROW + textwrap.dedent('''
        grow(3)
        for attempt in range(3):
            try:
                bytearray(1 << 50)      # C code raises MemoryError
            except MemoryError:
                pass
            time.sleep(0.2)
        try:
            raise MemoryError           # Python code: not a dump
        except MemoryError:
            pass
        time.sleep(0.2)
    ''')

    def check(self, process):
        self.assertEqual(os.listdir(self.directory), ['oom-1.pb.gz'],
                         process.stderr)
        self.assertIn('tracemalloc: MemoryError: pprof written to',
                      process.stderr)
        _, total = in_use(os.path.join(self.directory, 'oom-1.pb.gz'))
        self.assertGreaterEqual(total, 3 * MiB)

    def test_api_dumps_once(self):
        code = (f'import tracemalloc\ntracemalloc.start(5)\n'
                f'tracemalloc.dump_on_memory_error(True, {self.pattern!r})\n'
                + self.CODE)
        self.check(run(code))

    def test_startup_option(self):
        # Exact tracing (PYTHONTRACEMALLOC), so that the profile's total is
        # exact; the option alone samples, and its total is an estimate.
        self.check(run(self.CODE, env={
            'PYTHONTRACEMALLOC': '5',
            'PYTHONTRACEMALLOCDUMPONMEMORYERROR': '1',
            'PYTHONTRACEMALLOCDUMP': self.pattern}))

    def test_off(self):
        code = (f'import tracemalloc\ntracemalloc.start(5)\n'
                f'tracemalloc.dump_on_memory_error(True, {self.pattern!r})\n'
                f'tracemalloc.dump_on_memory_error(False)\n' + self.CODE)
        run(code)
        self.assertEqual(os.listdir(self.directory), [])


class ReviewS38Test(unittest.TestCase):
    """Issue 33's review (s38): the pattern of dump_over(path=None), and
    fork."""

    CHILD = GROW + textwrap.dedent('''
        tracemalloc.start(1)
        tracemalloc.dump_over(1 << 20)
        grow(2)
        wait_for(sys.argv[1], 1)
    ''')

    def setUp(self):
        self.directories = [tempfile.mkdtemp() for _ in range(3)]
        for directory in self.directories:
            self.addCleanup(__import__('shutil').rmtree, directory, True)

    def test_x_option_pattern_wins(self):
        # path=None: the pattern that the interpreter read at startup, -X
        # tracemalloc_dump winning over PYTHONTRACEMALLOCDUMP.
        xdir, envdir, tmpdir = self.directories
        for with_variable in (False, True):
            env = {'TMPDIR': tmpdir}
            if with_variable:
                env['PYTHONTRACEMALLOCDUMP'] = os.path.join(envdir,
                                                            'e-{n}.pb.gz')
            run(self.CHILD, '-X', 'tracemalloc_dump='
                + os.path.join(xdir, 'x-{n}.pb.gz'), env=env, argv=[xdir])
            # x-1 (1 MiB), and x-2 when 2 MiB is crossed once x-1 is
            # written.
            self.assertIn('x-1.pb.gz', os.listdir(xdir))
            self.assertEqual(os.listdir(envdir), [])
            self.assertEqual(os.listdir(tmpdir), [])
            for name in os.listdir(xdir):
                os.unlink(os.path.join(xdir, name))

    def test_relative_variable_from_the_start_directory(self):
        start, other, _ = self.directories
        code = GROW + textwrap.dedent(f'''
            import os
            os.chdir({other!r})
            tracemalloc.start(1)
            tracemalloc.dump_over(1 << 20)
            grow(2)
            wait_for({start!r}, 1)
        ''')
        process = subprocess.run(
            [sys.executable, '-c', code], cwd=start, text=True,
            env=dict({k: v for k, v in os.environ.items()
                      if not k.startswith('PYTHONTRACEMALLOC')},
                     PYTHONTRACEMALLOCDUMP='rel-{n}.pb.gz'),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        self.assertEqual(process.returncode, 0, process.stderr)
        # rel-1 (1 MiB), and rel-2 when 2 MiB is crossed once rel-1 is
        # written: the 2 MiB of grow() and the interpreter's own memory
        # cross it or not, depending on when the writer thread ran.
        self.assertIn('rel-1.pb.gz', os.listdir(start))
        self.assertLessEqual(set(os.listdir(start)),
                             {'rel-1.pb.gz', 'rel-2.pb.gz'})
        self.assertEqual(os.listdir(other), [])

    @unittest.skipUnless(hasattr(os, 'fork'), "needs os.fork()")
    def test_fork_child_gets_its_pid(self):
        # The parent crosses 1 MiB (next: 2 MiB); its child crosses 2 MiB
        # and must not replace the parent's heap-1.pb.gz.
        directory = self.directories[0]
        code = GROW + textwrap.dedent(f'''
            tracemalloc.start(1)
            tracemalloc.dump_over(1 << 20, {directory!r} + '/heap-{{n}}.pb.gz')
            parent = [bytes(1000) for _ in range(1200)]
            wait_for({directory!r}, 1)
            pid = os.fork()
            if pid == 0:
                child = [bytes(1000) for _ in range(2500)]
                wait_for({directory!r}, 2)
                os._exit(0)
            os.waitpid(pid, 0)
            print(pid)
        ''')
        process = run(code)
        child = int(process.stdout.split()[-1])
        self.assertEqual(sorted(os.listdir(directory)),
                         sorted(['heap-1.pb.gz', f'heap-1-pid{child}.pb.gz']),
                         process.stderr)


if __name__ == '__main__':
    unittest.main()
