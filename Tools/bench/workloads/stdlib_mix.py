"""A realistic mix: a few quick stdlib test modules run in-process.

Runs test_json, test_textwrap, test_heapq, test_bisect, test_pprint and
test_csv through unittest (output captured and discarded), ``n`` times.
Tests that spawn subprocesses (test_json.test_tool), only probe the
recursion limit, or loop over all 65536 code points (test_unicode_decode)
are left out: they measure process start-up, stack overflow handling or a
single micro-loop rather than a mix.  This exercises a broad slice
of the interpreter and the standard library at once.  The check value
includes the number of tests run and of failures/errors, so a configuration
that breaks a test shows up as a mismatch.
"""
import contextlib
import io
import unittest

from _common import main

MODULES = ["test.test_json", "test.test_textwrap", "test.test_heapq",
           "test.test_bisect", "test.test_pprint", "test.test_csv"]
EXCLUDE = ("test_json.test_tool.", "test_highly_nested", "test_unicode_decode", "bigmem")


def _flatten(suite):
    for test in suite:
        if isinstance(test, unittest.TestSuite):
            yield from _flatten(test)
        else:
            yield test


def load():
    loader = unittest.TestLoader()
    tests = _flatten(loader.loadTestsFromNames(MODULES))
    return unittest.TestSuite(t for t in tests
                              if not any(x in t.id() for x in EXCLUDE))


def run(n):
    ran = failed = 0
    for _ in range(n):
        suite = load()
        stream = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            result = unittest.TextTestRunner(stream=stream, verbosity=0).run(suite)
        ran += result.testsRun
        failed += len(result.failures) + len(result.errors)
    return f"ran={ran} failed={failed}"


if __name__ == "__main__":
    load()  # import the test modules before the timed section
    main("stdlib_mix", run, 1, __doc__)
