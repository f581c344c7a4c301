"""The fork's binary tarball (`make dist`, Tools/fork/dist.sh; issue 31,
item 9): extracted into a fresh directory, its interpreter runs from there,
makes a venv, installs a local wheel with pip (no network) and runs a
leaking pytest file with --tracemalloc-leaks, which fails on the line that
leaks.

The tarball is build/BASE/dist/python-tracemalloc-VERSION-linux-ARCH.tar.gz
beside the build tree of the interpreter that runs this test (`make test`
makes it first), or the file named by TRACEMALLOC_DIST_TARBALL.
"""

import glob
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import unittest
import zipfile

DEBIAN_DIST_PACKAGES = "/usr/lib/python3/dist-packages"


def find_tarball():
    named = os.environ.get("TRACEMALLOC_DIST_TARBALL")
    if named:
        return named
    version = platform.python_version()
    build = os.path.dirname(os.path.dirname(os.path.realpath(
        sys.executable)))
    return os.path.join(build, "dist", f"python-tracemalloc-{version}-"
                        f"linux-{platform.machine()}.tar.gz")


def make_wheel(directory):
    """A pure-Python wheel of the package leakylib, made by hand (the venv
    has pip, not setuptools or a build backend)."""
    files = {
        "leakylib/__init__.py": textwrap.dedent("""\
            _KEPT = []

            def work():
                _KEPT.append(bytearray(4096))  # LEAK
            """),
        "leakylib-1.0.dist-info/METADATA":
            "Metadata-Version: 2.1\nName: leakylib\nVersion: 1.0\n",
        "leakylib-1.0.dist-info/WHEEL":
            "Wheel-Version: 1.0\nGenerator: test_tracemalloc_dist\n"
            "Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files)
    record += "leakylib-1.0.dist-info/RECORD,,\n"
    files["leakylib-1.0.dist-info/RECORD"] = record
    path = os.path.join(directory, "leakylib-1.0-py3-none-any.whl")
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)
    return path


class DistTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        tarball = find_tarball()
        if not os.path.exists(tarball):
            raise unittest.SkipTest(f"no binary tarball at {tarball} "
                                    f"(make dist writes it)")
        cls.directory = tempfile.mkdtemp(prefix="tracemalloc-dist-")
        with tarfile.open(tarball) as archive:
            names = archive.getnames()
            if hasattr(tarfile, "tar_filter"):     # 3.11.4 and later
                archive.extractall(cls.directory, filter="tar")
            else:
                archive.extractall(cls.directory)
        top = {name.split("/")[0] for name in names}
        if len(top) != 1:
            raise AssertionError(f"the tarball has {len(top)} top "
                                 f"directories: {sorted(top)[:5]}")
        cls.prefix = os.path.join(cls.directory, top.pop())
        cls.python = os.path.join(cls.prefix, "bin", "python3")

    @classmethod
    def tearDownClass(cls):
        import shutil
        shutil.rmtree(cls.directory)

    def run_python(self, python, *args, **env):
        environment = {key: value for key, value in os.environ.items()
                       if not key.startswith(("PYTHON", "PYTEST"))}
        environment.update(env)
        return subprocess.run([python, *args], env=environment,
                              cwd=self.directory, capture_output=True,
                              text=True, timeout=600)

    def test_runs_from_where_it_was_extracted(self):
        process = self.run_python(
            self.python, "-X", "tracemalloc=5", "-c",
            "import sys, tracemalloc; print(sys.prefix); "
            "print(tracemalloc.is_tracing(), tracemalloc.get_traceback_limit())")
        self.assertEqual(process.returncode, 0, process.stderr)
        prefix, tracing = process.stdout.splitlines()
        self.assertEqual(os.path.realpath(prefix),
                         os.path.realpath(self.prefix))
        self.assertEqual(tracing, "True 5")
        # The scripts of bin/ run the interpreter beside them.
        pip = os.path.join(self.prefix, "bin", "pip3")
        process = self.run_python(pip, "--version")
        self.assertEqual(process.returncode, 0, process.stderr)
        self.assertIn(os.path.realpath(self.prefix), process.stdout)

    def test_venv_wheel_and_leaking_pytest_file(self):
        venv = os.path.join(self.directory, "venv")
        process = self.run_python(self.python, "-m", "venv", venv)
        self.assertEqual(process.returncode, 0, process.stderr)
        python = os.path.join(venv, "bin", "python")
        wheel = make_wheel(self.directory)
        process = self.run_python(python, "-m", "pip", "install",
                                  "--no-index", "--no-cache-dir", wheel)
        self.assertEqual(process.returncode, 0, process.stdout +
                         process.stderr)
        process = self.run_python(python, "-c", "import leakylib; "
                                  "print(leakylib.__file__)")
        self.assertEqual(process.returncode, 0, process.stderr)
        installed = process.stdout.strip()
        self.assertTrue(installed.startswith(venv), installed)

        if not glob.glob(os.path.join(DEBIAN_DIST_PACKAGES, "pytest")):
            self.skipTest(f"no pytest in {DEBIAN_DIST_PACKAGES} (Debian's "
                          f"python3-pytest)")
        tests = os.path.join(self.directory, "project")
        os.makedirs(tests, exist_ok=True)
        with open(os.path.join(tests, "test_leaky.py"), "w",
                  encoding="utf-8") as file:
            file.write("import leakylib\n\n\ndef test_leak():\n"
                       "    leakylib.work()\n")
        # No -p: the plugin comes from its entry point, which the venv
        # sees in the installed standard library.
        process = subprocess.run(
            [python, "-m", "pytest", "-p", "no:cacheprovider",
             "--tracemalloc-leaks", "test_leaky.py"],
            cwd=tests, capture_output=True, text=True, timeout=600,
            env={**{key: value for key, value in os.environ.items()
                    if not key.startswith(("PYTHON", "PYTEST"))},
                 "PYTHONPATH": DEBIAN_DIST_PACKAGES,
                 "PYTHONDONTWRITEBYTECODE": "1"})
        output = process.stdout + process.stderr
        self.assertEqual(process.returncode, 1, output)
        self.assertIn(f"{installed}:4: size=", output)
        self.assertIn("held by: module leakylib", output)
        self.assertIn("1 checked, 1 leaked", output)


if __name__ == "__main__":
    unittest.main()
