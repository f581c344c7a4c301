"""The command line's wrong answers of issue 29 (section 2, low items)
and of issue 43 (items 4 and 4.3), each a test that failed before its
fix."""

import functools
import os
import subprocess
import sys
import tempfile
import unittest

import tracemalloc


def run_cli(*args):
    env = dict(os.environ)
    env.pop("PYTHONTRACEMALLOC", None)
    return subprocess.run([sys.executable, "-m", "tracemalloc", *args],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env=env)


class SizeOptionTest(unittest.TestCase):
    """2.18: a size that is no finite number is a usage error (exit 2, one
    message), not an OverflowError traceback."""

    def setUp(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(__import__("shutil").rmtree, tmp)
        self.old = os.path.join(tmp, "old.snap")
        self.new = os.path.join(tmp, "new.snap")
        script = os.path.join(tmp, "s.py")
        with open(script, "w") as f:
            f.write("x = []\n")
        for path in (self.old, self.new):
            proc = run_cli("run", "-o", path, script)
            self.assertEqual(proc.returncode, 0, proc.stderr)

    def assert_usage_error(self, proc, option):
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)
        self.assertIn(option, proc.stderr)

    def test_fail_over_not_finite(self):
        for value in ("inf", "1e400", "nan", "-inf"):
            with self.subTest(value=value):
                proc = run_cli("diff", self.old, self.new,
                               "--fail-over", value)
                self.assert_usage_error(proc, "--fail-over")

    def test_threshold_not_finite(self):
        for value in ("inf", "1e400KiB"):
            with self.subTest(value=value):
                proc = run_cli("leaks", "--threshold", value, "os:getpid")
                self.assert_usage_error(proc, "--threshold")

    def test_finite_sizes_still_accepted(self):
        proc = run_cli("diff", self.old, self.new, "--fail-over", "1.5MB")
        self.assertEqual(proc.returncode, 0, proc.stderr)


class UsageTextTest(unittest.TestCase):
    """2.20: the bare usage line names every command, pprof included."""

    def test_bare_usage_names_every_command(self):
        proc = run_cli()
        self.assertEqual(proc.returncode, 2)
        usage = proc.stderr.split("error:")[0]
        from tracemalloc.__main__ import COMMANDS
        for command in COMMANDS:
            with self.subTest(command=command):
                self.assertIn(command, usage)


def run_sampled_cli(*args, sample="64KiB"):
    env = dict(os.environ)
    env.pop("PYTHONTRACEMALLOC", None)
    return subprocess.run([sys.executable, "-X", "tracemalloc=5",
                           "-X", f"tracemalloc_sample={sample}",
                           "-m", "tracemalloc", *args],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env=env)


class SampledNframeTest(unittest.TestCase):
    """2.13: -n does not silently turn a sampled process into an exact one.
    run -n keeps the sampling interval (only the frame limit changes);
    leaks refuses a sampled process at once, with or without -n."""

    def setUp(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(__import__("shutil").rmtree, tmp)
        self.script = os.path.join(tmp, "s.py")
        with open(self.script, "w") as f:
            f.write("import tracemalloc\n"
                    "print(tracemalloc.get_sample(), "
                    "tracemalloc.get_traceback_limit())\n")

    def test_run_nframe_keeps_sampling(self):
        proc = run_sampled_cli("run", "-n", "3", self.script)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.split(), [str(64 * 1024), "3"])

    def test_run_without_nframe_keeps_sampling(self):
        proc = run_sampled_cli("run", self.script)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.split(), [str(64 * 1024), "5"])

    def test_leaks_nframe_refuses_sampling(self):
        for extra in (("-n", "3"), ()):
            with self.subTest(extra=extra):
                proc = run_sampled_cli("leaks", *extra, "os:getpid")
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertIn("sampling", proc.stderr)
                self.assertNotIn("no allocation site grew", proc.stderr)
                self.assertNotIn("Traceback", proc.stderr)


class LeaksMessageTest(unittest.TestCase):
    """2.20: under sampling, leaks does not say that the target raised
    LeakCheckError: the target never ran."""

    def test_sampled_leaks_message(self):
        proc = run_sampled_cli("leaks", "os:getpid")
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertNotIn("raised", proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)
        self.assertIn("exact tracing", proc.stderr)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1,
                         proc.stderr)

    def test_checker_error_not_blamed_on_target(self):
        # The target stops tracing: the checker, not the target, raises.
        tmp = tempfile.mkdtemp()
        self.addCleanup(__import__("shutil").rmtree, tmp)
        with open(os.path.join(tmp, "stopper.py"), "w") as f:
            f.write("import tracemalloc\n"
                    "def work():\n"
                    "    tracemalloc.stop()\n")
        env = dict(os.environ)
        env.pop("PYTHONTRACEMALLOC", None)
        proc = subprocess.run([sys.executable, "-m", "tracemalloc", "leaks",
                               "-q", "stopper:work"], cwd=tmp,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertNotIn("raised LeakCheckError", proc.stderr)
        self.assertIn("no verdict", proc.stderr)


class LeaksOutputTest(unittest.TestCase):
    """Issue 31's review (s38), F3 and F7: leaks' usage errors and its
    JSON on standard output."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(__import__("shutil").rmtree, self.tmp)

    def leaks(self, *args):
        env = dict(os.environ)
        env.pop("PYTHONTRACEMALLOC", None)
        return subprocess.run([sys.executable, "-m", "tracemalloc", "leaks",
                               *args], cwd=self.tmp, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env)

    def test_empty_ignore_is_a_usage_error(self):
        # F3: `--ignore "$KNOWN"` with the variable empty was a traceback
        # and exit 1, the status of a leak.
        with open(os.path.join(self.tmp, "target.py"), "w") as f:
            f.write("def clean():\n    pass\n")
        for extra in ([], ["--json"]):
            with self.subTest(extra=extra):
                proc = self.leaks("--ignore", "", *extra, "target:clean")
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertNotIn("Traceback", proc.stderr)
                self.assertIn("--ignore", proc.stderr)
                self.assertEqual(proc.stdout, "")

    def test_json_alone_on_stdout(self):
        # F7: what the target prints, from Python and from C, goes to
        # standard error; standard output is the JSON report alone.
        import json
        with open(os.path.join(self.tmp, "jobs.py"), "w") as f:
            f.write("import os\n"
                    "def run_one():\n"
                    "    print('processed 1 job')\n"
                    "    os.write(1, b'raw write\\n')\n")
        proc = self.leaks("--json", "jobs:run_one")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        report = json.loads(proc.stdout)
        self.assertEqual(report["title"], "jobs:run_one")
        self.assertFalse(report["leaked"])
        self.assertIn("processed 1 job", proc.stderr)
        self.assertIn("raw write", proc.stderr)
        # Second s38 review, G6 and G7: a target that closes sys.stdout,
        # and what it prints at exit, leave the report alone.
        with open(os.path.join(self.tmp, "closer.py"), "w") as f:
            f.write("import atexit, sys\n"
                    "atexit.register(print, 'summary at exit')\n"
                    "def run_one():\n"
                    "    if not sys.stdout.closed:\n"
                    "        print('processed')\n"
                    "        sys.stdout.close()\n")
        proc = self.leaks("--json", "closer:run_one")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertFalse(json.loads(proc.stdout)["leaked"])
        self.assertIn("summary at exit", proc.stderr)
        # Without --json, the target's output stays on standard output.
        proc = self.leaks("jobs:run_one")
        self.assertIn("processed 1 job", proc.stdout)
        self.assertIn("raw write", proc.stdout)


PRISTINE = os.environ.get(
    "TRACEMALLOC_PRISTINE",
    "/root/.cache/tracemalloc-fork/pristine-3.13.15-build/e45c82448f97/"
    "Python-3.13.15/python")


OTHER_UID = 65534       # nobody


@functools.lru_cache
def _cannot_run_as(python, user, group):
    """Why *user* (and *group* with no other group, if not None) cannot run
    *python* and import tracemalloc, or None if it can: in a checkout that
    only its owner may enter (a mktemp -d directory, root's home), exec()
    fails with PermissionError, or the interpreter cannot read its
    standard library."""
    env = dict(os.environ)
    env.pop("PYTHONTRACEMALLOC", None)
    credentials = {"user": user}
    if group is not None:
        credentials.update(group=group, extra_groups=[])
    try:
        proc = subprocess.run([python, "-c", "import tracemalloc"], cwd="/",
                              stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, env=env,
                              **credentials)
    except OSError as exc:
        return f"{type(exc).__name__}: {exc.strerror}"
    if proc.returncode:
        lines = proc.stdout.strip().splitlines()
        return (f"exit status {proc.returncode}"
                + (f": {lines[-1]}" if lines else ""))
    return None


def skip_unless_runs_as(user, group=None, python=None):
    """Skip the test, saying why, when *user* (with *group*: see
    _cannot_run_as()) cannot run *python*, by default this interpreter
    (issue 43, item 4.3)."""
    python = python or sys.executable
    why = _cannot_run_as(python, user, group)
    if why is not None:
        raise unittest.SkipTest(
            f"user {user} cannot run {python} ({why}): the checkout is "
            f"private to its owner")


def run_as_other_user(code, cwd, python=None):
    """Run *code* as a user for whom a 0444 file is not writable: nobody
    when the tests run as root (root writes any file), else this user.
    The test is skipped when nobody cannot run the interpreter."""
    kwargs = {}
    if hasattr(os, "getuid") and os.getuid() == 0:
        skip_unless_runs_as(OTHER_UID, python=python)
        kwargs["user"] = OTHER_UID
    env = dict(os.environ)
    env.pop("PYTHONTRACEMALLOC", None)
    return subprocess.run([python or sys.executable, "-c", code], cwd=cwd,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env=env, **kwargs)


_WRITE_CODE = """
import os, sys, threading, time, tracemalloc, signal
tracemalloc.start()
snapshot = tracemalloc.take_snapshot()
how = sys.argv[1] if len(sys.argv) > 1 else {how!r}
try:
    if how == "dump":
        snapshot.dump("f")
    elif how == "open":
        # What upstream's dump() does: open(filename, 'wb').
        with open("f", "wb") as f:
            f.write(b"upstream")
    elif how == "dump_pprof":
        snapshot.dump_pprof("f")
    elif how == "dump_on_signal":
        tracemalloc.dump_on_signal(signal.SIGUSR1, "f", format="snapshot")
        os.kill(os.getpid(), signal.SIGUSR1)
        time.sleep(0.01)
        for thread in threading.enumerate():
            if thread is not threading.current_thread():
                thread.join()
    print("written")
except OSError as exc:
    print(type(exc).__name__, exc.filename)
"""


@unittest.skipUnless(hasattr(os, "chmod") and sys.platform != "win32",
                     "POSIX permissions")
class ReadOnlyTargetTest(unittest.TestCase):
    """2.16: a file that open(path, 'wb') refuses is refused, not replaced
    through a rename that its directory allows."""

    def make_dir(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(__import__("shutil").rmtree, tmp)
        os.chmod(tmp, 0o777)
        path = os.path.join(tmp, "f")
        with open(path, "wb") as f:
            f.write(b"baseline")
        os.chmod(path, 0o444)
        return tmp, path

    def assert_refused(self, how):
        tmp, path = self.make_dir()
        proc = run_as_other_user(_WRITE_CODE.format(how=how), tmp)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), b"baseline")
        return proc

    def test_dump_refuses_read_only(self):
        proc = self.assert_refused("dump")
        self.assertEqual(proc.stdout.split(), ["PermissionError", "f"])

    def test_dump_pprof_refuses_read_only(self):
        proc = self.assert_refused("dump_pprof")
        self.assertEqual(proc.stdout.split(), ["PermissionError", "f"])

    def test_dump_on_signal_refuses_read_only(self):
        proc = self.assert_refused("dump_on_signal")
        self.assertIn("PermissionError", proc.stderr)
        self.assertNotIn(".tmp", proc.stderr)

    def test_run_output_refuses_read_only(self):
        tmp, path = self.make_dir()
        script = os.path.join(tmp, "s.py")
        with open(script, "w") as f:
            f.write("x = 1\n")
        proc = run_as_other_user(
            "import sys, runpy; sys.argv[1:] = ['run', '-o', 'f', 's.py'];"
            "runpy.run_module('tracemalloc', run_name='__main__')", tmp)
        self.assertNotEqual(proc.returncode, 0, proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), b"baseline")

    def test_dump_as_open_wb(self):
        # Upstream's dump() is open(filename, 'wb'): the fork's writes or
        # refuses as that open does, for this user (root writes a 0444
        # file) and for another user.
        for other in (False, True):
            outcomes = []
            for how in ("dump", "open"):
                tmp, path = self.make_dir()
                code = _WRITE_CODE.format(how=how)
                if other:
                    proc = run_as_other_user(code, tmp)
                else:
                    proc = subprocess.run([sys.executable, "-c", code],
                                          cwd=tmp, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True)
                with open(path, "rb") as f:
                    outcomes.append((proc.stdout.split(),
                                     f.read() == b"baseline",
                                     os.stat(path).st_mode & 0o777))
            with self.subTest(other_user=other):
                self.assertEqual(outcomes[0], outcomes[1])

    @unittest.skipUnless(os.path.exists(PRISTINE), "no pristine build")
    def test_dump_as_pristine(self):
        # This user (root, in make test): pristine's dump() against ours.
        outcomes = []
        for python in (sys.executable, PRISTINE):
            tmp, path = self.make_dir()
            env = dict(os.environ)
            env.pop("PYTHONTRACEMALLOC", None)
            if python == PRISTINE:
                # Its own standard library, not a path set for the fork.
                env.pop("PYTHONPATH", None)
                env.pop("PYTHONHOME", None)
            proc = subprocess.run([python, "-c",
                                   _WRITE_CODE.format(how="dump")],
                                  cwd=tmp, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            with open(path, "rb") as f:
                outcomes.append((proc.stdout.split(),
                                 f.read() == b"baseline",
                                 os.stat(path).st_mode & 0o777))
        self.assertEqual(outcomes[0], outcomes[1])

    @unittest.skipUnless(hasattr(os, "geteuid") and os.geteuid() == 0,
                         "needs root, to dump over another user's file")
    def test_dump_keeps_owner(self):
        # Root rewrites a group-writable baseline of another user: as
        # open(path, 'wb') would, the file keeps its owner and group (a
        # rename gave it root's, and its owner could no longer write it).
        import pwd
        nobody = pwd.getpwnam("nobody")
        for how in ("dump", "dump_pprof"):
            with self.subTest(how):
                tmp, path = self.make_dir()
                os.chown(path, nobody.pw_uid, nobody.pw_gid)
                os.chmod(path, 0o664)
                proc = subprocess.run(
                    [sys.executable, "-c", _WRITE_CODE.format(how=how)],
                    cwd=tmp, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, text=True)
                self.assertEqual(proc.stdout.split(), ["written"],
                                 proc.stderr)
                st = os.stat(path)
                self.assertEqual((st.st_uid, st.st_gid),
                                 (nobody.pw_uid, nobody.pw_gid))
                self.assertEqual(st.st_mode & 0o777, 0o664)

    def test_unreplaceable_but_writable_written_in_place(self):
        # A writable file in a directory that this user cannot write to:
        # open(path, 'wb') writes it in place, and so does dump().
        tmp, path = self.make_dir()
        os.chmod(path, 0o666)
        os.chmod(tmp, 0o755)
        proc = run_as_other_user(_WRITE_CODE.format(how="dump"), tmp)
        self.assertEqual(proc.stdout.split(), ["written"], proc.stderr)
        snapshot = tracemalloc.Snapshot.load(path)
        self.assertIsInstance(snapshot, tracemalloc.Snapshot)


class SignalReportLineTest(unittest.TestCase):
    """2.20: each message of dump_on_signal() is one write of one whole
    line, so that two threads' messages (a signal flood) never share a
    line."""

    def test_report_is_one_write(self):
        from tracemalloc import _ondemand

        class Recorder:
            def __init__(self):
                self.writes = []

            def write(self, text):
                self.writes.append(text)
                return len(text)

            def flush(self):
                pass

        recorder = Recorder()
        old = sys.stderr
        sys.stderr = recorder
        try:
            _ondemand._report("first")
            _ondemand._report("second")
        finally:
            sys.stderr = old
        self.assertEqual(recorder.writes,
                         ["tracemalloc: first\n", "tracemalloc: second\n"])


class UnwritableOutputTest(unittest.TestCase):
    """2.14: an output that cannot be written is a one-line usage error
    (exit 2) said before the target runs; one that fails after the run
    gives one line too, run keeps the target's failing status, and a clean
    leaks --html does not exit 1."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(__import__("shutil").rmtree, self.tmp)
        self.marker = os.path.join(self.tmp, "ran")
        self.script = os.path.join(self.tmp, "s.py")
        with open(self.script, "w") as f:
            f.write(f"open({self.marker!r}, 'w').close()\n")
        self.missing = os.path.join(self.tmp, "no", "such", "dir", "out")
        self.snap = os.path.join(self.tmp, "a.snap")
        proc = run_cli("run", "-o", self.snap, self.script)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        os.unlink(self.marker)

    def assert_one_line_error(self, proc):
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)
        self.assertNotIn(".tmp", proc.stderr)
        errors = [line for line in proc.stderr.splitlines()
                  if "error" in line]
        self.assertEqual(len(errors), 1, proc.stderr)

    def test_run_checks_before_running(self):
        for option in ("-o", "--html"):
            with self.subTest(option=option):
                proc = run_cli("run", option, self.missing, self.script)
                self.assert_one_line_error(proc)
                self.assertIn(option, proc.stderr)
                self.assertFalse(os.path.exists(self.marker))

    def test_run_directory_as_output(self):
        proc = run_cli("run", "-o", self.tmp, self.script)
        self.assert_one_line_error(proc)
        self.assertFalse(os.path.exists(self.marker))

    def test_leaks_html_checks_before_running(self):
        proc = run_cli("leaks", "-q", "--html", self.missing, "os:getpid")
        self.assert_one_line_error(proc)
        self.assertNotIn("no allocation site grew", proc.stderr)

    def test_html_and_pprof_output(self):
        for command in ("html", "pprof"):
            with self.subTest(command=command):
                proc = run_cli(command, self.snap, "-o", self.missing)
                self.assert_one_line_error(proc)

    def _vanishing_dir_script(self, exit_code):
        directory = os.path.join(self.tmp, "d")
        os.mkdir(directory)
        with open(self.script, "w") as f:
            f.write(f"import shutil, sys\n"
                    f"shutil.rmtree({directory!r})\n"
                    f"sys.exit({exit_code})\n")
        return os.path.join(directory, "out")

    def test_run_write_fails_after_run(self):
        for option in ("-o", "--html"):
            for code, expected in ((0, 2), (3, 3)):
                with self.subTest(option=option, exit_code=code):
                    output = self._vanishing_dir_script(code)
                    proc = run_cli("run", option, output, self.script)
                    self.assertEqual(proc.returncode, expected, proc.stderr)
                    self.assertNotIn("Traceback", proc.stderr)
                    self.assertIn("cannot write", proc.stderr)

    def test_clean_leaks_html_write_fails_after_run(self):
        directory = os.path.join(self.tmp, "d")
        os.mkdir(directory)
        with open(os.path.join(self.tmp, "vanish.py"), "w") as f:
            f.write(f"import os\n"
                    f"def work():\n"
                    f"    if os.path.isdir({directory!r}):\n"
                    f"        os.rmdir({directory!r})\n")
        env = dict(os.environ)
        env.pop("PYTHONTRACEMALLOC", None)
        proc = subprocess.run(
            [sys.executable, "-m", "tracemalloc", "leaks", "-q", "--html",
             os.path.join(directory, "r.html"), "vanish:work"],
            cwd=self.tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=env)
        self.assertIn("no allocation site grew", proc.stderr)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)
        self.assertIn("cannot write", proc.stderr)


class CraftedSnapshotTest(unittest.TestCase):
    """2.17: a crafted snapshot file that loads must not fail later: what
    no snapshot holds is refused by load() with ValueError."""

    CASES = {
        "negative line number": ([(0, 10, (("a.py", -3),), 1)], 1),
        "negative traceback_limit": ([(0, 10, (("a.py", 3),), 1)], -1),
        "negative total_nframe": ([(0, 10, (("a.py", 3),), -2)], 1),
        "negative thread id": ([(0, 10, (("a.py", 3),), 1, -5)], 1),
        "line number above an unsigned int": ([(0, 10, (("a.py", 2 ** 70),), 1)], 1),
        "total_nframe above a C int": ([(0, 10, (("a.py", 3),), 2 ** 40)], 1),
    }

    def test_pprof_of_size_beyond_int64(self):
        # Second review, finding 5: a size that pprof's int64 cannot hold
        # (the file format can) is a one-line error of the command.
        tmp = tempfile.mkdtemp()
        self.addCleanup(__import__("shutil").rmtree, tmp)
        path = os.path.join(tmp, "big.snap")
        tracemalloc.Snapshot([(0, 2 ** 63 + 5, (("a.py", 1),), 1)],
                             1).dump(path)
        proc = run_cli("pprof", path)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertNotIn("Traceback (most recent call last)", proc.stderr)
        self.assertIn("64-bit", proc.stderr)

    def test_weight_out_of_range_refused(self):
        # A finite weight whose estimate no int64 holds (1e308 times 100
        # bytes): load() refuses it, and the commands that read the file
        # say so without a traceback.
        import json, struct, zlib
        document = {"traceback_limit": 1, "filenames": ["a.py"],
                    "frames": [0, 3], "tracebacks": [[0]],
                    "total_nframe": [1], "threads": None, "count": 1,
                    "attributes": {"sample": 4096}, "weights": [1e308]}
        text = json.dumps(document).encode()
        columns = struct.pack("<I", 0) + struct.pack("<Q", 100) \
            + struct.pack("<I", 0)
        payload = struct.pack("<Q", len(text)) + text + columns
        fd, path = tempfile.mkstemp()
        self.addCleanup(os.unlink, path)
        with os.fdopen(fd, "wb") as f:
            f.write(b"tracemalloc-snapshot\nversion 2\n"
                    + struct.pack("<Q", len(payload))
                    + zlib.compress(payload))
        with self.assertRaises(ValueError):
            tracemalloc.Snapshot.load(path)
        for command in ("top", "pprof"):
            with self.subTest(command):
                proc = run_cli(command, path)
                self.assertNotEqual(proc.returncode, 0)
                self.assertNotIn("Traceback (most recent call last)",
                                 proc.stderr)

    def load(self, snapshot, version, cls=tracemalloc.Snapshot):
        from tracemalloc import _snapshotfile
        data = _snapshotfile.encode(snapshot, version=version)
        fd, path = tempfile.mkstemp()
        self.addCleanup(os.unlink, path)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return cls.load(path)

    def test_refused(self):
        for name, (traces, limit) in self.CASES.items():
            for version in (1, 2):
                with self.subTest(name, version=version):
                    snapshot = tracemalloc.Snapshot(traces, limit)
                    with self.assertRaises(ValueError):
                        self.load(snapshot, version)

    def test_attribute_shadowing_a_method(self):
        for name in ("statistics", "compare_to", "dump", "filter_traces",
                     "__class__"):
            for version in (1, 2):
                with self.subTest(name, version=version):
                    snapshot = tracemalloc.Snapshot(
                        [(0, 10, (("a.py", 3),), 1)], 1)
                    vars(snapshot)[name] = 5
                    with self.assertRaises(ValueError):
                        self.load(snapshot, version)

    def test_empty_traceback_loads_and_reports(self):
        # A made-up snapshot may hold a trace without frames (pprof's own
        # tests write one): it loads, and nothing fails on it later.
        snapshot = tracemalloc.Snapshot([(0, 10, (), 1),
                                         (0, 5, (("a.py", 1),), 1)], 1)
        for version in (1, 2):
            with self.subTest(version=version):
                loaded = self.load(snapshot, version)
                for group_by in ("lineno", "filename", "traceback"):
                    self.assertEqual(
                        sum(stat.size for stat in
                            loaded.statistics(group_by)), 15)
        tmp = tempfile.mkdtemp()
        self.addCleanup(__import__("shutil").rmtree, tmp)
        path = os.path.join(tmp, "e.snap")
        snapshot.dump(path)
        for args in (("top", path), ("top", path, "--group-by", "filename"),
                     ("diff", path, path), ("html", path),
                     ("pprof", path)):
            with self.subTest(args=args[:-1]):
                proc = run_cli(*args)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertNotIn("Traceback (most recent call last)",
                                 proc.stderr)

    def test_sound_files_still_load(self):
        # Line 0 and the '<unknown>' frame are what the engine gives for
        # code without a line; thread 0 and total_nframe None are valid; a
        # subclass's plain class-level default may be set per instance.
        class Labelled(tracemalloc.Snapshot):
            label = ""

        traces = [(0, 10, (("<unknown>", 0),), None, 0),
                  (0, 20, (("a.py", 3), ("b.py", 1)), 7, 2 ** 63)]
        for version in (1, 2):
            with self.subTest(version=version):
                snapshot = Labelled(traces, 0)
                snapshot.label = "x"
                loaded = self.load(snapshot, version, Labelled)
                self.assertEqual(sorted(loaded.traces._raw(), key=repr),
                                 sorted(traces, key=repr))
                self.assertEqual(loaded.label, "x")
                loaded.statistics("traceback")



@unittest.skipUnless(os.path.exists("/dev/full"), "needs /dev/full")
class JsonUnwritableStdoutTest(unittest.TestCase):
    """Issue 43, item 4: leaks --json whose standard output cannot be
    written gives one line and exits 2 on a clean target (1 on a leak),
    as --html does; not a traceback and the status of a leak."""

    def leaks_to_full(self, target):
        env = dict(os.environ)
        env.pop("PYTHONTRACEMALLOC", None)
        with open("/dev/full", "w") as full:
            return subprocess.run(
                [sys.executable, "-m", "tracemalloc", "leaks", "-q",
                 "--json", target], stdout=full, stderr=subprocess.PIPE,
                text=True, env=env)

    def test_clean_target(self):
        proc = self.leaks_to_full("os:getpid")
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)
        self.assertNotIn("Exception ignored", proc.stderr)
        self.assertIn("no allocation site grew", proc.stderr)
        errors = [line for line in proc.stderr.splitlines()
                  if "error:" in line]
        self.assertEqual(len(errors), 1, proc.stderr)
        self.assertIn("cannot write the JSON report", errors[0])

    def test_leaking_target(self):
        # The verdict stands: a leak is exit 1, written or not.
        tmp = tempfile.mkdtemp()
        self.addCleanup(__import__("shutil").rmtree, tmp)
        with open(os.path.join(tmp, "keeper.py"), "w") as f:
            f.write("kept = []\n"
                    "def work():\n"
                    "    kept.append(bytearray(10000))\n")
        env = dict(os.environ)
        env.pop("PYTHONTRACEMALLOC", None)
        with open("/dev/full", "w") as full:
            proc = subprocess.run(
                [sys.executable, "-m", "tracemalloc", "leaks", "-q",
                 "--json", "keeper:work"], cwd=tmp, stdout=full,
                stderr=subprocess.PIPE, text=True, env=env)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertNotIn("Traceback (most recent call last)", proc.stderr)
        self.assertIn("cannot write the JSON report", proc.stderr)


@unittest.skipUnless(hasattr(os, "geteuid") and os.geteuid() == 0,
                     "needs root, to run a child as another user")
class PrivateCheckoutTest(unittest.TestCase):
    """Issue 43, item 4.3: in a checkout that only its owner can enter,
    the tests that run a child as another user are skipped with a reason,
    not failed with PermissionError."""

    def test_interpreter_in_private_directory_skips(self):
        private = tempfile.mkdtemp()        # 0700
        self.addCleanup(__import__("shutil").rmtree, private)
        python = os.path.join(private, "python")
        os.symlink(sys.executable, python)
        with self.assertRaises(unittest.SkipTest) as caught:
            run_as_other_user("pass", "/", python=python)
        self.assertIn("cannot run", str(caught.exception))
        self.assertIn("PermissionError", str(caught.exception))

    def test_interpreter_that_others_can_run(self):
        # The probe does not skip what nobody can run (when it can run
        # this interpreter at all).
        try:
            skip_unless_runs_as(OTHER_UID)
        except unittest.SkipTest:
            self.skipTest("this checkout is private")
        proc = run_as_other_user("import os; print(os.getuid())", "/")
        self.assertEqual(proc.stdout.split(), [str(OTHER_UID)],
                         proc.stderr)


if __name__ == "__main__":
    unittest.main()
