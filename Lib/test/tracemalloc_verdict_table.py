"""The leak checker's verdict matrix: the expected answer of each cell.

Each row is one cell: (entry point, kind of target, what the target does,
expected verdict, expected exit status, known wrong).  It is written here
once: Lib/test/test_tracemalloc_verdicts.py runs every cell and compares,
and Tools/fork/verdict_table.py renders the table of
Doc/library/tracemalloc.rst (section "The verdict matrix") from it; the
test checks that the doc's table is the rendering of this one.

What the target does: "leaks" (keeps ten 1 KiB buffers per call in a
module-level list, or in the fixture the target uses), "clean" (allocates
as much and frees it), "raises" (an exception, or self.fail() in a test).
Two kinds are clean targets that use the package themselves (issue 43,
items 1 and 2): "nested check" runs a leak check of its own on a clean
function (assert_no_leaks(), 1 warm-up and 4 rounds), and "labelled"
does its clean work under tracemalloc.label() with a new value per call
(a request id).

Verdicts:
  leak     the check fails the target, naming the leak;
  clean    the check ran the target to its end and found nothing;
  error    no verdict: the target failed or raised for another reason (or
           was refused), and the run fails;
  skipped  no verdict, and the runner counts no failure (a skip, an
           expected failure that happened, an xfail).
A verdict followed by " xN" means the runner reported the cell N times.

Exit status: that of the runner for the cell alone: check() has none
("-"); the CLI exits 0, 1 (leak) or 2 (error); unittest (@no_leaks,
LeakCheckMixin) and pytest 0 or 1; regrtest 0 or 2.

Known wrong: None, or (item, verdict, exit) for a cell whose right answer
is not given today: the issue item that fixes it, and what happens instead.
The test then checks that the wrong answer is still what happens, reports
the cell as KNOWN WRONG, and fails once the answer is right, so that this
table must be updated with the fix.
"""

ENTRY_POINTS = ("check()", "CLI", "@no_leaks", "LeakCheckMixin", "pytest",
                "pytest -n 2", "regrtest -R")

_CALLABLES = [
    # kind, outcome, verdict, exit
    ("function", "leaks", "leak"),
    ("function", "clean", "clean"),
    ("function", "raises", "error"),
    ("coroutine function", "leaks", "leak"),
    ("coroutine function", "clean", "clean"),
    ("coroutine function", "raises", "error"),
    ("generator function", "leaks", "leak"),
    ("generator function", "clean", "clean"),
    ("generator function", "raises", "error"),
    ("C callable", "leaks", "leak"),
    ("C callable", "clean", "clean"),
    ("C callable", "raises", "error"),
    ("nested check", "clean", "clean"),
    ("labelled", "clean", "clean"),
]

_SCRIPTS = [
    ("script", "leaks", "leak"),
    ("script", "clean", "clean"),
    ("script", "raises", "error"),
]

# Test methods of unittest.TestCase (of IsolatedAsyncioTestCase for the
# async ones).  "unexpected success" is the verdict error: exit 1.
_TESTCASE = [
    ("test method", "leaks", "leak"),
    ("test method", "clean", "clean"),
    ("test method", "raises", "error"),
    ("async test method", "leaks", "leak"),
    ("async test method", "clean", "clean"),
    ("async test method", "raises", "error"),
    ("subTest", "leaks", "leak"),
    ("subTest", "clean", "clean"),
    ("subTest", "raises", "error"),
    ("expectedFailure", "leaks", "leak"),
    ("expectedFailure", "clean", "error"),
    ("expectedFailure", "raises", "skipped"),
    ("skip", "leaks", "skipped"),
    ("setUpClass", "leaks", "leak"),
    ("setUpClass", "clean", "clean"),
    ("nested check", "clean", "clean"),
    ("labelled", "clean", "clean"),
]

_PYTEST = [
    ("test function", "leaks", "leak"),
    ("test function", "clean", "clean"),
    ("test function", "raises", "error"),
    ("parametrize", "leaks", "leak"),
    ("parametrize", "clean", "clean"),
    ("doctest", "leaks", "leak"),
    ("doctest", "clean", "clean"),
    ("doctest", "raises", "error"),
    ("xfail", "raises", "skipped"),
    ("xfail strict", "raises", "skipped"),
    ("xpass", "leaks", "leak"),
    ("xpass", "clean", "clean"),
    ("xpass strict", "leaks", "error"),
    ("xpass strict", "clean", "error"),
    ("pytest.skip", "leaks", "skipped"),
    ("function fixture", "leaks", "leak"),
    ("function fixture", "clean", "clean"),
    ("class fixture", "leaks", "leak"),
    ("class fixture", "clean", "clean"),
    ("module fixture", "leaks", "leak"),
    ("module fixture", "clean", "clean"),
    ("session fixture", "leaks", "leak"),
    ("session fixture", "clean", "clean"),
]

_EXIT = {
    "check()": {"leak": "-", "clean": "-", "error": "-", "skipped": "-"},
    "CLI": {"leak": "1", "clean": "0", "error": "2"},
    "regrtest -R": {"leak": "2", "clean": "0", "error": "2", "skipped": "0"},
}
_EXIT_DEFAULT = {"leak": "1", "clean": "0", "error": "1", "skipped": "0"}

# regrtest runs the whole test module in each of its runs: what a test
# keeps in state that setUpClass() makes and tearDownClass() drops is gone
# by the next run, and is no leak there.
# A test method skipped, or failing as expected, leaves the module passed:
# regrtest's verdict is the module's.  An unexpected success fails it in
# its first run, before any leak count.
_OVERRIDES = {
    ("regrtest -R", "setUpClass", "leaks"): "clean",
    ("regrtest -R", "skip", "leaks"): "clean",
    ("regrtest -R", "expectedFailure", "raises"): "clean",
    ("regrtest -R", "expectedFailure", "leaks"): "error",
    # pytest fails an unexpected success of a TestCase on its own.
    ("pytest", "expectedFailure", "leaks"): "error",
    ("pytest -n 2", "expectedFailure", "leaks"): "error",
}

# (entry point, kind, outcome) -> (item, verdict today, exit today)
KNOWN_WRONG = {
}


def _rows():
    rows = []
    for entry in ENTRY_POINTS:
        if entry in ("check()", "CLI"):
            cells = _CALLABLES + (_SCRIPTS if entry == "CLI" else [])
        elif entry.startswith("pytest"):
            cells = _PYTEST + _TESTCASE
        else:
            cells = _TESTCASE
        for kind, outcome, verdict in cells:
            verdict = _OVERRIDES.get((entry, kind, outcome), verdict)
            status = _EXIT.get(entry, _EXIT_DEFAULT)[verdict]
            known = KNOWN_WRONG.get((entry, kind, outcome))
            rows.append((entry, kind, outcome, verdict, status, known))
    return rows


CELLS = _rows()
