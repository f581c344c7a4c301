"""./python behaves like the real binary it runs (build/BASE/obj/python).

`make build` writes ./python as a small script that execs the real binary
by its path.  A symlink was not enough: sys.executable then named the
repository root, which getpath does not recognise as a build directory, so
a venv made from it (its `home`) or a child started with a made-up argv[0]
next to sys.executable could not find the standard library.
"""

import os
import shutil
import subprocess
import tempfile
import unittest

import forkbase

FORK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(os.path.dirname(FORK))
PYTHON = os.path.join(REPO, "python")
REAL = os.path.join(forkbase.build_dir(), "obj", "python")


def run(args, **kwargs):
    env = dict(os.environ)
    # The test is about the interpreter's own paths: nothing from outside.
    for name in ("PYTHONPATH", "PYTHONHOME", "PYTHONTRACEMALLOC",
                 "PYTHONMALLOC", "PYTHONEXECUTABLE"):
        env.pop(name, None)
    return subprocess.run(args, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=env,
                          timeout=300, **kwargs)


@unittest.skipUnless(os.path.exists(PYTHON) and os.path.exists(REAL),
                     "no ./python: run `make build` first")
class PythonLinkTest(unittest.TestCase):
    def check_ok(self, proc):
        self.assertEqual(proc.returncode, 0,
                         f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
        return proc.stdout

    def test_is_not_a_symlink(self):
        self.assertFalse(os.path.islink(PYTHON),
                         "./python is a symlink: rebuild with `make build`")
        self.assertTrue(os.access(PYTHON, os.X_OK))

    def test_sys_executable_is_the_real_binary(self):
        out = self.check_ok(run([PYTHON, "-c",
                                 "import sys; print(sys.executable); "
                                 "print(sys._base_executable)"]))
        executable, base = out.splitlines()
        self.assertEqual(os.path.realpath(executable), os.path.realpath(REAL))
        self.assertEqual(os.path.realpath(base), os.path.realpath(REAL))

    def test_arguments_and_exit_status_pass_through(self):
        args = ["", "two words", "$HOME", "'quoted'", "-c", "*"]
        out = self.check_ok(run([PYTHON, "-c",
                                 "import sys, json; "
                                 "print(json.dumps(sys.argv[1:]))"] + args))
        self.assertEqual(out.strip(), __import__("json").dumps(args))
        proc = run([PYTHON, "-c", "raise SystemExit(7)"])
        self.assertEqual(proc.returncode, 7)
        proc = run([PYTHON, "-c", "import sys; print(sys.stdin.read()[::-1])"],
                   input="abc")
        self.assertEqual(proc.stdout.strip(), "cba")

    def test_child_with_made_up_argv0(self):
        # What test_subprocess does: argv[0] names a file that does not
        # exist next to sys.executable; getpath finds the standard library
        # from argv[0]'s directory.
        code = ("import os, subprocess, sys; "
                "out = subprocess.check_output("
                "[os.path.join(os.path.dirname(sys.executable), "
                "'somethingyoudonthave'), '-c', "
                "'import encodings, sys; print(sys.prefix)'], "
                "executable=sys.executable, text=True); "
                "print(out.strip())")
        out = self.check_ok(run([PYTHON, "-c", code]))
        self.assertTrue(out.strip(), out)

    def test_venv(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        venv = os.path.join(tmp, "v")
        self.check_ok(run([PYTHON, "-m", "venv", "--without-pip", venv]))
        vpython = os.path.join(venv, "bin", "python")
        out = self.check_ok(run([vpython, "-c",
                                 "import encodings, sys, tracemalloc; "
                                 "print(sys.prefix); print(sys.base_prefix); "
                                 "print(sys.executable)"]))
        prefix, base_prefix, executable = out.splitlines()
        self.assertEqual(os.path.realpath(prefix), os.path.realpath(venv))
        self.assertNotEqual(os.path.realpath(base_prefix),
                            os.path.realpath(venv))
        self.assertEqual(executable, vpython)
        # The venv's interpreter is the fork, and traces.
        out = self.check_ok(run([vpython, "-X", "tracemalloc=5", "-c",
                                 "import tracemalloc; "
                                 "print(tracemalloc.get_traceback_limit())"]))
        self.assertEqual(out.strip(), "5")
        # A venv made from the venv works too.
        venv2 = os.path.join(tmp, "v2")
        self.check_ok(run([vpython, "-m", "venv", "--without-pip", venv2]))
        out = self.check_ok(run([os.path.join(venv2, "bin", "python"), "-c",
                                 "import encodings, sys; print(sys.prefix)"]))
        self.assertEqual(os.path.realpath(out.strip()),
                         os.path.realpath(venv2))


if __name__ == "__main__":
    unittest.main()
