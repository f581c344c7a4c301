"""Tests of the fork's machinery: the pinned tarballs and the patch series,
for every base (Tools/fork/bases/BASE/pin.sh, Tools/fork/patches/BASE/)."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import forkbase

FORK = forkbase.FORK
REPO = forkbase.REPO


def cached_tarball(base):
    """The verified tarball of BASE from the normal cache, without network
    (the build fetched the chosen base's; `make BASE=3.13 prepare` or
    bench-pristine fetches 3.13's), or skip saying which is missing."""
    env = dict(os.environ, TRACEMALLOC_FORK_BASE=base,
               TRACEMALLOC_FORK_OFFLINE="1")
    out = subprocess.run([os.path.join(FORK, "fetch-tarball.sh")], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    if out.returncode != 0:
        raise unittest.SkipTest(
            f"base {base}: no verified {forkbase.pins(base)['UPSTREAM_TARBALL']}"
            f" in the cache (`make BASE={base} prepare` fetches it): "
            + out.stderr.strip().splitlines()[-1])
    return out.stdout.strip()


def series(base):
    env = dict(os.environ, TRACEMALLOC_FORK_BASE=base)
    return subprocess.run([os.path.join(FORK, "series.sh")], env=env,
                          stdout=subprocess.PIPE, text=True,
                          check=True).stdout.split()


def patch_files(path):
    return subprocess.run([os.path.join(FORK, "patch-files.sh"), path],
                          stdout=subprocess.PIPE, text=True,
                          check=True).stdout.split()


class PinTest(unittest.TestCase):
    def test_bases(self):
        self.assertIn("3.11", forkbase.bases())
        self.assertIn("3.13", forkbase.bases())

    def test_each_pin(self):
        for base in forkbase.bases():
            with self.subTest(base=base):
                pin = forkbase.pins(base)
                version = pin["UPSTREAM_VERSION"]
                self.assertEqual(pin["FORK_BASE"], base)
                self.assertRegex(version, rf"^{re.escape(base)}\.\d+$")
                self.assertRegex(pin["UPSTREAM_SHA256"], r"^[0-9a-f]{64}$")
                self.assertIn(pin["UPSTREAM_TARBALL"],
                              (f"Python-{version}.tgz",
                               f"Python-{version}.tar.xz"))
                self.assertTrue(pin["UPSTREAM_URL"].endswith(
                    f"/{version}/{pin['UPSTREAM_TARBALL']}"))
                self.assertEqual(pin["DEBIAN_SOURCE_PACKAGE"], f"python{base}")
                # Debian's orig tarball is the same file: same compression.
                compression = ".tar.xz" if pin["UPSTREAM_TARBALL"].endswith(
                    ".tar.xz") else ".tar.gz"
                self.assertEqual(pin["DEBIAN_ORIG_TARBALL"],
                                 f"python{base}_{version}.orig{compression}")
                self.assertIn(pin["ENGINE_PORTED"], ("yes", "no"))
                self.assertEqual(pin["FORK_PATCHES"],
                                 os.path.join(FORK, "patches", base))
                self.assertTrue(os.path.isfile(
                    os.path.join(pin["FORK_PATCHES"], "series")))

    def test_the_pins_of_issue_20(self):
        self.assertEqual(forkbase.pins("3.11")["UPSTREAM_TARBALL"],
                         "Python-3.11.2.tgz")
        pin = forkbase.pins("3.13")
        self.assertEqual(pin["UPSTREAM_TARBALL"], "Python-3.13.15.tar.xz")
        self.assertEqual(pin["UPSTREAM_SHA256"], "1e66a7945a48390ee4c2a4268a0e"
                         "4185884059a13c4aab6d148aa208deea4a76")
        self.assertEqual(pin["DEBIAN_SUITE"], "sid")
        self.assertEqual(pin["DEBIAN_SOURCE_VERSION"], "3.13.15-1")

    def test_default_base_is_buildable(self):
        # `make test` on a fresh clone builds the default base: the engine
        # must be ported to it.
        default = forkbase.pins()["FORK_DEFAULT_BASE"]
        env = {k: v for k, v in os.environ.items()
               if k != "TRACEMALLOC_FORK_BASE"}
        out = subprocess.run(
            ["sh", "-c", 'here="$1"; . "$here/pin.sh"; echo "$FORK_BASE"',
             "sh", FORK], env=env, stdout=subprocess.PIPE, text=True,
            check=True)
        self.assertEqual(out.stdout.strip(), default)
        self.assertEqual(forkbase.pins(default)["ENGINE_PORTED"], "yes")

    def test_unknown_base_refused(self):
        with self.assertRaisesRegex(ValueError, "unknown base '2.7'"):
            forkbase.pins("2.7")
        env = dict(os.environ, TRACEMALLOC_FORK_BASE="2.7",
                   TRACEMALLOC_FORK_OFFLINE="1")
        out = subprocess.run([os.path.join(FORK, "fetch-tarball.sh")],
                             env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        self.assertNotEqual(out.returncode, 0)
        self.assertEqual(out.stdout, "")


class FetchTarballTest(unittest.TestCase):
    """For each base: the cached copy is used only if its sha256 is the
    pinned one."""

    def fetch(self, base, cache):
        env = dict(os.environ, TRACEMALLOC_FORK_CACHE=cache,
                   TRACEMALLOC_FORK_OFFLINE="1", TRACEMALLOC_FORK_BASE=base)
        return subprocess.run([os.path.join(FORK, "fetch-tarball.sh")],
                              env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)

    def for_each_base(self, check):
        """check(base, real, pin, cached, cache) in a fresh cache, for
        every base whose tarball is in the normal cache."""
        for base in forkbase.bases():
            with self.subTest(base=base):
                try:
                    real = cached_tarball(base)
                except unittest.SkipTest as why:
                    print(f"SKIPPED for base {base}: {why}")
                    continue
                pin = forkbase.pins(base)
                with tempfile.TemporaryDirectory() as cache:
                    check(base, real, pin,
                          os.path.join(cache, pin["UPSTREAM_TARBALL"]), cache)

    def check_refused(self, base, pin, cached, cache):
        res = self.fetch(base, cache)
        self.assertNotEqual(res.returncode, 0)
        self.assertEqual(res.stdout, "", "a bad tarball must never be used")
        self.assertIn("REJECTED", res.stderr)
        self.assertIn(pin["UPSTREAM_SHA256"], res.stderr)
        self.assertFalse(os.path.exists(cached))
        self.assertTrue(os.path.exists(cached + ".rejected"))

    def test_tampered_tarball_refused(self):
        def check(base, real, pin, cached, cache):
            shutil.copy(real, cached)
            with open(cached, "r+b") as f:
                f.seek(1000)
                byte = f.read(1)
                f.seek(1000)
                f.write(bytes([byte[0] ^ 0xFF]))
            self.check_refused(base, pin, cached, cache)
        self.for_each_base(check)

    def test_truncated_tarball_refused(self):
        def check(base, real, pin, cached, cache):
            with open(real, "rb") as src:
                data = src.read()
            with open(cached, "wb") as f:
                f.write(data[: len(data) // 2])
            self.check_refused(base, pin, cached, cache)
        self.for_each_base(check)

    def test_other_base_tarball_refused(self):
        # The 3.11 tarball renamed as 3.13's (or the reverse) is refused.
        def check(base, real, pin, cached, cache):
            other = [b for b in forkbase.bases() if b != base][0]
            try:
                other_tarball = cached_tarball(other)
            except unittest.SkipTest as why:
                print(f"SKIPPED for base {base}: {why}")
                return
            shutil.copy(other_tarball, cached)
            self.check_refused(base, pin, cached, cache)
        self.for_each_base(check)

    def test_verified_tarball_accepted(self):
        def check(base, real, pin, cached, cache):
            shutil.copy(real, cached)
            res = self.fetch(base, cache)
            self.assertEqual(res.returncode, 0, res.stderr)
            self.assertEqual(res.stdout.strip(), cached)
        self.for_each_base(check)


class DebianSourcesTest(unittest.TestCase):
    """The private apt sources of the Debian fallback, from a made-up
    machine configuration (fetch-tarball.sh --apt-sources)."""

    DEB822 = (
        "Types: deb\nURIs: http://mirror.example/debian\n"
        "Suites: bookworm bookworm-updates\nComponents: main\n"
        "Signed-By: /usr/share/keyrings/archive.gpg\n\n"
        "Types: deb\nURIs: http://mirror.example/debian-security\n"
        "Suites: bookworm-security\nComponents: main\n"
        "Signed-By: /usr/share/keyrings/archive.gpg\n")
    ONE_LINE = (
        "deb [arch=amd64 signed-by=/k.gpg] http://other.example/debian "
        "bookworm main contrib\n"
        "deb http://other.example/debian-security bookworm-security main\n"
        "deb http://vendor.example/apt nodistro main\n")

    def sources(self, base):
        root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, root)
        etc = os.path.join(root, "apt")
        os.makedirs(os.path.join(etc, "sources.list.d"))
        with open(os.path.join(etc, "sources.list.d", "a.sources"), "w") as f:
            f.write(self.DEB822)
        with open(os.path.join(etc, "sources.list.d", "b.list"), "w") as f:
            f.write(self.ONE_LINE)
        release = os.path.join(root, "os-release")
        with open(release, "w") as f:
            f.write("ID=debian\nVERSION_CODENAME=bookworm\n")
        out = os.path.join(root, "out")
        res = subprocess.run(
            [os.path.join(FORK, "fetch-tarball.sh"), "--apt-sources", out],
            env=dict(os.environ, TRACEMALLOC_FORK_BASE=base,
                     TRACEMALLOC_FORK_APT_ETC=etc,
                     TRACEMALLOC_FORK_OS_RELEASE=release),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(res.returncode, 0, res.stderr)
        written = {}
        for name in sorted(os.listdir(out)):
            with open(os.path.join(out, name)) as f:
                written[name] = f.read()
        return written

    def test_machine_suites_as_source(self):
        # 3.11: the machine's own suites, every configured one, as deb-src.
        written = self.sources("3.11")
        self.assertEqual(written["a.sources"],
                         self.DEB822.replace("Types: deb\n",
                                             "Types: deb-src\n"))
        self.assertEqual(written["b.list.list"],
                         self.ONE_LINE.replace("deb ", "deb-src ", 1)
                         .replace("\ndeb ", "\ndeb-src "))

    def test_other_suite_from_the_machines_archive(self):
        # 3.13: sid's main from the archives that serve the machine's
        # release only (not -security, not a vendor's), keyring kept.
        written = self.sources("3.13")
        self.assertEqual(written["a.sources"],
                         "Types: deb-src\nURIs: http://mirror.example/debian\n"
                         "Suites: sid\nComponents: main\n"
                         "Signed-By: /usr/share/keyrings/archive.gpg\n\n")
        self.assertEqual(written["b.list.list"],
                         "deb-src [arch=amd64 signed-by=/k.gpg] "
                         "http://other.example/debian sid main\n")


class PatchSeriesTest(unittest.TestCase):
    def test_check_patches(self):
        # Each base's series applies to that base's pristine tree with zero
        # fuzz (when its tarball is in the cache).
        for base in forkbase.bases():
            with self.subTest(base=base):
                try:
                    tarball = cached_tarball(base)
                except unittest.SkipTest as why:
                    print(f"SKIPPED check-patches for base {base}: {why}")
                    continue
                env = dict(os.environ, TRACEMALLOC_FORK_BASE=base,
                           TRACEMALLOC_FORK_OFFLINE="1")
                res = subprocess.run([os.path.join(FORK, "check-patches.sh")],
                                     env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
                self.assertEqual(res.returncode, 0, res.stdout)
                self.assertIn(f"base {base}: all {len(series(base))} patches"
                              f" apply to pristine {os.path.basename(tarball)}"
                              " with zero fuzz", res.stdout)

    def test_generated_cases_match_bytecodes(self):
        # A base whose interpreter loop is generated from Python/bytecodes.c
        # (3.12+): after the series, regenerating with upstream's generator
        # gives back the patched generated files, so that a patch to
        # bytecodes.c never ships with stale generated code.
        generated = {"tier1_generator.py": "Python/generated_cases.c.h",
                     "tier2_generator.py": "Python/executor_cases.c.h"}
        checked = 0
        for base in forkbase.bases():
            with self.subTest(base=base):
                try:
                    tarball = cached_tarball(base)
                except unittest.SkipTest as why:
                    print(f"SKIPPED generated cases for base {base}: {why}")
                    continue
                with tempfile.TemporaryDirectory() as tree:
                    subprocess.run(["tar", "-xf", tarball, "-C", tree,
                                    "--strip-components=1"], check=True)
                    tools = os.path.join(tree, "Tools", "cases_generator")
                    if not os.path.isdir(tools):
                        continue    # 3.11: ceval.c is written by hand
                    checked += 1
                    for name in series(base):
                        with open(os.path.join(FORK, "patches", base,
                                               name)) as patch:
                            subprocess.run(
                                ["patch", "-p1", "-d", tree, "--fuzz=0",
                                 "--forward", "--no-backup-if-mismatch",
                                 "-r", "-", "-s"],
                                stdin=patch, check=True)
                    for generator, target in generated.items():
                        out = os.path.join(tree, "regenerated")
                        subprocess.run(
                            [sys.executable, os.path.join(tools, generator),
                             "-o", out,
                             os.path.join(tree, "Python", "bytecodes.c")],
                            cwd=tree, check=True, stdout=subprocess.PIPE)
                        with open(out) as f, \
                                open(os.path.join(tree, target)) as g:
                            self.assertTrue(f.read() == g.read(),
                                            f"base {base}: {target} is not "
                                            "what bytecodes.c generates")
        if not checked:
            self.skipTest("no base with a generated interpreter loop has its "
                          "tarball in the cache")

    def test_every_patch_has_a_why(self):
        for base in forkbase.bases():
            names = series(base)
            self.assertTrue(names, base)
            for name in names:
                with self.subTest(base=base, patch=name):
                    with open(os.path.join(FORK, "patches", base, name)) as f:
                        header = f.read().split("\n--- ", 1)[0]
                    self.assertRegex(header, r"(?m)^Description: \S")
                    self.assertRegex(header, r"(?m)^Forwarded: \S")
                    self.assertNotIn("TODO", header, name)

    def test_every_patch_file_is_in_the_series(self):
        for base in forkbase.bases():
            directory = os.path.join(FORK, "patches", base)
            on_disk = sorted(n for n in os.listdir(directory)
                             if n.endswith(".patch"))
            self.assertEqual(sorted(series(base)), on_disk, base)

    def test_one_file_one_patch(self):
        # Within a base, an upstream file belongs to exactly one patch, and
        # is never also one of our own files (which replace upstream's
        # whole).
        ours = set(subprocess.run([os.path.join(FORK, "list-overlay.sh")],
                                  cwd=REPO, stdout=subprocess.PIPE,
                                  text=True, check=True).stdout.split())
        for base in forkbase.bases():
            owner = {}
            for name in series(base):
                for path in set(patch_files(
                        os.path.join(FORK, "patches", base, name))):
                    with self.subTest(base=base, patch=name, file=path):
                        self.assertNotIn(path, owner,
                                         f"{path} is in {owner.get(path)} "
                                         f"and {name}")
                        self.assertNotIn(path, ours)
                    owner[path] = name

    def test_no_patch_outside_a_base(self):
        # The series moved into patches/BASE/: nothing is left at the top.
        left = [n for n in os.listdir(os.path.join(FORK, "patches"))
                if not os.path.isdir(os.path.join(FORK, "patches", n))]
        self.assertEqual(left, [])
        self.assertEqual(sorted(os.listdir(os.path.join(FORK, "patches"))),
                         forkbase.bases())

    def test_broken_patch_stops_the_layout(self):
        # A copy of the machinery with one more patch whose context does
        # not exist upstream: the layout must stop and name both.
        base = forkbase.chosen_base()
        cached_tarball(base)
        root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, root)
        fork = os.path.join(root, "Tools", "fork")
        shutil.copytree(FORK, fork, ignore=shutil.ignore_patterns("tests"))
        bad = "9999-does-not-apply.patch"
        patches = os.path.join(fork, "patches", base)
        with open(os.path.join(patches, bad), "w") as f:
            f.write("Description: test\n\n"
                    "--- a/Objects/obmalloc.c\n+++ b/Objects/obmalloc.c\n"
                    "@@ -1,3 +1,3 @@\n no such line one\n-no such line two\n"
                    "+replacement\n no such line three\n")
        with open(os.path.join(patches, "series"), "a") as f:
            f.write(bad + "\n")
        env = dict(os.environ, BUILD_DIR=os.path.join(root, "build"))
        res = subprocess.run([os.path.join(fork, "prepare-tree.sh")],
                             env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn(bad, res.stdout)
        self.assertIn("Objects/obmalloc.c", res.stdout)


class MakeBaseTest(unittest.TestCase):
    """`make BASE=...` picks the base's pin, series and build tree."""

    def make(self, *args):
        env = {k: v for k, v in os.environ.items()
               if k not in ("TRACEMALLOC_FORK_BASE", "BUILD_DIR", "BASE",
                            "MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
        return subprocess.run(["make", "-s", "--no-print-directory", *args],
                              cwd=REPO, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)

    def test_help_names_the_base(self):
        # Without BASE, the default base: 3.13.15.
        out = self.make("help")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("pristine 3.13.15 + our files + patches/3.13",
                      out.stdout)
        self.assertIn("default 3.13 (3.13.15)", out.stdout)
        self.assertNotIn("not ported", out.stdout)
        out = self.make("BASE=3.11", "help")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("pristine 3.11.2 + our files + patches/3.11", out.stdout)
        out = self.make("BASE=3.13", "help")
        self.assertIn("pristine 3.13.15 + our files + patches/3.13",
                      out.stdout)

    def test_pristine_build_per_base(self):
        for base, version in (("3.11", "3.11.2"), ("3.13", "3.13.15")):
            out = self.make(f"BASE={base}", "bench-pristine-path")
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertRegex(out.stdout.strip(),
                             rf"/pristine-{re.escape(version)}-build/"
                             rf"[0-9a-f]{{12}}/Python-{re.escape(version)}"
                             r"/python$")

    def test_unknown_base(self):
        out = self.make("BASE=3.12", "help")
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("unknown BASE=3.12", out.stderr)

    def test_free_threaded_build_refused(self):
        for base in ("3.11", "3.13"):
            out = self.make(f"BASE={base}", "CONFIGURE_FLAGS=--disable-gil",
                            "build")
            self.assertNotEqual(out.returncode, 0)
            self.assertIn("free-threaded build (--disable-gil) is not "
                          "supported", out.stderr)

    def test_unported_base_refuses_to_build(self):
        # Until the engine is ported, the fork is not built on 3.13; this
        # refusal happens before anything is laid out or configured.
        if forkbase.pins("3.13")["ENGINE_PORTED"] == "yes":
            self.skipTest("the engine is ported to 3.13")
        out = self.make("BASE=3.13", "build")
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("not ported to base 3.13", out.stderr)


if __name__ == "__main__":
    unittest.main()
