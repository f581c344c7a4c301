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


if __name__ == "__main__":
    unittest.main()
