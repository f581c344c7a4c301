"""Tests of the fork's machinery: the pinned tarball and the patch series."""

import os
import shutil
import subprocess
import tempfile
import unittest

FORK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(os.path.dirname(FORK))


def pin(name):
    out = subprocess.run(["bash", "-c", f'. "{FORK}/pin.sh"; echo "${name}"'],
                         stdout=subprocess.PIPE, text=True, check=True)
    return out.stdout.strip()


def real_tarball():
    """The verified tarball from the normal cache (the build fetched it)."""
    out = subprocess.run([os.path.join(FORK, "fetch-tarball.sh")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    if out.returncode != 0:
        raise unittest.SkipTest("no verified tarball: " + out.stderr)
    return out.stdout.strip()


class FetchTarballTest(unittest.TestCase):
    def setUp(self):
        self.cache = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.cache)
        self.name = pin("UPSTREAM_TARBALL")
        self.sha = pin("UPSTREAM_SHA256")
        self.cached = os.path.join(self.cache, self.name)

    def fetch(self):
        env = dict(os.environ, TRACEMALLOC_FORK_CACHE=self.cache,
                   TRACEMALLOC_FORK_OFFLINE="1")
        return subprocess.run([os.path.join(FORK, "fetch-tarball.sh")],
                              env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)

    def check_refused(self):
        res = self.fetch()
        self.assertNotEqual(res.returncode, 0)
        self.assertEqual(res.stdout, "", "a bad tarball must never be used")
        self.assertIn("REJECTED", res.stderr)
        self.assertIn(self.sha, res.stderr)
        self.assertFalse(os.path.exists(self.cached))
        self.assertTrue(os.path.exists(self.cached + ".rejected"))

    def test_tampered_tarball_refused(self):
        shutil.copy(real_tarball(), self.cached)
        with open(self.cached, "r+b") as f:
            f.seek(1000)
            byte = f.read(1)
            f.seek(1000)
            f.write(bytes([byte[0] ^ 0xFF]))
        self.check_refused()

    def test_truncated_tarball_refused(self):
        with open(real_tarball(), "rb") as src:
            data = src.read()
        with open(self.cached, "wb") as f:
            f.write(data[: len(data) // 2])
        self.check_refused()

    def test_verified_tarball_accepted(self):
        shutil.copy(real_tarball(), self.cached)
        res = self.fetch()
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertEqual(res.stdout.strip(), self.cached)


class PatchSeriesTest(unittest.TestCase):
    def test_check_patches(self):
        res = subprocess.run([os.path.join(FORK, "check-patches.sh")],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
        self.assertEqual(res.returncode, 0, res.stdout)
        self.assertIn("zero fuzz", res.stdout)

    def test_every_patch_has_a_why(self):
        series = subprocess.run([os.path.join(FORK, "series.sh")],
                                stdout=subprocess.PIPE, text=True,
                                check=True).stdout.split()
        self.assertTrue(series)
        for name in series:
            with open(os.path.join(FORK, "patches", name)) as f:
                header = f.read().split("\n--- ", 1)[0]
            self.assertRegex(header, r"(?m)^Description: \S")
            self.assertNotIn("TODO", header, name)

    def test_broken_patch_stops_the_layout(self):
        # A copy of the machinery with one more patch whose context does
        # not exist upstream: the layout must stop and name both.
        root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, root)
        fork = os.path.join(root, "Tools", "fork")
        shutil.copytree(FORK, fork, ignore=shutil.ignore_patterns("tests"))
        bad = "9999-does-not-apply.patch"
        with open(os.path.join(fork, "patches", bad), "w") as f:
            f.write("Description: test\n\n"
                    "--- a/Objects/obmalloc.c\n+++ b/Objects/obmalloc.c\n"
                    "@@ -1,3 +1,3 @@\n no such line one\n-no such line two\n"
                    "+replacement\n no such line three\n")
        with open(os.path.join(fork, "patches", "series"), "a") as f:
            f.write(bad + "\n")
        env = dict(os.environ, BUILD_DIR=os.path.join(root, "build"))
        res = subprocess.run([os.path.join(fork, "prepare-tree.sh")],
                             env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn(bad, res.stdout)
        self.assertIn("Objects/obmalloc.c", res.stdout)


if __name__ == "__main__":
    unittest.main()
