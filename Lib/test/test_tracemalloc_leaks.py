"""Tests of leak checking: tracemalloc.leaks, the CLI, unittest and pytest.

The accuracy tests run the corpus of Lib/test/tracemalloc_leakcorpus through
all four entry points: each leak pattern must be reported with its marked
line as the first site, and each clean workload must report nothing.
"""

import functools
import importlib
import importlib.util
import os
import re
import sys
import textwrap
import tracemalloc
import unittest

from test.support import import_helper, os_helper, script_helper
from test import tracemalloc_leakcorpus as corpus
from test.test_tracemalloc_cli import write_snapshots

from tracemalloc import leaks
from tracemalloc.testing import LeakCheckMixin, no_leaks, skip_leak_check

# A site line of a leak report: FILE:LINE: size=..., count=... per round
SITE_LINE = re.compile(r"^(?P<file>.+):(?P<line>\d+): size=\S+ \S+, "
                       r"count=\S+ per round")

PACKAGE_DIRECTORY = os.path.dirname(os.path.abspath(tracemalloc.__file__))
LIB_DIRECTORY = os.path.dirname(PACKAGE_DIRECTORY)


def corpus_module(name):
    """Import the corpus module *name*; one that draws random numbers
    starts again from its first seed (see the corpus), one with a reset()
    from its first state: a check that starts tracing does not trace what
    an earlier one left (the entries of a full cache, which it would see
    replaced by traced ones)."""
    if name == "leak_c_domain":
        import_helper.import_module("_testcapi")
    module = importlib.import_module(f"{corpus.__name__}.{name}")
    if hasattr(module, "reset"):
        module.reset()
    if hasattr(module, "seed"):
        module.seed(module.SEEDS[0])
    return module


def check_corpus(name, **options):
    """The LeakReport of the corpus module *name*'s run(), checked with
    *options*; the module is reset afterwards."""
    module = corpus_module(name)
    try:
        return leaks.check(module.run, **options)
    finally:
        if hasattr(module, "reset"):
            module.reset()


def site_lines(text):
    """(filename, lineno) of each site line of a leak report, in order."""
    sites = []
    for line in text.splitlines():
        match = SITE_LINE.match(line)
        if match:
            sites.append((match["file"], int(match["line"])))
    return sites


def same_file(a, b):
    return os.path.normcase(os.path.abspath(a)) == \
        os.path.normcase(os.path.abspath(b))


class CorpusAssertions:
    """Checks shared by the four entry points."""

    def assertFirstSiteMarked(self, name, sites, text=""):
        filename, lineno = corpus.marked_line(name)
        self.assertTrue(sites, f"{name}: nothing reported\n{text}")
        first_file, first_line = sites[0]
        self.assertTrue(same_file(first_file, filename) and
                        first_line == lineno,
                        f"{name}: first site {first_file}:{first_line}, "
                        f"expected the marked line {filename}:{lineno}\n"
                        f"{text}")


def child_env(**extra):
    """Environment of a child interpreter that must import the tracemalloc
    package and the corpus under test (tests may run from a source tree)."""
    paths = [LIB_DIRECTORY]
    if os.environ.get("PYTHONPATH"):
        paths.append(os.environ["PYTHONPATH"])
    env = {"PYTHONPATH": os.pathsep.join(paths), "__isolated": False}
    env.update(extra)
    return env


def run_python(*args, **env):
    """Run a child interpreter; return (returncode, stdout, stderr) as str."""
    result, _ = script_helper.run_python_until_end(*args, **child_env(**env))
    return (result.rc, result.out.decode("utf-8", "replace"),
            result.err.decode("utf-8", "replace"))


# --------------------------------------------------------------------------
# The corpus itself

class CorpusLayoutTest(unittest.TestCase):
    def test_sizes(self):
        self.assertGreaterEqual(len(corpus.LEAKS), 12)
        self.assertGreaterEqual(len(corpus.CLEAN), 8)

    def test_one_marked_line_per_leak(self):
        for name in corpus.LEAKS:
            with self.subTest(name=name):
                filename, lineno = corpus.marked_line(name)
                self.assertGreater(lineno, 0)
        for name in corpus.CLEAN:
            with self.subTest(name=name):
                self.assertRaises(ValueError, corpus.marked_line, name)


# --------------------------------------------------------------------------
# 1. The API

class CorpusAPITest(CorpusAssertions, unittest.TestCase):
    def test_leaks(self):
        for name in corpus.LEAKS:
            with self.subTest(name=name):
                report = check_corpus(name)
                self.assertTrue(report)
                self.assertFirstSiteMarked(
                    name, [(s.filename, s.lineno) for s in report.sites],
                    report.format())

    def test_clean_workloads(self):
        for name in corpus.CLEAN:
            with self.subTest(name=name):
                module = corpus_module(name)
                report = leaks.check(module.run)
                self.assertFalse(report, report.format())
                self.assertEqual(report.sites, [])


class LeakCheckAPITest(unittest.TestCase):
    def setUp(self):
        self.kept = []

    def leak(self):
        self.kept.append(bytes(1000))

    def test_report_object(self):
        report = leaks.check(self.leak, warmup=1, rounds=4, extend=0)
        self.assertTrue(report)
        self.assertTrue(report.leaked)
        self.assertEqual((report.warmup, report.rounds), (1, 4))
        site = report.sites[0]
        self.assertEqual(site.filename, __file__)
        self.assertEqual(site.lineno, self.leak.__code__.co_firstlineno + 1)
        self.assertEqual(len(site.sizes), 4)
        self.assertEqual(len(site.counts), 4)
        self.assertTrue(all(size >= 1000 for size in site.sizes), site.sizes)
        self.assertEqual(site.counts, [1, 1, 1, 1])
        self.assertEqual(site.rounds_grown, 4)
        self.assertEqual(site.size, sum(site.sizes))
        self.assertIsInstance(site.traceback, tracemalloc.Traceback)
        # The traceback is the workload's, without the checker's frames.
        filenames = [frame.filename for frame in site.traceback]
        self.assertIn(__file__, filenames)
        self.assertFalse([name for name in filenames
                          if os.path.dirname(name) == PACKAGE_DIRECTORY])
        self.assertEqual(len(report.sizes), 4)
        self.assertEqual(len(report.counts), 4)

    def test_report_text(self):
        report = leaks.check(self.leak, title="my test")
        text = report.format()
        lines = text.splitlines()
        self.assertIn("my test", lines[0])
        self.assertEqual(site_lines(text)[0],
                         (__file__, self.leak.__code__.co_firstlineno + 1))
        self.assertRegex(lines[1], r"size=10\d\d B, count=1 per round "
                                   r"\(grew in (\d+) of \1 rounds\)$")
        self.assertEqual(lines[2].strip(),
                         "self.kept.append(bytes(1000))")
        self.assertIn("Traceback (most recent call first):", lines[3])
        self.assertEqual(str(report), text)

    def test_min_rounds_every_round_when_extended(self):
        # Issue 31 review (s38), finding F5: min_rounds=rounds means every
        # measured round, when the check added rounds too.
        calls = [0]

        def every_other_call():
            calls[0] += 1
            if calls[0] % 2:
                self.kept.append(bytes(500))

        report = leaks.check(every_other_call, rounds=4, min_rounds=4,
                             retention=False)
        self.assertEqual(report.rounds, 4 + leaks.DEFAULT_EXTEND)
        self.assertFalse(report, report.format())
        self.assertEqual(report.min_rounds, report.rounds)
        report = leaks.check(self.leak, rounds=4, min_rounds=4,
                             retention=False)
        self.assertTrue(report)
        self.assertEqual(report.sites[0].rounds_grown, report.rounds)
        # 3 of 4 rounds: 9 of the 12.
        report = leaks.check(self.leak, rounds=4, min_rounds=3, extend=8,
                             retention=False)
        self.assertEqual(report.min_rounds, 9)
        self.assertTrue(report)

    def test_clean(self):
        report = leaks.check(lambda: [bytes(1000) for _ in range(10)])
        self.assertFalse(report)
        self.assertIn("no allocation site grew", report.format())

    def test_assert_no_leaks(self):
        with self.assertRaises(leaks.LeakError) as cm:
            leaks.assert_no_leaks(self.leak)
        self.assertIsInstance(cm.exception, AssertionError)
        self.assertEqual(str(cm.exception), cm.exception.report.format())
        self.assertFalse(leaks.assert_no_leaks(lambda: None))

    def test_block_form(self):
        with self.assertRaises(leaks.LeakError) as cm:
            with leaks.LeakCheck(warmup=1, rounds=3) as check:
                for _ in check:
                    self.kept.append(bytearray(500))     # the leaking line
        with open(__file__, encoding="utf-8") as source:
            line = [lineno for lineno, text in enumerate(source, 1)
                    if text.rstrip().endswith("# the leaking line")][0]
        report = cm.exception.report
        self.assertIs(check.report, report)
        self.assertEqual((report.sites[0].filename, report.sites[0].lineno),
                         (__file__, line))

        rounds = []
        with leaks.LeakCheck(warmup=2, rounds=3, extend=0) as check:
            for index in check:
                rounds.append(index)
                [bytes(100) for _ in range(10)]
        self.assertEqual(rounds, [0, 1, 2, 3, 4])
        self.assertFalse(check.report)

    def test_threshold(self):
        self.assertTrue(leaks.check(self.leak, threshold=500))
        self.assertFalse(leaks.check(self.leak, threshold=10_000))

    def test_min_rounds(self):
        calls = []

        def every_other_call():
            calls.append(None)
            if len(calls) % 2:
                self.kept.append(bytes(2000))
        # Half the rounds grow: the level keeps rising, a leak.  With
        # min_rounds=4, a site must also grow in 4 rounds (of 5, here).
        report = leaks.check(every_other_call)
        self.assertTrue(report)
        rounds = report.rounds
        self.assertIn(report.sites[0].rounds_grown,
                      (rounds // 2, (rounds + 1) // 2))
        report = leaks.check(every_other_call, rounds=5, extend=0)
        self.assertIn(report.sites[0].rounds_grown, (2, 3))
        self.assertFalse(leaks.check(every_other_call, rounds=5, extend=0,
                                     min_rounds=4))

    def test_warmup_absorbs_one_time_growth(self):
        cache = {}

        def fill_once():
            if not cache:
                cache.update((n, str(n) * 10) for n in range(100))
        self.assertFalse(leaks.check(fill_once, warmup=1))
        # Without warm-up, the first round's growth is measured, but it
        # happens in one round only.
        self.assertFalse(leaks.check(fill_once, warmup=0))

    def test_cleared_caches_are_not_leaks(self):
        # A new regular expression per round: re's cache grows until
        # clear_caches() purges it before each snapshot.
        import re as re_module
        counter = iter(range(10**6))

        def compile_new_pattern():
            re_module.compile(f"x{next(counter)}y+z")
        self.assertFalse(leaks.check(compile_new_pattern))
        self.assertTrue(leaks.check(compile_new_pattern, cleanup=False))
        re_module.purge()

    def test_custom_cleanup(self):
        registry = []

        def register():
            registry.append(bytes(500))
        self.assertTrue(leaks.check(register))
        self.assertFalse(leaks.check(register, cleanup=registry.clear))

    def test_tracing_state_restored(self):
        if tracemalloc.is_tracing():
            self.skipTest("tracing is already on")
        leaks.check(lambda: None, nframe=3)
        self.assertFalse(tracemalloc.is_tracing())
        tracemalloc.start(7)
        try:
            report = leaks.check(self.leak)
            self.assertTrue(tracemalloc.is_tracing())
            self.assertEqual(tracemalloc.get_traceback_limit(), 7)
            self.assertEqual(report.traceback_limit, 7)
        finally:
            tracemalloc.stop()

    def test_nframe(self):
        if tracemalloc.is_tracing():
            self.skipTest("tracing is already on")
        report = leaks.check(self.leak, nframe=1)
        self.assertEqual(report.traceback_limit, 1)
        self.assertEqual(len(report.sites[0].traceback), 1)

    def test_own_allocations_are_not_reported(self):
        # Whatever the checker holds (per-round totals, snapshots with
        # keep_snapshots) is never reported, even over many rounds.
        check = leaks.LeakCheck(rounds=8, keep_snapshots=True)
        report = check.run(lambda: None)
        self.assertFalse(report, report.format())
        self.assertIsInstance(check.first_snapshot, tracemalloc.Snapshot)
        self.assertIsInstance(check.last_snapshot, tracemalloc.Snapshot)
        report = leaks.check(self.leak, rounds=8)
        self.assertEqual(len(report.sites), 1, report.format())

    def test_exception_propagates(self):
        def fail():
            raise KeyError("boom")
        with self.assertRaises(KeyError):
            leaks.check(fail)

    def test_invalid_options(self):
        for options in ({"rounds": 0}, {"warmup": -1}, {"threshold": -1},
                        {"rounds": 3, "min_rounds": 4},
                        {"min_rounds": 0}):
            with self.subTest(options=options):
                self.assertRaises(ValueError, leaks.LeakCheck, **options)


class NoiseTest(unittest.TestCase):
    """What grows once, or is emptied before each snapshot, is no leak."""

    def assertNoLeak(self, workload, **options):
        report = leaks.check(workload, **options)
        self.assertFalse(report, report.format())

    def test_lazily_imported_module(self):
        directory = self.enterContext(os_helper.temp_dir())
        script_helper.make_script(directory, "tm_lazy_module",
                                  "TABLE = {n: str(n) * 10 for n in "
                                  "range(500)}\n")
        self.enterContext(import_helper.DirsOnSysPath(directory))
        self.addCleanup(import_helper.unload, "tm_lazy_module")

        def workload():
            import tm_lazy_module
            return len(tm_lazy_module.TABLE)
        self.assertNoLeak(workload)

    def test_interned_strings(self):
        def workload():
            for n in range(200):
                sys.intern("tm interned string %d" % n)
        self.assertNoLeak(workload)

    def test_function_cache_first_fill(self):
        @functools.cache
        def square(n):
            return [n] * n

        def workload():
            for n in range(100):
                square(n)
        self.assertNoLeak(workload)

    def test_warnings_registry(self):
        import warnings

        def workload():
            with warnings.catch_warnings(record=True):
                warnings.simplefilter("default")
                warnings.warn("tm noise", UserWarning)
        self.assertNoLeak(workload)

    def test_linecache(self):
        import traceback

        def workload():
            try:
                raise ValueError("formatted")
            except ValueError:
                return traceback.format_exc()
        self.assertNoLeak(workload)

    def test_free_lists_and_type_cache(self):
        def workload():
            values = [float(n) for n in range(1000)]
            pairs = [(n, n) for n in range(1000)]
            cls = type("Temporary", (), {"attribute": 1})
            return sum(values), len(pairs), cls().attribute
        self.assertNoLeak(workload)


# --------------------------------------------------------------------------
# 1b. The verdict: the level, not the sign of each round

def levels_to_sizes(levels):
    """Growth per round of a site whose levels are *levels* (L0 first)."""
    return [b - a for a, b in zip(levels, levels[1:])]


def workload_call_line():
    """(filename, lineno) of the checker's line that calls the workload."""
    from tracemalloc import _leakcore
    code = _leakcore.call_workload.__code__
    return (code.co_filename,
            max(line for _, _, line in code.co_lines() if line is not None))


class VerdictRuleTest(unittest.TestCase):
    """Both sides of the rule of Doc/library/tracemalloc.rst, "How the
    checker decides", on made-up levels."""

    def assertLeak(self, levels, **options):
        from tracemalloc._leakcore import is_leak
        self.assertTrue(is_leak(levels_to_sizes(levels), **options), levels)

    def assertNoLeak(self, levels, **options):
        from tracemalloc._leakcore import is_leak
        self.assertFalse(is_leak(levels_to_sizes(levels), **options),
                         levels)

    def test_leaks(self):
        unit = 1057
        for levels in ([0, 1, 2, 3, 4, 5],      # every round
                       [0, 1, 1, 2, 2, 3],      # every other round
                       [0, 0, 1, 1, 2, 2],      # the other phase of it
                       [0, 1, 2, 2, 3, 4],      # a flat round
                       [0, 1, 2, 1, 2, 3]):     # one round gives back a bit
            with self.subTest(levels=levels):
                self.assertLeak([level * unit for level in levels])
        # More rounds see a slower leak: every third round over 10.
        self.assertLeak([level * unit for level in
                         [0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]])

    def test_not_leaks(self):
        unit = 1057
        # A buffer cleared every 4 rounds, in each of its 4 phases.
        for phase in range(4):
            levels = [(phase + n) % 4 for n in range(6)]
            with self.subTest(buffer_phase=phase):
                self.assertNoLeak([level * unit for level in levels])
        for levels in ([0, 0, 0, 1, 1, 1],      # one step, once
                       [0, 1, 0, 1, 0, 1],      # up and down
                       [4, 0, 1, 2, 3, 4],      # a drop, then refilling
                       [0, 0, 0, 0, 0, 0],
                       [0, -1, -2, -3, -4, -5]):
            with self.subTest(levels=levels):
                self.assertNoLeak([level * unit for level in levels])

    def test_issue_round_sizes(self):
        # The growth per round quoted in the bug report: a list cleared
        # every 4 calls, and a leak in every other round.
        from tracemalloc._leakcore import is_leak
        self.assertFalse(is_leak([1057, 1057, -3171, 1057, 1057]))
        self.assertTrue(is_leak([4057, 0, 4057, 0, 4057]))

    def test_blocks_replaced_or_resized(self):
        from tracemalloc._leakcore import is_leak
        no_blocks = [0] * 5
        # A full cache swapping entries of random sizes: the total wanders
        # up (with a fall on the way), the number of blocks stays.
        wandering = [1368, 672, 669, 775, -100]
        self.assertTrue(is_leak(wandering))
        self.assertFalse(is_leak(wandering, no_blocks))
        # The same sizes with a block more each round: a leak.
        self.assertTrue(is_leak(wandering, [1] * 5))
        # One buffer that keeps growing, never falling: a leak.
        self.assertTrue(is_leak([1000, 0, 2000, 1000, 4000], no_blocks))

    def test_threshold_and_min_rounds(self):
        self.assertLeak([0, 100, 200, 300, 400, 500], threshold=100)
        self.assertNoLeak([0, 100, 200, 300, 400, 500], threshold=101)
        self.assertLeak([0, 10, 10, 20, 20, 30], min_rounds=3)
        self.assertNoLeak([0, 10, 10, 20, 20, 30], min_rounds=4)

    def test_few_rounds(self):
        self.assertLeak([0, 1])
        self.assertNoLeak([0, 0])
        self.assertLeak([0, 1, 2])
        self.assertNoLeak([0, 1, 1])


class AdaptiveRoundsTest(unittest.TestCase):
    """Few rounds while nothing is suspect; more, to confirm, when a site
    is; a leak only if they confirm it (issue 31, item 2)."""

    def test_nothing_suspect_runs_few_rounds(self):
        check = leaks.LeakCheck()
        report = check.run(lambda: [bytes(1000) for _ in range(10)])
        self.assertFalse(report)
        self.assertFalse(check.extended)
        self.assertEqual(report.rounds, leaks.DEFAULT_ROUNDS)
        self.assertEqual(check.planned_rounds,
                         leaks.DEFAULT_WARMUP + leaks.DEFAULT_ROUNDS)

    def test_leak_is_confirmed_over_added_rounds(self):
        kept = []
        check = leaks.LeakCheck()
        report = check.run(lambda: kept.append(bytes(500)))
        self.assertTrue(report)
        self.assertTrue(check.extended)
        self.assertEqual(report.rounds,
                         leaks.DEFAULT_ROUNDS + leaks.DEFAULT_EXTEND)
        self.assertEqual(len(kept), leaks.DEFAULT_WARMUP
                         + leaks.DEFAULT_ROUNDS + leaks.DEFAULT_EXTEND)
        self.assertIn("added to confirm a suspect site", report.format())

    def test_slow_bounded_cache_passes(self):
        # A strong cache of 8 entries whose blocks go 4, 4, 5, 5, 6, 7, 8,
        # 8, then stay flat (python-dateutil's tz cache): suspect after the
        # screening rounds, clean over the added ones.
        module = corpus_module("clean_slow_cache")
        module.reset()
        check = leaks.LeakCheck()
        try:
            report = check.run(module.run)
        finally:
            module.reset()
        self.assertFalse(report, report.format())
        self.assertTrue(check.extended)
        # The previous defaults (2 warm-up, 5 measured rounds, none added)
        # took it for a leak: the case that the added rounds fix.
        try:
            report = leaks.check(module.run, warmup=2, rounds=5, extend=0)
        finally:
            module.reset()
        self.assertTrue(report)

    def test_every_corpus_leak_still_found(self):
        for name in corpus.LEAKS:
            with self.subTest(name=name):
                report = check_corpus(name)
                self.assertTrue(report, name)
                site = report.sites[0]
                self.assertEqual((site.filename, site.lineno),
                                 corpus.marked_line(name))

    def test_slow_and_small_leaks_found(self):
        kept = []
        calls = [0]

        def every_third_call():
            calls[0] += 1
            if calls[0] % 3 == 0:
                kept.append(bytes(3000))

        def small():
            kept.append(1.5 * len(kept))      # a float: 24 bytes a call

        # A leak every third call grows once in 4 screening rounds in some
        # phases (a limit of the defaults, documented): 6 rounds see it
        # twice, in every phase.
        for workload, options in ((every_third_call, {"rounds": 6}),
                                  (small, {})):
            for warmup in (1, 2, 3):          # every phase
                with self.subTest(workload=workload.__name__,
                                  warmup=warmup):
                    calls[0] = 0
                    report = leaks.check(workload, warmup=warmup, **options)
                    kept.clear()
                    self.assertTrue(report)

    def test_rule(self):
        from tracemalloc._leakcore import _still_rising, is_suspect
        unit = 1000
        # Suspect: a leak, or a rise that grew in two screening rounds at
        # least (a leak every other round, either phase); not a step made
        # once, nor a level that gives back what it took.
        for sizes in ([1, 1, 1, 1], [0, 1, 0, 1], [1, 0, 1, 0],
                      [0, 1, 1, 0]):
            with self.subTest(suspect=sizes):
                self.assertTrue(is_suspect([unit * n for n in sizes]))
        for sizes in ([1, 0, 0, 0], [0, 0, 0, 1], [0, 0, 0, 0],
                      [1, -1, 1, 0], [2, -2, 1, 1]):
            with self.subTest(not_suspect=sizes):
                self.assertFalse(is_suspect([unit * n for n in sizes]))
        # Still rising in the last third of the levels.
        self.assertTrue(_still_rising([1] * 11))
        self.assertTrue(_still_rising([0, 1] * 5 + [0]))
        self.assertTrue(_still_rising([0, 0, 1] * 4))
        # The slow cache: 4 4 5 5 6 7 8 8 8 ... blocks, from the base.
        self.assertFalse(_still_rising([0, 1, 0, 1, 1, 1, 0, 0, 0, 0, 0]))

    def test_rule_blocks_stop(self):
        # Issue 31 review (s38), finding F1: a full lru_cache(maxsize=8)
        # fed a new key per call: its dict is rebuilt once at a bigger
        # size in the last third (+280 B), its blocks stopped rising.
        from tracemalloc._leakcore import _still_rising, _stopped
        sizes = [56, 56, 56, 56, 184, 56, 56, 0, 0, 280, 0, 0]
        counts = [1] * 7 + [0] * 5
        self.assertTrue(_still_rising(sizes))
        self.assertFalse(_still_rising(sizes, counts))
        # Its strings, a byte longer once the keys gain a digit.
        self.assertFalse(_still_rising([51] * 7 + [0, 0, 1, 1, 1], counts))
        # A FIFO of 11 entries: full in the 10th measured round.
        counts = [1] * 10 + [0, 0]
        self.assertTrue(_stopped(counts))
        self.assertFalse(_still_rising([133] * 9 + [413, 0, 0], counts))
        # ... not one of 12, whose blocks grew one round before the end.
        self.assertFalse(_stopped([1] * 11 + [0]))
        # A leak every call, every other call, every third call (in each
        # phase) has not stopped, and a buffer that keeps as many blocks
        # is judged by its bytes.
        for period in (1, 2, 3):
            for phase in range(period):
                counts = [int((index + phase) % period == 0)
                          for index in range(12)]
                with self.subTest(period=period, phase=phase):
                    self.assertFalse(_stopped(counts))
                    self.assertTrue(_still_rising(
                        [1000 * count for count in counts], counts))
        self.assertTrue(_still_rising([8] * 12, [0] * 12))

    def test_many_new_call_contexts_per_round(self):
        # A round that makes thousands of new call contexts: the check's
        # state pins the engine's tree, which is then not compacted (that
        # would renumber the contexts), and the check gives its verdict.
        codes = [compile(f"def f():\n    return [{n}] * {n % 7}\n",
                         f"<context {n}>", "exec") for n in range(6000)]
        made = [0]
        kept = []

        def new_contexts():
            start = made[0] * 500 % len(codes)
            made[0] += 1
            for code in codes[start:start + 500]:
                namespace = {}
                exec(code, namespace)
                namespace["f"]()
            kept.append(bytes(2000))
        report = leaks.check(new_contexts)
        self.assertTrue(report)
        self.assertEqual(report.sites[0].lineno,
                         new_contexts.__code__.co_firstlineno + 7)

    def test_freeze_during_the_check(self):
        import gc
        seen = []
        leaks.check(lambda: seen.append(gc.get_freeze_count() > 0),
                    extend=0)
        self.assertTrue(all(seen), seen)
        self.assertEqual(gc.get_freeze_count(), 0)
        # A cycle made during the check is collected in its rounds: no
        # leak.
        def cycles():
            a = []
            a.append(a)
            a.append(bytes(1000))
        self.assertFalse(leaks.check(cycles))
        seen.clear()
        leaks.check(lambda: seen.append(gc.get_freeze_count()), freeze=False,
                    extend=0)
        self.assertEqual(set(seen), {0})
        # A program that froze objects itself keeps them frozen.
        gc.freeze()
        try:
            count = gc.get_freeze_count()
            leaks.check(lambda: None)
            self.assertEqual(gc.get_freeze_count(), count)
        finally:
            gc.unfreeze()

    def test_no_snapshot_per_round(self):
        # The rounds read the per-call-context totals: no trace export.
        calls = []
        original = tracemalloc._get_traces

        def counting():
            calls.append(None)
            return original()
        tracemalloc._get_traces = counting
        try:
            kept = []
            report = leaks.check(lambda: kept.append(bytes(100)))
        finally:
            tracemalloc._get_traces = original
        self.assertTrue(report)
        self.assertEqual(calls, [])

    def test_live_totals_diff(self):
        import _tracemalloc
        with self.assertRaises(TypeError):
            _tracemalloc._live_totals_diff(b"not a state")
        was_tracing = tracemalloc.is_tracing()
        if was_tracing:
            self.skipTest("tracing already on")
        with self.assertRaises(RuntimeError):
            _tracemalloc._live_totals_diff(None)
        tracemalloc.start(5)
        try:
            state, changes = _tracemalloc._live_totals_diff(None)
            self.assertIsNone(changes)
            kept = [bytearray(10_000)]      # the line kept
            state, changes = _tracemalloc._live_totals_diff(state)
            mine = [change for change in changes
                    if change[1][0][0] == __file__]
            self.assertTrue(any(size >= 10_000 and count >= 1
                                for domain, frames, size, count in mine),
                            changes)
            del kept
            state, changes = _tracemalloc._live_totals_diff(state)
            self.assertTrue(any(size <= -10_000 for _, frames, size, _
                                in changes if frames[0][0] == __file__),
                            changes)
            # clear_traces() renumbers: no comparison.
            tracemalloc.clear_traces()
            state, changes = _tracemalloc._live_totals_diff(state)
            self.assertIsNone(changes)
        finally:
            tracemalloc.stop()


class BoundedAndIntermittentTest(unittest.TestCase):
    """The checker on real workloads whose level goes up and down, and on
    leaks that skip rounds (issue 21, item 6 and the first part of 7)."""

    def test_bounded_buffer(self):
        for rounds in (5, 10):
            with self.subTest(rounds=rounds):
                report = check_corpus("clean_bounded_buffer",
                                           rounds=rounds)
                self.assertFalse(report, report.format())

    def test_memory_handler(self):
        report = check_corpus("clean_memory_handler")
        self.assertFalse(report, report.format())

    def test_random_bounded_cache_with_each_seed(self):
        clean = corpus_module("clean_random_cache")
        leaky = corpus_module("leak_random_cache")
        filename, lineno = corpus.marked_line("leak_random_cache")
        for seed in clean.SEEDS:
            with self.subTest(seed=seed):
                clean.seed(seed)
                report = leaks.check(clean.run)
                self.assertFalse(report, report.format())
                # The same cache with a leak beside it: found.
                leaky.seed(seed)
                try:
                    report = leaks.check(leaky.run)
                finally:
                    leaky.reset()
                self.assertEqual(
                    [(s.filename, s.lineno) for s in report.sites][:1],
                    [(filename, lineno)], report.format())

    def test_leak_every_other_round(self):
        for warmup in (2, 3):           # both phases
            with self.subTest(warmup=warmup):
                report = check_corpus("leak_every_other_round",
                                           warmup=warmup)
                site = report.sites[0]
                self.assertEqual((site.filename, site.lineno),
                                 corpus.marked_line(
                                     "leak_every_other_round"))
                rounds = len(site.sizes)
                self.assertIn(site.rounds_grown,
                              (rounds // 2, (rounds + 1) // 2))


HARNESS_THREAD = """
import threading

received = []
request = threading.Semaphore(0)
done = threading.Semaphore(0)

stopping = False

def serve():
    while True:
        request.acquire()
        if stopping:
            return
        received.append(bytearray(1000))    # a message kept by the harness
        done.release()

thread = threading.Thread(target=serve)
thread.start()

def workload():
    request.release()
    done.acquire()

def stop():
    global stopping
    stopping = True
    request.release()
    thread.join()
"""


class HarnessThreadTest(unittest.TestCase):
    """A thread of the code that runs the workload (pytest-xdist's execnet
    receiving its controller's messages) allocates while the check runs:
    with its directory in harness_directories, that is not the workload's
    leak; without, a thread's growth is the workload's (it may have
    started the thread)."""

    def setUp(self):
        directory = self.enterContext(os_helper.temp_dir())
        with open(os.path.join(directory, 'harness_mod.py'), 'w') as f:
            f.write(HARNESS_THREAD)
        self.enterContext(import_helper.DirsOnSysPath(directory))
        self.addCleanup(import_helper.unload, 'harness_mod')
        import harness_mod
        self.addCleanup(harness_mod.stop)
        self.module = harness_mod
        self.directory = directory

    def test_harness_thread_is_not_the_workload(self):
        report = leaks.check(self.module.workload,
                             harness_directories=[self.directory])
        self.assertFalse(report, report.format())

    def test_other_threads_are_the_workload(self):
        report = leaks.check(self.module.workload)
        self.assertTrue(report)
        self.assertEqual(report.sites[0].filename, self.module.__file__)


class AttributionTest(unittest.TestCase):
    """The target's allocations are never the checker's (issue 21, item 7):
    C callables given directly, and finalizers run by the checker's own
    collection."""

    def setUp(self):
        self.kept = []

    def assertLeaksFirstAt(self, workload, line):
        """*workload* leaks, most at *line* of this file."""
        report = leaks.check(workload)
        self.assertTrue(report, report.format())
        self.assertEqual((report.sites[0].filename, report.sites[0].lineno),
                         (__file__, line))

    def test_c_callable_partial(self):
        # The list grows by 200 items a round: its array of pointers.
        report = leaks.check(functools.partial(self.kept.extend,
                                               range(200)))
        self.assertTrue(report, report.format())
        site = report.sites[0]
        # No line of the target runs: the site is the checker's call line,
        # said to be C code called as the workload.
        self.assertEqual((site.filename, site.lineno), workload_call_line())
        self.assertEqual(len(site.traceback), 1)
        self.assertIn("C code called directly as the workload",
                      report.format())
        self.kept.clear()
        # Iterating a range of large numbers makes new int objects: 200
        # blocks a round more, on the same line.
        report = leaks.check(functools.partial(self.kept.extend,
                                               range(10**6, 10**6 + 200)))
        site = report.sites[0]
        self.assertEqual((site.filename, site.lineno), workload_call_line())
        # (The median round: one round can see an int of a free list.)
        self.assertGreaterEqual(sorted(site.counts)[len(site.counts) // 2],
                                200, site.counts)

    def test_c_methods(self):
        import collections
        buffer = bytearray()
        queue = collections.deque()
        for workload in (functools.partial(buffer.extend, bytes(1000)),
                         functools.partial(queue.extend, range(200))):
            with self.subTest(workload=workload):
                report = leaks.check(workload)
                self.assertEqual([(s.filename, s.lineno)
                                  for s in report.sites][:1],
                                 [workload_call_line()], report.format())

    def test_c_callable_corpus(self):
        for name in corpus.C_CALLABLE_LEAKS:
            with self.subTest(name=name):
                report = check_corpus(name)
                self.assertEqual([(s.filename, s.lineno)
                                  for s in report.sites][:1],
                                 [workload_call_line()], report.format())

    def test_finalizer_leaks(self):
        class Resource:
            def __init__(self):
                self.myself = self

            def __del__(this):
                self.kept.append(bytes(3000))       # the finalizer's line
        self.assertLeaksFirstAt(Resource,
                                Resource.__del__.__code__.co_firstlineno + 1)

    def test_weakref_finalize_leaks(self):
        import weakref

        class Session:
            pass

        def closed():
            self.kept.append(bytes(2500))           # the callback's line

        def workload():
            session = Session()
            session.myself = session
            weakref.finalize(session, closed)
        self.assertLeaksFirstAt(workload,
                                closed.__code__.co_firstlineno + 1)

    def test_finalizer_in_block_form(self):
        class Resource:
            def __init__(self):
                self.myself = self

            def __del__(this):
                self.kept.append(bytes(3000))
        with self.assertRaises(leaks.LeakError):
            with leaks.LeakCheck() as check:
                for _ in check:
                    Resource()

    def test_checker_memory_still_not_reported(self):
        # The checker's own work, including the frames objects of its call
        # line pinned by a workload that keeps its frames, is not reported
        # as the workload's beyond the workload's own lines.
        errors = []

        def fail_and_keep():
            try:
                raise ValueError("x" * 100)
            except ValueError as exc:
                errors.append(exc)
        report = leaks.check(fail_and_keep)
        self.assertTrue(report)
        from tracemalloc import _leakcore
        own = _leakcore.package_files()
        self.assertEqual([site for site in report.sites
                          if site.filename in own], [], report.format())


class NoVerdictTest(unittest.TestCase):
    """A check that could not see the memory raises LeakCheckError instead
    of passing (issue 21, item 8)."""

    def tearDown(self):
        corpus_module("stop_tracing").reset()

    def test_tracing_broken_by_the_target(self):
        module = corpus_module("stop_tracing")
        for name in ("run", "clear", "restart"):
            for warmup in (0, 2):
                with self.subTest(name=name, warmup=warmup):
                    with self.assertRaises(leaks.LeakCheckError):
                        leaks.check(getattr(module, name), warmup=warmup)
                    self.assertFalse(tracemalloc.is_tracing())

    def test_tracing_broken_in_block_form(self):
        module = corpus_module("stop_tracing")
        with self.assertRaises(leaks.LeakCheckError):
            with leaks.LeakCheck() as check:
                for _ in check:
                    module.clear()
        self.assertIsNone(check.report)
        self.assertFalse(tracemalloc.is_tracing())

    def test_tracing_broken_with_tracing_on_before(self):
        if tracemalloc.is_tracing():
            self.skipTest("tracing is already on")
        module = corpus_module("stop_tracing")
        tracemalloc.start(5)
        try:
            with self.assertRaises(leaks.LeakCheckError):
                leaks.check(module.clear)
        finally:
            tracemalloc.stop()

    def test_block_never_iterated(self):
        with self.assertRaises(leaks.LeakCheckError):
            with leaks.LeakCheck():
                pass

    def test_block_left_with_break(self):
        with self.assertRaises(leaks.LeakCheckError):
            with leaks.LeakCheck() as check:
                for index in check:
                    if index == 3:
                        break
        self.assertIsNone(check.report)
        self.assertFalse(tracemalloc.is_tracing())

    def test_block_with_run(self):
        with leaks.LeakCheck() as check:
            check.run(lambda: None)
        self.assertFalse(check.report)

    def test_failing_first_snapshot_stops_tracing(self):
        if tracemalloc.is_tracing():
            self.skipTest("tracing is already on")

        def failing_cleanup():
            raise OSError("cleanup failed")
        for warmup in (0, 1):
            with self.subTest(warmup=warmup):
                with self.assertRaises(OSError):
                    leaks.check(lambda: None, warmup=warmup,
                                cleanup=failing_cleanup)
                self.assertFalse(tracemalloc.is_tracing())
                with self.assertRaises(OSError):
                    with leaks.LeakCheck(warmup=warmup,
                                         cleanup=failing_cleanup) as check:
                        for _ in check:
                            pass
                self.assertFalse(tracemalloc.is_tracing())

    def test_cli_exit_status(self):
        target = f"{corpus.__name__}.stop_tracing"
        for name in ("run", "clear", "restart"):
            with self.subTest(name=name):
                rc, out, err = run_python("-m", "tracemalloc", "leaks",
                                          f"{target}:{name}")
                self.assertEqual(rc, 2, err)
                self.assertIn("LeakCheckError", err)
                self.assertIn("no verdict", err)
                self.assertNotIn("no allocation site grew", err)


class ReportTextTest(unittest.TestCase):
    def make_report(self, sites, frames=8):
        from tracemalloc._leakcore import LeakReport, LeakSite
        traceback = tracemalloc.Traceback(
            tuple((f"f{n}.py", n + 1) for n in range(frames)))
        return LeakReport(
            [LeakSite(f"site{n}.py", 1, [100] * 5, [1] * 5, traceback)
             for n in range(sites)],
            warmup=2, rounds=5, threshold=1, min_rounds=1,
            traceback_limit=25, sizes=[100] * 5, counts=[1] * 5)

    def test_whole_counts_per_round(self):
        from tracemalloc._leakcore import LeakSite
        traceback = tracemalloc.Traceback((("f.py", 1),))
        site = LeakSite("f.py", 1, [100] * 5, [1, 1, 2, 1, 1], traceback)
        line = site.format()[0]
        # One object a call, one more once: a whole number, "about".
        self.assertIn("count=1 per round (about: 6 blocks in 5 rounds; "
                      "grew in 5 of 5 rounds)", line)
        self.assertNotIn("1.2", line)
        site = LeakSite("f.py", 1, [100] * 5, [2] * 5, traceback)
        self.assertIn("count=2 per round (grew in 5 of 5 rounds)",
                      site.format()[0])
        site = LeakSite("f.py", 1, [100] * 5, [1, 0, 0, 0, 0], traceback)
        self.assertIn("count=1 per round (about: 1 block in 5 rounds",
                      site.format()[0])

    def test_other_sites_plural(self):
        text = self.make_report(11).format()
        self.assertIn("\n1 other leaking site: size=100 B per round", text)
        text = self.make_report(12).format()
        self.assertIn("\n2 other leaking sites: size=200 B per round", text)

    def test_traceback_order_is_said(self):
        text = self.make_report(1).format()
        self.assertIn("Traceback (most recent call first):", text)
        lines = text.splitlines()
        start = lines.index("  Traceback (most recent call first):")
        self.assertEqual(lines[start + 1].strip(), 'File "f0.py", line 1')
        self.assertEqual(lines[-1].strip(), 'File "f7.py", line 8')

    def test_frames_cut(self):
        text = self.make_report(2).format(frames=3, more="how to see all")
        self.assertIn("... 5 frames left out ...", text)
        self.assertIn('File "f0.py", line 1', text)
        self.assertIn('File "f1.py", line 2', text)
        self.assertNotIn('File "f2.py"', text)
        self.assertIn('File "f7.py", line 8', text)
        self.assertTrue(text.endswith("how to see all"))
        self.assertNotIn("how to see all",
                         self.make_report(2, frames=3).format(
                             frames=3, more="how to see all"))


class TargetResolutionTest(unittest.TestCase):
    def test_class_method(self):
        from tracemalloc._leakcore import resolve_target, TargetError
        directory = self.enterContext(os_helper.temp_dir())
        script_helper.make_script(directory, "tm_target_module",
                                  textwrap.dedent("""\
            class Service:
                def __init__(self):
                    self.items = []

                def handle(self):
                    self.items.append(1)
                    return len(self.items)

                @staticmethod
                def ping():
                    return "pong"

                @classmethod
                def name(cls):
                    return cls.__name__

            class NeedsArguments:
                def __init__(self, value):
                    pass

                def run(self):
                    pass
        """))
        self.enterContext(import_helper.DirsOnSysPath(directory))
        self.addCleanup(import_helper.unload, "tm_target_module")
        handle = resolve_target("tm_target_module:Service.handle")
        self.assertEqual((handle(), handle()), (1, 2))
        self.assertEqual(resolve_target("tm_target_module:Service.ping")(),
                         "pong")
        self.assertEqual(resolve_target("tm_target_module:Service.name")(),
                         "Service")
        with self.assertRaisesRegex(TargetError, "without arguments"):
            resolve_target("tm_target_module:NeedsArguments.run")
        for spec in ("tm_target_module:Missing", ":run", "tm_target_module",
                     "no_such_module_for_tracemalloc:run"):
            with self.subTest(spec=spec):
                self.assertRaises(TargetError, resolve_target, spec)


class StripToolFramesTest(unittest.TestCase):
    def test_strip(self):
        from tracemalloc import _leakcore
        own = os.path.join(PACKAGE_DIRECTORY, "leaks.py")
        harness = os.path.join(os.path.dirname(unittest.__file__), "case.py")
        traceback = tracemalloc.Traceback((("a.py", 1), ("b.py", 2),
                                           (harness, 3), ("c.py", 4),
                                           (own, 5)))
        self.assertEqual(
            list(_leakcore.strip_tool_frames(traceback)),
            list(tracemalloc.Traceback((("a.py", 1), ("b.py", 2),
                                        (harness, 3), ("c.py", 4)))))
        self.assertEqual(
            list(_leakcore.strip_tool_frames(
                traceback, [os.path.dirname(harness)])),
            list(tracemalloc.Traceback((("a.py", 1), ("b.py", 2)))))
        # The most recent frame is kept even when it is the tool's.
        only_own = tracemalloc.Traceback(((own, 5), ("c.py", 4)))
        self.assertEqual(
            list(_leakcore.strip_tool_frames(only_own)),
            list(tracemalloc.Traceback(((own, 5),))))


# --------------------------------------------------------------------------
# 2. The command line

class CorpusCLITest(CorpusAssertions, unittest.TestCase):
    def leaks_command(self, name, *options):
        return run_python("-m", "tracemalloc", "leaks", *options,
                          f"{corpus.__name__}.{name}:run")

    def test_leaks(self):
        for name in corpus.LEAKS:
            with self.subTest(name=name):
                corpus_module(name)   # skips without _testcapi
                rc, out, err = self.leaks_command(name)
                self.assertEqual(rc, 1, err)
                self.assertFirstSiteMarked(name, site_lines(err), err)
                self.assertEqual(out, "")

    def test_clean_workloads(self):
        for name in corpus.CLEAN:
            with self.subTest(name=name):
                rc, out, err = self.leaks_command(name)
                self.assertEqual(rc, 0, err)
                self.assertEqual(site_lines(err), [])
                self.assertIn("no allocation site grew", err)


class CLITest(unittest.TestCase):
    LEAKY_SCRIPT = textwrap.dedent("""\
        import sys
        from test.tracemalloc_leakcorpus import leak_module_list
        leak_module_list.run()
        if "--fail" in sys.argv:
            raise RuntimeError("target failure")
    """)

    def setUp(self):
        self.directory = self.enterContext(os_helper.temp_dir())

    def path(self, name):
        return os.path.join(self.directory, name)

    def script(self, source, name="target"):
        return script_helper.make_script(self.directory, name, source)

    def tracemalloc_cli(self, *args, **env):
        return run_python("-m", "tracemalloc", *args,
                          __cwd=self.directory, **env)

    def test_help(self):
        for command, options in [
                ((), ("--nframe", "--top", "--group-by", "--output",
                      "--html", "leaks")),
                (("run",), ("--nframe", "--top", "--html")),
                (("leaks",), ("--warmup", "--rounds", "--threshold",
                              "--nframe", "--html", "module:function")),
                (("top",), ("--group-by", "--cumulative", "--limit")),
                (("diff",), ("--fail-over", "--group-by")),
                (("html",), ("--base", "--output"))]:
            with self.subTest(command=command):
                rc, out, err = self.tracemalloc_cli(*command, "--help")
                self.assertEqual(rc, 0, err)
                for option in options:
                    self.assertIn(option, out)

    def test_leaks_exit_codes_and_format(self):
        rc, out, err = self.tracemalloc_cli(
            "leaks", f"{corpus.__name__}.leak_dict:run")
        self.assertEqual(rc, 1)
        lines = err.splitlines()
        self.assertIn("1 allocation site leaked", lines[0])
        filename, lineno = corpus.marked_line("leak_dict")
        self.assertTrue(lines[1].startswith(f"{filename}:{lineno}: size="),
                        err)
        self.assertTrue(lines[1].split(" (")[0].endswith("per round"), err)
        self.assertIn("# LEAK", lines[2])
        self.assertIn("Traceback (most recent call first):", lines[3])
        self.assertIn(f'File "{filename}", line {lineno}', lines[4])

        rc, out, err = self.tracemalloc_cli(
            "leaks", f"{corpus.__name__}.clean_slots:run")
        self.assertEqual(rc, 0, err)

    def test_leaks_options(self):
        target = f"{corpus.__name__}.leak_module_list:run"
        rc, out, err = self.tracemalloc_cli(
            "leaks", "--warmup", "3", "--rounds", "6", "--extend", "0",
            "-n", "2", target)
        self.assertEqual(rc, 1, err)
        self.assertIn("memory kept rising over 6 rounds (after 3 warm-up "
                      "rounds; traceback limit 2)", err)
        rc, out, err = self.tracemalloc_cli(
            "leaks", "--threshold", "10KiB", target)
        self.assertEqual(rc, 0, err)
        rc, out, err = self.tracemalloc_cli(
            "leaks", "--threshold", "100", target)
        self.assertEqual(rc, 1, err)

    def test_leaks_json_and_ignore(self):
        import json
        target = f"{corpus.__name__}.leak_module_list:run"
        rc, out, err = self.tracemalloc_cli("leaks", "--json", "-q", target)
        self.assertEqual(rc, 1, err)
        data = json.loads(out)
        self.assertEqual(data["schema"], "tracemalloc-leak-report")
        self.assertTrue(data["leaked"])
        site = data["sites"][0]
        self.assertEqual((site["filename"], site["lineno"]),
                         corpus.marked_line("leak_module_list"))
        self.assertEqual(len(site["sizes"]), data["rounds"])
        # Most recent call first.
        self.assertEqual(site["traceback"][0],
                         list(corpus.marked_line("leak_module_list")))
        # Ignored: no leak, and the report says what it left out.
        rc, out, err = self.tracemalloc_cli(
            "leaks", "--json", "-q", "--ignore", "*leak_module_list.py:*",
            target)
        self.assertEqual(rc, 0, err)
        data = json.loads(out)
        self.assertFalse(data["leaked"])
        self.assertEqual(data["ignored"][0]["pattern"],
                         "*leak_module_list.py:*")
        self.assertIn("1 leaking site ignored by pattern", err)

    def test_leaks_module_in_current_directory(self):
        self.script("items = []\n\ndef grow():\n"
                    "    items.append(bytes(300))\n", name="leaky_here")
        rc, out, err = self.tracemalloc_cli("leaks", "leaky_here:grow")
        self.assertEqual(rc, 1, err)
        self.assertEqual(site_lines(err)[0],
                         (self.path("leaky_here.py"), 4))

    def test_leaks_script(self):
        script = self.script(self.LEAKY_SCRIPT)
        rc, out, err = self.tracemalloc_cli("leaks", script)
        self.assertEqual(rc, 1, err)
        filename, lineno = corpus.marked_line("leak_module_list")
        self.assertEqual(site_lines(err)[0], (filename, lineno))
        # The script's frame is in the traceback, not the tool's or runpy's.
        self.assertIn(f'File "{script}", line 3', err)
        self.assertNotIn("runpy", err)
        self.assertNotIn(PACKAGE_DIRECTORY, err)

    def test_leaks_target_errors(self):
        script = self.script(self.LEAKY_SCRIPT)
        self.script("value = 3\n", name="not_callable")
        self.script("raise ImportError('broken')\n", name="broken_import")
        cases = [
            ("no_such_module_for_tracemalloc:run",),
            (f"{corpus.__name__}.leak_dict:no_such_function",),
            ("not_callable:value",),
            ("broken_import:run",),
            (self.path("missing.py"),),
            (":run",),
            ("--rounds", "0", script),
            ("--threshold", "lots", script),
            ("--rounds", "3", "--min-rounds", "4", script),
            (),
        ]
        for args in cases:
            with self.subTest(args=args):
                rc, out, err = self.tracemalloc_cli("leaks", *args)
                self.assertEqual(rc, 2, err)
                self.assertIn("usage: python -m tracemalloc leaks", err)
                self.assertIn("error:", err)
                self.assertNotIn("Traceback", err)

    def test_leaks_target_failure(self):
        script = self.script(self.LEAKY_SCRIPT)
        rc, out, err = self.tracemalloc_cli("leaks", script, "--fail")
        self.assertEqual(rc, 2, err)
        self.assertIn("RuntimeError: target failure", err)
        self.assertIn("no verdict", err)
        self.assertEqual(site_lines(err), [])

        self.script("import sys\ndef run():\n    sys.exit(5)\n", name="ex")
        rc, out, err = self.tracemalloc_cli("leaks", "ex:run")
        self.assertEqual(rc, 2, err)

    def test_run_command(self):
        script = self.script("kept = [bytes(1000) for _ in range(100)]\n")
        for command in (("run",), ()):
            with self.subTest(command=command):
                rc, out, err = self.tracemalloc_cli(*command, script)
                self.assertEqual(rc, 0, err)
                self.assertIn(f"#1: {script}:1:", err)

    def make_snapshots(self):
        """Write two snapshot files; the second has 5000 more bytes."""
        return write_snapshots(self.path)

    def test_top(self):
        old_path, new_path = self.make_snapshots()
        rc, out, err = self.tracemalloc_cli("top", new_path)
        self.assertEqual(rc, 0, err)
        lines = out.splitlines()
        self.assertIn("3 traces", lines[0])
        self.assertTrue(lines[1].startswith("#1: b.py:2: size=6000 B, "
                                            "count=2"), out)
        self.assertTrue(lines[2].startswith("#2: a.py:1: size=100 B"), out)

        rc, out, err = self.tracemalloc_cli("top", "--group-by", "filename",
                                            "--cumulative", new_path)
        self.assertEqual(rc, 0, err)
        self.assertTrue(out.splitlines()[1].startswith(
            "#1: a.py: size=6100 B"), out)
        rc, out, err = self.tracemalloc_cli("top", "--group-by", "traceback",
                                            "--limit", "1", new_path)
        self.assertEqual(rc, 0, err)
        self.assertIn('File "b.py", line 2', out)
        self.assertNotIn("#2", out)

    def test_diff(self):
        old_path, new_path = self.make_snapshots()
        rc, out, err = self.tracemalloc_cli("diff", old_path, new_path)
        self.assertEqual(rc, 0, err)
        self.assertIn("(+5000 B)", out.splitlines()[0])
        self.assertTrue(out.splitlines()[1].startswith(
            "#1: b.py:2: size=6000 B (+5000 B), count=2 (+1)"), out)
        rc, out, err = self.tracemalloc_cli("diff", "--fail-over", "4999",
                                            old_path, new_path)
        self.assertEqual(rc, 1, err)
        self.assertIn("over the limit", err)
        rc, out, err = self.tracemalloc_cli("diff", "--fail-over", "5000",
                                            old_path, new_path)
        self.assertEqual(rc, 0, err)
        rc, out, err = self.tracemalloc_cli("diff", "--fail-over", "1K",
                                            new_path, old_path)
        self.assertEqual(rc, 0, err)      # shrinking never fails

    def test_snapshot_file_errors(self):
        old_path, new_path = self.make_snapshots()
        garbage = self.path("garbage.snap")
        with open(garbage, "wb") as file:
            file.write(b"not a snapshot")
        for args in [("top", self.path("missing.snap")),
                     ("top", garbage),
                     ("top", "--group-by", "traceback", "--cumulative",
                      new_path),
                     ("diff", old_path),
                     ("diff", old_path, garbage),
                     ("diff", "--fail-over", "-3", old_path, new_path),
                     ("html", garbage)]:
            with self.subTest(args=args):
                rc, out, err = self.tracemalloc_cli(*args)
                self.assertEqual(rc, 2, err)
                self.assertIn("error:", err)
                self.assertNotIn("Traceback", err)

    def test_run_and_leaks_dump_for_top(self):
        script = self.script("kept = [bytes(1000) for _ in range(100)]\n")
        output = self.path("run.snap")
        # Untraced at startup (an empty PYTHONTRACEMALLOC is ignored): the
        # dump then holds little besides the script's memory.
        rc, out, err = self.tracemalloc_cli("run", "-o", output, script,
                                            PYTHONTRACEMALLOC="")
        self.assertEqual(rc, 0, err)
        rc, out, err = self.tracemalloc_cli("top", output)
        self.assertEqual(rc, 0, err)
        self.assertIn(f"#1: {script}:1:", out)

    # html: the report itself is tracemalloc.htmlreport's; these tests
    # check the command line's side with a stand-in module.

    FAKE_HTMLREPORT = textwrap.dedent("""\
        import sys, types
        fake = types.ModuleType("tracemalloc.htmlreport")
        def write_html(snapshot, path, *, base=None, title=None, **leaks):
            with open(path, "w") as file:
                file.write(f"{len(snapshot.traces)} {base is not None} "
                           f"{title}")
        fake.write_html = write_html
        sys.modules["tracemalloc.htmlreport"] = fake
        import tracemalloc
        tracemalloc.htmlreport = fake
        from tracemalloc.__main__ import main
        sys.argv[0] = "tracemalloc"
        sys.exit(main(sys.argv[1:]))
    """)

    def run_with_fake_html(self, *args):
        driver = self.script(self.FAKE_HTMLREPORT, name="html_driver")
        return run_python(driver, *args, __cwd=self.directory)

    def read(self, path):
        with open(path, encoding="utf-8") as file:
            return file.read()

    def test_html_command(self):
        old_path, new_path = self.make_snapshots()
        output = self.path("report.html")
        rc, out, err = self.run_with_fake_html("html", new_path, "--base",
                                               old_path, "-o", output)
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.read(output), "3 True new.snap")
        rc, out, err = self.run_with_fake_html("html", new_path)
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.read(self.path("new.html")),
                         "3 False new.snap")

    def test_html_options_of_run_and_leaks(self):
        script = self.script("kept = [bytes(1000) for _ in range(100)]\n")
        output = self.path("run.html")
        rc, out, err = self.run_with_fake_html("run", "--html", output,
                                               script)
        self.assertEqual(rc, 0, err)
        count, has_base, title = self.read(output).split(" ", 2)
        self.assertGreaterEqual(int(count), 100)
        self.assertEqual(has_base, "True")
        output = self.path("leaks.html")
        rc, out, err = self.run_with_fake_html(
            "leaks", "--html", output, f"{corpus.__name__}.leak_dict:run")
        self.assertEqual(rc, 1, err)
        count, has_base, title = self.read(output).split(" ", 2)
        self.assertEqual(has_base, "True")
        self.assertIn("leak_dict", title)

    def test_html_without_the_report_module(self):
        old_path, new_path = self.make_snapshots()
        script = self.script("kept = [bytes(1000) for _ in range(100)]\n")
        output = self.path("never.html")
        for args in (["html", new_path],
                     ["run", "--html", output, script],
                     ["leaks", "--html", output,
                      f"{corpus.__name__}.leak_dict:run"]):
            with self.subTest(command=args[0]):
                code = ("import sys; "
                        "sys.modules['tracemalloc.htmlreport'] = None; "
                        "from tracemalloc.__main__ import main; "
                        f"sys.exit(main({args!r}))")
                rc, out, err = run_python("-c", code)
                self.assertEqual(rc, 2, err)
                self.assertIn("HTML report is not available", err)
                self.assertNotIn("Traceback", err)
                # Said at once, before running anything.
                self.assertEqual(site_lines(err), [])
                self.assertNotIn("#1:", err)
                self.assertFalse(os.path.exists(output))

    @unittest.skipIf(importlib.util.find_spec("tracemalloc.htmlreport")
                     is None, "tracemalloc.htmlreport is not there yet")
    def test_html_real_report(self):
        old_path, new_path = self.make_snapshots()
        output = self.path("real.html")
        rc, out, err = self.tracemalloc_cli("html", new_path, "--base",
                                            old_path, "-o", output)
        self.assertEqual(rc, 0, err)
        self.assertGreater(os.path.getsize(output), 0)


# --------------------------------------------------------------------------
# 3. unittest

def corpus_test_case(module, style):
    """A unittest test case that runs *module*'s workload, leak checked in
    the given *style* ('decorator' or 'mixin')."""
    if style == "decorator":
        class CorpusCase(unittest.TestCase):
            @no_leaks
            def test_workload(self):
                module.run()
    else:
        class CorpusCase(LeakCheckMixin, unittest.TestCase):
            def setUp(self):
                self.scratch = [bytes(100) for _ in range(10)]

            def tearDown(self):
                del self.scratch

            def test_workload(self):
                module.run()
    return CorpusCase("test_workload")


def run_case(case):
    result = unittest.TestResult()
    case.run(result)
    return result


class CorpusUnittestTest(CorpusAssertions, unittest.TestCase):
    def test_leaks(self):
        for style in ("decorator", "mixin"):
            for name in corpus.LEAKS:
                with self.subTest(style=style, name=name):
                    module = corpus_module(name)
                    try:
                        result = run_case(corpus_test_case(module, style))
                    finally:
                        module.reset()
                    self.assertEqual(len(result.failures), 1,
                                     result.errors)
                    message = result.failures[0][1]
                    self.assertIn("LeakError", message)
                    self.assertFirstSiteMarked(name, site_lines(message),
                                               message)

    def test_clean_workloads(self):
        for style in ("decorator", "mixin"):
            for name in corpus.CLEAN:
                with self.subTest(style=style, name=name):
                    module = corpus_module(name)
                    result = run_case(corpus_test_case(module, style))
                    self.assertTrue(result.wasSuccessful(),
                                    result.failures + result.errors)


class UnittestIntegrationTest(unittest.TestCase):
    def test_mixin_runs_fixtures_each_round(self):
        calls = []

        class Case(LeakCheckMixin, unittest.TestCase):
            leak_check_warmup = 1
            leak_check_rounds = 2
            leak_check_threshold = 10**6    # *calls* grows, by design

            def setUp(self):
                calls.append("setUp")
                self.addCleanup(calls.append, "cleanup")

            def tearDown(self):
                calls.append("tearDown")

            def test_it(self):
                calls.append("test")

            @skip_leak_check
            def test_skipped(self):
                calls.append("skipped")

        self.assertTrue(run_case(Case("test_it")).wasSuccessful())
        self.assertEqual(calls, ["setUp", "test",
                                 "tearDown", "cleanup", "setUp", "test",
                                 "tearDown", "cleanup", "setUp", "test",
                                 "tearDown", "cleanup"])
        calls.clear()
        self.assertTrue(run_case(Case("test_skipped")).wasSuccessful())
        self.assertEqual(calls, ["setUp", "skipped", "tearDown", "cleanup"])

    def test_decorator_runs_fixtures_each_round(self):
        calls = []

        class Case(unittest.TestCase):
            def setUp(self):
                calls.append("setUp")
                self.addCleanup(calls.append, "cleanup")

            def tearDown(self):
                calls.append("tearDown")

            @no_leaks(warmup=1, rounds=2, threshold=10**6)
            def test_it(self):
                calls.append("test")

        self.assertTrue(run_case(Case("test_it")).wasSuccessful())
        self.assertEqual(calls, ["setUp", "test",
                                 "tearDown", "cleanup", "setUp", "test",
                                 "tearDown", "cleanup", "setUp", "test",
                                 "tearDown", "cleanup"])

    def test_fresh_instance_each_round(self):
        # State left on self does not carry over to the next round: each
        # round after the first runs on a fresh instance, as unittest runs
        # separate tests (and as the pytest plugin runs rounds).
        runs = [0]

        class Mixed(LeakCheckMixin, unittest.TestCase):
            def test_it(self):
                runs[0] += 1
                self.assertFalse(hasattr(self, "seen"))
                self.seen = [bytes(100)]

        class Decorated(unittest.TestCase):
            @no_leaks
            def test_it(self):
                runs[0] += 1
                self.assertFalse(hasattr(self, "calls"))
                self.calls = []
                self.calls.append(1)
                self.assertEqual(len(self.calls), 1)

        class AsyncMixed(LeakCheckMixin, unittest.IsolatedAsyncioTestCase):
            async def asyncSetUp(self):
                self.items = []

            async def test_it(self):
                runs[0] += 1
                self.assertEqual(self.items, [])
                self.assertFalse(hasattr(self, "seen"))
                self.seen = self.items.append(1)

        for case in (Mixed("test_it"), Decorated("test_it"),
                     AsyncMixed("test_it")):
            with self.subTest(case=type(case).__name__):
                runs[0] = 0
                result = run_case(case)
                self.assertTrue(result.wasSuccessful(),
                                result.failures + result.errors)
                self.assertGreater(runs[0], 2)

    def test_ordinary_failure_shows_its_own_line(self):
        # A test failing for an ordinary reason fails with its own
        # exception, whose traceback starts at the test's line: not at the
        # checker's frames.
        state = {"runs": 0}

        class Mixed(LeakCheckMixin, unittest.TestCase):
            def test_fails(self):
                self.assertEqual(1, 2)          # the failing line

            def test_errs(self):
                {}["missing key"]               # the failing line

        class Decorated(unittest.TestCase):
            @no_leaks
            def test_fails(self):
                self.assertEqual(1, 2)          # the failing line

            @no_leaks
            def test_errs(self):
                {}["missing key"]               # the failing line

        class Later(LeakCheckMixin, unittest.TestCase):
            def test_second_run(self):
                state["runs"] += 1
                self.assertLess(state["runs"], 2)   # the failing line

        for case, kind in ((Mixed("test_fails"), "failures"),
                           (Mixed("test_errs"), "errors"),
                           (Decorated("test_fails"), "failures"),
                           (Decorated("test_errs"), "errors"),
                           (Later("test_second_run"), "failures")):
            with self.subTest(case=case.id()):
                result = run_case(case)
                problems = getattr(result, kind)
                self.assertEqual(len(problems), 1,
                                 result.failures + result.errors)
                text = problems[0][1]
                frames = re.findall(r'^  File "([^"]+)", line \d+, in '
                                    r'(\w+)$', text, re.MULTILINE)
                self.assertTrue(frames, text)
                # The first frame shown is the test's own.
                self.assertEqual(frames[0], (__file__,
                                             case._testMethodName), text)
                self.assertNotIn(os.path.join("tracemalloc", "leaks.py"),
                                 text)
                self.assertNotIn("_leakcore.py", text)
                self.assertIn("# the failing line", text)
        self.assertIn("failed in run 2", text)

    def test_fixture_released_in_teardown_is_not_a_leak(self):
        class Case(LeakCheckMixin, unittest.TestCase):
            def setUp(self):
                self.big = bytearray(10_000)

            def tearDown(self):
                self.big = None

            def test_it(self):
                self.big[0] = 1
        self.assertTrue(run_case(Case("test_it")).wasSuccessful())

    def test_decorator_options(self):
        kept = []

        class Case(unittest.TestCase):
            @no_leaks(threshold=100_000)
            def test_small_leak(self):
                kept.append(bytes(100))

            @no_leaks(rounds=3, extend=0)
            def test_leak(self):
                kept.append(bytes(100))
        self.assertTrue(run_case(Case("test_small_leak")).wasSuccessful())
        result = run_case(Case("test_leak"))
        self.assertEqual(len(result.failures), 1)
        self.assertIn("of 3 rounds", result.failures[0][1])
        self.assertIn("test_leak", result.failures[0][1])

    def test_short_failure_message(self):
        # Ten leaking sites, each 12 calls deep: the message shows the top
        # three with three frames each, and says how to get the rest.
        kept = []
        codes = [compile(f"kept.append(bytes({100 * n}))",
                         f"<leak site {n}>", "exec") for n in range(1, 11)]

        def deep(depth, code):
            if depth:
                return deep(depth - 1, code)
            exec(code, {"kept": kept})

        def leak_everywhere():
            for code in codes:
                deep(10, code)

        class Case(unittest.TestCase):
            @no_leaks
            def test_many(self):
                leak_everywhere()

            @no_leaks(full_report=True)
            def test_many_full(self):
                leak_everywhere()
        result = run_case(Case("test_many"))
        message = result.failures[0][1]
        report_text = message[message.index("tracemalloc: "):]
        self.assertLessEqual(len(report_text.splitlines()), 40, message)
        self.assertEqual(len(site_lines(report_text)), 3, message)
        self.assertIn("frames left out", report_text)
        self.assertIn("other leaking sites", report_text)
        self.assertIn("full_report=True", report_text)
        self.assertIn("Traceback (most recent call first):", report_text)
        # The oldest frame kept is the test's own line.
        self.assertIn("leak_everywhere()", report_text)

        result = run_case(Case("test_many_full"))
        message = result.failures[0][1]
        self.assertGreater(len(site_lines(message)), 3, message)
        self.assertNotIn("frames left out", message)

    def test_no_site_of_the_tool(self):
        # A test that keeps its frames (a stored exception) pins the frame
        # objects of the code that called it, the tool's among them: they
        # are not reported as the test's sites.
        module = corpus_module("leak_stored_traceback")

        class Decorated(unittest.TestCase):
            @no_leaks(full_report=True)
            def test_it(self):
                module.run()

        class Mixed(LeakCheckMixin, unittest.TestCase):
            leak_check_full_report = True

            def test_it(self):
                module.run()
        for case in (Decorated("test_it"), Mixed("test_it")):
            with self.subTest(case=type(case).__name__):
                try:
                    message = run_case(case).failures[0][1]
                finally:
                    module.reset()
                sites = site_lines(message)
                self.assertTrue(sites, message)
                self.assertEqual([site for site in sites
                                  if os.path.dirname(site[0])
                                  == PACKAGE_DIRECTORY], [], message)

    def test_decorator_and_mixin_same_title(self):
        kept = []

        class Decorated(unittest.TestCase):
            @no_leaks
            def test_it(self):
                kept.append(bytes(500))

        class Mixed(LeakCheckMixin, unittest.TestCase):
            def test_it(self):
                kept.append(bytes(500))
        for case in (Decorated("test_it"), Mixed("test_it")):
            with self.subTest(case=type(case).__name__):
                message = run_case(case).failures[0][1]
                self.assertIn(f"tracemalloc: {case.id()}: 1 allocation "
                              f"site leaked", message)

    def test_errors_are_errors(self):
        class Case(unittest.TestCase):
            @no_leaks
            def test_error(self):
                raise KeyError("boom")

            @no_leaks
            def test_failure(self):
                self.assertEqual(1, 2)
        result = run_case(Case("test_error"))
        self.assertEqual(len(result.errors), 1)
        result = run_case(Case("test_failure"))
        self.assertEqual(len(result.failures), 1)
        self.assertIn("1 != 2", result.failures[0][1])


# --------------------------------------------------------------------------
# 4. pytest (Debian's python3-pytest, pure Python, run by the fork)

PYTEST_SITE = os.environ.get("TRACEMALLOC_TEST_PYTEST_PATH",
                             "/usr/lib/python3/dist-packages")
# Only the pure-Python packages that pytest needs: the directory also holds
# compiled modules built for the system's Python.
PYTEST_PACKAGES = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging",
                   "attr", "attrs", "py.py", "exceptiongroup", "tomli")


def pytest_path(directory):
    """Make *directory* hold links to pytest and its dependencies only;
    return it, or None when pytest is not installed."""
    if not os.path.isdir(os.path.join(PYTEST_SITE, "_pytest")):
        return None
    os.makedirs(directory, exist_ok=True)
    for name in PYTEST_PACKAGES:
        source = os.path.join(PYTEST_SITE, name)
        if os.path.exists(source):
            os.symlink(source, os.path.join(directory, name))
    return directory


PYTEST_TESTS = textwrap.dedent("""\
    import importlib
    import pytest

    CORPUS = {corpus!r}
    NAMES = {names!r}

    @pytest.mark.parametrize("name", NAMES)
    def test_corpus(name):
        importlib.import_module(CORPUS + "." + name).run()

    @pytest.mark.tracemalloc_leaks(rounds=4, extend=0)
    def test_marked_leak(tmp_path):
        importlib.import_module(CORPUS + ".leak_module_list").run()

    @pytest.mark.tracemalloc_leaks
    def test_marked_clean():
        importlib.import_module(CORPUS + ".clean_json").run()

    @pytest.mark.no_tracemalloc_leaks
    def test_exempt():
        importlib.import_module(CORPUS + ".leak_dict").run()
""")


class CorpusPytestTest(CorpusAssertions, unittest.TestCase):
    def setUp(self):
        self.directory = self.enterContext(os_helper.temp_dir())
        path = pytest_path(os.path.join(self.directory, "site"))
        if path is None:
            self.skipTest(f"pytest is not installed (no _pytest in "
                          f"{PYTEST_SITE}; on Debian: apt-get install "
                          f"python3-pytest)")
        self.pytest_site = path
        names = [name for name in corpus.LEAKS + corpus.CLEAN
                 if name != "leak_c_domain"
                 or importlib.util.find_spec("_testcapi")]
        self.names = names
        script_helper.make_script(
            self.directory, "test_corpus",
            PYTEST_TESTS.format(corpus=corpus.__name__, names=names))

    def pytest(self, *args):
        paths = [LIB_DIRECTORY, self.pytest_site]
        return run_python("-m", "pytest", "-p", "tracemalloc.pytest_plugin",
                          "-p", "no:cacheprovider", "-q", "-rN",
                          "--color=no", *args, "test_corpus.py",
                          __cwd=self.directory,
                          PYTHONPATH=os.pathsep.join(paths))

    def summary(self, out):
        """{test id: first site} from the plugin's end summary."""
        lines = out.splitlines()
        starts = [i for i, line in enumerate(lines)
                  if re.search(r"tracemalloc: \d+ leaking tests?", line)]
        self.assertEqual(len(starts), 1, out)
        result = {}
        site = None
        for line in lines[starts[0] + 1:]:
            if site_lines(line):
                site = site_lines(line)[0]
            elif site is not None and line.startswith("    first site of"):
                tests = line.partition(": ")[2]
                self.assertNotRegex(tests, r" and \d+ more$", out)
                for nodeid in tests.split(", "):
                    result[nodeid] = site
                site = None
            else:
                break
        return result

    def test_option_checks_every_test(self):
        # Every leaking test named in the summary: no cap.
        rc, out, err = self.pytest("--tracemalloc-leaks",
                                   "--tracemalloc-max-reports=0")
        self.assertEqual(rc, 1, out + err)
        leaking = self.summary(out)
        expected = {f"test_corpus.py::test_corpus[{name}]"
                    for name in self.names if name.startswith("leak_")}
        expected.add("test_corpus.py::test_marked_leak")
        self.assertEqual(set(leaking), expected, out)
        for nodeid, site in leaking.items():
            name = nodeid.partition("[")[2].rstrip("]") or "leak_module_list"
            with self.subTest(name=name):
                self.assertFirstSiteMarked(name, [site], out)
        # Each failure shows the whole report.
        for name in self.names:
            if name.startswith("leak_"):
                filename, lineno = corpus.marked_line(name)
                self.assertIn(f"{filename}:{lineno}: size=", out)
        self.assertIn(f"{len(expected)} failed", out)

    def test_marker_alone(self):
        rc, out, err = self.pytest()
        self.assertEqual(rc, 1, out + err)
        self.assertEqual(set(self.summary(out)),
                         {"test_corpus.py::test_marked_leak"})
        self.assertIn("1 failed", out)
        self.assertIn("of 4 rounds", out)

    def test_options(self):
        rc, out, err = self.pytest("--help")
        self.assertEqual(rc, 0, err)
        for option in ("--tracemalloc-leaks", "--tracemalloc-rounds",
                       "--tracemalloc-warmup", "--tracemalloc-threshold"):
            self.assertIn(option, out)
        rc, out, err = self.pytest("--tracemalloc-leaks",
                                   "--tracemalloc-threshold", "100000",
                                   "-k", "not marked")
        self.assertEqual(rc, 0, out + err)


# --------------------------------------------------------------------------
# 5. regrtest -R

REGRTEST_LEAKY = textwrap.dedent("""\
    import unittest

    _kept = []


    class LeakyTest(unittest.TestCase):
        def test_leak(self):
            _kept.extend(str(n) * 5 for n in range(200))  # LEAK

        def test_clean(self):
            [bytes(100) for _ in range(100)]
""")

REGRTEST_CLEAN = textwrap.dedent("""\
    import json
    import unittest


    class CleanTest(unittest.TestCase):
        def test_json(self):
            json.loads(json.dumps({"a": [1, 2, 3] * 10}))
""")


REGRTEST_STOPPER = textwrap.dedent("""\
    import tracemalloc
    import unittest

    _kept = []


    class StopperTest(unittest.TestCase):
        def test_leak_and_stop_tracing(self):
            _kept.extend(str(n) * 5 for n in range(200))
            tracemalloc.stop()
""")


class RegrtestTest(unittest.TestCase):
    def setUp(self):
        self.directory = self.enterContext(os_helper.temp_dir())
        script_helper.make_script(self.directory, "test_tm_leaky",
                                  REGRTEST_LEAKY)
        script_helper.make_script(self.directory, "test_tm_clean",
                                  REGRTEST_CLEAN)
        script_helper.make_script(self.directory, "test_tm_stopper",
                                  REGRTEST_STOPPER)

    def regrtest(self, test_name, *options, **env):
        return run_python(*options, "-m", "test", "--testdir",
                          self.directory, "-R", "3:3", test_name,
                          __cwd=self.directory, **env)

    def test_leaking_test_names_its_line(self):
        rc, out, err = self.regrtest("test_tm_leaky", "-X", "tracemalloc=25")
        output = out + err
        self.assertNotEqual(rc, 0, output)
        # regrtest's own verdict, then the sites.
        self.assertRegex(output, r"test_tm_leaky leaked \[.*\] memory "
                                 r"blocks")
        filename = os.path.join(self.directory, "test_tm_leaky.py")
        line = [lineno for lineno, text
                in enumerate(REGRTEST_LEAKY.splitlines(), 1)
                if text.endswith("# LEAK")][0]
        self.assertEqual(site_lines(output)[0], (filename, line), output)
        self.assertIn("_kept.extend(str(n) * 5 for n in range(200))  "
                      "# LEAK", output)
        self.assertLess(output.index("memory blocks"),
                        output.index(f"{filename}:{line}: size="))

    def test_clean_test(self):
        rc, out, err = self.regrtest("test_tm_clean", "-X", "tracemalloc=25")
        self.assertEqual(rc, 0, out + err)
        self.assertNotIn("leaked", out + err)
        self.assertEqual(site_lines(out + err), [])

    def test_test_that_stops_tracing(self):
        # regrtest's verdict stands; the tracer says it cannot name the
        # sites, instead of failing or naming none as if nothing grew.
        rc, out, err = self.regrtest("test_tm_stopper", "-X",
                                     "tracemalloc=25")
        output = out + err
        self.assertNotEqual(rc, 0, output)
        self.assertRegex(output, r"test_tm_stopper leaked \[.*\] memory "
                                 r"blocks")
        self.assertIn("tracemalloc: test_tm_stopper: no allocation sites: "
                      "tracing was stopped", output)
        self.assertNotIn("Traceback", output)
        self.assertEqual(site_lines(output), [])

    @unittest.skipIf(hasattr(sys, "gettotalrefcount"), "debug build")
    def test_release_build_needs_tracing(self):
        rc, out, err = self.regrtest("test_tm_clean", PYTHONTRACEMALLOC="")
        self.assertNotEqual(rc, 0)
        self.assertIn("requires a debug build", out + err)


if __name__ == "__main__":
    unittest.main()
