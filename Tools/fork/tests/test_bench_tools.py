"""Tests of the benchmark tools: benchlib reads callgrind's output format
itself, for the per-step breakdown of workload_instructions.py and for
instructions.py --profile; the runners check that each child ran in the
configuration it was meant to (tracing, traceback limit, sampling
interval); the report derives the sampling mode's rows from a run's
data.  No figure measured here is asserted: the reports' inputs are made
up."""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

FORK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(os.path.dirname(FORK), "bench")
sys.path.insert(0, BENCH)
import benchlib  # noqa: E402
import instructions  # noqa: E402
import report  # noqa: E402
import workload_instructions as wi  # noqa: E402
import allocations  # noqa: E402


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


class SampledConfigurationTest(unittest.TestCase):
    """The sampled configuration's command line, label and child check."""

    def test_labels_and_command(self):
        self.assertIn(("fork", 25, benchlib.SAMPLE_DEFAULT), benchlib.CONFIGS)
        self.assertEqual(benchlib.config_label("fork", 25, "512KiB"), "fork sampled")
        self.assertEqual(benchlib.config_label("fork", 25, "1GiB"), "fork sampled 1GiB")
        self.assertEqual(benchlib.config_label("fork", 0), "fork off")
        self.assertEqual(benchlib.config_label("pristine", 25), "pristine N=25")
        self.assertEqual(benchlib.python_cmd("py", 25, "512KiB"),
                         ["py", "-s", "-X", "tracemalloc=25",
                          "-X", "tracemalloc_sample=512KiB"])
        self.assertEqual(benchlib.python_cmd("py", 1), ["py", "-s", "-X", "tracemalloc=1"])
        labels = [benchlib.config_label(*c) for c in benchlib.CONFIGS]
        self.assertEqual(len(labels), len(set(labels)))
        labels = [benchlib.config_label(*c) for c in instructions.CONFIGS]
        self.assertEqual(len(labels), len(set(labels)))

    def test_parse_size(self):
        self.assertEqual(benchlib.parse_size("512KiB"), 512 * 1024)
        self.assertEqual(benchlib.parse_size("1GiB"), 1 << 30)
        self.assertEqual(benchlib.parse_size("4096"), 4096)
        with self.assertRaises(ValueError):
            benchlib.parse_size("lots")

    def test_check_tracing(self):
        ok = {"tracing": True, "traceback_limit": 25, "sample": 512 * 1024}
        self.assertIsNone(benchlib.check_tracing(ok, 25, "512KiB"))
        # the wrong interval, no sampling, or a child that cannot say
        self.assertIn("get_sample", benchlib.check_tracing(ok, 25, "1GiB"))
        self.assertIn("get_sample", benchlib.check_tracing(dict(ok, sample=None), 25, "512KiB"))
        no_key = {"tracing": True, "traceback_limit": 25}
        self.assertIn("did not report", benchlib.check_tracing(no_key, 25, "512KiB"))
        # sampling where exact tracing was meant
        self.assertIn("sampling", benchlib.check_tracing(ok, 25))
        # the older checks still hold for sampled configurations
        self.assertIn("NOT tracing",
                      benchlib.check_tracing(dict(ok, tracing=False), 25, "512KiB"))
        self.assertIn("limit",
                      benchlib.check_tracing(dict(ok, traceback_limit=1), 25, "512KiB"))
        # exact and off children of either build
        self.assertIsNone(benchlib.check_tracing(no_key, 25))
        self.assertIsNone(benchlib.check_tracing({"tracing": False, "sample": None}, 0))


@unittest.skipUnless(hasattr(__import__("_tracemalloc"), "get_sample"),
                     "this interpreter has no sampling mode")
class WorkloadChildTest(unittest.TestCase):
    """A real workload child reports what the runner checks."""

    def child(self, *options):
        script = os.path.join(BENCH, "workloads", "strings.py")
        cmd = [sys.executable, "-s", *options, script, "--scale", "0.01"]
        out = subprocess.run(cmd, stdout=subprocess.PIPE, check=True,
                             env=benchlib.child_env(), text=True).stdout
        return json.loads(out.strip().splitlines()[-1])

    def test_sampled_child(self):
        data = self.child("-X", "tracemalloc=25", "-X", "tracemalloc_sample=512KiB")
        self.assertIsNone(benchlib.check_tracing(data, 25, "512KiB"))
        self.assertIsNotNone(benchlib.check_tracing(data, 25, "1GiB"))
        self.assertIsNotNone(benchlib.check_tracing(data, 25))
        self.assertIsInstance(data["samples"], int)

    def test_exact_child_is_not_taken_for_sampled(self):
        data = self.child("-X", "tracemalloc=25")
        self.assertIsNone(data["sample"])
        self.assertIsNone(benchlib.check_tracing(data, 25))
        self.assertIsNotNone(benchlib.check_tracing(data, 25, "512KiB"))


def time_run(ratios):
    """A time suite's data with one repetition: ratios[workload][label]
    against a pristine off of 1 second."""
    labels = [benchlib.config_label(*c) for c in benchlib.CONFIGS]
    results = {}
    for name, row in ratios.items():
        results[name] = {label: {"times": [row.get(label, 1.0)], "error": None,
                                 "mismatch": None, "checks": [0]} for label in labels}
    return {"reps": 1, "slow_reps": 1, "scale": 1.0, "stat": "median",
            "workloads": list(ratios), "configs": labels, "results": results,
            "samples": {"fork sampled": benchlib.SAMPLE_DEFAULT}}


class SampledReportTest(unittest.TestCase):
    def test_time_targets(self):
        t = time_run({"a": {"fork sampled": 1.02}, "b": {"fork sampled": 1.10},
                      "c": {"fork sampled": 1.01}})
        _, _, per, geo, same = report.time_table(t)
        _, rows = report.target_rows(geo, same, per)
        by = {r[0]: r for r in rows}
        geomean = by["fork sampled / pristine off"]
        self.assertEqual(geomean[2:], ["<= 1.03x", "NOT met"])
        self.assertEqual(geomean[1], report.fmt_ratio((1.02 * 1.10 * 1.01) ** (1 / 3)))
        worst = by["fork sampled / pristine off, slowest workload (b)"]
        self.assertEqual(worst[1:], ["1.10x", "<= 1.08x", "NOT met"])
        t = time_run({"a": {"fork sampled": 1.02}, "c": {"fork sampled": 1.01}})
        _, _, per, geo, same = report.time_table(t)
        _, rows = report.target_rows(geo, same, per)
        by = {r[0]: r for r in rows}
        self.assertEqual(by["fork sampled / pristine off"][3], "met")
        self.assertEqual(by["fork sampled / pristine off, slowest workload (a)"][3], "met")
        # sampling against the same build untraced (fork off at 1.00x here)
        self.assertEqual(by["fork sampled / fork off"][1],
                         report.fmt_ratio((1.02 * 1.01) ** 0.5))
        self.assertIn("tracemalloc_sample=512KiB", report.sampled_description(t))

    def test_time_run_without_sampled_column(self):
        # runs saved before the configuration existed still render
        t = time_run({"a": {}})
        t["configs"] = [l for l in t["configs"] if l != "fork sampled"]
        del t["samples"]
        _, _, per, geo, same = report.time_table(t)
        _, rows = report.target_rows(geo, same, per)
        self.assertFalse([r for r in rows if "sampled" in r[0]])
        self.assertEqual(report.sampled_description(t), "")

    def test_non_sampled_pair_instructions(self):
        configs = [benchlib.config_label(*c) for c in instructions.CONFIGS]
        per_iter = {"pristine off": 100, "fork off": 101, "fork sampled": 109,
                    "fork sampled 1GiB": 107}
        results = {label: {"small_object": {"per_iter": per_iter.get(label, 300),
                                            "layouts": [per_iter.get(label, 300)]},
                           "empty_loop": {"per_iter": 50, "layouts": [50]}}
                   for label in configs}
        ins = {"workloads": ["small_object", "empty_loop"], "configs": configs,
               "results": results, "small": 1, "big": 2, "depth": 30,
               "samples": {"fork sampled": "512KiB", "fork sampled 1GiB": "1GiB"},
               "non_sampled": "fork sampled 1GiB"}
        header, rows = report.sampling_instruction_table(ins)
        by = {r[0]: dict(zip(header, r)) for r in rows}
        self.assertEqual(by["small_object"]["non-sampled pair: fork sampled 1GiB - fork off"],
                         "6.0")
        self.assertEqual(by["small_object"]["budget"], "<= 10")
        self.assertEqual(by["small_object"][""], "met")
        self.assertEqual(by["small_object"]["fork sampled - fork off (amortised)"], "8.0")
        self.assertEqual(by["empty_loop"]["non-sampled pair: fork sampled 1GiB - fork off"],
                         "0.0")
        ins["configs"].remove("fork sampled 1GiB")
        self.assertIsNone(report.sampling_instruction_table(ins))

    def test_bytes_per_sample(self):
        def rec(side, frames, sample, **kw):
            r = {"side": side, "frames": frames, "blocks": 10 ** 6, "sample": sample,
                 "peak_rss_kib": 1, "rss_kib": 1, "rss_before_kib": 1}
            r.update(kw)
            return r
        m = {"sizes": [10 ** 6], "frames": 1, "samples": ["512KiB"], "results": [
            rec("fork", 0, None), rec("pristine", 0, None),
            rec("pristine", 1, None, tm_memory=50, tm_memory_before=0, traces=1),
            rec("fork", 1, None, tm_memory=9_000_000, tm_memory_before=0,
                traces=1_000_000),
            rec("fork", 1, "512KiB", tm_memory=400_000, tm_memory_before=300_000,
                traces=40, traces_before=20)]}
        header, rows = report.sampled_memory_rows(m)
        row = dict(zip(header, rows[0]))
        self.assertEqual(row["B/sample"], "10,000")
        self.assertEqual(row["B/sample (marginal)"], "5,000")
        self.assertEqual(row["exact: B/trace"], "9.0")
        # the sampled record does not replace exact mode's in its table
        self.assertEqual(report.memory_summary(m)[10 ** 6]["fork"]["per_trace"], 9.0)


@unittest.skipUnless(hasattr(__import__("tracemalloc"), "is_tracing_allocations"),
                     "this interpreter has no allocation profiles")
class AllocationsSuiteTest(unittest.TestCase):
    """allocations.py: its launcher starts tracing as asked and the runner
    checks it; its report derives ratios from made-up counts."""

    def launch(self, frames, sample, allocs, labels=False,
               workload="strings"):
        script = os.path.join(BENCH, "workloads", workload + ".py")
        cmd = allocations.launch_cmd(sys.executable, frames, sample, allocs,
                                     labels, script, ["--scale", "0.01"])
        out = subprocess.run(cmd, stdout=subprocess.PIPE, check=True,
                             env=benchlib.child_env(), text=True).stdout
        return json.loads(out.strip().splitlines()[-1])

    def test_launcher(self):
        data = self.launch(25, "512KiB", True)
        self.assertIsNone(allocations._check(data, 25, "512KiB", True))
        self.assertIsNotNone(allocations._check(data, 25, "512KiB", False))
        data = self.launch(25, None, False)
        self.assertIsNone(allocations._check(data, 25, None, False))
        self.assertIsNotNone(allocations._check(data, 25, None, True))
        self.assertIsNotNone(allocations._check(data, 25, "512KiB", False))
        data = self.launch(0, None, False)
        self.assertIsNone(allocations._check(data, 0, None, False))

    @unittest.skipUnless(hasattr(__import__("tracemalloc"), "label"),
                         "this interpreter has no labels")
    def test_launcher_labels(self):
        data = self.launch(25, "512KiB", False, True, "requests_labelled")
        self.assertIsNone(allocations._check(data, 25, "512KiB", False,
                                             True))
        self.assertIsNotNone(allocations._check(data, 25, "512KiB", False,
                                                False))
        plain = self.launch(25, "512KiB", False, False, "requests_labelled")
        self.assertIsNone(allocations._check(plain, 25, "512KiB", False))
        self.assertIsNotNone(allocations._check(plain, 25, "512KiB", False,
                                                True))
        # Labels change no result of the workload.
        self.assertEqual(data["check"], plain["check"])

    def test_report(self):
        counts = {"pristine off": 100, "fork off": 101, "fork sampled": 102,
                  "fork sampled + allocations": 102, "fork N=25": 150,
                  "fork N=25 + allocations": 165}
        data = {"quick": True, "workloads": ["a", "b"], "scales": [0.05, 0.15],
                "configs": [c[0] for c in allocations.CONFIGS], "frames": 25,
                "sample": "512KiB", "instructions": {"a": counts, "b": {}},
                "rounds": [10, 11], "errors": [],
                "memory": {"fork N=25": [{"round": "start", "engine": 2 ** 20},
                                         {"round": 10, "engine": 2 ** 21, "nodes": 7}]}}
        header, rows = allocations.instruction_rows(data)
        by = {r[0]: dict(zip(header, r)) for r in rows}
        self.assertEqual(by["a"]["alloc. cost, N=25"], "1.100x")
        self.assertEqual(by["b"]["alloc. cost, N=25"], "n/a")
        self.assertEqual(by["geometric mean"]["fork off / pristine off"], "1.010x")
        header, rows = allocations.memory_rows(data)
        self.assertEqual(rows[1], ["exact_recursion(10)", "2,047", "2.00 MiB (7 nodes)"])
        text = report.results_markdown({"kind": "custom", "meta": {
            "date": "d", "commit": "c", "machine": {"cpu": "x", "cores": 2, "memory": "m",
                                                    "system": "s", "kernel": "k"}},
            "allocations": data})
        self.assertIn("## Allocation profiles", text)


if __name__ == "__main__":
    unittest.main()
