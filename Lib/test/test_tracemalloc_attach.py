"""Tests of profiles on demand (issue 33, items 1 and 2):
PYTHONTRACEMALLOCSIGNAL / -X tracemalloc_signal at startup, the state
machine of tracemalloc._ondemand, and ``python -m tracemalloc attach PID``.

The real service is a ThreadingHTTPServer in a child process, under load
from a client loop of this process on the loopback interface (bounded in
time), attached twice while tracing is off (each signal pair starts
sampling, then writes a profile of what is live and of what was allocated
and stops) and twice while tracing is on (each signal writes a profile,
tracing goes on).  Each profile is decoded by the minimal reader of
test_tracemalloc_pprof and by the real readers that it uses (protoc
--decode, pprof-format under node, go tool pprof, pprof built from
Debian's sources), each skipped with its reason when it is missing
(Tools/fork/pprof/install-readers.sh installs them): per line and per
sample type, every reader finds the totals that the profile holds, and the
leaking line of the handler is there.

A second service runs on asyncio (asyncio.start_server, one task per
connection) with every task labelled (tracemalloc.label_tasks()) and each
request in tracemalloc.label(endpoint=...): attached twice in each mode as
well, its profiles carry the labels and the thread of each sample, which
the minimal reader and ``go tool pprof -tags`` read back.
"""

import gzip
import http.client
import json
import os
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

from test.test_tracemalloc_clisound import skip_unless_runs_as
from test.test_tracemalloc_pprof import (
    CACHE, DEBIAN_PPROF, INSTALL_HINT, PPROF_FORMAT, PROTO, READ_PROFILE_JS,
    READERS, child_env, decode_profile, go_pprof_top, parse_text_format,
    run_reader, text_fields, text_scalar)
from tracemalloc import _ondemand

SIGNAL = getattr(signal, 'SIGUSR2', None)

# Whether this build keeps allocation totals (tracemalloc.start(...,
# allocations=True), take_snapshot(allocated=True)): then the profiles
# written when a signal started tracing carry alloc_* values too.
HAS_ALLOCATED = 'allocated' in _ondemand._keyword_parameters(
    tracemalloc.take_snapshot)

INUSE_TYPES = [('inuse_objects', 'count'), ('inuse_space', 'bytes')]
ALLOC_TYPES = [('alloc_objects', 'count'), ('alloc_space', 'bytes')]

SERVICE = textwrap.dedent('''\
    import http.server
    import signal
    import sys

    _sessions = []


    def remember(path):
        _sessions.append(bytearray(4000))        # SERVICE_LEAK
        return b"ok\\n"


    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            body = remember(self.path)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass


    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    handler = signal.getsignal(signal.SIGUSR2)
    print("handler", type(handler).__name__, flush=True)
    print("port", server.server_address[1], flush=True)
    server.serve_forever(poll_interval=0.05)
''')

SERVICE_LEAK_LINE = next(number for number, line
                         in enumerate(SERVICE.splitlines(), 1)
                         if 'SERVICE_LEAK' in line)

# The same service on asyncio: a task per connection, labelled, and a
# label per request.  Same leak, same protocol (HTTP/1.1, keep-alive).
ASYNC_SERVICE = textwrap.dedent('''\
    import asyncio
    import signal
    import tracemalloc

    tracemalloc.label_tasks()
    _sessions = []


    def remember(path):
        _sessions.append(bytearray(4000))        # SERVICE_LEAK
        return b"ok\\n"


    async def handle(reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\\r\\n\\r\\n")
                path = head.split(b" ", 2)[1].decode()
                with tracemalloc.label(endpoint=path):
                    body = remember(path)
                writer.write(b"HTTP/1.1 200 OK\\r\\nContent-Length: %d"
                             b"\\r\\n\\r\\n" % len(body) + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


    async def main():
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        handler = signal.getsignal(signal.SIGUSR2)
        print("handler", type(handler).__name__, flush=True)
        print("port", server.sockets[0].getsockname()[1], flush=True)
        async with server:
            await server.serve_forever()


    asyncio.run(main())
''')

ASYNC_LEAK_LINE = next(number for number, line
                       in enumerate(ASYNC_SERVICE.splitlines(), 1)
                       if 'SERVICE_LEAK' in line)

# The client loop never runs longer than this, whatever happens.
CLIENT_LIMIT = 60.0


def run_attach(pid, *args, timeout=60, **kwargs):
    return subprocess.run(
        [sys.executable, '-m', 'tracemalloc', 'attach', str(pid), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=child_env(), timeout=timeout, **kwargs)


class ClientLoop:
    """Threads that send GET requests to 127.0.0.1:PORT until stopped (or
    CLIENT_LIMIT seconds have passed)."""

    def __init__(self, port, threads=2):
        self.port = port
        self.stopped = threading.Event()
        self.requests = 0
        self.errors = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, daemon=True)
                        for _ in range(threads)]

    def start(self):
        for thread in self.threads:
            thread.start()

    def run(self):
        deadline = time.monotonic() + CLIENT_LIMIT
        connection = None
        while not self.stopped.is_set() and time.monotonic() < deadline:
            try:
                if connection is None:
                    connection = http.client.HTTPConnection(
                        '127.0.0.1', self.port, timeout=10)
                connection.request('GET', '/item')
                response = connection.getresponse()
                response.read()
                with self.lock:
                    self.requests += 1
            except OSError as exc:
                if connection is not None:
                    connection.close()
                    connection = None
                if not self.stopped.is_set():
                    self.errors.append(exc)
                    time.sleep(0.05)
        if connection is not None:
            connection.close()

    def stop(self):
        self.stopped.set()
        for thread in self.threads:
            thread.join(CLIENT_LIMIT)


def start_service(directory, env_extra, *, umask=None, service=SERVICE):
    """Start *service* (SERVICE) in *directory* with *env_extra*; return
    (process, port, handler type name printed by the service)."""
    script = os.path.join(directory, 'service.py')
    with open(script, 'w') as fp:
        fp.write(service)
    env = child_env(**env_extra)
    for name in ('PYTHONTRACEMALLOCSIGNAL', 'PYTHONTRACEMALLOCDUMP'):
        if name not in env_extra:
            env.pop(name, None)

    def set_umask():
        if umask is not None:
            os.umask(umask)

    proc = subprocess.Popen(
        [sys.executable, script], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=env, cwd=directory,
        preexec_fn=set_umask)
    handler = proc.stdout.readline().split()
    port = proc.stdout.readline().split()
    if len(handler) != 2 or len(port) != 2:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"the service did not start: {err}")
    return proc, int(port[1]), handler[1]


def stop_process(proc):
    if proc.poll() is None:
        proc.terminate()
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return out, err


def per_line(samples, ntypes):
    """{(filename, lineno): [value of each sample type]}, summed over the
    samples' leaf locations (pprof's flat view by line)."""
    totals = {}
    for sample in samples:
        key = tuple(sample['frames'][0]) if sample['frames'] else ('', 0)
        row = totals.setdefault(key, [0] * ntypes)
        for index, value in enumerate(sample['values']):
            row[index] += value
    return {key: row for key, row in totals.items() if any(row)}


def run_service(top, service=SERVICE):
    """Run *service* twice in directories of *top*, tracing off then on,
    attach twice each time; return (results by mode, profiles)."""
    results = {}
    profiles = []
    for mode, env_extra in [
            # Tracing off: each attach starts sampling (every 32 KiB on
            # average, the option's interval), then stops it.
            ('off', {'PYTHONTRACEMALLOCSIGNAL': 'USR2:32KiB'}),
            # Tracing on from startup (exact): each attach dumps.
            ('on', {'PYTHONTRACEMALLOCSIGNAL': 'USR2',
                    'PYTHONTRACEMALLOC': '5'})]:
        directory = os.path.join(top, mode)
        os.mkdir(directory)
        pattern = os.path.join(directory, 'heap-{pid}-{n}.pb.gz')
        env_extra = dict(env_extra, PYTHONTRACEMALLOCDUMP=pattern)
        # umask 0: the profiles must still be 0o600.
        proc, port, handler = start_service(directory, env_extra, umask=0,
                                            service=service)
        client = ClientLoop(port)
        client.start()
        attaches = []
        try:
            time.sleep(0.3)
            for _ in range(2):
                started = time.monotonic()
                result = run_attach(proc.pid, '--duration', '1',
                                    '--timeout', '30')
                attaches.append((result, time.monotonic() - started))
        finally:
            client.stop()
            out, err = stop_process(proc)
        results[mode] = {
            'pid': proc.pid, 'handler': handler, 'attaches': attaches,
            'stderr': err, 'requests': client.requests,
            'client_errors': client.errors, 'directory': directory,
            'script': os.path.join(directory, 'service.py')}
        for number, (result, _) in enumerate(attaches, 1):
            path = result.stdout.strip()
            if result.returncode == 0 and os.path.isfile(path):
                with open(path, 'rb') as fp:
                    profiles.append((f"{mode} {number}", path, mode,
                                     decode_profile(fp.read())))
    return results, profiles


# The service is run once for the module: (directory, results, profiles)
# or the exception that it raised.
_shared = None


def shared():
    global _shared
    if _shared is None:
        directory = tempfile.mkdtemp()
        try:
            _shared = (directory, *run_service(directory))
        except Exception as exc:
            _shared = exc
    if isinstance(_shared, Exception):
        raise _shared
    return _shared


_shared_async = None


def shared_async():
    global _shared_async
    if _shared_async is None:
        directory = tempfile.mkdtemp()
        try:
            _shared_async = (directory, *run_service(directory,
                                                     ASYNC_SERVICE))
        except Exception as exc:
            _shared_async = exc
    if isinstance(_shared_async, Exception):
        raise _shared_async
    return _shared_async


def tearDownModule():
    for state in (_shared, _shared_async):
        if isinstance(state, tuple):
            shutil.rmtree(state[0])


@unittest.skipUnless(SIGNAL is not None, "needs SIGUSR2")
@unittest.skipUnless(os.path.isdir('/proc/self'), "attach needs /proc")
class ServiceBase(unittest.TestCase):
    """The real service, attached four times, and the profiles it wrote."""

    @classmethod
    def setUpClass(cls):
        _, cls.results, cls.profiles = shared()

    def leak_key(self, mode):
        return (self.results[mode]['script'], SERVICE_LEAK_LINE)

    def expected(self, profile):
        return per_line(profile['samples'], len(profile['sample_types']))


class ServiceTest(ServiceBase):

    # -- what attach and the service did

    def test_handler_installed_before_user_code(self):
        for mode in ('off', 'on'):
            self.assertEqual(self.results[mode]['handler'], '_OnDemand')

    def test_attach_twice_prints_each_profile(self):
        for mode in ('off', 'on'):
            with self.subTest(mode=mode):
                result = self.results[mode]
                paths = []
                for attach, elapsed in result['attaches']:
                    self.assertEqual(attach.returncode, 0, attach.stderr)
                    path = attach.stdout.strip()
                    self.assertTrue(os.path.isfile(path), path)
                    self.assertEqual(os.path.dirname(path),
                                     result['directory'])
                    paths.append(path)
                    if mode == 'off':
                        self.assertIn('tracing started', attach.stderr)
                        self.assertGreaterEqual(elapsed, 1.0)
                    else:
                        self.assertIn('tracing was on', attach.stderr)
                self.assertEqual(
                    [os.path.basename(path) for path in paths],
                    [f"heap-{result['pid']}-{n}.pb.gz" for n in (1, 2)])
                self.assertGreater(result['requests'], 0)
                self.assertEqual(result['client_errors'], [])

    def test_service_says_what_it_did(self):
        off = self.results['off']['stderr']
        self.assertEqual(off.count("SIGUSR2: tracing started, sampled: one "
                                   "sample per 32768 bytes on average"), 2,
                         off)
        self.assertEqual(off.count("tracing stopped after"), 2, off)
        on = self.results['on']['stderr']
        self.assertNotIn('tracing started', on)
        self.assertEqual(on.count("; tracing goes on"), 2, on)
        for err in (off, on):
            self.assertNotIn('Traceback', err)

    def test_files_are_private_and_nothing_is_left(self):
        for mode in ('off', 'on'):
            directory = self.results[mode]['directory']
            names = sorted(os.listdir(directory))
            # No state file, no temporary file or directory.
            self.assertEqual(
                [name for name in names if name.startswith('.')], [])
            for name in names:
                if name.endswith('.pb.gz'):
                    mode_bits = os.stat(os.path.join(directory,
                                                     name)).st_mode
                    # Written under umask 0: still only the owner's.
                    self.assertEqual(mode_bits & 0o777, 0o600, name)

    # -- the profiles, by the minimal reader

    def test_profiles(self):
        self.assertEqual(len(self.profiles), 4)
        leaked = {}
        for name, path, mode, profile in self.profiles:
            with self.subTest(profile=name):
                types = profile['sample_types']
                if mode == 'off':
                    expected_types = INUSE_TYPES + (ALLOC_TYPES
                                                    if HAS_ALLOCATED else [])
                    self.assertEqual(profile['period'], 32768)
                else:
                    expected_types = INUSE_TYPES
                    self.assertEqual(profile['period'], 1)
                self.assertEqual(sorted(types), sorted(expected_types))
                lines = per_line(profile['samples'], len(types))
                row = lines.get(self.leak_key(mode))
                self.assertIsNotNone(row, sorted(lines)[:20])
                values = dict(zip([t for t, _ in types], row))
                self.assertGreater(values['inuse_space'], 0)
                if 'alloc_space' in values:
                    self.assertGreaterEqual(values['alloc_space'],
                                            values['inuse_space'] // 2)
                leaked.setdefault(mode, []).append(values['inuse_objects'])
        # Tracing on: the second profile holds the first one's leak and
        # more; exact, so the leak is counted block by block.
        self.assertGreater(leaked['on'][1], leaked['on'][0])


# --------------------------------------------------------------------------
# The real readers: each finds the totals that the profile holds


@unittest.skipUnless(shutil.which('protoc'),
                     f"protoc is missing (Debian's protobuf-compiler; "
                     f"{INSTALL_HINT})")
class ProtocTest(ServiceBase):

    def test_reader(self):
        for name, path, mode, profile in self.profiles:
            with self.subTest(profile=name):
                with open(path, 'rb') as fp:
                    data = gzip.decompress(fp.read())
                text = run_reader(
                    ['protoc', f'--proto_path={READERS}',
                     '--decode=perftools.profiles.Profile',
                     'profile.proto'], input=data).decode('utf-8')
                self.assertNotRegex(text, r'(?m)^\s*\d+:')
                message = parse_text_format(text)
                strings = [value.decode('utf-8', 'surrogateescape')
                           for value in text_fields(message,
                                                    'string_table')]
                functions = {text_scalar(function, 'id'): function
                             for function in text_fields(message,
                                                         'function')}
                frames = {}
                for location in text_fields(message, 'location'):
                    line, = text_fields(location, 'line')
                    function = functions[text_scalar(line, 'function_id')]
                    frames[text_scalar(location, 'id')] = (
                        strings[text_scalar(function, 'filename')],
                        text_scalar(line, 'line'))
                types = [(strings[text_scalar(value_type, 'type')],
                          strings[text_scalar(value_type, 'unit')])
                         for value_type in text_fields(message,
                                                       'sample_type')]
                self.assertEqual(types, profile['sample_types'])
                samples = [{'frames': [frames[location_id] for location_id
                                       in text_fields(sample,
                                                      'location_id')],
                            'values': text_fields(sample, 'value')}
                           for sample in text_fields(message, 'sample')]
                got = per_line(samples, len(types))
                self.assertEqual(got, self.expected(profile))
                self.assertIn(self.leak_key(mode), got)


@unittest.skipUnless(shutil.which('node'),
                     f"node is missing (Debian's nodejs; {INSTALL_HINT})")
@unittest.skipUnless(os.path.isdir(PPROF_FORMAT),
                     f"the pprof-format package is not in {PPROF_FORMAT} "
                     f"({INSTALL_HINT})")
class PprofFormatTest(ServiceBase):

    def test_reader(self):
        for name, path, mode, profile in self.profiles:
            with self.subTest(profile=name):
                env = dict(os.environ, TRACEMALLOC_FORK_CACHE=CACHE)
                result = json.loads(run_reader(
                    ['node', READ_PROFILE_JS, path], env=env))
                self.assertEqual([tuple(t) for t in result['sample_types']],
                                 profile['sample_types'])
                got = {(filename, lineno): values
                       for filename, lineno, *values in result['lines']
                       if any(values)}
                self.assertEqual(got, self.expected(profile))
                self.assertIn(self.leak_key(mode), got)


class PprofTestMixin:
    pprof = None

    def test_reader(self):
        for name, path, mode, profile in self.profiles:
            expected = self.expected(profile)
            for index, (sample_type, _) in enumerate(
                    profile['sample_types']):
                with self.subTest(profile=name, sample_index=sample_type):
                    output, flat = go_pprof_top(self.pprof, path,
                                                sample_type)
                    # pprof's text output is split on spaces: a file name
                    # with one ("<frozen importlib._bootstrap>") cannot be
                    # read back from it, and is left out on both sides.
                    flat = {key: value for key, value in flat.items()
                            if ' ' not in key[0]}
                    want = {key: row[index]
                            for key, row in expected.items()
                            if row[index] and ' ' not in key[0]}
                    self.assertEqual(flat, want, output)
                    self.assertIn(f'Type: {sample_type}', output)
                    if sample_type.endswith('_space'):
                        self.assertIn(self.leak_key(mode), flat)


@unittest.skipUnless(shutil.which('go'),
                     f"go is missing (Debian's golang-go, whose `go tool "
                     f"pprof` is pprof; {INSTALL_HINT})")
class GoToolPprofTest(PprofTestMixin, ServiceBase):
    pprof = ['go', 'tool', 'pprof']


@unittest.skipUnless(os.access(DEBIAN_PPROF, os.X_OK),
                     f"{DEBIAN_PPROF} is missing (pprof built from "
                     f"Debian's golang-github-google-pprof-dev; "
                     f"{INSTALL_HINT})")
class DebianPprofTest(PprofTestMixin, ServiceBase):
    pprof = [DEBIAN_PPROF]


@unittest.skipUnless(SIGNAL is not None, "needs SIGUSR2")
@unittest.skipUnless(os.path.isdir('/proc/self'), "attach needs /proc")
@unittest.skipUnless(hasattr(tracemalloc, 'label'), "needs labels")
class AsyncioServiceTest(unittest.TestCase):
    """The asyncio service, attached twice with tracing off and twice with
    tracing on: the profiles, their labels and their threads."""

    @classmethod
    def setUpClass(cls):
        _, cls.results, cls.profiles = shared_async()

    def test_attach_twice(self):
        for mode in ('off', 'on'):
            with self.subTest(mode=mode):
                result = self.results[mode]
                self.assertEqual(result['handler'], '_OnDemand')
                for attach, elapsed in result['attaches']:
                    self.assertEqual(attach.returncode, 0, attach.stderr)
                    self.assertTrue(os.path.isfile(attach.stdout.strip()))
                self.assertGreater(result['requests'], 0)
                self.assertEqual(result['client_errors'], [])
                self.assertNotIn('Traceback', result['stderr'])
        self.assertEqual(len(self.profiles), 4)

    def leak_samples(self, mode, profile):
        leak = (self.results[mode]['script'], ASYNC_LEAK_LINE)
        return [sample for sample in profile['samples']
                if sample['frames'] and tuple(sample['frames'][0]) == leak]

    def test_labels_and_threads(self):
        for name, path, mode, profile in self.profiles:
            with self.subTest(profile=name):
                samples = self.leak_samples(mode, profile)
                self.assertTrue(samples, name)
                for sample in samples:
                    labels = sample['labels']
                    self.assertEqual(labels.get('endpoint'), '/item')
                    self.assertEqual(labels.get('coroutine'), 'handle')
                    self.assertRegex(labels.get('task', ''), r'^Task-\d+$')
                    self.assertEqual(labels.get('thread'), 'MainThread')
                    self.assertIn('thread_id', labels)
                # The same totals as the profile's samples hold.
                index = [t for t, _ in profile['sample_types']].index(
                    'inuse_space')
                self.assertGreater(sum(s['values'][index] for s in samples),
                                   0)

    @unittest.skipUnless(shutil.which('go'),
                         f"go is missing (Debian's golang-go; "
                         f"{INSTALL_HINT})")
    def test_go_tool_pprof_tags(self):
        for name, path, mode, profile in self.profiles:
            with self.subTest(profile=name):
                samples = self.leak_samples(mode, profile)
                leaked = sum(s['values'][[t for t, _ in profile[
                    'sample_types']].index('inuse_space')] for s in samples)
                result = subprocess.run(
                    ['go', 'tool', 'pprof', '-tags', '-tagfocus',
                     'endpoint=/item', '-sample_index=inuse_space', path],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    text=True, timeout=120)
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertRegex(result.stdout, r'endpoint: Total')
                self.assertIn('/item', result.stdout)
                self.assertIn('coroutine: Total', result.stdout)
                self.assertIn(': handle', result.stdout)
                self.assertGreater(leaked, 0)


# --------------------------------------------------------------------------
# Startup options, opt-in, and attach's refusals

def run_python(*args, env_extra=None, **kwargs):
    env = child_env(**(env_extra or {}))
    for name in ('PYTHONTRACEMALLOCSIGNAL', 'PYTHONTRACEMALLOCDUMP'):
        if name not in (env_extra or {}):
            env.pop(name, None)
    return subprocess.run([sys.executable, *args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=env,
                          timeout=60, **kwargs)


PRINT_HANDLER = ("import signal; "
                 "print(type(signal.getsignal(signal.SIGUSR2)).__name__)")


@unittest.skipUnless(SIGNAL is not None, "needs SIGUSR2")
class StartupOptionTest(unittest.TestCase):

    def test_option_installs_the_handler(self):
        for args, env_extra in [
                ((), {'PYTHONTRACEMALLOCSIGNAL': 'USR2'}),
                ((), {'PYTHONTRACEMALLOCSIGNAL': 'sigusr2:exact'}),
                ((), {'PYTHONTRACEMALLOCSIGNAL': str(int(SIGNAL))}),
                (('-X', 'tracemalloc_signal=USR2:64KiB'), {}),
                # -X wins over the variable.
                (('-X', 'tracemalloc_signal=USR2'),
                 {'PYTHONTRACEMALLOCSIGNAL': 'NOPE'})]:
            with self.subTest(args=args, env=env_extra):
                proc = run_python(*args, '-c', PRINT_HANDLER,
                                  env_extra=env_extra)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertEqual(proc.stdout.strip(), '_OnDemand')
                # Nothing happens until a signal arrives: no message, no
                # tracing.
                self.assertEqual(proc.stderr, '')

    def test_nothing_without_the_option(self):
        for args, env_extra in [((), {}),
                                (('-E',), {'PYTHONTRACEMALLOCSIGNAL':
                                           'USR2'}),
                                (('-I',), {'PYTHONTRACEMALLOCSIGNAL':
                                           'USR2'}),
                                # -E ignores a bad value too.
                                (('-E',), {'PYTHONTRACEMALLOCSIGNAL':
                                           'NOPE'})]:
            with self.subTest(args=args, env=env_extra):
                proc = run_python(
                    *args, '-c', PRINT_HANDLER + "; import sys; "
                    "print('tracemalloc._ondemand' in sys.modules)",
                    env_extra=env_extra)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertEqual(proc.stdout.split(), ['Handlers', 'False'])

    def test_bad_values_stop_startup_with_a_message(self):
        missing = os.path.join(tempfile.gettempdir(), 'no-such-directory',
                               'heap-{pid}.pb.gz')
        for args, env_extra, message in [
                ((), {'PYTHONTRACEMALLOCSIGNAL': 'NOPE'},
                 "PYTHONTRACEMALLOCSIGNAL=NOPE: unknown signal NOPE"),
                (('-X', 'tracemalloc_signal=KILL'), {},
                 "-X tracemalloc_signal=KILL: unknown signal KILL"),
                (('-X', 'tracemalloc_signal=SEGV'), {},
                 "-X tracemalloc_signal=SEGV: unknown signal SEGV"),
                ((), {'PYTHONTRACEMALLOCSIGNAL': 'USR2:lots'},
                 "PYTHONTRACEMALLOCSIGNAL=USR2:lots: bad interval lots"),
                ((), {'PYTHONTRACEMALLOCSIGNAL': 'USR2',
                      'PYTHONTRACEMALLOCDUMP': missing},
                 f"PYTHONTRACEMALLOCDUMP={missing}: invalid path pattern"),
                ((), {'PYTHONTRACEMALLOCSIGNAL': 'USR2',
                      'PYTHONTRACEMALLOCDUMP': '/tmp/heap-{nope}.pb.gz'},
                 "unknown field {nope}")]:
            with self.subTest(args=args, env=env_extra):
                proc = run_python(*args, '-c', 'print("ran")',
                                  env_extra=env_extra)
                # An error exit, not a crash (a signal) and not the
                # program.
                self.assertGreater(proc.returncode, 0)
                self.assertEqual(proc.stdout, '')
                self.assertIn(message, proc.stderr)
                self.assertNotIn('Traceback', proc.stderr)

    def test_default_pattern_is_in_the_temporary_directory(self):
        directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, directory)
        proc = run_python(
            '-c', "from tracemalloc import _ondemand; "
                  "print(_ondemand._on_demand.pattern)",
            env_extra={'PYTHONTRACEMALLOCSIGNAL': 'USR2',
                       'TMPDIR': directory})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.strip(),
                         os.path.join(directory, 'tracemalloc-{pid}-{n}.pb.gz'))


WAIT_SCRIPT = textwrap.dedent('''\
    import signal, sys
    print(type(signal.getsignal(signal.SIGUSR2)).__name__, flush=True)
    sys.stdin.readline()
''')


@unittest.skipUnless(SIGNAL is not None, "needs SIGUSR2")
@unittest.skipUnless(os.path.isdir('/proc/self'), "attach needs /proc")
class AttachRefusalTest(unittest.TestCase):

    def setUp(self):
        self.directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.directory)

    def start(self, script, *args, env_extra=None, user=None):
        path = os.path.join(self.directory, 'child.py')
        with open(path, 'w') as fp:
            fp.write(script)
        env = child_env(**(env_extra or {}))
        for name in ('PYTHONTRACEMALLOCSIGNAL', 'PYTHONTRACEMALLOCDUMP'):
            if name not in (env_extra or {}):
                env.pop(name, None)
        proc = subprocess.Popen(
            [sys.executable, *args, path], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env, cwd=self.directory)
        self.addCleanup(stop_process, proc)
        first = proc.stdout.readline()
        self.assertTrue(first, proc.stderr.read() if not first else '')
        return proc, first.strip()

    def assert_refused(self, result, message):
        # Exit status 2, and one line that says why: the last one (the
        # lines before it, if any, are the steps that attach took).
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertEqual(result.stdout, '')
        lines = result.stderr.splitlines()
        errors = [line for line in lines if ': error: ' in line]
        self.assertEqual(errors, lines[-1:], result.stderr)
        self.assertTrue(lines[-1].startswith(
            'python -m tracemalloc attach: error: '), lines[-1])
        self.assertIn(message, lines[-1])

    def test_no_variable_keeps_the_default_action(self):
        proc, handler = self.start(WAIT_SCRIPT)
        self.assertEqual(handler, 'Handlers')     # Handlers.SIG_DFL
        self.assert_refused(run_attach(proc.pid, '--timeout', '2'),
                            f"process {proc.pid} did not opt in")
        # attach sent nothing; the signal's default action kills.
        self.assertIsNone(proc.poll())
        os.kill(proc.pid, SIGNAL)
        self.assertEqual(proc.wait(timeout=30), -SIGNAL)

    def test_ignored_environment(self):
        proc, handler = self.start(
            WAIT_SCRIPT, '-E', env_extra={'PYTHONTRACEMALLOCSIGNAL': 'USR2'})
        self.assertEqual(handler, 'Handlers')
        self.assert_refused(run_attach(proc.pid), "-E or -I")

    def test_handler_replaced_by_the_program(self):
        proc, handler = self.start(
            "import signal, sys\n"
            "signal.signal(signal.SIGUSR2, signal.SIG_DFL)\n"
            "print('replaced', flush=True)\n"
            "sys.stdin.readline()\n",
            env_extra={'PYTHONTRACEMALLOCSIGNAL': 'USR2'})
        self.assert_refused(run_attach(proc.pid),
                            "no handler for SIGUSR2")

    def test_no_such_process(self):
        proc = subprocess.Popen([sys.executable, '-c', 'pass'])
        proc.wait()
        self.assert_refused(run_attach(proc.pid), f"no process {proc.pid}")

    def test_process_of_another_user(self):
        if os.getuid() == 0:
            # Root reads every process: attach as another user instead.
            try:
                import pwd
                nobody = pwd.getpwnam('nobody')
            except (ImportError, KeyError):
                self.skipTest("no user 'nobody' to attach as")
            # A private checkout: nobody cannot run this interpreter.
            skip_unless_runs_as(nobody.pw_uid, nobody.pw_gid)
            proc, _ = self.start(WAIT_SCRIPT, env_extra={
                'PYTHONTRACEMALLOCSIGNAL': 'USR2',
                'PYTHONTRACEMALLOCDUMP':
                    os.path.join(self.directory, 'h-{pid}-{n}.pb.gz')})
            env = child_env()
            env.pop('PYTHONTRACEMALLOCSIGNAL', None)
            env['HOME'] = '/'
            result = subprocess.run(
                [sys.executable, '-m', 'tracemalloc', 'attach',
                 str(proc.pid)], stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True, env=env, timeout=60,
                cwd='/', user=nobody.pw_uid, group=nobody.pw_gid,
                extra_groups=[])
            target = proc.pid
        else:
            target = 1
            try:
                with open('/proc/1/environ', 'rb'):
                    self.skipTest("process 1 is readable: it is ours")
            except PermissionError:
                pass
            result = run_attach(target)
        self.assert_refused(result, f"process {target} is not ours")

    def test_blocked_main_thread_times_out(self):
        # The main thread waits in C (glibc's system() retries waitpid()
        # after a signal): the C handler sets the flag, but the Python
        # handler runs only when system() returns.
        try:
            import ctypes
            ctypes.CDLL(None).system
        except (ImportError, OSError, AttributeError) as exc:
            self.skipTest(f"needs ctypes and system(): {exc}")
        pattern = os.path.join(self.directory, 'h-{pid}-{n}.pb.gz')
        proc, _ = self.start(textwrap.dedent('''\
            import ctypes, sys
            print("blocking", flush=True)
            ctypes.CDLL(None).system(b"read line")
            print("returned", flush=True)
        '''), env_extra={'PYTHONTRACEMALLOCSIGNAL': 'USR2',
                         'PYTHONTRACEMALLOCDUMP': pattern})
        started = time.monotonic()
        result = run_attach(proc.pid, '--timeout', '1')
        self.assertLess(time.monotonic() - started, 20)
        self.assert_refused(
            result, f"process {proc.pid} did not answer SIGUSR2 within 1 s")
        self.assertIn("blocked in C code", result.stderr)
        # Once system() returns, the handler runs: tracing starts, as the
        # first signal of the state machine says.
        out, err = proc.communicate('\n', timeout=60)
        self.assertEqual(proc.returncode, 0, err)
        self.assertEqual(out.strip(), 'returned')
        self.assertIn("SIGUSR2: tracing started", err)
        # The process exited: its state file went with it.
        self.assertEqual(os.listdir(self.directory), ['child.py'])


class AttachUsageTest(unittest.TestCase):

    def test_bad_arguments(self):
        for args in (['notapid'], ['0'], ['1', '--duration', '-1'],
                     ['1', '--timeout', 'x']):
            with self.subTest(args=args):
                result = run_attach(*args)
                self.assertEqual(result.returncode, 2)
                self.assertIn('error:', result.stderr)

    def test_command_line_options(self):
        from tracemalloc._attach import _interpreter_options
        self.assertEqual(
            _interpreter_options(['python', '-X', 'tracemalloc_signal=USR2',
                                  '-Xtracemalloc_dump=/x/{pid}.pb.gz',
                                  'app.py', '-E']),
            ({'tracemalloc_signal': 'USR2',
              'tracemalloc_dump': '/x/{pid}.pb.gz'}, False))
        self.assertEqual(_interpreter_options(['python', '-uE', '-m', 'x']),
                         ({}, True))
        self.assertEqual(_interpreter_options(['python', '-I', '-c', 'x',
                                               '-X', 'y']),
                         ({}, True))
        self.assertEqual(_interpreter_options(['gunicorn', 'app:app']),
                         ({}, False))


@unittest.skipUnless(SIGNAL is not None, "needs SIGUSR2")
class ReviewS38Test(unittest.TestCase):
    """Issue 33's review (s38): the state machine and attach."""

    def setUp(self):
        self.directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.directory, True)

    def test_program_restart_between_signals(self):
        # Signal 1 starts sampling; the program stops it and starts its own
        # tracing; signal 2 must write the profile and leave the program's
        # tracing on.
        code = textwrap.dedent("""
            import os, signal, sys, threading, time, tracemalloc
            def send():
                os.kill(os.getpid(), signal.SIGUSR2)
                for _ in range(200):
                    time.sleep(0.001)
                for thread in threading.enumerate():
                    if thread.name == "tracemalloc-dump":
                        thread.join()
            send()
            assert tracemalloc.is_tracing()
            tracemalloc.stop()
            tracemalloc.start(5)
            keep = [bytes(1000) for _ in range(100)]
            send()
            print(tracemalloc.is_tracing(), tracemalloc.get_traceback_limit())
        """)
        result = run_python('-c', code, env_extra={
            'PYTHONTRACEMALLOCSIGNAL': 'USR2',
            'PYTHONTRACEMALLOCDUMP': os.path.join(self.directory,
                                                  'heap-{n}.pb.gz')})
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.split(), ['True', '5'], result.stderr)
        self.assertIn('tracing goes on', result.stderr)
        self.assertEqual(os.listdir(self.directory), ['heap-1.pb.gz'])

    def test_attach_pid_format_spec(self):
        # {pid:08d}: attach looks for the name that the process writes.
        env = child_env(PYTHONTRACEMALLOCSIGNAL='USR2',
                        PYTHONTRACEMALLOCDUMP=os.path.join(
                            self.directory, 'heap-{pid:08d}-{n}.pb.gz'))
        target = subprocess.Popen(
            [sys.executable, '-X', 'tracemalloc=5', '-c',
             'import sys, time\nkeep = [bytes(1000) for _ in range(100)]\n'
             'print("ready", flush=True)\n'
             'while True: time.sleep(0.05)'],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        self.addCleanup(stop_process, target)
        self.assertEqual(target.stdout.readline().strip(), 'ready')
        result = run_attach(target.pid, '--timeout', '20')
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.strip(), os.path.join(
            self.directory, f'heap-{target.pid:08d}-1.pb.gz'))



# A parent that forks one child; the child prints its pid.  With BLOCK set,
# the child holds the signal back until the file BLOCK exists.
FORKING_SCRIPT = textwrap.dedent("""\
    import os, signal, sys, time
    keep = [bytes(1000) for _ in range(100)]
    block = os.environ.get("BLOCK")
    pid = os.fork()
    if pid == 0:
        if block:
            signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR2])
        print(os.getpid(), flush=True)
        if block:
            while not os.path.exists(block):
                time.sleep(0.01)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGUSR2])
        while True:
            time.sleep(0.05)
    while True:
        time.sleep(0.05)
""")

# A parent that forks one child, then holds the signal back until the file
# BLOCK exists; it prints the child's pid once it holds the signal.
ORIGINAL_SCRIPT = textwrap.dedent("""\
    import os, signal, sys, time
    keep = [bytes(1000) for _ in range(100)]
    block = os.environ["BLOCK"]
    pid = os.fork()
    if pid == 0:
        while True:
            time.sleep(0.05)
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR2])
    print(pid, flush=True)
    while not os.path.exists(block):
        time.sleep(0.01)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGUSR2])
    while True:
        time.sleep(0.05)
""")


def _kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@unittest.skipUnless(SIGNAL is not None, "needs SIGUSR2")
@unittest.skipUnless(os.path.isdir('/proc/self'), "attach needs /proc")
@unittest.skipUnless(hasattr(os, 'fork'), "needs os.fork()")
class ForkedChildTest(unittest.TestCase):
    """Issue 43, item 3: a child made by os.fork() writes its profiles
    under the name that its parent's pattern gives it (-pid{pid} added
    when the pattern has no {pid}); attach looks for that name, and takes
    no other process's profile for the child's."""

    def setUp(self):
        self.directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.directory, True)

    def start(self, pattern, *options, block=None):
        env = child_env(PYTHONTRACEMALLOCSIGNAL='USR2',
                        PYTHONTRACEMALLOCDUMP=os.path.join(self.directory,
                                                           pattern))
        if block:
            env['BLOCK'] = block
        parent = subprocess.Popen(
            [sys.executable, *options, '-c', FORKING_SCRIPT], env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(stop_process, parent)
        child = int(parent.stdout.readline())
        self.addCleanup(_kill, child)
        return parent, child

    def test_pattern_without_fields(self):
        # Tracing off (the signal starts it, then the profile) and on (one
        # signal, one profile): heap.pb.gz is heap-pid<CHILD>.pb.gz in the
        # child.
        for options in ((), ('-X', 'tracemalloc=5')):
            with self.subTest(options=options):
                parent, child = self.start('heap.pb.gz', *options)
                result = run_attach(child, '--duration', '0.2',
                                    '--timeout', '10')
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertEqual(result.stdout.strip(), os.path.join(
                    self.directory, f'heap-pid{child}.pb.gz'))
                _kill(child)        # first: it holds the parent's pipes
                stop_process(parent)

    def test_parent_profile_is_not_the_child_s(self):
        # heap-{n}.pb.gz: the parent writes heap-1.pb.gz while attach waits
        # for the child (which holds the signal back until then); attach
        # prints the child's heap-1-pid<CHILD>.pb.gz, not the parent's.
        parent_file = os.path.join(self.directory, 'heap-1.pb.gz')
        parent, child = self.start('heap-{n}.pb.gz', '-X', 'tracemalloc=5',
                                   block=parent_file)
        attach = subprocess.Popen(
            [sys.executable, '-m', 'tracemalloc', 'attach', str(child),
             '--timeout', '20'], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=child_env())
        self.addCleanup(stop_process, attach)
        self.assertIn('sent SIGUSR2', attach.stderr.readline())
        os.kill(parent.pid, signal.SIGUSR2)
        out, err = attach.communicate(timeout=60)
        self.assertEqual(attach.returncode, 0, err)
        self.assertTrue(os.path.exists(parent_file))
        self.assertEqual(out.strip(), os.path.join(
            self.directory, f'heap-1-pid{child}.pb.gz'))

    def test_original_process_ignores_its_children(self):
        # The process that started (not a forked child) writes
        # heap-{n}.pb.gz's own names; a child's heap-1-pid<CHILD>.pb.gz,
        # written while attach waits for the parent, is not the parent's.
        child_file = os.path.join(self.directory, 'child-done')
        script = ORIGINAL_SCRIPT
        env = child_env(PYTHONTRACEMALLOCSIGNAL='USR2',
                        PYTHONTRACEMALLOCDUMP=os.path.join(
                            self.directory, 'heap-{n}.pb.gz'),
                        BLOCK=child_file)
        parent = subprocess.Popen(
            [sys.executable, '-X', 'tracemalloc=5', '-c', script], env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(stop_process, parent)
        child = int(parent.stdout.readline())
        self.addCleanup(_kill, child)
        attach = subprocess.Popen(
            [sys.executable, '-m', 'tracemalloc', 'attach', str(parent.pid),
             '--timeout', '20'], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=child_env())
        self.addCleanup(stop_process, attach)
        self.assertIn('sent SIGUSR2', attach.stderr.readline())
        os.kill(child, signal.SIGUSR2)
        written = os.path.join(self.directory, f'heap-1-pid{child}.pb.gz')
        deadline = time.monotonic() + 30
        while not os.path.exists(written) and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertTrue(os.path.exists(written))
        open(child_file, 'w').close()
        out, err = attach.communicate(timeout=60)
        self.assertEqual(attach.returncode, 0, err)
        self.assertEqual(out.strip(), os.path.join(self.directory,
                                                   'heap-1.pb.gz'))


if __name__ == '__main__':
    unittest.main()
