"""The fork keeps binary compatibility with extensions built for stock CPython.

On the 3.11 base: numpy, as Debian ships it for its python3.11 (compiled against stock CPython
3.11, not against this fork), must import and work with tracing off and on,
and its buffers, which it reports through PyTraceMalloc_Track() in its own
domain, must be traced with the right traceback and untracked when freed.
"""

import glob
import os
import sys
import textwrap
import unittest

from test.support.script_helper import assert_python_ok

NUMPY_DOMAIN = 389047   # NPY_TRACE_DOMAIN


# Debian's numpy is built for the system's CPython (3.11): its extension
# modules carry that version's tag, and a base of another version cannot
# import them.  Binary extensions built for stock 3.13 are tested against
# pristine 3.13.15's headers instead (issue 20, item 8).
TAG = sys.implementation.cache_tag      # 'cpython-311', 'cpython-313'


def find_numpy_site():
    for site in glob.glob("/usr/lib/python3/dist-packages"):
        if glob.glob(os.path.join(site, "numpy", "core",
                                  f"_multiarray_umath.{TAG}-*.so")):
            return site
    return None


def skip_reason():
    if not glob.glob("/usr/lib/python3/dist-packages/numpy/core/"
                     "_multiarray_umath.*.so"):
        return ("Debian's python3-numpy is not installed; .ci/run "
                "installs it")
    return (f"Debian's python3-numpy has no {TAG} build: it is built for "
            f"the system's CPython, not for this base "
            f"({sys.version.split()[0]})")


SITE = find_numpy_site()


@unittest.skipIf(SITE is None, skip_reason())
class NumpyTest(unittest.TestCase):
    def run_child(self, body, *args):
        code = f"import sys; sys.path.append({SITE!r})\n" + textwrap.dedent(body)
        rc, out, err = assert_python_ok(*args, "-c", code)
        return out.decode()

    def test_untraced(self):
        out = self.run_child("""
            import numpy as np
            a = np.arange(10**6, dtype=np.float64)
            print(float((a * 2).sum()))
        """)
        self.assertEqual(out.strip(), str(float(10**6 * (10**6 - 1))))

    def test_buffers_traced_in_numpy_domain(self):
        out = self.run_child("""
            import tracemalloc, _tracemalloc, _testtracemalloc
            import numpy as np
            tracemalloc.start(10)
            def make():
                global alloc_line
                alloc_line = sys._getframe().f_lineno + 1
                return np.empty(2_000_000)     # a C function: no frame of its own
            call_line = sys._getframe().f_lineno + 1
            a = make()
            snap = tracemalloc.take_snapshot()
            big = [t for t in snap.traces
                   if t.domain == %d and t.size == 16_000_000]
            assert len(big) == 1, big
            tb = big[0].traceback
            assert (tb[-1].filename, tb[-1].lineno) == ("<string>",
                                                        alloc_line), tb
            assert (tb[-2].filename, tb[-2].lineno) == ("<string>",
                                                        call_line), tb
            obj_tb = tracemalloc.get_object_traceback(a)
            assert obj_tb[-1].lineno == alloc_line, obj_tb
            del a
            snap = tracemalloc.take_snapshot()
            assert not [t for t in snap.traces
                        if t.domain == %d and t.size == 16_000_000]
            _testtracemalloc.check_consistency()
            print("ok")
        """ % (NUMPY_DOMAIN, NUMPY_DOMAIN))
        self.assertEqual(out.strip(), "ok")

    def test_traced_from_startup(self):
        out = self.run_child("""
            import tracemalloc, _tracemalloc, _testtracemalloc
            import numpy as np
            m = np.random.default_rng(0).random((300, 300))
            inv = np.linalg.inv(m)
            assert np.allclose(m @ inv, np.eye(300), atol=1e-6)
            current, peak = tracemalloc.get_traced_memory()
            assert peak >= current > 2 * 300 * 300 * 8, (current, peak)
            _testtracemalloc.check_consistency()
            print("ok")
        """, "-X", "tracemalloc=25")
        self.assertEqual(out.strip(), "ok")


if __name__ == "__main__":
    unittest.main()
