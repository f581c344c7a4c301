"""Differential test: the fork's traces against pristine CPython.

Each program of tracemalloc_parity/scenarios.py (recursion, generators
resumed from several callers, coroutines and asynchronous generators under
asyncio, closures, calls, callbacks from C, exceptions, comprehensions,
class bodies, a thread, big buffers, resizing, code compiled at run time,
other domains, free lists...) runs on this interpreter and on the
pristine release of its base, 3.11.2 or 3.13.15 (CONFIGURATIONS): at N = 1,
5 and 25 frames with tracing started by tracemalloc.start(), at N = 5 with
-X tracemalloc, and at N = 5 under PYTHONMALLOC=malloc and debug (and on
3.13 mimalloc and mimalloc_debug).  The live traces allocated in scenarios.py
are compared per traceback (frames, total number of frames, domain): the
number of traces and their sizes.

They must be the same, except for the differences documented in
Doc/library/tracemalloc.rst, "Differences from upstream", which the test
expects exactly:

* frame-field: each generator, coroutine, asynchronous generator and frame
  object is FRAME_FIELD_SIZE bytes bigger (patch 0002 appends the
  call-context cache and the last-site memo to _PyInterpreterFrame).  The runner counts these
  objects per traceback on both interpreters; the sizes of a traceback's
  traces must be upstream's with exactly that many of them grown by
  FRAME_FIELD_SIZE.  The scenarios that create such objects must show it.
* snapshot list: upstream's _get_traces() takes its result list from the
  list free list before it copies the traces, which moves the trace of the
  list freed last out of the snapshot; the fork's snapshot keeps it.  The
  runner frees a list of its own before each snapshot, except for the
  scenario list_freed_last, where the fork must have exactly one more trace
  of a list object, on the marked line.

* key table: the fork re-traces a dictionary's key table taken from its
  free list at the line that takes it (patch 0012 on 3.13, 0013 on 3.11);
  upstream leaves it at the line that allocated it first, which may be
  outside the traces the runner reports (asyncio's code, say).  Traces of
  a minimal key table's size (KEY_TABLE_SIZE) are therefore not compared
  per traceback: the parity of that one size is left to the differential
  fuzzer, whose programs empty the free lists before each step.

Any other difference fails, with the tracebacks and sizes on both sides.

Pristine is the interpreter named by $TRACEMALLOC_PRISTINE_PYTHON
(the tests fail if it is not there), else the one `make bench-pristine`
built in the fork's cache (`make test` passes it by name when it exists).
Without it the tests are skipped, and say so.
"""

import collections
import glob
import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS_DIR = os.path.join(HERE, "tracemalloc_parity")
RUNNER = os.path.join(PROGRAMS_DIR, "runner.py")

PRISTINE_ENV = "TRACEMALLOC_PRISTINE_PYTHON"
# The pristine release of this base: the fork keeps upstream's version.
PRISTINE_VERSION = sys.version.split()[0]

# How tracing is started, with how many frames, and under which allocator
# (PYTHONMALLOC; None: pymalloc): tracemalloc.start(N) in the program, or
# -X tracemalloc=N.  Tracing from startup costs pristine several seconds per
# run at N=25 (every import traced with deep stacks): one N is enough to
# compare what startup tracing adds.
CONFIGURATIONS = (
    ("start", 1, None),
    ("start", 5, None),
    ("start", 25, None),
    ("startup", 5, None),
    ("start", 5, "malloc"),
    ("start", 5, "debug"),
)
# 3.13's allocators in a default build add mimalloc (feature-tested the way
# test.support.with_mimalloc() does).
try:
    import _testcapi
except ImportError:
    _testcapi = None
if getattr(_testcapi, "WITH_MIMALLOC", False):
    CONFIGURATIONS += (
        ("start", 5, "mimalloc"),
        ("start", 5, "mimalloc_debug"),
    )

# Bytes that patch 0002 adds to _PyInterpreterFrame, and so to every object
# that embeds one.
FRAME_FIELD_SIZE = 16

# Scenarios whose live objects include generators, coroutines or frame
# objects allocated in scenarios.py: the frame-field difference must show.
FRAME_FIELD_SCENARIOS = {"generators", "coroutines", "exceptions"}

# The "snapshot list" difference: upstream's _get_traces() takes its result
# list from the list free list before copying the traces, so the list freed
# last loses its trace in upstream's snapshot; the fork's snapshot keeps it.
# Shown by the scenario list_freed_last, on the line with this comment.
SNAPSHOT_LIST = "snapshot list"
SNAPSHOT_LIST_MARKER = "# freed last: upstream's snapshot recycles it"
LIST_OBJECT_SIZE = sys.getsizeof([])

# The "key table" difference: the size of the key table of a dictionary of
# one str key, the tables that have a free list.
KEY_TABLE_SIZE = {"a": 1}.__sizeof__() - {}.__sizeof__()


def marked_line(marker):
    with open(os.path.join(PROGRAMS_DIR, "scenarios.py"),
              encoding="utf-8") as file:
        lines = [number for number, text in enumerate(file, 1)
                 if marker in text]
    if len(lines) != 1:
        raise AssertionError(f"{marker!r} is on lines {lines} of "
                             f"scenarios.py, not on one line")
    return lines[0]


PRISTINE = None
SKIP_REASON = None


def find_pristine(version=PRISTINE_VERSION):
    """Return (path of the pristine python *version*, None) or (None, why
    not).  Tools/fork/fuzz_differential.py finds pristine with it too."""
    path = os.environ.get(PRISTINE_ENV)
    if path:
        if os.access(path, os.X_OK):
            return path, None
        return None, f"${PRISTINE_ENV}={path} is not an executable"
    # The cache of Tools/bench/bench.mk: one directory per build key, with
    # a .built stamp once the build has passed its smoke test.
    cache = os.environ.get("TRACEMALLOC_FORK_CACHE")
    if not cache:
        base = (os.environ.get("XDG_CACHE_HOME")
                or os.path.join(os.path.expanduser("~"), ".cache"))
        cache = os.path.join(base, "tracemalloc-fork")
    stamps = glob.glob(os.path.join(
        glob.escape(cache), f"pristine-{version}-build", "*",
        ".built"))
    builds = []
    for stamp in stamps:
        python = os.path.join(os.path.dirname(stamp),
                              f"Python-{version}", "python")
        if os.access(python, os.X_OK):
            builds.append((os.path.getmtime(stamp), python))
    if not builds:
        return None, (f"no pristine CPython {version} build: run "
                      f"`make bench-pristine` or set ${PRISTINE_ENV}")
    return max(builds)[1], None


def child_env(allocator=None):
    env = {name: value for name, value in os.environ.items()
           if not name.startswith("PYTHON")}
    env["PYTHONHASHSEED"] = "0"
    if allocator is not None:
        env["PYTHONMALLOC"] = allocator
    return env


_results = {}


def run_scenarios(python, mode, nframe, allocator=None):
    """Run every scenario on *python*; return {name: result} (cached)."""
    key = (python, mode, nframe, allocator)
    if key not in _results:
        args = [python, "-s"]
        if mode == "startup":
            args += ["-X", f"tracemalloc={nframe}"]
        args += [RUNNER, mode, str(nframe)]
        proc = subprocess.run(args, env=child_env(allocator),
                              cwd=PROGRAMS_DIR,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, timeout=600)
        if proc.returncode:
            raise AssertionError(f"{' '.join(args)} failed with status "
                                 f"{proc.returncode}:\n{proc.stderr}")
        _results[key] = json.loads(proc.stdout)["scenarios"]
    return _results[key]


def frames_key(frames):
    return tuple(tuple(frame) for frame in frames)


def describe(frames, total_nframe=None, domain=0):
    text = " <- ".join(f"{name}:{line}" for name, line in frames)
    if total_nframe is not None:
        text += f" (total_nframe={total_nframe})"
    if domain:
        text += f" (domain {domain})"
    return text


def shifted_sizes(fork_sizes, pristine_sizes, shift):
    """How many of *pristine_sizes* must grow by *shift* to give
    *fork_sizes* (two Counters of size -> count), or None if no choice
    of grown sizes does."""
    values = sorted(set(fork_sizes) | set(pristine_sizes)
                    | {size + shift for size in pristine_sizes})
    grown = {}
    for value in values:
        # Traces of this size on the fork: those of pristine that kept it,
        # plus those that grew from value - shift.
        count = (pristine_sizes[value] - fork_sizes[value]
                 + grown.get(value - shift, 0))
        if not 0 <= count <= pristine_sizes[value]:
            return None
        grown[value] = count
    return sum(grown.values())


def compare(fork, pristine, frame_field_size=FRAME_FIELD_SIZE,
            fork_extra=()):
    """Compare two runner documents.

    *fork_extra* lists the traces that only the fork must have, as
    (description, line in scenarios.py, size) triples.  Return (problems,
    grown): the differences that no documented difference explains, as
    readable strings, and how many traces showed the frame-field
    difference."""
    problems = []
    groups = {}
    for side, document in (("fork", fork), ("pristine", pristine)):
        for frames, total_nframe, domain, sizes in document["traces"]:
            entry = groups.setdefault(
                (frames_key(frames), total_nframe, domain),
                {"fork": collections.Counter(),
                 "pristine": collections.Counter()})
            entry[side].update({int(size): count
                                for size, count in sizes.items()})
    for description, line, size in fork_extra:
        candidates = [entry for (frames, _, _), entry in groups.items()
                      if frames[0] == ("<scenarios>", line)
                      and entry["fork"][size] > entry["pristine"][size]]
        if len(candidates) == 1:
            candidates[0]["fork"][size] -= 1
        else:
            problems.append(
                f"<scenarios>:{line}: the documented difference "
                f"{description!r} (one more trace of {size} bytes on the "
                f"fork) did not show")
    # The key tables, which may have moved to or from lines not reported.
    for entry in groups.values():
        del entry["fork"][KEY_TABLE_SIZE]
        del entry["pristine"][KEY_TABLE_SIZE]
    frame_objects = {}
    for side, document in (("fork", fork), ("pristine", pristine)):
        for frames, count in document["frame_objects"]:
            frame_objects.setdefault(frames_key(frames), {})[side] = count
    for frames, counts in sorted(frame_objects.items()):
        if counts.get("fork", 0) != counts.get("pristine", 0):
            problems.append(
                f"{describe(frames)}: {counts.get('fork', 0)} live "
                f"generators, coroutines or frame objects on the fork, "
                f"{counts.get('pristine', 0)} on pristine")

    # Counts must match per traceback; sizes per frames, where the
    # frame-carrying objects are counted.
    by_frames = {}
    for (frames, total_nframe, domain), entry in sorted(groups.items()):
        fork_count = sum(entry["fork"].values())
        pristine_count = sum(entry["pristine"].values())
        if fork_count != pristine_count:
            problems.append(
                f"{describe(frames, total_nframe, domain)}: {fork_count} "
                f"traces on the fork, {pristine_count} on pristine; sizes: "
                f"fork {dict(sorted(entry['fork'].items()))}, pristine "
                f"{dict(sorted(entry['pristine'].items()))}")
            continue
        merged = by_frames.setdefault(
            frames, {"fork": collections.Counter(),
                     "pristine": collections.Counter()})
        merged["fork"].update(entry["fork"])
        merged["pristine"].update(entry["pristine"])
    grown_total = 0
    for frames, entry in sorted(by_frames.items()):
        expected = frame_objects.get(frames, {}).get("fork", 0)
        grown = shifted_sizes(entry["fork"], entry["pristine"],
                              frame_field_size)
        if grown != expected:
            problems.append(
                f"{describe(frames)}: sizes differ: fork "
                f"{dict(sorted(entry['fork'].items()))}, pristine "
                f"{dict(sorted(entry['pristine'].items()))}; expected "
                f"{expected} of them {frame_field_size} bytes bigger "
                f"(live generators, coroutines or frame objects)")
        else:
            grown_total += grown
    return problems, grown_total


def setUpModule():
    global PRISTINE, SKIP_REASON
    PRISTINE, SKIP_REASON = find_pristine()
    if PRISTINE is None:
        return
    if os.path.realpath(PRISTINE) == os.path.realpath(sys.executable):
        raise unittest.SkipTest(f"{PRISTINE} is this interpreter, not "
                                f"pristine {PRISTINE_VERSION}")
    proc = subprocess.run(
        [PRISTINE, "-c", "import sys; print(sys.version.split()[0])"],
        env=child_env(), stdout=subprocess.PIPE, text=True)
    version = proc.stdout.strip()
    if version != PRISTINE_VERSION:
        raise AssertionError(f"{PRISTINE} is Python {version!r}, "
                             f"not {PRISTINE_VERSION}")


class CompareTest(unittest.TestCase):
    """The comparison itself, on made-up runner documents."""

    @staticmethod
    def document(traces, frame_objects=()):
        return {"traces": [[frames, total, 0, {str(size): count
                                               for size, count in sizes}]
                           for frames, total, sizes in traces],
                "frame_objects": [list(item) for item in frame_objects]}

    def test_same(self):
        doc = self.document([([["<scenarios>", 3]], 4, [(56, 2)])])
        self.assertEqual(compare(doc, doc), ([], 0))

    def test_count_differs(self):
        fork = self.document([([["<scenarios>", 3]], 4, [(56, 1)])])
        pristine = self.document([([["<scenarios>", 3]], 4, [(56, 2)])])
        problems, _ = compare(fork, pristine)
        self.assertEqual(len(problems), 1)
        self.assertIn("1 traces on the fork, 2 on pristine", problems[0])

    def test_key_table_moved(self):
        # A key table on another line than upstream's: documented.
        size = KEY_TABLE_SIZE
        fork = self.document([([["<scenarios>", 4]], 4, [(size, 1)]),
                              ([["<scenarios>", 3]], 4, [(56, 1)])])
        pristine = self.document([([["<scenarios>", 3]], 4,
                                   [(56, 1), (size, 1)])])
        self.assertEqual(compare(fork, pristine), ([], 0))
        # Another size on another line: not explained.
        fork = self.document([([["<scenarios>", 4]], 4, [(size + 8, 1)]),
                              ([["<scenarios>", 3]], 4, [(56, 1)])])
        problems, _ = compare(fork, pristine)
        self.assertEqual(len(problems), 1, problems)

    def test_missing_traceback(self):
        fork = self.document([])
        pristine = self.document([([["<scenarios>", 3]], 4, [(48, 1)])])
        problems, _ = compare(fork, pristine)
        self.assertEqual(len(problems), 1)
        self.assertIn("<scenarios>:3 (total_nframe=4)", problems[0])

    def test_frame_field(self):
        frames = [["<scenarios>", 7], ["<runner>", 1]]
        objects = [(frames, 2)]
        pristine = self.document([(frames, 5, [(56, 3), (192, 2)])],
                                 objects)
        fork = self.document([(frames, 5, [(56, 3), (192 + FRAME_FIELD_SIZE, 2)])], objects)
        self.assertEqual(compare(fork, pristine), ([], 2))
        # Grown, but no frame-carrying object there.
        problems, _ = compare(
            self.document([(frames, 5, [(56, 3), (192 + FRAME_FIELD_SIZE, 2)])]),
            self.document([(frames, 5, [(56, 3), (192, 2)])]))
        self.assertEqual(len(problems), 1)
        self.assertIn(f"expected 0 of them {FRAME_FIELD_SIZE} bytes bigger", problems[0])
        # A frame-carrying object there, but not grown.
        problems, _ = compare(pristine, pristine)
        self.assertEqual(len(problems), 1)
        self.assertIn(f"expected 2 of them {FRAME_FIELD_SIZE} bytes bigger", problems[0])
        # Grown by another amount.
        fork = self.document([(frames, 5, [(56, 3), (192 + FRAME_FIELD_SIZE + 8, 2)])], objects)
        problems, _ = compare(fork, pristine)
        self.assertEqual(len(problems), 1)

    def test_frame_field_overlapping_sizes(self):
        # 192 -> 200 and 200 -> 208: the grown sizes overlap kept ones.
        self.assertEqual(shifted_sizes(
            collections.Counter({200: 1, 208: 1, 56: 1}),
            collections.Counter({192: 1, 200: 1, 56: 1}), 8), 2)
        self.assertEqual(shifted_sizes(
            collections.Counter({200: 2}),
            collections.Counter({192: 1, 200: 1}), 8), 1)
        self.assertIsNone(shifted_sizes(
            collections.Counter({200: 1, 56: 1}),
            collections.Counter({192: 1, 50: 1}), 8))

    def test_fork_extra(self):
        frames = [["<scenarios>", 9], ["<runner>", 1]]
        fork = self.document([(frames, 2, [(56, 2)])])
        pristine = self.document([(frames, 2, [(56, 1)])])
        extra = [("snapshot list", 9, 56)]
        self.assertEqual(compare(fork, pristine, fork_extra=extra), ([], 0))
        problems, _ = compare(pristine, pristine, fork_extra=extra)
        self.assertEqual(len(problems), 1)
        self.assertIn("'snapshot list' (one more trace of 56 bytes on the "
                      "fork) did not show", problems[0])
        problems, _ = compare(fork, pristine,
                              fork_extra=[("snapshot list", 8, 56)])
        self.assertEqual(len(problems), 2)

    def test_frame_objects_differ(self):
        frames = [["<scenarios>", 7]]
        fork = self.document([], [(frames, 1)])
        problems, _ = compare(fork, self.document([]))
        self.assertEqual(len(problems), 1)
        self.assertIn("1 live generators", problems[0])


class ParityTest(unittest.TestCase):
    """Each scenario on the fork and on its base's pristine release."""

    def setUp(self):
        if SKIP_REASON is not None and os.environ.get(PRISTINE_ENV):
            # Asked for by name: a missing interpreter is an error.
            self.fail(SKIP_REASON)
        if SKIP_REASON is not None:
            self.skipTest(f"parity with pristine {PRISTINE_VERSION} not "
                          f"checked: {SKIP_REASON}")

    def check(self, name, configurations=CONFIGURATIONS, fork_extra=()):
        grown = 0
        for mode, nframe, allocator in configurations:
            with self.subTest(mode=mode, nframe=nframe, allocator=allocator):
                fork = run_scenarios(sys.executable, mode, nframe,
                                     allocator)[name]
                pristine = run_scenarios(PRISTINE, mode, nframe,
                                         allocator)[name]
                self.assertTrue(fork["traces"], "the runner found no trace")
                problems, grown_here = compare(fork, pristine,
                                               fork_extra=fork_extra)
                grown += grown_here
                if problems:
                    self.fail(f"scenario {name}, {mode}, N={nframe}, "
                              f"PYTHONMALLOC={allocator}: "
                              f"{len(problems)} undocumented differences "
                              f"from pristine {PRISTINE_VERSION}:\n"
                              + "\n".join(problems))
        if name in FRAME_FIELD_SCENARIOS:
            self.assertGreater(grown, 0, "the documented frame-field "
                               "difference did not show")
        else:
            self.assertEqual(grown, 0)

    def test_recursion(self):
        self.check("recursion")

    def test_generators(self):
        self.check("generators")

    def test_coroutines(self):
        self.check("coroutines")

    def test_closures(self):
        self.check("closures")

    def test_calls(self):
        self.check("calls")

    def test_multi_line(self):
        self.check("multi_line")

    def test_deep_recursion(self):
        self.check("deep_recursion")

    def test_threads(self):
        self.check("threads")

    def test_callbacks_from_c(self):
        self.check("callbacks_from_c")

    def test_exceptions(self):
        self.check("exceptions")

    def test_comprehensions(self):
        self.check("comprehensions")

    def test_class_bodies(self):
        self.check("class_bodies")

    def test_big_buffers(self):
        self.check("big_buffers")

    def test_resizing(self):
        self.check("resizing")

    def test_dynamic_code(self):
        self.check("dynamic_code")

    def test_free_lists(self):
        self.check("free_lists")

    def test_tuple_after_start(self):
        # start(n) must build no arguments tuple, as upstream's
        # METH_FASTCALL start(): that tuple, allocated before tracing
        # started, would be the first 1-tuple built after start(), untraced.
        self.check("tuple_after_start",
                   [configuration for configuration in CONFIGURATIONS
                    if configuration[0] == "start"])

    def test_held_snapshot(self):
        self.check("held_snapshot")

    def test_other_domains(self):
        self.check("other_domains")

    def test_list_freed_last(self):
        self.check("list_freed_last", fork_extra=[
            (SNAPSHOT_LIST, marked_line(SNAPSHOT_LIST_MARKER),
             LIST_OBJECT_SIZE)])


if __name__ == "__main__":
    unittest.main()
