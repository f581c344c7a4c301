"""The command line: ``python -m tracemalloc COMMAND ...``.

Commands (``python -m tracemalloc COMMAND --help`` describes each one):

  run    run a script (or a module with -m) traced, then report where the
         memory that it still holds at exit was allocated; the default,
         so ``python -m tracemalloc script.py`` is ``run script.py``
  leaks  run a function (module:function) or a script in rounds and report
         the allocation sites that grow; exit 1 when something leaks
  top    the top allocation sites of a snapshot file
  diff   what grew between two snapshot files; with --fail-over, exit 1
         when the total growth passes a limit (CI against a baseline)
  html   write a self-contained HTML report of a snapshot file
  pprof  convert a snapshot file (or the difference of two) to a pprof
         profile, for go tool pprof and continuous-profiling systems
  attach ask a running process (PID) that started with
         PYTHONTRACEMALLOCSIGNAL=USR2 for a pprof profile; print its path

Exit status: 0 when all is well, 1 when a leak (or a growth over the limit)
is found, 2 on a usage error or when the target cannot run (``attach``:
when the process did not opt in, is not ours or did not answer); ``run``
exits with the status of the program that it ran.

The work is done by functions of the package that programs may call too:
tracemalloc.leaks.check(), Snapshot.load(), Snapshot.statistics(),
compare_to() and dump_pprof(); this module only parses the command line
and prints.
"""

import argparse
import gc
import linecache
import os
import sys

import tracemalloc
from tracemalloc import _leakcore
from tracemalloc import (BaseFilter, Snapshot, Traceback, _format_size,
                         is_tracing, reset_peak, start, take_snapshot)

COMMANDS = ('run', 'leaks', 'top', 'diff', 'html', 'pprof', 'attach')
PROG = "python -m tracemalloc"
DEFAULT_TOP = 10

EXIT_OK = 0
EXIT_LEAK = 1
EXIT_USAGE = 2
EXIT_OVER_PEAK = 3       # run --fail-over-peak


class _TargetError(Exception):
    """The target of `leaks` cannot be loaded or failed: exit status 2."""


# --------------------------------------------------------------------------
# Argument types

def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"must be a positive integer, not {text!r}")
    return value


def _non_negative_int(text):
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(
            f"must be a non-negative integer, not {text!r}")
    return value


_SIZE_SUFFIXES = {'': 1, 'b': 1, 'k': 1024, 'kb': 1000, 'kib': 1024,
                  'm': 1024 ** 2, 'mb': 1000 ** 2, 'mib': 1024 ** 2,
                  'g': 1024 ** 3, 'gb': 1000 ** 3, 'gib': 1024 ** 3}


def _size(text):
    """A number of bytes: 1000, 64K, 10KiB, 1.5MB, 2MiB..."""
    stripped = text.strip().lower()
    number = stripped.rstrip('kmgib')
    suffix = stripped[len(number):]
    try:
        value = float(number) * _SIZE_SUFFIXES[suffix]
    except (ValueError, KeyError):
        value = -1
    # inf, 1e400 and nan are no size (int() of them raised OverflowError
    # or ValueError, a traceback instead of a usage error).
    if not 0 <= value < float('inf'):
        raise argparse.ArgumentTypeError(
            f"must be a size in bytes such as 1000, 64KiB or 2MB, "
            f"not {text!r}")
    return int(value)


def _add_nframe(parser):
    parser.add_argument(
        "-n", "--nframe", type=_positive_int, default=None, metavar="N",
        help=f"number of frames to store per traceback (default: "
             f"{_leakcore.DEFAULT_NFRAME}); tracing already on, e.g. with -X "
             f"tracemalloc, keeps its own limit unless -n is given")


def _ensure_tracing(parser, nframe):
    """Start tracing with *nframe* frames (or restart it with another
    limit when -n was given explicitly).

    A restart keeps the sampling interval of the process (-X
    tracemalloc_sample, PYTHONTRACEMALLOCSAMPLE) and its native tracing
    and native frames (-X tracemalloc_native): -n changes the frame limit
    only, it does not turn a sampled process into an exact one, nor turn
    native tracing off."""
    sample = None
    native = {}
    if is_tracing():
        if nframe is None or tracemalloc.get_traceback_limit() == nframe:
            return
        # An explicit -n wins over PYTHONTRACEMALLOC or -X tracemalloc: what
        # was traced so far belongs to the baseline anyway.  Native tracing
        # and native frames (-X tracemalloc_native) stay as they were.
        sample = tracemalloc.get_sample()
        if getattr(tracemalloc, "is_tracing_native", lambda: False)():
            native["native"] = True
            frames = tracemalloc.is_tracing_native_frames()
            if frames:
                native["native_frames"] = frames
        tracemalloc.stop()
    try:
        start(_leakcore.DEFAULT_NFRAME if nframe is None else nframe,
              sample=sample, **native)
    except ValueError as exc:
        parser.error(f"argument -n/--nframe: {exc}")


# --------------------------------------------------------------------------
# HTML reports (tracemalloc.htmlreport is imported only when asked for)

def _check_html_report_module(parser):
    """Exit with a usage error if tracemalloc.htmlreport is missing.

    Commands that take --html call it before doing any work, so that a
    missing report module is said at once, not after a long run.  It finds
    the module without importing it: the report module imports json and
    re, and had the tool imported them before the target ran, the target's
    own imports of them would cost nothing and leave its report (with --html,
    "of 59 sites" became "of 11 sites").
    """
    import importlib.util

    name = 'tracemalloc.htmlreport'
    if sys.modules.get(name) is not None:
        return
    try:
        found = importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        parser.exit(EXIT_USAGE, f"{parser.prog}: error: the HTML report "
                                f"is not available in this Python "
                                f"(no module tracemalloc.htmlreport)\n")


def _output_problem(path):
    """Why *path* cannot be written as an output file, or None.

    Said before the target runs, so that a long run does not end in an
    error.  An existing regular file is opened for writing
    without truncating it, which is refused as open(path, 'w') would be; a
    new file needs its directory to exist and be writable.  Anything else
    (a device, a FIFO) is left to the write itself.
    """
    import stat

    try:
        target = os.stat(path)
    except FileNotFoundError:
        target = None
    except OSError as exc:
        return exc.strerror or str(exc)
    if target is None:
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            return f"no such directory: {directory!r}"
        if not os.access(directory, os.W_OK | os.X_OK):
            return f"directory {directory!r} is not writable"
        return None
    if stat.S_ISDIR(target.st_mode):
        return "is a directory"
    if not stat.S_ISREG(target.st_mode):
        return None
    try:
        fd = os.open(path, os.O_WRONLY | getattr(os, 'O_CLOEXEC', 0)
                     | getattr(os, 'O_NONBLOCK', 0))
    except OSError as exc:
        return exc.strerror or str(exc)
    os.close(fd)
    return None


def _check_output(parser, option, path):
    """Exit with a one-line usage error if *path* cannot be written."""
    if path is None:
        return
    problem = _output_problem(path)
    if problem is not None:
        parser.exit(EXIT_USAGE, f"{parser.prog}: error: argument {option}: "
                                f"cannot write {path!r}: {problem}\n")


def _write_failed(parser, path, exc, file=None, quote=True):
    """Say in one line that *path* (a path, or with *quote* false what was
    written) could not be written after the run."""
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror \
        else str(exc)
    what = repr(path) if quote else path
    print(f"{parser.prog}: error: cannot write {what}: {reason}",
          file=sys.stderr if file is None else file, flush=True)


def _write_html(parser, snapshot, path, *, base=None, title=None,
                leaks=None):
    """Write the report; only called once the target is done.  Raise
    OSError if it cannot be written."""
    try:
        from tracemalloc import htmlreport
    except ImportError as exc:
        if exc.name != 'tracemalloc.htmlreport':
            raise
        _check_html_report_module(parser)
        raise
    # (leaks= only when there are leaks: a write_html() of its own, which
    # a program may put in place of the module's, need not take it.)
    extra = {} if leaks is None else {'leaks': leaks}
    htmlreport.write_html(snapshot, path, base=base, title=title, **extra)
    print(f"tracemalloc: HTML report written to {path}", file=sys.stderr)


# --------------------------------------------------------------------------
# The tool's own frames

def _tool_frames_trimmer():
    """Return trim(frames): the raw *frames* (most recent first) less the
    frames through which the tool ran the target.

    The rule is the leak checker's, _leakcore.strip_tool_frames(), applied
    once per distinct traceback.
    """

    trimmed = {}

    def trim(frames):
        result = trimmed.get(frames)
        if result is None:
            traceback = Traceback(frames)
            stripped = _leakcore.strip_tool_frames(traceback)
            if stripped is traceback:
                result = frames
            else:
                # Traceback keeps its frames oldest first.
                result = tuple(reversed(stripped._frames))
            trimmed[frames] = result
        return result

    return trim


def _without_tool_frames(snapshot, trim=None):
    """Return a copy of *snapshot* whose tracebacks lack the tool's frames
    (see _tool_frames_trimmer()), so that the text report, the dumped
    snapshot and the HTML report show the same call paths: the target's."""
    from tracemalloc import _Columns

    if trim is None:
        trim = _tool_frames_trimmer()
    columns = getattr(snapshot.traces, '_columns', None)
    if columns is not None:
        columns = _Columns(list(map(trim, columns.frames)),
                           columns.total_nframe, columns.threads,
                           columns.domains, columns.sizes, columns.indexes,
                           columns.weights)
        return snapshot._derived(columns)
    return snapshot._derived([(trace[0], trace[1], trim(trace[2]),
                               *trace[3:])
                              for trace in snapshot.traces._traces])


# --------------------------------------------------------------------------
# run: what a script still holds at exit

class _RunnerNoise(BaseFilter):
    """Exclusive filter dropping the allocations that the `run` tool causes.

    A trace is dropped if its most recent frame is in this package, in runpy
    which runs the target, in the import bootstrap (whose allocations are
    module code objects) or '<unknown>', or if any of its frames is one of
    *code_lines*, the (filename, lineno) pairs of code that the tool runs
    after the target finished, such as printing its error.  It is dropped
    too when the leak checker's rule (_leakcore.Ownership, *ownership*)
    calls it the tool's: its most recent frame of this package is not a
    line through which the tool runs the target (those of _run_target()),
    as when the tool's own code calls the standard library.
    """

    # Decides on the frames alone: see Snapshot.filter_traces().
    _frames_only = True

    def __init__(self, filenames, directories, code_lines, ownership):
        super().__init__(False)
        self._filenames = frozenset(filenames)
        self._directories = frozenset(directories)
        self._code_lines = frozenset(code_lines)
        self._is_workload = ownership.is_workload
        self._is_runpy_own = _runpy_own_checker()

    def _match(self, trace):
        frames = trace[2]
        if frames:
            filename = frames[0][0]
            if (filename in self._filenames
                    or os.path.dirname(filename) in self._directories):
                return False
        return (self._code_lines.isdisjoint(frames)
                and self._is_workload(frames)
                and not self._is_runpy_own(frames))


class _RunpyNoise(BaseFilter):
    """Exclusive filter dropping what runpy allocates for itself (see
    _runpy_own_checker())."""

    _frames_only = True

    def __init__(self):
        super().__init__(False)
        self._is_runpy_own = _runpy_own_checker()

    def _match(self, trace):
        return not self._is_runpy_own(trace[2])


def _runpy_own_checker():
    """Return is_runpy_own(frames): true for the raw *frames* (most recent
    first) of what runpy allocated for itself while it prepared to run the
    target (an isinstance() cache, a path), below a line of runpy other
    than the one that executes the target's code.  Such memory is the
    tool's, but its most recent frames are the standard library's."""
    import dis
    import runpy

    code = runpy._run_code.__code__
    runpy_file = code.co_filename
    exec_lines = {(runpy_file, instruction.positions.lineno)
                  for instruction in dis.get_instructions(code)
                  if instruction.opname == 'LOAD_GLOBAL'
                  and instruction.argval == 'exec'}

    def is_runpy_own(frames):
        for frame in frames:
            if frame[0] == runpy_file:
                return frame not in exec_lines
        return False

    return is_runpy_own


def _code_lines(function):
    """Return the set of (filename, lineno) pairs of *function*'s body."""
    code = function.__code__
    return {(code.co_filename, lineno)
            for _, _, lineno in code.co_lines() if lineno is not None}


def _package_directory():
    return os.path.dirname(_code_lines.__code__.co_filename)


def _is_runner_file(filename):
    return (filename in _leakcore.runner_files()
            or os.path.dirname(filename) == _package_directory())


def _skip_runner_frames(tb):
    """Skip the leading traceback entries of this package and of runpy."""
    while tb is not None and _is_runner_file(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    return tb


def _target_globals(exc):
    """Return the globals of the target's module code that raised *exc*.

    The module-level frame is the first frame of the traceback that belongs
    to neither this tool nor runpy.  None if the target never ran (e.g. a
    syntax error).
    """
    tb = _skip_runner_frames(exc.__traceback__)
    return tb.tb_frame.f_globals if tb is not None else None


def _run_target(options):
    """Run the target as __main__; return (its globals, exit status, error).

    The globals are returned, even when the target exits or fails, so that
    the caller can keep what the target stored at module level alive until
    the final snapshot, as at the end of a normal run.
    """
    import runpy

    try:
        if options.run_module:
            target_globals = runpy.run_module(
                options.target, run_name="__main__", alter_sys=True)
        else:
            target_globals = runpy.run_path(
                options.target, run_name="__main__")
    except SystemExit as exc:
        return _target_globals(exc), exc.code, None
    except BaseException as exc:
        return _target_globals(exc), 1, exc
    return target_globals, 0, None


def _print_target_error(exc, file):
    """Print the traceback of *exc* without this tool's and runpy's frames."""
    import traceback

    tb = _skip_runner_frames(exc.__traceback__)
    traceback.print_exception(type(exc), exc, tb, file=file)
    file.flush()


def _run_parser(prog, usage):
    parser = argparse.ArgumentParser(
        prog=prog, usage=usage,
        description="Run a Python script (or a module with -m) with memory "
                    "tracing on, then report on standard error where the "
                    "memory that it still holds at exit was allocated.",
        epilog="Other commands: leaks (find the allocation sites that grow "
               "while a function or script runs in rounds), top and diff "
               "(read snapshot files), html (an HTML report), pprof (a "
               "pprof profile); see "
               f"'{PROG} COMMAND --help'.")
    _add_nframe(parser)
    parser.add_argument(
        "--top", type=_positive_int, default=DEFAULT_TOP, metavar="K",
        help="number of allocation sites to show (default: %(default)s)")
    parser.add_argument(
        "--group-by", choices=("lineno", "filename", "traceback"),
        default="lineno",
        help="how allocations are grouped into sites (default: %(default)s)")
    parser.add_argument(
        "-o", "--output", metavar="FILE",
        help="also dump the final snapshot, without the tool's own "
             "allocations, to FILE (read it with Snapshot.load())")
    parser.add_argument(
        "--html", metavar="FILE",
        help="also write an HTML report of the memory still held at exit "
             "to FILE")
    parser.add_argument(
        "--peak", action="store_true",
        help="report what was allocated when traced memory reached its "
             "peak while the target ran, instead of what it still holds "
             "at exit")
    parser.add_argument(
        "--fail-over-peak", type=_size, default=None, metavar="SIZE",
        help="exit with status 3 when the peak of traced memory while the "
             "target ran, over its start, exceeds SIZE ('24MB', 512KiB), "
             "and report what was live at that peak (implies --peak)")
    parser.add_argument(
        "-m", dest="run_module", action="store_true",
        help="run a module, like python -m")
    # Everything from the script (or module) name on belongs to the target,
    # even what looks like an option of this tool.
    parser.add_argument(
        "command", nargs=argparse.REMAINDER,
        help="script path (or module name with -m) and its arguments")
    return parser


def _parse_run_args(parser, argv):
    options = parser.parse_args(argv)
    if not options.command:
        what = "module name" if options.run_module else "script"
        parser.error(f"the {what} to run is missing")
    options.target, *options.args = options.command

    if options.run_module:
        import importlib.util
        try:
            found = importlib.util.find_spec(options.target) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            parser.error(f"no module named {options.target!r}")
    elif not os.path.exists(options.target):
        parser.error(f"can't open file {options.target!r}: "
                     f"no such file or directory")
    return options


def _format_run_report(stats, options, traceback_limit, file):
    """Write the `run` report for the StatisticDiff list *stats*."""
    grown = [stat for stat in stats if stat.size_diff > 0]
    shown = grown[:options.top]
    write = file.write
    when = ("live at the peak of traced memory"
            if getattr(options, "peak", False) else "still held at exit")
    if getattr(options, "peak", False) and tracemalloc.get_sample():
        # A sampled peak is the highest value that a noisy estimate
        # reached: it overstates the true peak.
        when = ("live at the sampled peak of traced memory (an upper "
                "bound: the highest the estimate reached)")
    if not grown:
        write(f"tracemalloc: no memory allocated by {options.target} is "
              f"{when}\n")
        file.flush()
        return
    write(f"tracemalloc: memory allocated by {options.target} and {when}: "
          f"top {len(shown)} of {len(grown)} sites, grouped "
          f"by {options.group_by} (traceback limit: {traceback_limit})\n")
    for rank, stat in enumerate(shown, 1):
        amount = (f"size={_format_size(stat.size_diff, False)}, "
                  f"count={stat.count_diff}")
        for line in _format_stat_lines(rank, stat, options.group_by,
                                       amount):
            write(f"{line}\n")
    rest = grown[options.top:]
    if rest:
        size = sum(stat.size_diff for stat in rest)
        count = sum(stat.count_diff for stat in rest)
        write(f"{len(rest)} other sites: size={_format_size(size, False)}, "
              f"count={count}\n")
    size = sum(stat.size_diff for stat in grown)
    count = sum(stat.count_diff for stat in grown)
    write(f"Total: size={_format_size(size, False)}, count={count}\n")
    file.flush()


def command_run(argv, prog=f"{PROG} run"):
    """`run [options] (script.py | -m module) [args]`."""
    # Modules used once the target runs or has run (runpy, pkgutil that
    # runpy imports lazily, traceback to print errors): import them now so
    # that their import does not show up in the report.
    import pkgutil  # noqa: F401
    import runpy  # noqa: F401
    import traceback  # noqa: F401

    if prog == PROG:
        usage = (f"{PROG} [run] [options] (script.py | -m module) "
                 f"[args ...]\n       {PROG} "
                 f"{{{','.join(COMMANDS[1:])}}} ... (see COMMAND --help)")
    else:
        usage = f"{prog} [options] (script.py | -m module) [args ...]"
    parser = _run_parser(prog, usage)
    options = _parse_run_args(parser, argv)
    if options.fail_over_peak is not None:
        options.peak = True
    if options.html:
        _check_html_report_module(parser)
    _check_output(parser, "-o/--output", options.output)
    _check_output(parser, "--html", options.html)


    # What the target allocates, it allocates under the lines of
    # _run_target() (see _RunnerNoise).
    _leakcore.calls_workload(_run_target)

    # Set up the target's environment, like "python script.py" would.
    sys.argv[:] = [options.target] + options.args
    if not options.run_module:
        sys.path[0] = os.path.dirname(os.path.abspath(options.target))

    _ensure_tracing(parser, options.nframe)

    noise = _RunnerNoise(
        filenames=(*_leakcore.runner_files(),
                   "<frozen importlib._bootstrap>",
                   "<frozen importlib._bootstrap_external>",
                   "<unknown>"),
        directories=(_package_directory(),),
        code_lines=_code_lines(_print_target_error),
        ownership=_leakcore.Ownership())
    # filter_traces() fills an isinstance() cache on first use: fill it now,
    # before the baseline, as it is not the target's doing.
    Snapshot([], 1).filter_traces([noise])

    # What was allocated before the target started (at interpreter startup
    # with -X tracemalloc, or by this tool) is not the target's doing: the
    # report is the growth since this snapshot.
    baseline = take_snapshot().filter_traces([noise])
    if options.peak:
        # The peak to report is the target's, not the tool's start-up.
        reset_peak()
    start_size = tracemalloc.get_traced_memory()[0]

    # The report goes where stderr was, even if the target replaced it.
    report_file = sys.stderr
    target_globals, status, error = _run_target(options)
    if error is not None:
        _print_target_error(error, report_file)
        # The traceback holds the frames, and so the local variables, of the
        # failed code: drop it so that they do not count as still allocated.
        error = None

    peak_size = max(tracemalloc.get_traced_memory()[1] - start_size, 0)
    gc.collect()
    if not is_tracing():
        print("tracemalloc: the program stopped tracing, no report",
              file=report_file)
        return status
    final = take_snapshot(peak=options.peak).filter_traces([noise])
    # The report, the dump and the HTML report show the target's call
    # paths, without the frames through which the tool ran it.  Trimming
    # never takes a traceback's most recent frame, so grouping by line or
    # by file gives the same sites either way: only grouping by traceback,
    # the dump and the HTML report pay for it (a call into
    # _leakcore.strip_tool_frames() per distinct traceback).
    if options.group_by == "traceback" or options.output or options.html:
        trim = _tool_frames_trimmer()
        baseline = _without_tool_frames(baseline, trim)
        final = _without_tool_frames(final, trim)
    stats = final.compare_to(baseline, options.group_by)
    _format_run_report(stats, options, final.traceback_limit, report_file)
    # An output that cannot be written after all (checked before the run,
    # but the target may have removed its directory) is said in one line;
    # the exit status is then the target's if it failed, else 2.
    failed = False
    if options.output:
        try:
            final.dump(options.output)
        except OSError as exc:
            _write_failed(parser, options.output, exc, report_file)
            failed = True
        else:
            print(f"tracemalloc: snapshot written to {options.output}",
                  file=report_file)
    if options.html:
        what = "at its peak" if options.peak else "held at exit"
        if options.peak and final.sample:
            what = "at its sampled peak (an upper bound)"
        try:
            _write_html(parser, final, options.html, base=baseline,
                        title=f"memory {what} by {options.target}")
        except OSError as exc:
            _write_failed(parser, options.html, exc, report_file)
            failed = True
    # Only now may the target's module-level objects go away.
    del target_globals
    if failed and status in (None, 0):
        return EXIT_USAGE
    if options.fail_over_peak is not None:
        from tracemalloc import _budget
        measure = _budget.Measure(options.fail_over_peak)
        measure.peak = peak_size
        measure.sample = tracemalloc.get_sample()
        if measure.over:
            print(measure.headline(options.target), file=report_file)
            if status in (None, 0):
                return EXIT_OVER_PEAK
        else:
            verb = "is estimated at" if measure.estimated else "was"
            print(f"tracemalloc: the peak memory of {options.target} {verb} "
                  f"{_budget.format_bytes(peak_size)}, within its limit of "
                  f"{_budget.format_bytes(options.fail_over_peak)}",
                  file=report_file)
    return status


# --------------------------------------------------------------------------
# leaks: allocation sites that grow while a target runs in rounds

def _leaks_parser():
    from tracemalloc import leaks

    parser = argparse.ArgumentParser(
        prog=f"{PROG} leaks",
        usage=f"{PROG} leaks [options] TARGET [args ...]",
        description="Run TARGET in rounds with memory tracing on: warm-up "
                    "rounds first, then measured rounds with a snapshot "
                    "after each.  Report on standard error the allocation "
                    "sites whose memory kept rising over the measured "
                    "rounds, largest first, each as FILE:LINE: with its "
                    "source line and traceback.  Exit status: 0 when "
                    "nothing leaks, 1 when something leaks, 2 on a usage "
                    "error or when the target cannot be loaded or fails.",
        epilog="TARGET is module:function (a function called without "
               "arguments; the module is imported as python -m would, with "
               "the current directory on the path) or the path of a script "
               "(run whole in each round, with args as its sys.argv[1:]).")
    parser.add_argument(
        "--warmup", type=_non_negative_int, default=leaks.DEFAULT_WARMUP,
        metavar="W",
        help="rounds run before measuring (default: %(default)s)")
    parser.add_argument(
        "--rounds", type=_positive_int, default=leaks.DEFAULT_ROUNDS,
        metavar="R", help="measured rounds (default: %(default)s)")
    parser.add_argument(
        "--extend", type=_non_negative_int, default=leaks.DEFAULT_EXTEND,
        metavar="E",
        help="rounds added when some site looks like a leak after the "
             "measured rounds; a site leaks only if these confirm it "
             "(0: none; default: %(default)s)")
    parser.add_argument(
        "--ignore", action="append", default=[], metavar="PATTERN",
        help="leave out the leaking sites that match PATTERN, an fnmatch "
             "pattern of FILE:LINE or FILE ('pkg/cache.py:*'); repeatable; "
             "the report counts them")
    parser.add_argument(
        "--no-retention", dest="retention", action="store_false",
        help="after a leak verdict, do not search for what holds each "
             "leaking site's objects (by default the report shows up to "
             "3 reference chains per site, 'held by: ...')")
    parser.add_argument(
        "--json", action="store_true",
        help="print the report as JSON on standard output (schema: 'JSON "
             "reports' in the tracemalloc docs), besides the text report on "
             "standard error")
    parser.add_argument(
        "--min-rounds", type=_positive_int, default=None, metavar="K",
        help="a leaking site must also have grown in at least K of the "
             "R rounds (default: no such requirement beyond the verdict "
             "rule, see 'How the checker decides' in the docs)")
    parser.add_argument(
        "--threshold", type=_size, default=leaks.DEFAULT_THRESHOLD,
        metavar="BYTES",
        help="minimum average growth per round of a leaking site, in bytes "
             "(suffixes K, KiB, MB... accepted; default: %(default)s)")
    _add_nframe(parser)
    parser.add_argument(
        "--limit", type=_positive_int, default=DEFAULT_TOP, metavar="N",
        help="number of leaking sites to show (default: %(default)s)")
    parser.add_argument(
        "--html", metavar="FILE",
        help="also write an HTML report of the last round, compared with "
             "the first measured snapshot, to FILE")
    parser.add_argument(
        "-q", "--quiet", action="store_true",
        help="say nothing until the report; by default, a check that takes "
             "more than a second says which round it is in, on standard "
             "error (one line per round unless it is a terminal)")
    parser.add_argument("target", metavar="TARGET",
                        help="module:function, or a script path")
    parser.add_argument("args", nargs=argparse.REMAINDER,
                        help="the script's arguments")
    return parser


class _Progress:
    """Say on stderr which round of a leak check is running.

    Nothing is said for a check that ends within PROGRESS_DELAY seconds.
    After that, on a terminal, one status line is rewritten in place (the
    round and the time spent so far, updated every second) and erased when
    the check ends; otherwise, one line per round, when the round starts,
    so that a CI log gains a line per round and nothing else.

    A thread watches the clock, so that the first long round is announced
    without waiting for it to end.  It is started with _thread, not
    threading, so that its oldest frame is _watch(), a frame of this
    package: everything that it allocates is then the checker's for the
    leak checker's rule (see _leakcore.Ownership), while a threading.Thread
    allocates in threading's frames first, which the rule would count as
    the workload's, and the HTML report would show.
    """

    POLL = 0.1              # seconds between two looks at the clock

    def __init__(self, title, warmup, rounds, stream, delay):
        import _thread
        import time

        self._clock = time.monotonic
        self._sleep = time.sleep
        self._title = title
        self._warmup = warmup
        self._rounds = rounds
        self._stream = stream
        self._delay = delay
        try:
            self._tty = stream.isatty()
        except (AttributeError, ValueError):
            self._tty = False
        self._lock = _thread.allocate_lock()
        self._round = 0             # the round running, from 1; 0: none
        self._shown = (0, -1)       # (round, seconds) last written
        self._line_open = False     # a status line is on the terminal
        self._start = self._clock()
        self._stopping = False
        # Released by the thread when it starts and when it ends.
        self._started = _thread.allocate_lock()
        self._started.acquire()
        self._ended = _thread.allocate_lock()
        self._ended.acquire()
        _thread.start_new_thread(self._watch, ())
        self._started.acquire()

    def round_started(self):
        self._round += 1
        self._update()

    # A callable giving the rounds planned now (LeakCheck.planned_rounds:
    # the check adds rounds when a site is suspect), or None.
    planned = None

    def _text(self, seconds):
        number = self._round
        total = self._warmup + self._rounds
        if self.planned is not None:
            total = max(total, self.planned())
        if number <= self._warmup:
            phase = f"warm-up {number} of {self._warmup}"
        else:
            phase = (f"measured {number - self._warmup} of "
                     f"{total - self._warmup}")
        return (f"tracemalloc: {self._title}: round {number} of {total} "
                f"({phase}), {seconds} s elapsed")

    def _update(self):
        elapsed = self._clock() - self._start
        if elapsed < self._delay or not self._round:
            return
        with self._lock:
            if self._stopping:
                return
            if self._tty:
                # The clock ticks on a terminal: the check is alive.
                state = (self._round, int(elapsed))
                if state == self._shown:
                    return
                text = self._text(int(elapsed))
                try:
                    columns = os.get_terminal_size(
                        self._stream.fileno()).columns
                except (AttributeError, ValueError, OSError):
                    columns = 0
                if columns > 1:
                    # A wrapped line could not be rewritten in place.
                    text = text[:columns - 1]
                text = f"\r{text}\x1b[K"
                self._line_open = True
            else:
                state = (self._round, -1)
                if state == self._shown:
                    return
                text = f"{self._text(f'{elapsed:.1f}')}\n"
            self._shown = state
            try:
                self._stream.write(text)
                self._stream.flush()
            except (AttributeError, OSError, ValueError):
                pass

    def _watch(self):
        try:
            self._started.release()
            while not self._stopping:
                self._sleep(self.POLL)
                self._update()
        finally:
            self._ended.release()

    def stop(self):
        """Stop the thread; erase the status line of a terminal."""
        with self._lock:
            self._stopping = True
            if self._line_open:
                self._line_open = False
                try:
                    self._stream.write("\r\x1b[K")
                    self._stream.flush()
                except (AttributeError, OSError, ValueError):
                    pass
        if self._ended is not None:
            self._ended.acquire()       # the thread's end
            self._ended = None


# A leak check that ends within this many seconds says nothing until its
# report.
PROGRESS_DELAY = 1.0


def _round_counter(func, progress):
    """Return a callable that tells *progress* of each round, then calls
    *func()*: the workload that the checker runs."""

    def one_round():
        progress.round_started()
        return func()
    # Its call of func() is a line through which the workload allocates;
    # what round_started() allocates stays the checker's.
    return _leakcore.calls_workload(one_round)


def _load_function(spec):
    """Import module:function (module:Class.method works too: see
    _leakcore.resolve_target())."""

    try:
        return _leakcore.resolve_target(spec)
    except _leakcore.TargetError as exc:
        raise _TargetError(str(exc)) from None
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        # The module raised while it was imported: its traceback says why.
        _print_target_error(exc, sys.stderr)
        module_name = spec.partition(':')[0]
        raise _TargetError(f"importing {module_name!r} failed") from None


def _run_script(path):
    import runpy

    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise


def _script_runner(path, args):
    import functools
    # runpy imports pkgutil the first time that it runs a script: not the
    # script's doing, yet it would be under the script's first round.
    import pkgutil  # noqa: F401

    path = os.path.abspath(path)
    sys.argv[:] = [path, *args]
    sys.path[0] = os.path.dirname(path)
    _leakcore.calls_workload(_run_script)
    return functools.partial(_run_script, path)


class _StdoutToStderr:
    """For leaks --json: from now on, file descriptor 1 is standard error,
    for the target, its threads and its exit handlers alike, and the JSON
    report goes to the real standard output through take_stdout_fd() alone.
    While the target runs, sys.stdout is a stream of its own on a copy of
    standard error (a target that closes it closes neither stream).  When
    there is no descriptor 1 to save, the report goes to sys.stdout."""

    def __init__(self):
        self.stdout = sys.stdout
        self.saved_fd = None
        _flush(sys.stdout, sys.stderr)
        try:
            self.saved_fd = os.dup(1)
            os.dup2(2, 1)
        except OSError:
            if self.saved_fd is not None:
                os.close(self.saved_fd)
            self.saved_fd = None
        stream = None
        try:
            stream = open(os.dup(2), 'w', buffering=1,
                          encoding=getattr(sys.stderr, 'encoding', None),
                          errors='backslashreplace')
        except (OSError, ValueError):
            pass
        sys.stdout = stream if stream is not None else sys.stderr
        self.stream = stream

    def restore(self):
        """After the target: sys.stdout is the original object again (its
        descriptor 1 is standard error now)."""
        _flush(sys.stdout, sys.stderr, self.stream)
        if self.stream is not None:
            try:
                self.stream.close()
            except (OSError, ValueError):
                pass
        sys.stdout = self.stdout

    def take_stdout_fd(self):
        """The descriptor of the real standard output, for the report, now
        the caller's to close; None when there is none (the report then
        goes to sys.stdout)."""
        fd, self.saved_fd = self.saved_fd, None
        return fd


def _flush(*streams):
    for stream in streams:
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass


def _write_json(report, json_output):
    """Write *report* as JSON to the real standard output (see
    _StdoutToStderr); raise OSError (or ValueError: a closed sys.stdout)
    when it cannot be written, a full disk or a closed pipe, leaving
    nothing buffered that the interpreter's exit would try to write
    again."""
    import json
    text = json.dumps(dict(report.as_dict(), schema="tracemalloc-leak-report",
                           version=1), indent=1) + "\n"
    fd = json_output.take_stdout_fd()
    if fd is None:
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except (OSError, ValueError):
            sys.stdout = None       # its buffer is not flushed at exit
            raise
        return
    try:
        data = text.encode('utf-8')
        while data:
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)


def command_leaks(argv):
    """`leaks [options] TARGET [args]`."""
    from tracemalloc import leaks

    parser = _leaks_parser()
    if not [arg for arg in argv if not arg.startswith('-')]:
        options = parser.parse_args(argv)   # --help exits here
        parser.error("the TARGET to check is missing")
    options = parser.parse_args(argv)
    if options.min_rounds is not None and options.min_rounds > options.rounds:
        parser.error("--min-rounds cannot exceed --rounds")
    if options.html:
        _check_html_report_module(parser)
        _check_output(parser, "--html", options.html)
    sample = tracemalloc.get_sample() if is_tracing() else None
    if sample is not None:
        # Said before the target is loaded: it never runs (-n must
        # not turn the process exact behind its back).
        parser.exit(EXIT_USAGE,
                    f"{parser.prog}: error: tracemalloc is sampling (one "
                    f"sample per {sample} bytes on average) and a leak "
                    f"check needs exact tracing: run without -X "
                    f"tracemalloc_sample or PYTHONTRACEMALLOCSAMPLE\n")
    target = options.target
    try:
        if ':' in target and not os.path.exists(target):
            if options.args:
                parser.error("arguments are only accepted for a script")
            func = _load_function(target)
        elif os.path.exists(target):
            func = _script_runner(target, options.args)
        else:
            raise _TargetError(f"can't open file {target!r}: no such file "
                               f"or directory (TARGET is module:function "
                               f"or a script path)")
    except _TargetError as exc:
        parser.error(str(exc))

    if any(not pattern for pattern in options.ignore):
        parser.error("--ignore: a pattern must not be empty (an unset "
                     "variable?); give FILE:LINE or FILE patterns such as "
                     "'pkg/cache.py:*'")
    _ensure_tracing(parser, options.nframe)
    try:
        check = leaks.LeakCheck(warmup=options.warmup, rounds=options.rounds,
                                extend=options.extend,
                                ignore=options.ignore,
                                threshold=options.threshold,
                                min_rounds=options.min_rounds, title=target,
                                keep_snapshots=bool(options.html),
                                retention=options.retention)
    except (TypeError, ValueError) as exc:
        # An option that the checker refuses (an empty --ignore pattern):
        # a usage error, exit 2, not a traceback and the status of a leak.
        parser.error(str(exc))
    # The report goes where stderr was, even if the target replaces it.
    report_file = sys.stderr
    progress = None
    # A coroutine or generator function's body runs in each round (the
    # counter below would hide what func is).
    func = leaks._completing(func)
    if not options.quiet:
        progress = _Progress(target, options.warmup, options.rounds,
                             report_file, PROGRESS_DELAY)
        progress.planned = lambda: check.planned_rounds
        func = _round_counter(func, progress)
    # With --json, standard output is the report's alone: what the target
    # prints (from Python or C) goes to standard error while it runs.
    json_output = _StdoutToStderr() if options.json else None
    try:
        report = check.run(func)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        if progress is not None:
            progress.stop()
        if (isinstance(exc, leaks.LeakCheckError)
                and _skip_runner_frames(exc.__traceback__) is None):
            # The checker's own refusal (tracing stopped or cleared while
            # it ran), not an error of the target.
            print(f"{parser.prog}: error: the leak check gave no verdict "
                  f"(LeakCheckError): {exc}", file=report_file)
            return EXIT_USAGE
        _print_target_error(exc, report_file)
        print(f"{parser.prog}: error: the target {target!r} raised "
              f"{type(exc).__name__}; no verdict", file=report_file)
        return EXIT_USAGE
    finally:
        if progress is not None:
            progress.stop()
        if json_output is not None:
            json_output.restore()
    print(report.format(limit=options.limit), file=report_file, flush=True)
    if options.json:
        try:
            _write_json(report, json_output)
        except (OSError, ValueError) as exc:
            # As for --html: the verdict stands, and a clean check whose
            # report was asked for and not written is no success.
            _write_failed(parser, "the JSON report to standard output",
                          exc, report_file, quote=False)
            return EXIT_LEAK if report else EXIT_USAGE
    if options.html:
        # The graph shows the target's call paths, from the target's code
        # down: not the checker's or runpy's frames above them, nor what
        # runpy allocates for itself to run a script.
        trim = _tool_frames_trimmer()
        noise = [_RunpyNoise()]
        first, last = (_without_tool_frames(snapshot.filter_traces(noise),
                                            trim)
                       for snapshot in (check.first_snapshot,
                                        check.last_snapshot))
        try:
            _write_html(parser, last, options.html, base=first,
                        title=f"leaks of {target}",
                        leaks=report.sites or None)
        except OSError as exc:
            # The verdict stands; a clean check whose report was asked
            # for and not written is no success.
            _write_failed(parser, options.html, exc, report_file)
            return EXIT_LEAK if report else EXIT_USAGE
    return EXIT_LEAK if report else EXIT_OK


# --------------------------------------------------------------------------
# top and diff: snapshot files

def _load_snapshot(parser, path):
    try:
        return Snapshot.load(path)
    except (OSError, ValueError) as exc:
        parser.exit(EXIT_USAGE, f"{parser.prog}: error: {exc}\n")


def _add_grouping(parser):
    parser.add_argument(
        "--group-by", choices=("lineno", "filename", "traceback"),
        default="lineno",
        help="how traces are grouped into sites (default: %(default)s)")
    parser.add_argument(
        "--cumulative", action="store_true",
        help="credit every frame of a traceback, not only the most recent "
             "one (with lineno or filename)")
    parser.add_argument(
        "--limit", type=_positive_int, default=DEFAULT_TOP, metavar="N",
        help="number of sites to show (default: %(default)s)")


def _check_grouping(parser, options):
    if options.cumulative and options.group_by == "traceback":
        parser.error("--cumulative only works with --group-by lineno or "
                     "filename")


# Every traceback that the command line prints says its order, and the
# order is the same everywhere (leaks' report included): the allocating line
# first, where a reader starts.
TRACEBACK_HEADING = "Traceback (most recent call first):"


def _format_stat_lines(rank, stat, group_by, amount):
    """The lines of one site of the run, top and diff reports."""
    if group_by == "traceback":
        lines = [f"#{rank}: {amount}", f"  {TRACEBACK_HEADING}"]
        lines.extend("  " + line for line in
                     stat.traceback.format(most_recent_first=True))
        return lines
    if not len(stat.traceback):
        # A made-up snapshot's trace without frames (the engine gives a
        # frameless allocation the frame <unknown>:0).
        return [f"#{rank}: <no traceback>: {amount}"]
    frame = stat.traceback[0]
    if group_by == "filename":
        return [f"#{rank}: {frame.filename}: {amount}"]
    lines = [f"#{rank}: {frame.filename}:{frame.lineno}: {amount}"]
    source = linecache.getline(frame.filename, frame.lineno).strip()
    if source:
        lines.append(f"    {source}")
    return lines


def _snapshot_total(snapshot):
    """The traced size of a snapshot: the estimate of a sampled one."""
    if getattr(snapshot, 'sample', None) is not None:
        return sum(stat.size for stat in snapshot.statistics('traceback'))
    return sum(trace.size for trace in snapshot.traces)


def _sampled_note(*snapshots):
    """' (estimated: ...)' for sampled snapshots, else ''."""
    intervals = {getattr(s, 'sample', None) for s in snapshots} - {None}
    if not intervals:
        return ""
    return (" (estimated from samples, one per "
            + " / ".join(_format_size(i, False) for i in sorted(intervals))
            + " allocated on average)")


def command_top(argv):
    """`top SNAPSHOT [--group-by ...] [--cumulative] [--limit N]`."""
    parser = argparse.ArgumentParser(
        prog=f"{PROG} top",
        description="Print the top allocation sites of a snapshot file "
                    "written by Snapshot.dump() or run --output.")
    parser.add_argument("snapshot", metavar="SNAPSHOT")
    _add_grouping(parser)
    options = parser.parse_args(argv)
    _check_grouping(parser, options)
    snapshot = _load_snapshot(parser, options.snapshot)
    stats = snapshot.statistics(options.group_by, options.cumulative)
    total = _snapshot_total(snapshot)
    shown = stats[:options.limit]
    out = sys.stdout
    print(f"{options.snapshot}: {len(snapshot.traces)} traces, "
          f"{_format_size(total, False)}; top {len(shown)} of {len(stats)} "
          f"sites by {options.group_by}"
          f"{' (cumulative)' if options.cumulative else ''}"
          f"{_sampled_note(snapshot)}", file=out)
    for rank, stat in enumerate(shown, 1):
        amount = f"size={_format_size(stat.size, False)}, count={stat.count}"
        if stat.count:
            average = _format_size(stat.size / stat.count, False)
            amount += f", average={average}"
        for line in _format_stat_lines(rank, stat, options.group_by, amount):
            print(line, file=out)
    return EXIT_OK


def command_diff(argv):
    """`diff OLD NEW [--fail-over BYTES] [--group-by ...] [--limit N]`."""
    parser = argparse.ArgumentParser(
        prog=f"{PROG} diff",
        description="Print what grew (and shrank) between two snapshot "
                    "files, largest change first.  With --fail-over, exit "
                    "with status 1 when the total traced memory grew by "
                    "more than BYTES: compare a CI run with a stored "
                    "baseline snapshot.")
    parser.add_argument("old", metavar="OLD")
    parser.add_argument("new", metavar="NEW")
    _add_grouping(parser)
    parser.add_argument(
        "--fail-over", type=_size, default=None, metavar="BYTES",
        help="exit 1 when the total growth from OLD to NEW is more than "
             "BYTES (suffixes K, KiB, MB... accepted)")
    options = parser.parse_args(argv)
    _check_grouping(parser, options)
    old = _load_snapshot(parser, options.old)
    new = _load_snapshot(parser, options.new)
    try:
        stats = new.compare_to(old, options.group_by, options.cumulative)
    except ValueError as exc:  # exact against sampled, or two intervals
        parser.exit(EXIT_USAGE, f"{parser.prog}: error: {exc}\n")
    old_total = _snapshot_total(old)
    new_total = _snapshot_total(new)
    growth = new_total - old_total
    changed = [stat for stat in stats if stat.size_diff or stat.count_diff]
    shown = changed[:options.limit]
    out = sys.stdout
    print(f"{options.old} -> {options.new}: total "
          f"{_format_size(old_total, False)} -> "
          f"{_format_size(new_total, False)} "
          f"({_format_size(growth, True)}); top {len(shown)} of "
          f"{len(changed)} changed sites by {options.group_by}"
          f"{_sampled_note(old, new)}", file=out)
    for rank, stat in enumerate(shown, 1):
        amount = (f"size={_format_size(stat.size, False)} "
                  f"({_format_size(stat.size_diff, True)}), "
                  f"count={stat.count} ({stat.count_diff:+d})")
        for line in _format_stat_lines(rank, stat, options.group_by, amount):
            print(line, file=out)
    out.flush()
    if options.fail_over is None:
        return EXIT_OK
    # The verdict, one line on stderr whichever it is: a CI log then says
    # that the check ran, and against which limit.
    if growth > options.fail_over:
        print(f"{parser.prog}: total growth {_format_size(growth, True)} "
              f"({growth} bytes) is over the limit of "
              f"{options.fail_over} bytes", file=sys.stderr)
        return EXIT_LEAK
    print(f"{parser.prog}: total growth {_format_size(growth, True)} "
          f"({growth} bytes) is within the limit of {options.fail_over} "
          f"bytes", file=sys.stderr)
    return EXIT_OK


# --------------------------------------------------------------------------
# html

def command_html(argv):
    """`html SNAPSHOT [--base OLD] [-o FILE]`."""
    parser = argparse.ArgumentParser(
        prog=f"{PROG} html",
        description="Write a self-contained HTML report of a snapshot file "
                    "(it works offline); with --base, show what grew since "
                    "the OLD snapshot.")
    parser.add_argument("snapshot", metavar="SNAPSHOT")
    parser.add_argument("--base", metavar="OLD",
                        help="snapshot file to compare with")
    parser.add_argument("-o", "--output", metavar="FILE", default=None,
                        help="output file (default: SNAPSHOT with .html)")
    parser.add_argument("--title", default=None, help="title of the report")
    options = parser.parse_args(argv)
    snapshot = _load_snapshot(parser, options.snapshot)
    base = None
    if options.base is not None:
        base = _load_snapshot(parser, options.base)
        try:
            # Exact against sampled, or two intervals: refused.
            tracemalloc._check_same_sampling(snapshot, base,
                                             "take the difference of")
        except ValueError as exc:
            parser.exit(EXIT_USAGE, f"{parser.prog}: error: {exc}\n")
    output = options.output
    if output is None:
        output = os.path.splitext(options.snapshot)[0] + ".html"
    _check_output(parser, "-o/--output", output)
    try:
        _write_html(parser, snapshot, output, base=base,
                    title=options.title or os.path.basename(options.snapshot))
    except OSError as exc:
        _write_failed(parser, output, exc)
        return EXIT_USAGE
    return EXIT_OK


# --------------------------------------------------------------------------
# pprof

PPROF_SUFFIX = ".pb.gz"


def command_pprof(argv):
    """`pprof SNAPSHOT [--base OLD] [-o FILE]`."""
    parser = argparse.ArgumentParser(
        prog=f"{PROG} pprof",
        description="Write a snapshot file as a gzip-compressed pprof "
                    "profile (sample types inuse_objects and inuse_space, "
                    "one sample per traceback), for go tool pprof, "
                    "Pyroscope, Datadog or Google Cloud Profiler.  With "
                    "--base, the profile is the difference from the OLD "
                    "snapshot, as pprof -diff_base builds it.")
    parser.add_argument("snapshot", metavar="SNAPSHOT")
    parser.add_argument("--base", metavar="OLD",
                        help="snapshot file to subtract (its samples are "
                             "negated and labelled pprof::base=true)")
    parser.add_argument("-o", "--output", metavar="FILE", default=None,
                        help=f"output file (default: SNAPSHOT with "
                             f"{PPROF_SUFFIX})")
    options = parser.parse_args(argv)
    snapshot = _load_snapshot(parser, options.snapshot)
    base = None
    if options.base is not None:
        base = _load_snapshot(parser, options.base)
        try:
            # Exact against sampled, or two intervals: refused.
            tracemalloc._check_same_sampling(snapshot, base,
                                             "take the difference of")
        except ValueError as exc:
            parser.exit(EXIT_USAGE, f"{parser.prog}: error: {exc}\n")
    output = options.output
    if output is None:
        output = os.path.splitext(options.snapshot)[0] + PPROF_SUFFIX
    _check_output(parser, "-o/--output", output)
    try:
        snapshot.dump_pprof(output, base=base)
    except OSError as exc:
        # The error names the output, never a temporary file (2.14).
        _write_failed(parser, output, exc)
        return EXIT_USAGE
    except ValueError as exc:
        # What pprof cannot hold (a size beyond int64 in a crafted or
        # made-up snapshot): a message, not a traceback.
        parser.exit(EXIT_USAGE, f"{parser.prog}: error: {exc}\n")
    what = "difference" if base is not None else "profile"
    print(f"tracemalloc: pprof {what} written to {output}", file=sys.stderr)
    return EXIT_OK


def command_attach(argv):
    """`attach PID [--duration S] [--timeout S]` (tracemalloc._attach)."""
    from tracemalloc import _attach

    return _attach.command_attach(argv, prog=f"{PROG} attach")


# --------------------------------------------------------------------------

def main(argv=None):
    """Entry point of ``python -m tracemalloc``; return the exit status."""
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] in COMMANDS:
        command, argv = argv[0], argv[1:]
        if command == 'run':
            return command_run(argv)
        return _COMMAND_FUNCTIONS[command](argv)
    # The bare form: python -m tracemalloc [options] script.py [args]
    return command_run(argv, prog=PROG)


_COMMAND_FUNCTIONS = {
    'leaks': command_leaks,
    'top': command_top,
    'diff': command_diff,
    'html': command_html,
    'pprof': command_pprof,
    'attach': command_attach,
}


if __name__ == "__main__":
    sys.exit(main())
