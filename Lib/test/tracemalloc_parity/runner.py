"""Run the parity scenarios traced, and print their live traces as JSON.

    python runner.py start NFRAME [SCENARIO ...]
    python -X tracemalloc=NFRAME runner.py startup NFRAME [SCENARIO ...]

Imports scenarios.py (from this directory) and runs each scenario (all of
them by default) in turn:

1. gc.collect(), which also empties the free lists;
2. mode "start": tracemalloc.start(NFRAME), then gc.collect() again unless
   the scenario says otherwise; mode "startup": tracing is on since
   startup, and stays on; for every scenario but the first,
   tracemalloc.clear_traces();
3. run the scenario, free a list of its own (unless the scenario says
   otherwise), and take a snapshot while the scenario's result is alive;
4. count the live objects that embed an interpreter frame;
5. mode "start": tracemalloc.stop().  Then the result is dropped.

It prints one JSON document on stdout, {"python": sys.version,
"scenarios": {name: result}}, where each result is

    {"traces": [[traceback, total_nframe, domain, {size: count}], ...],
     "frame_objects": [[traceback, count], ...]}

"traces" groups, per traceback, total number of frames and domain, the
traces whose
most recent frame is in scenarios.py, except those of its import (mode
"startup"): how many traces of each size.
"frame_objects" counts, per traceback, the live generators, coroutines,
asynchronous generators and frame objects allocated in scenarios.py.  Each
traceback is a list of [file, line] pairs, most recent first, where file is
"<scenarios>" for scenarios.py, "<runner>" for this file and
"<stdlib>/..." for a file of the standard library, so that the output of
two interpreters installed in different places can be compared.

Standard library only: this file runs on pristine CPython too.
"""

import gc
import json
import os
import sys
import tracemalloc
import types

import scenarios

SCENARIOS_FILE = os.path.abspath(scenarios.__file__)
RUNNER_FILE = os.path.abspath(__file__)
STDLIB_DIR = os.path.dirname(os.path.abspath(os.__file__))
# co_filename of the scenarios, as the import system spelled it.
SCENARIOS_SPELLINGS = {scenarios.__file__, SCENARIOS_FILE}

IMPORT_SYSTEM = "<frozen importlib."

FRAME_CARRYING_TYPES = (types.GeneratorType, types.CoroutineType,
                        types.AsyncGeneratorType, types.FrameType)


def portable_filename(filename):
    if not os.path.isabs(filename):
        # "<frozen importlib._bootstrap>", "<string>", "<unknown>"...
        return filename
    path = os.path.normpath(filename)
    if filename in SCENARIOS_SPELLINGS or path == SCENARIOS_FILE:
        return "<scenarios>"
    if path == RUNNER_FILE:
        return "<runner>"
    if path.startswith(STDLIB_DIR + os.sep):
        return "<stdlib>/" + os.path.relpath(path, STDLIB_DIR)
    return filename


def portable_frames(frames):
    """[file, line] pairs of raw frames ((filename, lineno), ... most recent
    first), or None if the most recent frame is not in scenarios.py."""
    if not frames or frames[0][0] not in SCENARIOS_SPELLINGS:
        return None
    return [[portable_filename(filename), lineno]
            for filename, lineno in frames]


def frame_carrying_objects():
    """[[traceback, count], ...] of the live objects that embed an
    interpreter frame, allocated in scenarios.py.

    Their size differs between the fork and upstream (see the documented
    differences).  Only the objects known to the garbage collector are
    seen: one that is not would make the test fail, never pass wrongly."""
    counts = {}
    for obj in gc.get_objects():
        if isinstance(obj, FRAME_CARRYING_TYPES):
            traceback = tracemalloc.get_object_traceback(obj)
            # A Traceback lists the oldest frame first.
            frames = traceback and portable_frames(
                [(frame.filename, frame.lineno)
                 for frame in reversed(traceback)])
            if frames:
                # get_object_traceback() gives no total_nframe: the key is
                # the frames alone.
                key = json.dumps(frames)
                counts[key] = counts.get(key, 0) + 1
    return [[json.loads(key), count] for key, count in counts.items()]


def group_traces(snapshot):
    """[[traceback, total_nframe, domain, {size: count}], ...] of our
    traces."""
    groups = {}
    # The raw traces, (domain, size, frames, total_nframe) tuples with the
    # most recent frame first, as _get_traces() returns them: the Trace
    # objects would cost too much with upstream's tracing of the loop on.
    for domain, size, frames, total_nframe in snapshot.traces._traces:
        if len(frames) > 1 and frames[1][0].startswith(IMPORT_SYSTEM):
            # Run by the import of scenarios.py (mode "startup"): not a
            # scenario, and history-dependent (a class statement may grow
            # object's table of subclasses, which the fork and upstream
            # resize at different points: they create a different number
            # of classes at startup).
            continue
        frames = portable_frames(frames)
        if frames:
            key = json.dumps([frames, total_nframe, domain])
            sizes = groups.setdefault(key, {})
            sizes[size] = sizes.get(size, 0) + 1
    return [json.loads(key) + [sizes] for key, sizes in groups.items()]


def run(name, nframe, mode, first):
    function = scenarios.SCENARIOS[name]
    gc.collect()
    if mode == "start":
        tracemalloc.start(nframe)
        if getattr(function, "collect_after_start", True):
            # Empty the free lists of what start() itself freed: on the
            # fork, start()'s arguments tuple, allocated before tracing was
            # on (scenarios.tuple_after_start).
            gc.collect()
    elif not first:
        tracemalloc.clear_traces()
    kept = function()
    if getattr(function, "recycle_a_list", True):
        # Upstream's _get_traces() takes its result list from the list
        # free list before it copies the traces, which moves the trace of
        # the list freed last to tracemalloc.py (documented difference
        # "snapshot list", shown by scenarios.list_freed_last): make that
        # list one of the runner's.
        recycled = []
        del recycled
    snapshot = tracemalloc.take_snapshot()
    frame_objects = frame_carrying_objects()
    if mode == "start":
        tracemalloc.stop()
    del kept
    return {"traces": group_traces(snapshot),
            "frame_objects": frame_objects}


def main():
    mode, nframe, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    if mode == "startup":
        if not (tracemalloc.is_tracing()
                and tracemalloc.get_traceback_limit() == nframe):
            raise SystemExit(f"mode startup: run me with "
                             f"-X tracemalloc={nframe}")
        if nframe < 2:
            raise SystemExit("mode startup needs 2 frames or more, to tell "
                             "the import of scenarios.py from scenarios")
    elif mode != "start":
        raise SystemExit(f"unknown mode {mode!r}")
    if not names:
        names = [name for name, function in scenarios.SCENARIOS.items()
                 if mode in getattr(function, "modes", (mode,))]
    results = {}
    for name in names:
        results[name] = run(name, nframe, mode, first=not results)
    json.dump({"python": sys.version, "scenarios": results}, sys.stdout)


if __name__ == "__main__":
    main()
