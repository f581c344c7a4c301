"""Tests of the benchmark tools' parsing: benchlib reads callgrind's
output format itself, for the per-step breakdown of
workload_instructions.py and for instructions.py --profile."""

import os
import sys
import tempfile
import textwrap
import unittest

FORK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(os.path.dirname(FORK), "bench")
sys.path.insert(0, BENCH)
import benchlib  # noqa: E402
import workload_instructions as wi  # noqa: E402


# Callgrind's format with name compression ("(id) name" once, "(id)" after),
# relative positions, a recursion level ('2), a GCC clone (.part.0), an
# inlined file (fi=) and calls, whose following cost line is the callee's
# inclusive cost and must not count as the caller's own.
SAMPLE = textwrap.dedent("""\
    # callgrind format
    version: 1
    creator: callgrind-3.19.0
    positions: line
    events: Ir
    summary: 1189

    fl=(1) /build/Python/tracemalloc.c
    fn=(1) _PyTraceMalloc_Malloc
    10 100
    +2 20
    cfl=(2) /build/Objects/obmalloc.c
    cfn=(2) _PyObject_Malloc
    calls=7 55
    * 700
    fi=(3) /build/Python/tracemalloc_store.c
    +1 5

    fl=(2)
    fn=(2)
    55 300

    fl=(4) /build/Python/ceval.c
    fn=(3) _PyEval_EvalFrameDefault'2
    100 40
    cfl=(1)
    cfn=(1)
    calls=3 10
    * 9000
    cfl=(5) /build/Python/tracemalloc_cct.c
    cfn=(4) _PyTraceMalloc_CurrentNode_unlocked.part.0
    calls=2 300
    * 444

    fn=(5) _PyEval_EvalFrameDefault
    101 4

    fl=(5)
    fn=(4)
    300 500
    fn=(6) cct_mystery
    310 16
    """)


class ParseCallgrindTest(unittest.TestCase):
    def parse(self, text):
        with tempfile.NamedTemporaryFile("w", suffix=".cg",
                                         delete=False) as f:
            f.write(text)
        self.addCleanup(os.unlink, f.name)
        cost, calls, files = benchlib.parse_callgrind(f.name)
        return cost, calls, wi.engine_functions(files)

    def test_self_costs_calls_and_engine_functions(self):
        cost, calls, engine = self.parse(SAMPLE)
        self.assertEqual(cost, {
            "_PyTraceMalloc_Malloc": 125,       # call cost left out
            "_PyObject_Malloc": 300,
            "_PyEval_EvalFrameDefault": 44,     # both recursion levels
            "_PyTraceMalloc_CurrentNode_unlocked": 500,     # clone merged
            "cct_mystery": 16,
        })
        self.assertEqual(calls, {"_PyObject_Malloc": 7,
                                 "_PyTraceMalloc_Malloc": 3,
                                 "_PyTraceMalloc_CurrentNode_unlocked": 2})
        self.assertEqual(engine, {"_PyTraceMalloc_Malloc",
                                  "_PyTraceMalloc_CurrentNode_unlocked",
                                  "cct_mystery"})
        self.assertEqual(sum(cost.values()), 985)

    def test_instruction_positions(self):
        # With --dump-instr=yes each cost line starts with an address, then
        # the line: the cost is the third column.
        cost, calls, _ = self.parse(textwrap.dedent("""\
            positions: instr line
            events: Ir

            fl=(1) /build/Python/tracemalloc.c
            fn=(1) retrace_object
            0x1000 10 3
            +4 * 5
            cfn=(2) memo_set
            calls=1 0x2000 20
            +4 * 40
            fn=(2)
            0x2000 20 7
            """))
        self.assertEqual(cost, {"retrace_object": 8, "memo_set": 7})
        self.assertEqual(calls, {"memo_set": 1})

    def test_steps(self):
        _, _, engine = self.parse(SAMPLE)
        self.assertEqual(wi.step_of("_PyTraceMalloc_Malloc", engine),
                         "alloc hooks")
        self.assertEqual(
            wi.step_of("_PyTraceMalloc_CurrentNode_unlocked", engine),
            "new sites")
        self.assertEqual(wi.step_of("cct_mystery", engine), "other engine")
        self.assertEqual(wi.step_of("_PyObject_Malloc", engine),
                         "interpreter")
        # Every listed function belongs to one step only.
        listed = [fn for _, functions in wi.STEPS for fn in functions]
        self.assertEqual(len(listed), len(set(listed)))

    def test_breakdown_subtracts_sizes_and_configurations(self):
        def run(cost, calls):
            return (cost, calls, {"retrace_object"})
        details = {"w": {
            "fork off": {1: run({"f": 100}, {}), 2: run({"f": 300}, {})},
            "fork N=1": {
                1: run({"f": 110, "retrace_object": 50},
                       {"_PyTraceMalloc_NewReference": 1}),
                2: run({"f": 330, "retrace_object": 250},
                       {"_PyTraceMalloc_NewReference": 3}),
            },
        }}
        work = {"w": {"fork off": 200}}
        steps = wi.breakdown(details, work, ["w"], 1, 2)["w"]
        self.assertEqual(steps["steps"]["re-trace"], 200)
        self.assertEqual(steps["steps"]["interpreter"], 20)
        self.assertEqual(steps["calls"]["re-traces"], 2)
        self.assertEqual(steps["calls"]["allocations"], 0)


if __name__ == "__main__":
    unittest.main()
