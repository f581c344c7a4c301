"""What a leak report says holds the objects that no Python object refers
to.

A site whose objects only C code keeps (an extra Py_IncRef()) is held by
"no Python referrer", with the objects' type and refcount, found among the
engine's live blocks of the site: a bytes object is not listed by the
collector, and no container or frame refers to it, so a search from the
objects alone never saw it (the report said no object was found in the
site's live blocks).
"""

import ctypes
import gc
import os
import textwrap
import unittest

import tracemalloc
from test.support import os_helper, script_helper


def line_of(source, mark):
    """The line number (from 1) of the line of SOURCE ending with MARK."""
    for lineno, line in enumerate(source.splitlines(), 1):
        if line.rstrip().endswith(mark):
            return lineno
    raise ValueError(mark)


# bytes kept alive by a reference leaked from C: no container, frame or
# tracked object refers to them.
INCREF_LEAK = """\
import ctypes

def work():
    for i in range(20):
        b = bytes(range(i % 7, 200))    # LEAKED
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(b))
"""


class RefcountLeakHeldByTest(unittest.TestCase):
    """A non-GC object leaked by an extra Py_IncRef() is held by "no
    Python referrer", with its type and refcount."""

    def setUp(self):
        if tracemalloc.is_tracing():
            self.skipTest("tracemalloc is already tracing")

    def test_cli(self):
        directory = self.enterContext(os_helper.temp_dir())
        with open(os.path.join(directory, "increfleak.py"), "w",
                  encoding="utf-8") as file:
            file.write(INCREF_LEAK)
        res = script_helper.assert_python_failure(
            "-m", "tracemalloc", "leaks", "-q", "increfleak:work",
            __cwd=directory)
        report = res.err.decode()
        path = os.path.join(directory, "increfleak.py")
        self.assertIn(f"{path}:{line_of(INCREF_LEAK, '# LEAKED')}:", report)
        held = [line.strip() for line in report.splitlines()
                if "held by:" in line]
        self.assertTrue(held, report)
        self.assertEqual(
            held[0],
            "held by: no Python referrer (refcount 1, 0 referrer(s) found: "
            "kept by C code or a refcount leak) \u2192 bytes", report)
        self.assertIn("1 object, ", report)

    def test_testing_api(self):
        from tracemalloc import testing
        namespace = {"__name__": "leakapp_incref"}
        exec(compile(INCREF_LEAK, "<incref>", "exec"), namespace)

        class Leaky(unittest.TestCase):
            @testing.no_leaks
            def test_leak(self):
                namespace["work"]()

        result = unittest.TestResult()
        tracemalloc.start(1)
        try:
            Leaky("test_leak").run(result)
        finally:
            tracemalloc.stop()
        self.assertEqual(len(result.failures), 1, result.errors)
        message = result.failures[0][1]
        self.assertIn(f"<incref>:{line_of(INCREF_LEAK, '# LEAKED')}:",
                      message)
        self.assertIn("held by: no Python referrer (refcount 1, 0 "
                      "referrer(s) found: kept by C code or a refcount "
                      "leak) \u2192 bytes", message)

    def test_untracked_tuple_holds_its_bytes(self):
        # A tuple that the collector no longer tracks (it holds only
        # bytes), kept by C code: the tuple is the holder, its bytes are
        # under it, not holders of their own.
        from tracemalloc import retention
        leaked = []

        def release():
            for address in leaked:
                ctypes.pythonapi.Py_DecRef(ctypes.c_void_p(address))
        self.addCleanup(release)
        tracemalloc.start(1)
        self.addCleanup(tracemalloc.stop)
        namespace = {}
        exec(compile(textwrap.dedent("""\
            def make(incref, leaked):
                for i in range(5):
                    pair = (bytes(range(i, 100)), bytes(range(i, 120)))
                    incref(pair)
                    leaked.append(id(pair))
            """), "<pairs>", "exec"), namespace)
        namespace["make"](lambda obj: ctypes.pythonapi.Py_IncRef(
            ctypes.py_object(obj)), leaked)
        gc.collect()     # untracks the tuples: they hold only bytes
        result = retention.site_retention(("<pairs>", 3), max_chains=10)
        self.assertEqual(result.holders, 5, result)
        self.assertEqual(result.count, 15, result)
        for chain in result.chains:
            self.assertEqual(chain.kind, "no-referrer")
            self.assertEqual(str(chain).rsplit(" \u2192 ", 1)[1], "tuple")
            self.assertEqual((chain.count, chain.refcount), (3, 1))
            self.assertEqual(chain.types, {"tuple": 1, "bytes": 2})


if __name__ == "__main__":
    unittest.main()
