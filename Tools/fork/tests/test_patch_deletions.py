"""Tests of the patch tools with a patch that deletes an upstream file.

Patch 0005 deletes upstream's Lib/tracemalloc.py, which the package
Lib/tracemalloc/ replaces: the tools must see the deleted file as the
patch's, regenerate the deletion, and keep the file out of build/src.
"""

import os
import shutil
import subprocess
import tempfile
import textwrap
import unittest

import forkbase

FORK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(os.path.dirname(FORK))
BUILD = forkbase.build_dir()


def run(*args, **env):
    return subprocess.run(args, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True,
                          env=dict(os.environ, **env))


class PatchFilesTest(unittest.TestCase):
    def test_deleted_created_and_edited_files(self):
        patch = textwrap.dedent("""\
            Description: test
            --- a/Lib/edited.py
            +++ b/Lib/edited.py
            @@ -1 +1 @@
            -old
            +new
            --- a/Lib/deleted.py
            +++ /dev/null
            @@ -1 +0,0 @@
            -gone
            --- /dev/null
            +++ b/Lib/created.py
            @@ -0,0 +1 @@
            +born
        """)
        with tempfile.NamedTemporaryFile("w", suffix=".patch") as file:
            file.write(patch)
            file.flush()
            out = run(os.path.join(FORK, "patch-files.sh"), file.name)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.split(),
                         ["Lib/edited.py", "Lib/deleted.py",
                          "Lib/created.py"])

    def test_series_owns_the_deleted_module(self):
        out = run(os.path.join(FORK, "series-files.sh"))
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("Lib/tracemalloc.py", out.stdout.split())


class RefreshDeletionTest(unittest.TestCase):
    """refresh-patches.sh writes a deletion as a diff against /dev/null."""

    def test_refresh_regenerates_a_deletion(self):
        with tempfile.TemporaryDirectory() as tmp:
            fork = os.path.join(tmp, "Tools", "fork")
            shutil.copytree(FORK, fork, ignore=shutil.ignore_patterns(
                "tests", "__pycache__"))
            patches = os.path.join(fork, "patches",
                                   forkbase.chosen_base())
            for name in os.listdir(patches):
                os.unlink(os.path.join(patches, name))
            with open(os.path.join(patches, "series"), "w") as file:
                file.write("0001-drop.patch\n")
            with open(os.path.join(patches, "0001-drop.patch"), "w") as file:
                file.write("Description: drop a file\n\n"
                           "--- a/Lib/dropped.py\n+++ b/Lib/dropped.py\n")
            build = os.path.join(tmp, "build")
            for tree, files in (("pristine", {"Lib/dropped.py": "x = 1\n",
                                              "Lib/kept.py": "y = 2\n"}),
                                ("src", {"Lib/kept.py": "y = 2\n"})):
                for name, content in files.items():
                    path = os.path.join(build, tree, name)
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    with open(path, "w") as file:
                        file.write(content)
            out = run(os.path.join(fork, "refresh-patches.sh"),
                      BUILD_DIR=build)
            self.assertEqual(out.returncode, 0, out.stderr)
            with open(os.path.join(patches, "0001-drop.patch")) as file:
                text = file.read()
            self.assertTrue(text.startswith("Description: drop a file\n"))
            self.assertIn("--- a/Lib/dropped.py\n+++ /dev/null\n", text)
            self.assertIn("-x = 1\n", text)
            # Refreshing again keeps the patch as it is.
            out = run(os.path.join(fork, "refresh-patches.sh"),
                      BUILD_DIR=build)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertNotIn("refreshed", out.stdout)
            with open(os.path.join(patches, "0001-drop.patch")) as file:
                self.assertEqual(file.read(), text)


class BuildTreeTest(unittest.TestCase):
    def test_no_stale_module_beside_the_package(self):
        src = os.path.join(BUILD, "src", "Lib")
        if not os.path.isdir(os.path.join(src, "tracemalloc")):
            self.skipTest("no build tree")
        self.assertFalse(os.path.exists(os.path.join(src, "tracemalloc.py")))


if __name__ == "__main__":
    unittest.main()
