"""The command line's wrong answers of issue 29 (section 2, low items),
each a test that failed before its fix."""

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


if __name__ == "__main__":
    unittest.main()
