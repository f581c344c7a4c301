"""The differential fuzzer of the engine (Tools/fork/fuzz_differential.py)
on fixed seeds, bounded in time (issue 29, item 3.1).

Exact mode runs each seed's program on this interpreter and on pristine
CPython of the same release (found as test_tracemalloc_parity finds it:
$TRACEMALLOC_PRISTINE_PYTHON or the cache of `make bench-pristine`; the
tests skip and say why without it) and compares, after every step, the
traceback of every object and block the program holds and the live traces
of its lines.  Sampling mode runs on this interpreter only and compares the
estimates with its own exact answers within Z_BOUND standard deviations.

What the fixed seeds found on the engine before issue 29's fixes (the
binary kept at /work/oldengine/3.13/obj/python), with
`Tools/fork/fuzz_differential.py --fork-python /work/oldengine/3.13/obj/python ...`:

  exact mode, --steps 12 (PYTHONMALLOC=malloc is the seeds' own choice):
    seed 113  items 1.2/1.3: PyMem_RawRealloc() with the GIL, clear_traces()
              in sampling mode (sample=1), PyMem_RawFree(); dicts reused
              from the free list kept their first line (fork 205, pristine
              208 for one dict)
    seed 165  item 1.2: a list resized in sampling mode, freed, a tuple
              reused from the free list kept its first line
    seed 129  a tuple traced at the line of a freed block (fork None,
              pristine its line) after clear_traces(); fixed with 1.2/1.3
  sampling mode, --mode sampling --seeds 1-6:
    seeds 1, 2, 4, 5, 6  item 1.4: the inner raw blocks of a user allocator
              built on PyMem_Raw*() were sampled (seed 2: 6114 of them,
              against 21597 caller blocks; exact traces none)
  Item 1.1 (a worker's stale countdown) was not found by these seeds: the
  sampling programs do restart with new seeds while a persistent worker
  holds its countdown, but at 1024-65536 bytes the stale distance runs out
  within the run (the issue's case drew 2**40 first).

Still mismatching on the fixed engine (reported, not in the seeds below):
exact seed 165 (flaky: one dict or tuple reused untraced from a free list,
fork 1 of 10, pristine 0 or 3 of 10 from run to run), exact seeds 131, 132
with --steps 12 (fork 2 untraced tuples/dicts reused from a free list where
pristine has 4, or the other way).

A seed that mismatches on the engine of today fails its test with the
seed, the shrunk list of steps and the diff.
"""

import importlib.util
import os
import sys
import sysconfig
import tempfile
import time
import unittest

from test import support


def _load_fuzzer():
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [
        os.path.join(here, "..", "..", "Tools", "fork", "fuzz_differential.py"),
        os.path.join(os.path.dirname(here), "..", "Tools", "fork",
                     "fuzz_differential.py"),
    ]
    # from build/BASE/src/Lib/test up to the fork's checkout
    up = here
    for _ in range(6):
        up = os.path.dirname(up)
        candidates.append(os.path.join(up, "Tools", "fork",
                                       "fuzz_differential.py"))
    srcdir = sysconfig.get_config_var("srcdir") or ""
    candidates.append(os.path.join(srcdir, "Tools", "fork",
                                   "fuzz_differential.py"))
    for path in candidates:
        if os.path.exists(path):
            spec = importlib.util.spec_from_file_location(
                "fuzz_differential", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    return None


FUZZ = _load_fuzzer()

# (seed, PYTHONMALLOC or None for the seed's own choice)
EXACT_SEEDS = [(113, None), (129, None)]  # 165: flaky on the fixed engine, see above
SAMPLING_SEEDS = [2, 5]
# The whole module stops starting new seeds after this many seconds.
BUDGET = 55.0
_started = time.monotonic()


class Args:
    def __init__(self, mode, pristine=None, pythonmalloc=None):
        self.mode = mode
        self.fork_python = sys.executable
        self.pristine_python = pristine
        self.pythonmalloc = pythonmalloc
        self.steps = 12     # the seeds above were found with --steps 12
        self.shrink = 25


def _pristine():
    if FUZZ is None:
        return None, "Tools/fork/fuzz_differential.py not found"
    version = sys.version.split()[0]
    path, why = FUZZ.find_pristine(version)
    if path is None:
        return None, why
    if os.path.realpath(path) == os.path.realpath(sys.executable):
        return None, f"{path} is this interpreter, not pristine {version}"
    return path, None


def _sampling_supported():
    import tracemalloc
    try:
        tracemalloc.start(1, sample=4096)
    except (TypeError, ValueError):
        return False
    tracemalloc.stop()
    return True


@unittest.skipUnless(hasattr(os, "fork"), "needs os.fork()")
@support.requires_subprocess()
class DifferentialTest(unittest.TestCase):

    def fuzz(self, seed, mode, pristine=None, pythonmalloc=None):
        if time.monotonic() - _started > BUDGET:
            self.skipTest(f"the module's time budget ({BUDGET:.0f} s) is "
                          f"spent")
        args = Args(mode, pristine, pythonmalloc)
        with tempfile.TemporaryDirectory(prefix="fuzzdiff") as tmpdir:
            report = FUZZ.fuzz_one(seed, args, tmpdir)
        if report is not None:
            self.fail("\n" + report)

    def test_exact_against_pristine(self):
        pristine, why = _pristine()
        if pristine is None:
            self.skipTest(f"no pristine CPython to compare with: {why}")
        for seed, alloc in EXACT_SEEDS:
            with self.subTest(seed=seed, pythonmalloc=alloc):
                self.fuzz(seed, "exact", pristine, alloc)

    def test_sampling_against_exact(self):
        if FUZZ is None:
            self.skipTest("Tools/fork/fuzz_differential.py not found")
        if not _sampling_supported():
            self.skipTest("the engine has no sampling mode")
        for seed in SAMPLING_SEEDS:
            with self.subTest(seed=seed):
                self.fuzz(seed, "sampling")


if __name__ == "__main__":
    unittest.main()
