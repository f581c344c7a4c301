"""Extensions built for stock CPython 3.13.15 load into the fork and work
traced (issue 20, item 8).

The work is done by Tools/fork/binary_compat.py (also a command line); here
each of its checks is a test:

* the public structures' sizes and field offsets are pristine's, and so are
  the offsets of the internal fields that stdlib extension modules, built
  with Py_BUILD_CORE_MODULE, reach through macros (_Py_ID() reads
  _PyRuntime.static_objects);
* the .so files of pristine 3.13.15's own build (_decimal, _ctypes,
  xxlimited, _testcapi, _json, _pickle, array...) are loaded by the fork,
  which proves the module it imported is the copy of pristine's file, and
  their stdlib tests pass traced (PYTHONTRACEMALLOC=25, -X tracemalloc=1)
  wherever they pass on pristine (same tests, same tracing);
* markupsafe, from Debian's source package, compiled with pristine's flags
  and headers: its own pytest suite passes on the fork, traced, on that
  _speedups .so, and a string the C code allocates is traced at the Python
  lines that called it, as on pristine.

Skipped, saying so, on another base than 3.13, without pristine 3.13.15
(`make BASE=3.13 bench-pristine`), or when markupsafe's source cannot be
fetched (then the markupsafe tests only).  Pristine's results are cached in
the fork's cache (binary-compat/): the first run takes minutes, because
upstream's tracemalloc at 25 frames is slow.
"""

import hashlib
import os
import sys
import unittest


def _import_binary_compat():
    try:
        import binary_compat
        return binary_compat
    except ImportError:
        pass
    # Outside `make test`: the repository is above the build tree of
    # sys.executable (build/BASE/obj/python) or above Lib/test.
    for root in (os.path.join(os.path.dirname(sys.executable), "..", "..",
                              ".."),
                 os.path.join(os.path.dirname(__file__), "..", "..")):
        tools = os.path.join(root, "Tools", "fork")
        if os.path.exists(os.path.join(tools, "binary_compat.py")):
            sys.path.insert(0, os.path.abspath(tools))
            import binary_compat
            return binary_compat
    return None


def _prerequisites():
    """(binary_compat, pristine's python, None) or (..., why the tests
    skip)."""
    if sys.version_info[:2] != (3, 13):
        return None, None, ("binary compatibility with stock 3.13.15 is "
                            "checked on the 3.13 base only")
    module = _import_binary_compat()
    if module is None:
        return None, None, ("Tools/fork/binary_compat.py not found (run "
                            "through `make test`)")
    try:
        return module, module.find_pristine(), None
    except module.Unavailable as exc:
        return module, None, str(exc)


binary_compat, PRISTINE, SKIP_REASON = _prerequisites()
FORK = sys.executable
skip_unless_ready = unittest.skipIf(SKIP_REASON is not None, SKIP_REASON)


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@skip_unless_ready
class LayoutTest(unittest.TestCase):
    def test_public_structures_unchanged(self):
        diffs = binary_compat.compare_layouts(FORK, PRISTINE, "public")
        self.assertEqual(diffs, [], "public structures differ from "
                         "pristine's (item, pristine, fork)")

    def test_internal_fields_reached_by_macros_unchanged(self):
        diffs = binary_compat.compare_layouts(FORK, PRISTINE, "internal")
        # The deliberate change is there, and explained.
        self.assertIn("_PyInterpreterFrame size", [d[0] for d in diffs])
        self.assertEqual(binary_compat.layout_findings(diffs), [],
                         "internal fields that stdlib extension modules "
                         "read through macros moved (item, pristine, fork)")


@skip_unless_ready
class StdlibExtensionsTest(unittest.TestCase):
    """Pristine's own extension modules, with their stdlib tests."""

    def check_suite(self, name):
        source = binary_compat.extension_dir(PRISTINE)
        suffix = binary_compat.ext_suffix(PRISTINE)
        modules = binary_compat.STDLIB_SUITES[name][0]
        fork_build = binary_compat.extension_dir(FORK)
        for tracing in binary_compat.TRACING:
            with self.subTest(tracing=tracing):
                mine, reference, findings = \
                    binary_compat.compare_stdlib_suite(FORK, PRISTINE, name,
                                                       tracing)
                self.assertEqual(findings, [], mine.get("stderr_tail"))
                # What the fork imported are copies of pristine's files,
                # not the fork's own builds, and stayed so through the
                # tests (import_fresh_module() imports them anew).
                self.assertEqual(sorted(mine["loaded"]), sorted(modules))
                for module, path in mine["loaded"].items():
                    staged = mine["staged"][module]
                    self.assertEqual(os.path.basename(path),
                                     module + suffix)
                    self.assertEqual(staged["from"],
                                     os.path.join(source, module + suffix))
                    self.assertEqual(staged["sha256"],
                                     sha256(staged["from"]))
                    self.assertNotEqual(staged["sha256"], sha256(
                        os.path.join(fork_build, module + suffix)))
                self.assertEqual(mine["loaded_after"], mine["loaded"])
                self.assertTrue(mine["is_tracing"])
                self.assertEqual(mine["nframe"], 25 if "25" in tracing else 1)
                self.assertGreater(mine["run"], 0)


def _add_suite_test(name):
    def test(self):
        self.check_suite(name)
    test.__name__ = f"test_{name}"
    test.__doc__ = (f"{', '.join(binary_compat.STDLIB_SUITES[name][0])}: "
                    f"{', '.join(binary_compat.STDLIB_SUITES[name][1])}")
    setattr(StdlibExtensionsTest, test.__name__, test)


for _name in (binary_compat.STDLIB_SUITES if binary_compat else ()):
    _add_suite_test(_name)


@skip_unless_ready
class MarkupSafeTest(unittest.TestCase):
    """A third-party C extension from Debian's source package."""

    @classmethod
    def setUpClass(cls):
        try:
            cls.source = binary_compat.fetch_markupsafe()
        except binary_compat.Unavailable as exc:
            raise unittest.SkipTest(str(exc))
        cls.built = binary_compat.build_markupsafe(PRISTINE, cls.source)
        cls.speedups = os.path.join(
            cls.built, "markupsafe",
            "_speedups" + binary_compat.ext_suffix(PRISTINE))

    def test_own_tests_traced(self):
        try:
            mine = binary_compat.run_markupsafe_tests(FORK, self.built,
                                                      self.source)
            theirs = binary_compat.run_markupsafe_tests(PRISTINE, self.built,
                                                        self.source)
        except binary_compat.Unavailable as exc:
            self.skipTest(str(exc))
        self.assertEqual(mine["speedups"], self.speedups)
        self.assertTrue(mine["tracing"])
        self.assertEqual(mine["nframe"], 25)
        self.assertEqual((mine["failed"], mine["status"]), (0, 0),
                         mine["failed_ids"] or mine["tail"])
        self.assertGreater(mine["speedups_passed"], 0)
        self.assertEqual(
            (mine["passed"], mine["skipped"], mine["speedups_passed"]),
            (theirs["passed"], theirs["skipped"], theirs["speedups_passed"]))

    def test_allocation_in_extension_traced_at_caller(self):
        mine = binary_compat.markupsafe_traceback_check(FORK, self.built)
        self.assertEqual(mine["speedups"], self.speedups)
        self.assertTrue(mine["traced_object"])
        self.assertEqual(mine["tracebacks"], [mine["expected"]])
        theirs = binary_compat.markupsafe_traceback_check(PRISTINE,
                                                          self.built)
        self.assertEqual(len(theirs["tracebacks"]), 1)
        # Pristine names the same lines (the scripts' paths differ).
        self.assertEqual([line for _, line in theirs["tracebacks"][0]],
                         [line for _, line in mine["tracebacks"][0]])


if __name__ == "__main__":
    unittest.main()
