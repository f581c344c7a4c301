"""Leak patterns and clean workloads for the tracemalloc leak checker.

Each module is a small program with a run() function, the workload that the
checker calls once per round.  In a leak_* module exactly one line is marked
with a "# LEAK" comment: the line that allocates the memory that leaks,
which must be the first site that the checker reports.  A clean_* module
must report nothing after the warm-up rounds.  A module may define reset()
to release what its leak kept, so that tests can run it in-process, and
seed() and SEEDS when it draws random numbers: the tests run it with each
of the fixed SEEDS.

Two more lists hold workloads that do not fit that mould:
C_CALLABLE_LEAKS, whose run is a C callable (no Python line of the target
allocates: the first site is the checker's call line), and NO_VERDICT,
whose functions stop, clear or restart tracing, so that a check of them
must raise instead of giving a verdict.
"""

import os

LEAKS = [
    "leak_module_list",
    "leak_dict",
    "leak_lru_cache",
    "leak_class_registry",
    "leak_del_resurrection",
    "leak_global_cycle",
    "leak_stored_traceback",
    "leak_thread_local",
    "leak_suspended_generators",
    "leak_closure_callbacks",
    "leak_c_domain",
    "leak_in_thread",
    "leak_c_callback",
    "leak_mutable_default",
    "leak_every_other_round",
    "leak_finalizer",
    "leak_random_cache",
]

CLEAN = [
    "clean_json",
    "clean_regex",
    "clean_decimal",
    "clean_asyncio",
    "clean_dataclasses",
    "clean_strings",
    "clean_sorting",
    "clean_slots",
    "clean_bounded_cache",
    "clean_generators",
    "clean_bounded_buffer",
    "clean_memory_handler",
    "clean_random_cache",
    "clean_slow_cache",
    "clean_evicting_lru",
    "clean_ordered_lru",
    "clean_dict_fifo",
]

C_CALLABLE_LEAKS = [
    "leak_c_callable",
]

# Each function of these modules (run, clear, restart) breaks tracing.
NO_VERDICT = [
    "stop_tracing",
]

LEAK_MARKER = "# LEAK"


def marked_line(name):
    """Return (filename, lineno) of the line marked "# LEAK" in *name*."""
    filename = os.path.join(os.path.dirname(__file__), name + ".py")
    with open(filename, encoding="utf-8") as source:
        marked = [lineno for lineno, line in enumerate(source, 1)
                  if line.rstrip().endswith(LEAK_MARKER)
                  or LEAK_MARKER + ":" in line]
    if len(marked) != 1:
        raise ValueError(f"{filename}: {len(marked)} lines marked "
                         f"{LEAK_MARKER!r}, expected 1")
    return filename, marked[0]
