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

Exit status: 0 when all is well, 1 when a leak (or a growth over the limit)
is found, 2 on a usage error or when the target cannot run; ``run`` exits
with the status of the program that it ran.

The work is done by functions of the package that programs may call too:
tracemalloc.leaks.check(), Snapshot.load(), Snapshot.statistics() and
compare_to(); this module only parses the command line and prints.
"""

import argparse
import gc
import linecache
import os
import sys

import tracemalloc
from tracemalloc import (BaseFilter, Snapshot, Traceback, _format_size,
                         is_tracing, reset_peak, start, take_snapshot)

COMMANDS = ('run', 'leaks', 'top', 'diff', 'html')
PROG = "python -m tracemalloc"
DEFAULT_NFRAME = 25
DEFAULT_TOP = 10

EXIT_OK = 0
EXIT_LEAK = 1
EXIT_USAGE = 2


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
    if value < 0:
        raise argparse.ArgumentTypeError(
            f"must be a size in bytes such as 1000, 64KiB or 2MB, "
            f"not {text!r}")
    return int(value)


def _add_nframe(parser):
    parser.add_argument(
        "-n", "--nframe", type=_positive_int, default=None, metavar="N",
        help=f"number of frames to store per traceback (default: "
             f"{DEFAULT_NFRAME}); tracing already on, e.g. with -X "
             f"tracemalloc, keeps its own limit unless -n is given")


def _ensure_tracing(parser, nframe):
    """Start tracing with *nframe* frames (or restart it with another
    limit when -n was given explicitly)."""
    if is_tracing():
        if nframe is None or tracemalloc.get_traceback_limit() == nframe:
            return
        # An explicit -n wins over PYTHONTRACEMALLOC or -X tracemalloc: what
        # was traced so far belongs to the baseline anyway.
        tracemalloc.stop()
    try:
        start(DEFAULT_NFRAME if nframe is None else nframe)
    except ValueError as exc:
        parser.error(f"argument -n/--nframe: {exc}")


# --------------------------------------------------------------------------
# HTML reports (tracemalloc.htmlreport is imported only when asked for)

def _html_report_module(parser):
    """Import tracemalloc.htmlreport, or exit with a usage error.

    Commands that take --html call it before doing any work, so that a
    missing report module is said at once, not after a long run.
    """
    try:
        from tracemalloc import htmlreport
    except ImportError as exc:
        if exc.name not in ('tracemalloc.htmlreport',):
            raise
        parser.exit(EXIT_USAGE, f"{parser.prog}: error: the HTML report "
                                f"is not available in this Python "
                                f"(no module tracemalloc.htmlreport)\n")
    return htmlreport


def _write_html(parser, snapshot, path, *, base=None, title=None):
    htmlreport = _html_report_module(parser)
    htmlreport.write_html(snapshot, path, base=base, title=title)
    print(f"tracemalloc: HTML report written to {path}", file=sys.stderr)


# --------------------------------------------------------------------------
# run: what a script still holds at exit

class _RunnerNoise(BaseFilter):
    """Exclusive filter dropping the allocations that the `run` tool causes.

    A trace is dropped if its most recent frame is in this package, in runpy
    which runs the target, in the import bootstrap (whose allocations are
    module code objects) or '<unknown>', or if any of its frames is one of
    *code_lines*, the (filename, lineno) pairs of code that the tool runs
    after the target finished, such as printing its error.
    """

    # Decides on the frames alone: see Snapshot.filter_traces().
    _frames_only = True

    def __init__(self, filenames, directories, code_lines):
        super().__init__(False)
        self._filenames = frozenset(filenames)
        self._directories = frozenset(directories)
        self._code_lines = frozenset(code_lines)

    def _match(self, trace):
        frames = trace[2]
        if frames:
            filename = frames[0][0]
            if (filename in self._filenames
                    or os.path.dirname(filename) in self._directories):
                return False
        return self._code_lines.isdisjoint(frames)


def _code_lines(function):
    """Return the set of (filename, lineno) pairs of *function*'s body."""
    code = function.__code__
    return {(code.co_filename, lineno)
            for _, _, lineno in code.co_lines() if lineno is not None}


def _package_directory():
    return os.path.dirname(_code_lines.__code__.co_filename)


def _runner_files():
    """Filenames of the code that runs the target: this tool and runpy."""
    import runpy

    return {_code_lines.__code__.co_filename,
            runpy.run_path.__code__.co_filename}


def _is_runner_file(filename):
    return (filename in _runner_files()
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


def _without_runner_frames(traceback):
    """Return *traceback* less its oldest frames from this tool and runpy.

    They are the same for every allocation of the target: noise.
    """
    frames = traceback._frames              # oldest first
    start = 0
    while start < len(frames) and _is_runner_file(frames[start][0]):
        start += 1
    if start == len(frames):
        return traceback
    return Traceback(tuple(reversed(frames[start:])))


def _run_parser(prog, usage):
    parser = argparse.ArgumentParser(
        prog=prog, usage=usage,
        description="Run a Python script (or a module with -m) with memory "
                    "tracing on, then report on standard error where the "
                    "memory that it still holds at exit was allocated.",
        epilog="Other commands: leaks (find the allocation sites that grow "
               "while a function or script runs in rounds), top and diff "
               "(read snapshot files), html (an HTML report); see "
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
        if options.group_by == "traceback":
            write(f"#{rank}: {amount}, allocated at:\n")
            for line in _without_runner_frames(stat.traceback).format():
                write(f"  {line}\n")
            continue
        frame = stat.traceback[0]
        if options.group_by == "filename":
            write(f"#{rank}: {frame.filename}: {amount}\n")
            continue
        write(f"#{rank}: {frame.filename}:{frame.lineno}: {amount}\n")
        source = linecache.getline(frame.filename, frame.lineno).strip()
        if source:
            write(f"    {source}\n")
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
                 f"{{leaks,top,diff,html}} ... (see COMMAND --help)")
    else:
        usage = f"{prog} [options] (script.py | -m module) [args ...]"
    parser = _run_parser(prog, usage)
    options = _parse_run_args(parser, argv)
    if options.html:
        _html_report_module(parser)

    # Set up the target's environment, like "python script.py" would.
    sys.argv[:] = [options.target] + options.args
    if not options.run_module:
        sys.path[0] = os.path.dirname(os.path.abspath(options.target))

    _ensure_tracing(parser, options.nframe)

    noise = _RunnerNoise(
        filenames=(*_runner_files(),
                   "<frozen importlib._bootstrap>",
                   "<frozen importlib._bootstrap_external>",
                   "<unknown>"),
        directories=(_package_directory(),),
        code_lines=_code_lines(_print_target_error))
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

    # The report goes where stderr was, even if the target replaced it.
    report_file = sys.stderr
    target_globals, status, error = _run_target(options)
    if error is not None:
        _print_target_error(error, report_file)
        # The traceback holds the frames, and so the local variables, of the
        # failed code: drop it so that they do not count as still allocated.
        error = None

    gc.collect()
    if not is_tracing():
        print("tracemalloc: the program stopped tracing, no report",
              file=report_file)
        return status
    final = take_snapshot(peak=options.peak).filter_traces([noise])
    stats = final.compare_to(baseline, options.group_by)
    _format_run_report(stats, options, final.traceback_limit, report_file)
    if options.output:
        final.dump(options.output)
        print(f"tracemalloc: snapshot written to {options.output}",
              file=report_file)
    if options.html:
        what = "at its peak" if options.peak else "held at exit"
        _write_html(parser, final, options.html, base=baseline,
                    title=f"memory {what} by {options.target}")
    # Only now may the target's module-level objects go away.
    del target_globals
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
                    "sites whose memory grew in (almost) every measured "
                    "round, largest first, each as FILE:LINE: with its "
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
        "--min-rounds", type=_positive_int, default=None, metavar="K",
        help="a site leaks when it grew in at least K of the R rounds "
             "(default: R - R//4, so 4 of 5)")
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
    parser.add_argument("target", metavar="TARGET",
                        help="module:function, or a script path")
    parser.add_argument("args", nargs=argparse.REMAINDER,
                        help="the script's arguments")
    return parser


def _load_function(spec):
    """Import module:function (module:Class.method works too)."""
    import importlib

    module_name, _, qualname = spec.partition(':')
    if not module_name or not qualname:
        raise _TargetError(f"invalid target {spec!r}: expected "
                           f"module:function or a script path")
    if '' not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target = importlib.import_module(module_name)
    except ImportError as exc:
        raise _TargetError(f"cannot import {module_name!r}: {exc}") from None
    except BaseException as exc:
        _print_target_error(exc, sys.stderr)
        raise _TargetError(f"importing {module_name!r} failed") from None
    for name in qualname.split('.'):
        try:
            target = getattr(target, name)
        except AttributeError:
            raise _TargetError(f"module {module_name!r} has no attribute "
                               f"{qualname!r}") from None
    if not callable(target):
        raise _TargetError(f"{spec!r} is not callable")
    return target


def _run_script(path):
    import runpy

    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise


def _script_runner(path, args):
    import functools
    from tracemalloc import leaks

    path = os.path.abspath(path)
    sys.argv[:] = [path, *args]
    sys.path[0] = os.path.dirname(path)
    leaks._calls_workload(_run_script)
    return functools.partial(_run_script, path)


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
        _html_report_module(parser)
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

    _ensure_tracing(parser, options.nframe)
    check = leaks.LeakCheck(warmup=options.warmup, rounds=options.rounds,
                            threshold=options.threshold,
                            min_rounds=options.min_rounds, title=target,
                            keep_snapshots=bool(options.html))
    try:
        report = check.run(func)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        _print_target_error(exc, sys.stderr)
        print(f"{parser.prog}: error: the target {target!r} raised "
              f"{type(exc).__name__}; no verdict", file=sys.stderr)
        return EXIT_USAGE
    print(report.format(limit=options.limit), file=sys.stderr, flush=True)
    if options.html:
        _write_html(parser, check.last_snapshot, options.html,
                    base=check.first_snapshot, title=f"leaks of {target}")
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


def _format_stat_lines(rank, stat, group_by, amount):
    if group_by == "traceback":
        lines = [f"#{rank}: {amount}"]
        lines.extend("  " + line for line in
                     stat.traceback.format(most_recent_first=True))
        return lines
    frame = stat.traceback[0]
    if group_by == "filename":
        return [f"#{rank}: {frame.filename}: {amount}"]
    lines = [f"#{rank}: {frame.filename}:{frame.lineno}: {amount}"]
    source = linecache.getline(frame.filename, frame.lineno).strip()
    if source:
        lines.append(f"    {source}")
    return lines


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
    total = sum(trace.size for trace in snapshot.traces)
    shown = stats[:options.limit]
    out = sys.stdout
    print(f"{options.snapshot}: {len(snapshot.traces)} traces, "
          f"{_format_size(total, False)}; top {len(shown)} of {len(stats)} "
          f"sites by {options.group_by}"
          f"{' (cumulative)' if options.cumulative else ''}", file=out)
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
    stats = new.compare_to(old, options.group_by, options.cumulative)
    old_total = sum(trace.size for trace in old.traces)
    new_total = sum(trace.size for trace in new.traces)
    growth = new_total - old_total
    changed = [stat for stat in stats if stat.size_diff or stat.count_diff]
    shown = changed[:options.limit]
    out = sys.stdout
    print(f"{options.old} -> {options.new}: total "
          f"{_format_size(old_total, False)} -> "
          f"{_format_size(new_total, False)} "
          f"({_format_size(growth, True)}); top {len(shown)} of "
          f"{len(changed)} changed sites by {options.group_by}", file=out)
    for rank, stat in enumerate(shown, 1):
        amount = (f"size={_format_size(stat.size, False)} "
                  f"({_format_size(stat.size_diff, True)}), "
                  f"count={stat.count} ({stat.count_diff:+d})")
        for line in _format_stat_lines(rank, stat, options.group_by, amount):
            print(line, file=out)
    out.flush()
    if options.fail_over is not None and growth > options.fail_over:
        print(f"{parser.prog}: total growth {_format_size(growth, True)} "
              f"({growth} bytes) is over the limit of "
              f"{options.fail_over} bytes", file=sys.stderr)
        return EXIT_LEAK
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
    output = options.output
    if output is None:
        output = os.path.splitext(options.snapshot)[0] + ".html"
    _write_html(parser, snapshot, output, base=base,
                title=options.title or os.path.basename(options.snapshot))
    return EXIT_OK


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
}


if __name__ == "__main__":
    sys.exit(main())
