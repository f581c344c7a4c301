#!/usr/bin/env python3
"""Turn a saved benchmark run into tables, Tools/bench/RESULTS.md and the
summary between the markers in the repository README.md.

    python3 Tools/bench/report.py [RUN.json]

Without an argument the run behind the current RESULTS.md
(results/published.json, written with it) is used, or else the latest full
run (results/latest-full.json), or else the latest quick run.  run.py imports this module to print the same
tables while it runs.
"""

import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

RESULTS_MD = os.path.join(benchlib.BENCH_DIR, "RESULTS.md")
# Results measured apart from a full run (by hand, with their own date and
# commit), appended to RESULTS.md as they are.
APART_MD = os.path.join(benchlib.BENCH_DIR, "results", "measured-apart.md")
README = os.path.join(benchlib.REPO_ROOT, "README.md")
SUMMARY_FALLBACK = os.path.join(benchlib.BENCH_DIR, "README-summary.md")
PUBLISHED = os.path.join(benchlib.RESULTS_DIR, "published.json")
MARK_START = "<!-- bench-summary:start -->"
MARK_END = "<!-- bench-summary:end -->"

# Targets from the project brief (reported, never asserted).
TARGETS = {
    "fork off": 1.01,
    "fork N=1": 1.20,
    "fork N=25": 1.25,
    # issue 22: sampling at the default interval, against pristine off
    "fork sampled": 1.03,
}
# The same, for the worst workload instead of the geometric mean.
MAX_TARGETS = {
    "fork sampled": 1.08,
}
# Bytes per live small block (issue 20: 8 or fewer at 10^6 blocks; the
# 3.11 brief asked for 16).  The row shows the engine memory per trace,
# which includes the interpreter's start-up traces and the fixed tables,
# and in brackets the marginal bytes per added block.
BOOKKEEPING_TARGET = 8


# ------------------------------------------------------------------ rendering

def render_text(header, rows, align=None):
    cells = [header] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    align = align or (["<"] + [">"] * (len(header) - 1))
    out = []
    for i, r in enumerate(cells):
        out.append("  ".join(f"{c:{a}{w}}" for c, a, w in zip(r, align, widths)).rstrip())
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def render_md(header, rows, align=None):
    align = align or (["<"] + [">"] * (len(header) - 1))
    out = ["| " + " | ".join(header) + " |",
           "|" + "|".join(":---" if a == "<" else "---:" for a in align) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


def fmt_ratio(x):
    if x is None or not math.isfinite(x):
        return "n/a"
    return f"{x:.2f}x" if x < 100 else f"{x:.0f}x"


def fmt_num(x, nd=1):
    if x is None or not math.isfinite(x):
        return "n/a"
    return f"{x:,.{nd}f}"


def pow10(n):
    e = int(round(math.log10(n))) if n > 0 else 0
    return f"10^{e}" if 10 ** e == n else f"{n:,}"


# ----------------------------------------------------------------- time suite

def time_summary(t):
    """Per workload and config: median (or min) seconds and ratio to pristine
    off; geometric means per config."""
    stat = benchlib.median if t.get("stat", "median") == "median" else min
    labels = t["configs"]
    per = {}
    for name in t["workloads"]:
        res = t["results"].get(name, {})
        base_times = res.get("pristine off", {}).get("times", [])
        base = stat(base_times) if base_times else float("nan")
        row = {}
        for label in labels:
            r = res.get(label, {})
            times = r.get("times", [])
            value = stat(times) if times else float("nan")
            row[label] = {
                "seconds": value,
                "ratio": value / base if times and base_times else float("nan"),
                "reps": len(times),
                "error": r.get("error"),
                "mismatch": r.get("mismatch"),
                "spread": ((max(times) - min(times)) / benchlib.median(times)) if len(times) > 1 else 0.0,
            }
        per[name] = row
    geo = {label: benchlib.geomean([per[n][label]["ratio"] for n in per]) for label in labels}
    # Fork relative to pristine at the same setting.
    same = {}
    for frames in ("off", "N=1", "N=25"):
        same[frames] = benchlib.geomean(
            [per[n][f"fork {frames}"]["ratio"] / per[n][f"pristine {frames}"]["ratio"]
             for n in per
             if per[n][f"pristine {frames}"]["ratio"] > 0])
    return per, geo, same


def time_table(t):
    per, geo, same = time_summary(t)
    labels = t["configs"]
    header = ["workload", "pristine off (s)", "noise"] + labels
    rows = []
    for name, row in per.items():
        base = row["pristine off"]
        cells = [name, fmt_num(base["seconds"], 3), f"{100 * base['spread']:.0f}%"]
        for label in labels:
            c = row[label]
            if c["error"] and not c["reps"]:
                cells.append("ERR")
                continue
            s = fmt_ratio(c["ratio"])
            if c["mismatch"] or c["error"]:
                s += "!"
            if c["reps"] < t["reps"]:
                s += f" ({c['reps']})"
            cells.append(s)
        rows.append(cells)
    rows.append(["geometric mean", "", ""] + [fmt_ratio(geo[l]) for l in labels])
    return header, rows, per, geo, same


def time_notes(t, per):
    notes = []
    for name, row in per.items():
        for label, c in row.items():
            if c["error"]:
                notes.append(f"{name} / {label}: {c['error']}")
            if c["mismatch"]:
                notes.append(f"{name} / {label}: result differs from pristine off: {c['mismatch']}")
    return notes


def worst_workload(per, label):
    """(ratio, workload) of the workload where *label* is slowest against
    pristine off, or (nan, None)."""
    worst = (float("nan"), None)
    for name, row in per.items():
        r = row.get(label, {}).get("ratio", float("nan"))
        if math.isfinite(r) and not (math.isfinite(worst[0]) and r <= worst[0]):
            worst = (r, name)
    return worst


def sampled_description(t):
    """What the sampled configurations of a time run were, in words."""
    samples = t.get("samples") or {}
    return "; ".join(f"*{label}* = the fork with `-X tracemalloc=25 "
                     f"-X tracemalloc_sample={sample}` (Poisson sampling, one "
                     f"sample per {sample} allocated on average"
                     f"{', the default interval' if sample == benchlib.SAMPLE_DEFAULT else ''}"
                     f", 25-frame tracebacks)"
                     for label, sample in samples.items())


def target_rows(geo, same, per=None):
    rows = []
    for label, target in TARGETS.items():
        g = geo.get(label, float("nan"))
        if label not in geo:
            continue  # a run from before the configuration existed
        status = "n/a" if not math.isfinite(g) else ("met" if g <= target else "NOT met")
        rows.append([f"{label} / pristine off", fmt_ratio(g), f"<= {target:.2f}x", status])
        if label in MAX_TARGETS and per is not None:
            worst, name = worst_workload(per, label)
            status = ("n/a" if not math.isfinite(worst) else
                      "met" if worst <= MAX_TARGETS[label] else "NOT met")
            rows.append([f"{label} / pristine off, slowest workload ({name or 'n/a'})",
                         fmt_ratio(worst), f"<= {MAX_TARGETS[label]:.2f}x", status])
    for frames in ("N=1", "N=25"):
        rows.append([f"fork {frames} / pristine {frames}", fmt_ratio(same[frames]), "", ""])
    if "fork sampled" in geo and per is not None:
        # Against the same build untraced: sampling's own cost, whatever
        # the fork's untraced path costs against pristine.
        rows.append(["fork sampled / fork off", fmt_ratio(benchlib.geomean(
            [row["fork sampled"]["ratio"] / row["fork off"]["ratio"]
             for row in per.values() if row["fork off"]["ratio"] > 0])), "", ""])
    return ["geometric mean (unless said)", "measured", "target", ""], rows


# --------------------------------------------------------------- memory suite

def memory_summary(m):
    """vals[size][side] = dict of per-block figures (NaN where missing)."""
    by = {(r["side"], r["frames"], r["blocks"]): r for r in m["results"]
          if r.get("sample") is None}
    frames = m.get("frames", 1)
    nan = float("nan")
    out = {}
    for size in m["sizes"]:
        out[size] = {}
        for side in ("pristine", "fork"):
            on = by.get((side, frames, size))
            off = by.get((side, 0, size))
            v = dict(per_trace=nan, marginal=nan, rss_peak=nan, rss_growth=nan,
                     peak_on=nan, peak_off=nan, exact=True)
            if on and not on.get("error"):
                v["per_trace"] = on["tm_memory"] / max(1, on["traces"])
                v["marginal"] = (on["tm_memory"] - on["tm_memory_before"]) / size
                v["peak_on"] = on["peak_rss_kib"] * 1024
                v["exact"] = on.get("traces_exact", True)
                if off and not off.get("error"):
                    v["peak_off"] = off["peak_rss_kib"] * 1024
                    v["rss_peak"] = (on["peak_rss_kib"] - off["peak_rss_kib"]) * 1024 / size
                    v["rss_growth"] = ((on["rss_kib"] - on["rss_before_kib"])
                                       - (off["rss_kib"] - off["rss_before_kib"])) * 1024 / size
            out[size][side] = v
    return out


def memory_rows(m):
    """Two tables: tracemalloc's own accounting, and RSS."""
    summ = memory_summary(m)
    h1 = ["live blocks", "pristine B/trace", "fork B/trace",
          "pristine B/block (marginal)", "fork B/block (marginal)"]
    h2 = ["live blocks", "pristine RSS B/block (peak)", "fork RSS B/block (peak)",
          "pristine RSS B/block (growth)", "fork RSS B/block (growth)",
          "pristine peak off/on", "fork peak off/on"]
    r1, r2 = [], []
    for size, vals in summ.items():
        p, f = vals["pristine"], vals["fork"]
        star = lambda v: "" if v["exact"] else "*"
        r1.append([pow10(size), fmt_num(p["per_trace"]) + star(p), fmt_num(f["per_trace"]) + star(f),
                   fmt_num(p["marginal"]), fmt_num(f["marginal"])])
        peaks = []
        for v in (p, f):
            if math.isfinite(v["peak_on"]) and math.isfinite(v["peak_off"]):
                peaks.append(f"{benchlib.human_bytes(v['peak_off'])} / {benchlib.human_bytes(v['peak_on'])}")
            else:
                peaks.append("n/a")
        r2.append([pow10(size), fmt_num(p["rss_peak"]), fmt_num(f["rss_peak"]),
                   fmt_num(p["rss_growth"]), fmt_num(f["rss_growth"])] + peaks)
    return (h1, r1), (h2, r2), summ


def sampled_memory_rows(m):
    """The sampling mode's engine memory per size and interval, beside
    exact mode's bytes per live block; None for a run without it."""
    sampled = [r for r in m["results"] if r.get("sample") is not None]
    if not sampled:
        return None
    exact = memory_summary(m)
    header = ["live blocks", "interval", "engine memory", "samples",
              "B/sample", "B/sample (marginal)", "engine B/live block",
              "exact: engine memory", "exact: B/trace"]
    rows = []
    intervals = m.get("samples") or sorted({r["sample"] for r in sampled})
    for size in m["sizes"]:
        ex = next((e for e in m["results"] if e.get("sample") is None
                   and e["side"] == "fork" and e["frames"] and e["blocks"] == size
                   and not e.get("error")), None)
        for interval in intervals:
            r = next((r for r in sampled if r["blocks"] == size and r["sample"] == interval),
                     None)
            if r is None or r.get("error"):
                rows.append([pow10(size), interval] + ["ERR" if r else "n/a"] * (len(header) - 2))
                continue
            added = r["traces"] - r["traces_before"]
            marginal = ((r["tm_memory"] - r["tm_memory_before"]) / added
                        if added > 0 else float("nan"))
            rows.append([pow10(size), interval, benchlib.human_bytes(r["tm_memory"]),
                         f"{r['traces']:,}",
                         fmt_num(r["tm_memory"] / max(1, r["traces"]), 0),
                         fmt_num(marginal, 0),
                         fmt_num(r["tm_memory"] / size, 3),
                         benchlib.human_bytes(ex["tm_memory"]) if ex else "n/a",
                         fmt_num(exact[size]["fork"]["per_trace"])])
    return header, rows


def sampled_memory_intro(m):
    return (f"Sampling mode (`-X tracemalloc={m.get('frames', 1)} "
            f"-X tracemalloc_sample=INTERVAL`; {benchlib.SAMPLE_DEFAULT} is the "
            f"default): only sampled blocks have a trace.  *engine memory* = "
            f"`get_tracemalloc_memory()` with the blocks live; *samples* = "
            f"`len(tracemalloc.take_snapshot().traces)` then; *B/sample* = engine "
            f"memory / samples (it includes the engine's fixed tables, so it falls "
            f"as samples grow); *marginal* = growth of the engine memory across the "
            f"allocation / samples added (0 while the preallocated table has room: "
            f"the small interval shows what a sample costs once it has not); "
            f"*engine B/live block* = engine memory / live blocks, beside exact "
            f"mode's engine memory and bytes per trace (same sizes).")


def memory_notes(m):
    return [f"{r['side']} frames={r['frames']} blocks={r['blocks']}: {r['error']}"
            for r in m["results"] if r.get("error")]


# -------------------------------------------------------------- scaling suite

def scaling_summary(s):
    """cost[(side, frames)][axis][point] = ns per allocation, traced - off."""
    runs = s["runs"]  # list of {side, frames, rep, live: {L: ns}, depth: {D: ns}}
    per = {}
    for r in runs:
        if r.get("error"):
            continue
        key = (r["side"], r["frames"])
        for axis in ("live", "depth"):
            for point, ns in r[axis].items():
                per.setdefault(key, {}).setdefault(axis, {}).setdefault(int(point), []).append(ns)
    # min over the runs: each value is already a best-of-N timing, and on a
    # shared machine noise only ever adds time.
    med = {k: {a: {p: min(v) for p, v in d.items()} for a, d in ax.items()}
           for k, ax in per.items()}
    cost = {}
    for side in ("pristine", "fork"):
        off = med.get((side, 0))
        for frames in s["frames"]:
            on = med.get((side, frames))
            if not on or not off:
                continue
            cost[(side, frames)] = {
                axis: {p: on[axis][p] - off[axis].get(p, float("nan")) for p in on[axis]}
                for axis in on}
    return med, cost


def scaling_tables(s):
    med, cost = scaling_summary(s)
    cols = [(side, f) for side in ("pristine", "fork") for f in s["frames"]]
    tables = {}
    for axis, title, points in (("live", "live blocks", s["live"]),
                                ("depth", "stack depth", s["depths"])):
        header = [title] + [f"{side} N={f}" for side, f in cols] + \
                 [f"{side} off (abs)" for side in ("pristine", "fork")]
        rows = []
        for p in points:
            cells = [pow10(p) if axis == "live" else str(p)]
            for key in cols:
                v = cost.get(key, {}).get(axis, {}).get(p)
                cells.append(fmt_num(v, 0) if v is not None else "n/a")
            for side in ("pristine", "fork"):
                v = med.get((side, 0), {}).get(axis, {}).get(p)
                cells.append(fmt_num(v, 0) if v is not None else "n/a")
            rows.append(cells)
        # growth factor: last point / first point
        growth = ["growth (last/first)"]
        for key in cols:
            d = cost.get(key, {}).get(axis, {})
            a, b = d.get(points[0]), d.get(points[-1])
            growth.append(fmt_ratio(b / a) if a and b and a > 0 else "n/a")
        growth += ["", ""]
        rows.append(growth)
        tables[axis] = (header, rows)
    return tables, cost


# --------------------------------------------------------- instruction suite

def instruction_pairs(ins, spread=None):
    """pair[name][config] = instructions per pair (the loop's iteration,
    minus the control loop's where there is one), the median over the heap
    layouts; spread[name][config] = (min, max) over them, if asked."""
    import instructions
    res = ins.get("results", {})
    out = {}
    for name, work, control in instructions.PAIRS:
        if work not in ins.get("workloads", []):
            continue
        if control and control not in ins["workloads"]:
            continue
        row = {}
        for label in ins["configs"]:
            r = res.get(label)
            if not r or work not in r:
                continue
            values = r[work].get("layouts", [r[work]["per_iter"]])
            if control:
                cvalues = r[control].get("layouts", [r[control]["per_iter"]])
                values = [a - b for a, b in zip(values, cvalues)]
            row[label] = benchlib.median(values)
            if spread is not None:
                spread.setdefault(name, {})[label] = (min(values), max(values))
        out[name] = row
    return out


def instruction_tables(ins):
    import instructions
    labels = ins["configs"]
    h1 = ["loop"] + labels + ["what it does"]
    r1 = []
    for name in ins["workloads"]:
        cells = [name]
        for label in labels:
            r = ins.get("results", {}).get(label, {}).get(name)
            cells.append(fmt_num(r["per_iter"], 1) if r else "ERR")
        cells.append(ins.get("descriptions", {}).get(name, ""))
        r1.append(cells)
    h2 = ["pair", "pristine off", "fork off - pristine off", "budget",
          "pristine N=1 - off", "fork N=1 - off", "fork N=25 - off",
          "budget", "budgets", "fork N=1 over layouts"]
    r2 = []
    spread = {}
    for name, row in instruction_pairs(ins, spread).items():
        untraced_budget, traced_budget = instructions.BUDGETS.get(name, (None, None))
        def d(a, b):
            return row[a] - row[b] if a in row and b in row else None
        untraced = d("fork off", "pristine off")
        traced = [d("fork N=1", "fork off"), d("fork N=25", "fork off")]
        status = "n/a"
        if untraced is not None and None not in traced and untraced_budget is not None:
            ok = untraced <= untraced_budget and max(traced) <= traced_budget
            status = "met" if ok else "NOT met"
        r2.append([name, fmt_num(row.get("pristine off"), 1),
                   fmt_num(untraced, 1) if untraced is not None else "n/a",
                   f"<= {untraced_budget:g}" if untraced_budget is not None else "",
                   fmt_num(d("pristine N=1", "pristine off"), 1)
                   if d("pristine N=1", "pristine off") is not None else "n/a"]
                  + [fmt_num(t, 1) if t is not None else "n/a" for t in traced]
                  + [f"<= {traced_budget:g}" if traced_budget is not None else "",
                     status, layout_range(spread, name, "fork N=1", row.get("fork off"))])
    return (h1, r1), (h2, r2)


def sampling_instruction_table(ins):
    """The sampling mode's table: what a pair that is not sampled adds
    over untraced (fork sampled at the non-sampled interval - fork off),
    with issue 22's budget, and the amortised cost at the default
    interval.  None for a run without the sampled configurations."""
    import instructions
    label = ins.get("non_sampled")
    if not label or label not in ins.get("configs", []):
        return None
    amortised = config_label_default_sampled(ins)
    header = ["pair", "fork off", f"non-sampled pair: {label} - fork off",
              "budget", "", f"{label} - pristine off"]
    if amortised:
        header.append(f"{amortised} - fork off (amortised)")
    rows = []
    spread = {}
    for name, row in instruction_pairs(ins, spread).items():
        budget = instructions.SAMPLING_BUDGETS.get(name)
        def d(a, b):
            return row[a] - row[b] if a in row and b in row else None
        added = d(label, "fork off")
        status = "n/a"
        if added is not None and budget is not None:
            status = "met" if added <= budget else "NOT met"
        cells = [name, fmt_num(row.get("fork off"), 1),
                 fmt_num(added, 1) if added is not None else "n/a",
                 f"<= {budget:g}" if budget is not None else "", status,
                 fmt_num(d(label, "pristine off"), 1)
                 if d(label, "pristine off") is not None else "n/a"]
        if amortised:
            cells.append(fmt_num(d(amortised, "fork off"), 1)
                         if d(amortised, "fork off") is not None else "n/a")
        rows.append(cells)
    return header, rows


def config_label_default_sampled(ins):
    """The label of the configuration sampled at the default interval, if
    the run had one."""
    for label, sample in (ins.get("samples") or {}).items():
        if sample == benchlib.SAMPLE_DEFAULT:
            return label
    return None


def sampling_instruction_intro(ins):
    label = ins.get("non_sampled")
    sample = (ins.get("samples") or {}).get(label, "?")
    return (f"Sampling mode (`-X tracemalloc=25 -X tracemalloc_sample=...`): what "
            f"a pair that is not sampled adds over untraced, per pair.  *{label}* "
            f"samples every {sample} on average: a loop allocates a few MB at "
            f"most, so almost surely none of its pairs is sampled and each takes "
            f"the non-sampled path (a countdown decrement and a branch on "
            f"allocation, a filter check on free).  At the default interval "
            f"({benchlib.SAMPLE_DEFAULT}) a few pairs of a loop are sampled and "
            f"their cost is spread over the others: the last column is that "
            f"amortised cost, not the non-sampled pair's.  Budget: issue 22's "
            f"aim, under {_sampling_budget()} instructions per pair.")


def _sampling_budget():
    import instructions
    return instructions.SAMPLING_BUDGET


def layout_range(spread, name, label, base):
    lo_hi = spread.get(name, {}).get(label)
    if lo_hi is None or base is None:
        return "n/a"
    lo, hi = lo_hi
    return f"{fmt_num(lo - base, 0)} - {fmt_num(hi - base, 0)}"


def instruction_notes(ins):
    return [f"{k}: {v}" for k, v in ins.get("errors", {}).items()]


def instruction_intro(ins):
    return (f"Instructions (callgrind `Ir`) per loop iteration: (Ir of {ins['big']:,} "
            f"iterations - Ir of {ins['small']:,}) / {ins['big'] - ins['small']:,}, "
            f"counted only inside the loop's exec() after a warm-up, the loop "
            f"{ins['depth']} frames deep; the median over {ins.get('layouts', 1)} heap "
            f"layouts (live padding blocks shifting the loop's addresses; the last "
            f"column gives the fork's traced range over them).  Each iteration "
            f"allocates one block and frees the previous one.")


# ------------------------------------------------------- long-running suite

FLAT_LIMIT = 1.10  # max of the second half / max of the warm first half


def longrun_summary(lr):
    """Per config: sampled series, growth, bytes per live trace."""
    out = {}
    for label, r in lr.get("results", {}).items():
        if r.get("error"):
            out[label] = {"error": r["error"]}
            continue
        s = r["engine_memory"]
        n = len(s)
        warm = s[max(1, n // 10): max(2, n // 2)] or s[:1]
        late = s[n // 2:] or s[-1:]
        growth = max(late) / max(warm) if max(warm) else float("nan")
        picks = sorted({0, n // 4, n // 2, (3 * n) // 4, n - 1})
        out[label] = {
            "samples": [(i + 1, s[i]) for i in picks],
            "max": max(s), "growth": growth, "flat": growth <= FLAT_LIMIT,
            "per_trace": s[-1] / max(1, r["traces"]), "traces": r["traces"],
            "max_per_trace": max(s) / max(1, r["traces"]),
            "traced_first": r["traced_memory"][0], "traced_last": r["traced_memory"][-1],
            "seconds": r.get("seconds", float("nan")),
        }
    return out


def longrun_table(lr):
    summ = longrun_summary(lr)
    rounds = lr["rounds"]
    picks = sorted({0, rounds // 4, rounds // 2, (3 * rounds) // 4, rounds - 1})
    header = (["config"] + [f"round {i + 1} (KiB)" for i in picks] +
              ["max (KiB)", "growth", "", "live traces", "engine B/trace (last / max)",
               "traced KiB first -> last"])
    rows = []
    for frames in lr["frames"]:
        for side in ("fork", "pristine"):
            label = f"{side} N={frames}"
            v = summ.get(label)
            if v is None:
                continue
            if "error" in v:
                rows.append([label] + ["ERR"] * (len(header) - 1))
                continue
            rows.append([label] + [fmt_num(b / 1024, 0) for _, b in v["samples"]] +
                        [fmt_num(v["max"] / 1024, 0), fmt_ratio(v["growth"]),
                         "flat" if v["flat"] else "GROWS", f"{v['traces']:,}",
                         f"{fmt_num(v['per_trace'], 1)} / {fmt_num(v['max_per_trace'], 1)}",
                         f"{v['traced_first'] / 1024:,.0f} -> {v['traced_last'] / 1024:,.0f}"])
    return header, rows, summ


def longrun_intro(lr):
    return (f"Long-running: {lr['rounds']} rounds of exponential recursion, "
            f"random-shape tree walks and stacks over {lr['deep']} frames deep diverging "
            f"near the root, a new seed each round, with {lr['live_objects']:,} "
            f"objects live throughout.  Engine memory = "
            f"`get_tracemalloc_memory()` after each round; *growth* = its max "
            f"over the second half / its max over rounds {max(2, lr['rounds'] // 10 + 1)}"
            f"-{lr['rounds'] // 2} (flat: <= {FLAT_LIMIT:.2f}x); *engine B/trace* "
            f"= engine memory after the last round (and at its maximum) / live traces "
            f"after the last round.")


# -------------------------------------------------------------- snapshot suite

def snapshot_cells(sn):
    """cell[(side, size)] = record."""
    return {(r["side"], r["size"]): r for r in sn.get("results", [])}


def snapshot_table(sn):
    cells = snapshot_cells(sn)
    header = ["operation"]
    for size in sn["sizes"]:
        header += [f"fork {pow10(size)} (s)", f"pristine {pow10(size)} (s)",
                   f"speed-up {pow10(size)}"]
    if len(sn["sizes"]) > 1:
        header.append(f"fork growth {pow10(sn['sizes'][-2])} -> {pow10(sn['sizes'][-1])}")
    rows = []

    def value(side, size, op):
        r = cells.get((side, size))
        if r is None or r.get("error"):
            return None, "ERR"
        if op in r.get("times", {}):
            t = r["times"][op]
            return t, fmt_num(t, 3)
        if op in r.get("skipped", {}):
            return None, f"skipped (~{r['skipped'][op]:,.0f}s)"
        return None, "n/a"

    for op in sn["operations"]:
        row = [op]
        for size in sn["sizes"]:
            f, fs = value("fork", size, op)
            p, ps = value("pristine", size, op)
            row += [fs, ps, fmt_ratio(p / f) if f and p else "n/a"]
        if len(sn["sizes"]) > 1:
            a, _ = value("fork", sn["sizes"][-2], op)
            b, _ = value("fork", sn["sizes"][-1], op)
            row.append(fmt_ratio(b / a) if a and b else "n/a")
        rows.append(row)
    for what, key in (("file size (KiB)", "file_bytes"), ("traces", "traces"),
                      ("traces, 2nd snapshot (1st held)", "traces_2nd")):
        row = [what]
        for size in sn["sizes"]:
            vals = []
            for side in ("fork", "pristine"):
                r = cells.get((side, size), {})
                v = r.get(key)
                vals.append(v)
                if v is None:
                    row.append("n/a")
                elif key == "file_bytes":
                    row.append(fmt_num(v / 1024, 0))
                else:
                    row.append(f"{v:,}")
            f, p = vals
            if key == "file_bytes":
                row.append(f"{f / p:.3f} of pristine" if f and p else "n/a")
            else:
                row.append("")
        if len(sn["sizes"]) > 1:
            a = cells.get(("fork", sn["sizes"][-2]), {}).get(key)
            b = cells.get(("fork", sn["sizes"][-1]), {}).get(key)
            row.append(fmt_ratio(b / a) if a and b else "n/a")
        rows.append(row)
    return header, rows


def snapshot_intro(sn):
    return (f"Snapshots: live traces with {sn['frames']}-frame tracebacks "
            f"({sn['leaves']} paths, 3 lines each), timed inside one child per size "
            f"and interpreter with tracing on (`tracemalloc.start({sn['frames']})` after "
            f"start-up, so the counts are the program's), "
            f"best of up to 3 timings within a second; *speed-up* = pristine / fork.  "
            f"Operations predicted (linearly, from the previous size) to take more "
            f"than {sn.get('op_cap', 0):.0f} s on one side are skipped at that size.")


def snapshot_notes(sn):
    return [f"{r['side']} {r['size']:,}: {r['error']}"
            for r in sn.get("results", []) if r.get("error")]


# --------------------------------------------------------------------- output

def all_text_tables(data):
    """The tables as plain text, for the terminal."""
    out = []
    if "time" in data:
        header, rows, per, geo, same = time_table(data["time"])
        out.append(f"Time: ratio of the {data['time'].get('stat', 'median')} timed-section "
                   f"wall time to pristine off ({data['time']['reps']} interleaved reps)")
        out.append(render_text(header, rows))
        out.append("")
        out.append(render_text(*target_rows(geo, same, per)))
        if sampled_description(data["time"]):
            out.append(sampled_description(data["time"]).replace("*", "").replace("`", ""))
        for note in time_notes(data["time"], per):
            out.append("  ! " + note)
        out.append("")
    if "memory" in data:
        t1, t2, _ = memory_rows(data["memory"])
        out.append(f"Memory: tracemalloc bookkeeping per live block "
                   f"(-X tracemalloc={data['memory'].get('frames', 1)}, live blocks = {data['memory'].get('object', 'object()')}; "
                   f"* = trace count computed, not counted)")
        out.append(render_text(*t1))
        out.append("")
        out.append(render_text(*t2))
        sampled = sampled_memory_rows(data["memory"])
        if sampled:
            out.append("")
            out.append(sampled_memory_intro(data["memory"]).replace("*", "").replace("`", ""))
            out.append(render_text(*sampled))
        for note in memory_notes(data["memory"]):
            out.append("  ! " + note)
        out.append("")
    if "instructions" in data:
        ins = data["instructions"]
        out.append(instruction_intro(ins))
        if ins.get("results"):
            t1, t2 = instruction_tables(ins)
            out.append(render_text(*t1, align=["<"] + [">"] * (len(t1[0]) - 2) + ["<"]))
            out.append("")
            out.append("Per pair: the pair's own instructions untraced, and what tracing "
                       "adds (N=k - off, same build):")
            out.append(render_text(*t2))
            sampled = sampling_instruction_table(ins)
            if sampled:
                out.append("")
                out.append(sampling_instruction_intro(ins).replace("*", "").replace("`", ""))
                out.append(render_text(*sampled))
        for note in instruction_notes(ins):
            out.append("  ! " + note)
        out.append("")
    if "longrun" in data:
        lr = data["longrun"]
        out.append(longrun_intro(lr))
        header, rows, _ = longrun_table(lr)
        out.append(render_text(header, rows))
        for label, r in lr.get("results", {}).items():
            if r.get("error"):
                out.append(f"  ! {label}: {r['error']}")
        out.append("")
    if "snapshots" in data:
        sn = data["snapshots"]
        out.append(snapshot_intro(sn))
        out.append(render_text(*snapshot_table(sn)))
        for note in snapshot_notes(sn):
            out.append("  ! " + note)
        out.append("")
    if "retention" in data:
        import retention
        out.append(retention.intro(data["retention"]))
        out.append(retention.table(data["retention"]["results"]))
        out.append("")
    if "allocations" in data:
        import allocations
        out.append(allocations.markdown(data["allocations"]))
    if "native" in data:
        import native_workloads
        out.append(native_workloads.markdown(data["native"]))
    if "scaling" in data:
        tables, _ = scaling_tables(data["scaling"])
        out.append("Scaling: ns per traced allocation, traced minus off (off column: absolute ns per iteration)")
        out.append(render_text(*tables["live"]))
        out.append("")
        out.append(render_text(*tables["depth"]))
        for r in data["scaling"]["runs"]:
            if r.get("error"):
                out.append(f"  ! {r['side']} frames={r['frames']} rep={r['rep']}: {r['error']}")
        out.append("")
    return "\n".join(out)


def results_markdown(data):
    meta = data["meta"]
    mach = meta["machine"]
    lines = [
        "# Benchmark results",
        "",
        "Generated by `Tools/bench/run.py` (`make bench`); regenerate the text from the",
        "saved run with `make bench-results`.  See `Tools/bench/README.md` for what each",
        "workload exercises and how to read the tables.",
        "",
        f"- Date: {meta['date']}",
        f"- Commit: `{meta['commit']}`",
        f"- Run: {data['kind']}{' (subset: not the full suite)' if data['kind'] != 'full' else ''}"
        f"{run_sizes(data)}, took {benchlib.fmt_duration(meta.get('duration_s', 0))}",
        f"- Machine: {mach['cpu']}, {mach['cores']} cores, {mach['memory']} RAM, "
        f"{mach['system']} {mach['kernel']}",
    ]
    for side in ("pristine", "fork"):
        info = meta.get(side, {})
        ii = info.get("info", {})
        lines.append(f"- {side}: `{info.get('path')}` (Python {ii.get('version', '?')}, "
                     f"CC `{ii.get('cc', '?')}`, OPT `{ii.get('opt', '?')}`, "
                     f"configure `{ii.get('config_args', '?')}`)")
    if meta.get("note"):
        lines.append(f"- Note: {meta['note']}")
    if meta.get("rebuilt_during_run"):
        lines.append(f"- WARNING: rebuilt while this run was measuring: "
                     f"{', '.join(meta['rebuilt_during_run'])} (the tables mix two builds)")
    if meta.get("same_interpreter"):
        lines.append("- NOTE: the same interpreter was given as pristine and fork; this run "
                     "only checks the harness.")
    lines.append("")
    if "time" in data:
        t = data["time"]
        header, rows, per, geo, same = time_table(t)
        lines += [
            "## Time",
            "",
            f"Wall time of each workload's timed section (measured inside the child with "
            f"`time.perf_counter`, start-up excluded), {t.get('stat', 'median')} of "
            f"{t['reps']} repetitions, all {len(t['configs'])} configurations interleaved "
            f"round-robin in every repetition.  "
            + (sampled_description(t) + ".  " if sampled_description(t) else "") +
            f"Cells are ratios to *pristine off*; `(k)` marks a "
            f"configuration that was run in only k repetitions because it is slow; `!` "
            f"marks an error or a result mismatch (listed below); *noise* is the spread "
            f"(max-min)/median of the pristine-off repetitions.",
            "",
            render_md(header, rows),
            "",
            render_md(*target_rows(geo, same, per)),
            "",
        ]
        notes = time_notes(t, per)
        if notes:
            lines += ["Problems:", ""] + [f"- {n}" for n in notes] + [""]
    if "memory" in data:
        m = data["memory"]
        t1, t2, _ = memory_rows(m)
        lines += [
            "## Memory",
            "",
            f"Live blocks are `{m.get('object', 'object()')}` instances (16 bytes each) kept "
            f"alive in a list, under `-X tracemalloc={m.get('frames', 1)}`; one child process "
            f"per cell.  Target: <= {BOOKKEEPING_TARGET} bytes of bookkeeping per live small "
            f"block.",
            "",
            f"*B/trace* = `tracemalloc.get_tracemalloc_memory()` / number of traces (`*`: "
            f"the number of traces was computed as traces before + blocks + 1 instead of "
            f"counted, above {m.get('count_limit', 10**6):,} blocks); *marginal* = growth of "
            f"`get_tracemalloc_memory()` per added block.",
            "",
            render_md(*t1),
            "",
            "*peak* = (peak RSS traced - peak RSS untraced) / blocks, same interpreter; "
            "*growth* = the same for the growth of the current RSS across the allocation "
            "(leaves out the traces of start-up allocations, which dominate the peak figure "
            "at 10^4; both are page-granular and only meaningful from about 10^5 blocks).",
            "",
            render_md(*t2),
            "",
        ]
        sampled = sampled_memory_rows(m)
        if sampled:
            lines += [sampled_memory_intro(m), "", render_md(*sampled), ""]
        notes = memory_notes(m)
        if notes:
            lines += ["Problems:", ""] + [f"- {n}" for n in notes] + [""]
    if "instructions" in data:
        ins = data["instructions"]
        lines += ["## Instructions per allocation+free pair", "",
                  instruction_intro(ins) + "  Measured with `valgrind "
                  "--tool=callgrind`; deterministic, unlike wall time.  The raw "
                  "domain is reached through ctypes, whose own cost is removed by "
                  "a control loop making the same calls to `labs()`.  Budgets are "
                  "in `Tools/bench/README.md`.", ""]
        if ins.get("results"):
            t1, t2 = instruction_tables(ins)
            lines += [render_md(*t1, align=["<"] + [">"] * (len(t1[0]) - 2) + ["<"]), "",
                      "Per pair: *pristine off* is the whole iteration untraced "
                      "(for raw, the pair net of the ctypes calls); the other "
                      "columns are differences in instructions per pair.", "",
                      render_md(*t2), ""]
            sampled = sampling_instruction_table(ins)
            if sampled:
                lines += [sampling_instruction_intro(ins), "", render_md(*sampled), ""]
        notes = instruction_notes(ins)
        if notes:
            lines += ["Problems:", ""] + [f"- {n}" for n in notes] + [""]
    if "longrun" in data:
        lr = data["longrun"]
        header, rows, _ = longrun_table(lr)
        lines += ["## Long-running: engine memory with constant live data", "",
                  longrun_intro(lr), "", render_md(header, rows), ""]
        errs = [f"- {label}: {r['error']}" for label, r in lr.get("results", {}).items()
                if r.get("error")]
        if errs:
            lines += ["Problems:", ""] + errs + [""]
    if "snapshots" in data:
        sn = data["snapshots"]
        lines += ["## Snapshots", "", snapshot_intro(sn), "",
                  render_md(*snapshot_table(sn)), ""]
        notes = snapshot_notes(sn)
        if notes:
            lines += ["Problems:", ""] + [f"- {n}" for n in notes] + [""]
    if "retention" in data:
        import retention
        lines += ["## Retention paths", "", retention.intro(data["retention"]),
                  "", retention.table(data["retention"]["results"]), ""]
    if "allocations" in data:
        import allocations
        lines += ["## Allocation profiles", "", allocations.markdown(data["allocations"])]
    if "native" in data:
        import native_workloads
        lines += ["## Native memory", "", native_workloads.markdown(data["native"])]
    if "scaling" in data:
        s = data["scaling"]
        tables, _ = scaling_tables(s)
        lines += [
            "## Scaling",
            "",
            f"Cost of one traced allocation in ns (best over {s['reps']} interleaved runs "
            f"of the best of {s['repeat']} timings of ~{s.get('target_ms', '?')} ms each (at most "
            f"{s['iters']:,} allocations); traced minus off of the same interpreter).  Each iteration allocates one "
            f"`object()` and frees one from a ring of {s['ring']:,} slots visited in a "
            f"shuffled order.  *off (abs)* is the untraced cost of a whole iteration.  "
            f"Target: flat (growth close to 1x).",
            "",
            f"Live blocks grow (stack depth {s['base_depth']}):",
            "",
            render_md(*tables["live"]),
            "",
            f"Stack deepens (about {s['depth_live']:,} live blocks); depth = frames added "
            f"by a recursive chain above the allocating loop:",
            "",
            render_md(*tables["depth"]),
            "",
        ]
    return "\n".join(lines)


def run_sizes(data):
    """For a quick run: which suites ran at full size anyway."""
    full = data["meta"].get("full_suites") or []
    if data["kind"] != "quick" or not full:
        return ""
    short = [s for s in data["meta"].get("suites", []) if s not in full]
    return (f"; at full size: {', '.join(full)}"
            + (f"; quick size: {', '.join(short)}" if short else ""))


def summary_markdown(data):
    meta = data["meta"]
    lines = [f"Benchmarks ({data['kind']} run{run_sizes(data)}, {meta['date']}, commit `{meta['commit']}`, "
             f"{meta['machine']['cpu']}, {meta['machine']['cores']} cores; details in "
             f"[Tools/bench/RESULTS.md](Tools/bench/RESULTS.md)):", ""]
    version = meta.get("pristine", {}).get("info", {}).get("version", "")
    header = ["metric", "fork", f"pristine {version}".strip(), "target"]
    rows = []
    if "time" in data:
        _, _, per, geo, _ = time_table(data["time"])
        for frames in ("off", "N=1", "N=25"):
            target = TARGETS.get(f"fork {frames}")
            rows.append([f"time, tracemalloc {frames} (geomean vs pristine off)",
                         fmt_ratio(geo[f"fork {frames}"]), fmt_ratio(geo[f"pristine {frames}"]),
                         f"<= {target:.2f}x" if target else ""])
        if "fork sampled" in geo:
            worst, name = worst_workload(per, "fork sampled")
            rows.append(["time, tracemalloc sampled at 512 KiB, N=25 "
                         "(geomean vs pristine off; slowest workload)",
                         f"{fmt_ratio(geo['fork sampled'])}; {fmt_ratio(worst)} ({name})",
                         "", f"<= {TARGETS['fork sampled']:.2f}x; "
                             f"<= {MAX_TARGETS['fork sampled']:.2f}x"])
    if "memory" in data:
        msum = memory_summary(data["memory"])
        for size in (10 ** 6, 10 ** 7):
            if size not in msum:
                continue
            v = msum[size]
            rows.append([f"bookkeeping bytes per live block ({pow10(size)} blocks; "
                         f"per trace (marginal))",
                         f'{fmt_num(v["fork"]["per_trace"])} ({fmt_num(v["fork"]["marginal"])})',
                         f'{fmt_num(v["pristine"]["per_trace"])} ({fmt_num(v["pristine"]["marginal"])})',
                         f"<= {BOOKKEEPING_TARGET}"])
            rows.append([f"peak RSS overhead bytes per live block ({pow10(size)} blocks)",
                         fmt_num(v["fork"]["rss_peak"]), fmt_num(v["pristine"]["rss_peak"]), ""])
        sampled = {r["blocks"]: r for r in data["memory"]["results"]
                   if r.get("sample") == benchlib.SAMPLE_DEFAULT and not r.get("error")}
        if 10 ** 6 in sampled:
            r = sampled[10 ** 6]
            rows.append([f"engine memory sampling at {r['sample']}, 10^6 live blocks "
                         f"(samples; bytes per sample)",
                         f"{benchlib.human_bytes(r['tm_memory'])} ({r['traces']:,}; "
                         f"{fmt_num(r['tm_memory'] / max(1, r['traces']), 0)})", "",
                         "scales with samples"])
    if "scaling" in data:
        s = data["scaling"]
        _, cost = scaling_tables(s)
        for axis, points, what in (("live", s["live"], "live blocks"),
                                   ("depth", s["depths"], "stack depth")):
            for frames in s["frames"]:
                cells = []
                for side in ("fork", "pristine"):
                    d = cost.get((side, frames), {}).get(axis, {})
                    a, b = d.get(points[0]), d.get(points[-1])
                    cells.append(f"{fmt_num(a, 0)} -> {fmt_num(b, 0)}" if a is not None and b is not None else "n/a")
                lo = pow10(points[0]) if axis == "live" else points[0]
                hi = pow10(points[-1]) if axis == "live" else points[-1]
                rows.append([f"ns per traced alloc, N={frames}, {what} {lo} -> {hi}",
                             cells[0], cells[1], "flat"])
    if "instructions" in data and data["instructions"].get("results"):
        import instructions
        pairs = instruction_pairs(data["instructions"])
        names = [n for n in pairs if n != "empty_loop"]
        def diffs(a, b):
            return " / ".join(fmt_num(pairs[n][a] - pairs[n][b], 0)
                              if a in pairs[n] and b in pairs[n] else "n/a"
                              for n in names)
        what = " / ".join(n.split(" ")[0] for n in names)
        rows.append([f"instructions added per untraced pair vs pristine ({what})",
                     diffs("fork off", "pristine off"), "0",
                     "<= " + " / ".join(f"{instructions.BUDGETS[n][0]:g}" for n in names)])
        rows.append([f"instructions added by tracing a pair, N=1 ({what})",
                     diffs("fork N=1", "fork off"), diffs("pristine N=1", "pristine off"),
                     "<= " + " / ".join(f"{instructions.BUDGETS[n][1]:g}" for n in names)])
        rows.append([f"instructions added by tracing a pair, N=25 ({what})",
                     diffs("fork N=25", "fork off"), "",
                     "<= " + " / ".join(f"{instructions.BUDGETS[n][1]:g}" for n in names)])
        label = data["instructions"].get("non_sampled")
        if label and label in data["instructions"]["configs"]:
            rows.append([f"instructions added per non-sampled pair, sampling mode "
                         f"({label} - fork off; {what})",
                         diffs(label, "fork off"), "",
                         "<= " + " / ".join(f"{instructions.SAMPLING_BUDGETS[n]:g}"
                                            for n in names)])
    if "longrun" in data:
        lr = data["longrun"]
        summ = longrun_summary(lr)
        for frames in lr["frames"]:
            cells = []
            for side in ("fork", "pristine"):
                v = summ.get(f"{side} N={frames}", {})
                if not v or "error" in v:
                    cells.append("n/a")
                    continue
                first = v["samples"][0][1]
                cells.append(f"{benchlib.human_bytes(first)} -> "
                             f"{benchlib.human_bytes(v['samples'][-1][1])}, max "
                             f"{benchlib.human_bytes(v['max'])} "
                             f"({'flat' if v['flat'] else 'grows'}, "
                             f"{fmt_num(v['per_trace'], 1)} B/trace, "
                             f"{fmt_num(v['max_per_trace'], 1)} at max)")
            rows.append([f"engine memory over {lr['rounds']} rounds of changing call "
                         f"paths, constant live data, N={frames}",
                         cells[0], cells[1], "flat; B/trace <= pristine"])
    if "snapshots" in data:
        sn = data["snapshots"]
        cells = snapshot_cells(sn)
        groups = [("take_snapshot / dump / load", ["take_snapshot", "dump", "load"], ">= 5x"),
                  ("statistics lineno / filename / traceback / lineno cum. / filename cum.",
                   ["statistics lineno", "statistics filename", "statistics traceback",
                    "statistics lineno cumulative", "statistics filename cumulative"],
                   ">= 10x"),
                  ("compare_to lineno / traceback", ["compare_to lineno", "compare_to traceback"],
                   ">= 10x")]
        for title, ops, target in groups:
            fork_cells, prist_cells = [], []
            for op in ops:
                # the largest size at which both sides measured the operation
                for size in reversed(sn["sizes"]):
                    f = cells.get(("fork", size), {}).get("times", {}).get(op)
                    pr = cells.get(("pristine", size), {}).get("times", {}).get(op)
                    if f and pr:
                        fork_cells.append(f"{fmt_num(f, 3)}s ({fmt_ratio(pr / f)}, {pow10(size)})")
                        prist_cells.append(f"{fmt_num(pr, 3)}s")
                        break
                else:
                    fork_cells.append("n/a")
                    prist_cells.append("n/a")
            rows.append([f"snapshot {title}, {sn['frames']}-frame tracebacks "
                         f"(s; speed-up, traces)", " / ".join(fork_cells),
                         " / ".join(prist_cells), target + " faster"])
        big = sn["sizes"][-1]
        f = cells.get(("fork", big), {}).get("file_bytes")
        pr = cells.get(("pristine", big), {}).get("file_bytes")
        rows.append([f"snapshot file size, {pow10(big)} traces",
                     benchlib.human_bytes(f) + (f" ({f / pr:.3f}x)" if f and pr else "")
                     if f else "n/a",
                     benchlib.human_bytes(pr) if pr else "n/a", "<= 1/3 of pristine"])
    lines.append(render_md(header, rows))
    return "\n".join(lines)


def write_outputs(data, results_md=RESULTS_MD, readme=README, published=None):
    with open(results_md, "w") as f:
        f.write(results_markdown(data) + "\n")
        if os.path.exists(APART_MD):
            with open(APART_MD) as apart:
                f.write("\n" + apart.read())
    print(f"wrote {os.path.relpath(results_md, benchlib.REPO_ROOT)}")
    if published is None and results_md == RESULTS_MD:
        published = PUBLISHED
    if published and os.path.abspath(published) != os.path.abspath(data.get("_path", "")):
        # The data behind RESULTS.md, whatever kind of run it was, so that
        # `make bench-results` regenerates the same text.
        with open(published, "w") as f:
            json.dump({k: v for k, v in data.items() if k != "_path"}, f,
                      indent=1, sort_keys=True)
        print(f"wrote {os.path.relpath(published, benchlib.REPO_ROOT)}")
    summary = summary_markdown(data)
    if data["meta"].get("same_interpreter"):
        # A harness check (pristine given as the fork too) must not publish
        # numbers in the project README.
        with open(SUMMARY_FALLBACK, "w") as f:
            f.write(MARK_START + "\n" + summary + "\n" + MARK_END + "\n")
        print(f"harness-check run (same interpreter for pristine and fork): README.md left "
              f"alone; summary in {os.path.relpath(SUMMARY_FALLBACK, benchlib.REPO_ROOT)}")
        return
    text = None
    if os.path.exists(readme):
        with open(readme) as f:
            text = f.read()
    if text is not None and MARK_START in text and MARK_END in text \
            and text.index(MARK_START) < text.index(MARK_END):
        head, rest = text.split(MARK_START, 1)
        _, tail = rest.split(MARK_END, 1)
        new = head + MARK_START + "\n" + summary + "\n" + MARK_END + tail
        if new != text:
            with open(readme, "w") as f:
                f.write(new)
        print(f"updated the summary in {os.path.relpath(readme, benchlib.REPO_ROOT)}")
    else:
        with open(SUMMARY_FALLBACK, "w") as f:
            f.write(MARK_START + "\n" + summary + "\n" + MARK_END + "\n")
        why = "does not exist" if text is None else "has no bench-summary markers"
        print(f"WARNING: {os.path.relpath(readme, benchlib.REPO_ROOT)} {why}; wrote the summary "
              f"to {os.path.relpath(SUMMARY_FALLBACK, benchlib.REPO_ROOT)} instead.  Add the lines\n"
              f"  {MARK_START}\n  {MARK_END}\nto README.md and run `make bench-results`.",
              file=sys.stderr)


def latest_run_path():
    if os.path.exists(PUBLISHED):
        return PUBLISHED
    for kind in ("full", "quick"):
        path = os.path.join(benchlib.RESULTS_DIR, f"latest-{kind}.json")
        if os.path.exists(path):
            return path
    return None


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    path = argv[0] if argv else latest_run_path()
    if not path or not os.path.exists(path):
        print("report: no saved run; run `make bench` first", file=sys.stderr)
        return 1
    with open(path) as f:
        data = json.load(f)
    data["_path"] = path
    if data.get("kind") != "full":
        print(f"report: WARNING: {path} is a {data.get('kind')} run, not a full one", file=sys.stderr)
    print(all_text_tables(data))
    write_outputs(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
