"""The core of the leak checker, shared by its integrations.

Private to the tracemalloc package.  tracemalloc.leaks (the public API),
tracemalloc.testing, tracemalloc.regrtest, tracemalloc.pytest_plugin and the
command line (tracemalloc.__main__) use it through the names below, and
only them:

  DEFAULT_NFRAME            traceback limit when a tool starts tracing
  format_size(size, sign)   "1.5 KiB", as in the reports of the package
  sum_by_key(rows)          {key: [size, count]} of (key, size, count) rows
  runner_files()            files of the code that runs a script (runpy)
  call_workload(func, ...)  call the workload: its allocations, C code's
                            included, are the workload's, not the tool's
  calls_workload(function)  register a helper between call_workload() and
                            the workload (a test runner's)
  Ownership                 decides whether a traceback is the workload's
  strip_tool_frames(tb)     a Traceback without the tool's oldest frames
  resolve_target(spec)      the callable named by "module:qualname"
  TargetError               raised by resolve_target()
"""

import os
import sys
from operator import itemgetter

from tracemalloc import Traceback, _format_size, _sum_by_key

DEFAULT_NFRAME = 25


def format_size(size, sign=False):
    """Return *size* (bytes) as text, "+" first if *sign* is true."""
    return _format_size(size, sign)


def sum_by_key(rows):
    """Return {key: [size, count]}, summed over the (key, size, count)
    *rows*."""
    return _sum_by_key(rows)


# --------------------------------------------------------------------------
# Whose memory is it?

# (filename, lineno) of the lines through which the tool calls a workload:
# call_workload()'s, and the lines of the helpers registered with
# calls_workload().
_WORKLOAD_CALLS = set()


def call_workload(func, *args, **kwargs):
    """Call *func* as the workload; return its result.

    The call line is the root of the workload: what is allocated under it,
    by Python code or directly by a C callable (a builtin, a C method, a
    functools.partial of one), is the workload's.
    """
    # This frame's frame object, which a workload that keeps one of its own
    # frames pins through f_back, is made here, on a line of the tool, and
    # not later on the call line below, where it would count as the
    # workload's.
    sys._getframe()
    return func(*args, **kwargs)


_code = call_workload.__code__
_WORKLOAD_CALLS.add((_code.co_filename,
                     max(line for _, _, line in _code.co_lines()
                         if line is not None)))
del _code
_PACKAGE_DIRECTORY = os.path.dirname(call_workload.__code__.co_filename)


def calls_workload(function):
    """Register the lines of *function*, a helper that sits between
    call_workload() and the workload, as lines that call the workload.

    What is allocated under those lines is the workload's, so the helper
    must allocate nothing that outlives it there.  Return *function*.
    """
    code = function.__code__
    _WORKLOAD_CALLS.update((code.co_filename, lineno)
                           for _, _, lineno in code.co_lines()
                           if lineno is not None
                           and lineno != code.co_firstlineno)
    return function


_RUNNER_FILES = None


def runner_files():
    """Files whose frames run a script without being part of it (runpy)."""
    global _RUNNER_FILES
    if _RUNNER_FILES is None:
        import runpy
        _RUNNER_FILES = frozenset({runpy.run_path.__code__.co_filename})
    return _RUNNER_FILES


def package_files():
    """The co_filename of every module of the tracemalloc package."""
    try:
        names = os.listdir(_PACKAGE_DIRECTORY)
    except OSError:
        names = []          # a zip file, for one: the loaded modules below
    files = {os.path.join(_PACKAGE_DIRECTORY, name) for name in names
             if name.endswith('.py')}
    for name, module in list(sys.modules.items()):
        spec = getattr(module, '__spec__', None)
        spec_name = getattr(spec, 'name', None) or name
        if spec_name == 'tracemalloc' or spec_name.startswith(
                'tracemalloc.'):
            filename = getattr(module, '__file__', None)
            if filename:
                files.add(filename)
    return frozenset(files)


_FILENAME = itemgetter(0)


class Ownership:
    """Decide whether a traceback (raw frames, most recent first) is the
    workload's or the tool's.

    A traceback that reaches no file of this package is the workload's:
    a block of code run by iterating a LeakCheck, a thread, whatever the
    process allocated before the check, and '<unknown>' (C code running
    without a Python frame, which may leak too).  Otherwise, the most recent
    frame of the package decides: the traceback is the workload's when that
    frame is a line that calls the workload (call_workload()'s, or a
    registered helper's), even when it is the innermost frame -- then a C
    callable called directly as the workload allocated the memory -- and
    the tool's otherwise.
    """

    def __init__(self):
        self._own_files = package_files()

    def is_workload(self, frames):
        own_files = self._own_files
        # Most tracebacks never reach this package: one C-level pass.
        if own_files.isdisjoint(map(_FILENAME, frames)):
            return True
        for frame in frames:
            if frame[0] in own_files:
                return frame in _WORKLOAD_CALLS
        return True


def strip_tool_frames(traceback, directories=()):
    """Return *traceback* (a Traceback) less its oldest frames that are the
    tool's: frames of this package and of runpy, and frames of files in
    *directories* (a test harness's, for one).

    They are the same for every allocation of the workload.  The most
    recent frame is always kept, even if it is the tool's: a C callable
    called directly as the workload allocates on the tool's call line.
    """
    own = package_files() | runner_files()
    directories = frozenset(directories)
    frames = [(frame.filename, frame.lineno) for frame in traceback]
    start = 0                                   # oldest first
    while (start < len(frames) - 1
           and (frames[start][0] in own
                or os.path.dirname(frames[start][0]) in directories)):
        start += 1
    if start == 0:
        return traceback
    return Traceback(tuple(reversed(frames[start:])),
                     traceback.total_nframe)


# --------------------------------------------------------------------------
# Targets of the command line

class TargetError(ValueError):
    """A target that cannot be resolved; the message says why."""


def resolve_target(spec):
    """Return the callable named by *spec*, "module:qualname".

    The module is imported as ``python -m`` would, with the current
    directory on the path.  For "module:Class.method" where *method* is a
    plain function of the class (not a static or class method), the class
    is instantiated once, without arguments, and the method of that
    instance is returned.  Raise TargetError when the module or the name is
    not found, or the result is not callable; an exception raised while
    importing the module propagates.
    """
    import importlib
    import inspect

    module_name, _, qualname = spec.partition(':')
    if not module_name or not qualname:
        raise TargetError(f"invalid target {spec!r}: expected "
                          f"module:function or a script path")
    if '' not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target = importlib.import_module(module_name)
    except ImportError as exc:
        raise TargetError(f"cannot import {module_name!r}: {exc}") from None
    owner = None
    for name in qualname.split('.'):
        owner = target
        try:
            target = getattr(target, name)
        except AttributeError:
            raise TargetError(f"module {module_name!r} has no attribute "
                              f"{qualname!r}") from None
    if (inspect.isclass(owner)
            and inspect.isfunction(inspect.getattr_static(owner, name,
                                                          None))):
        try:
            instance = owner()
        except Exception as exc:
            raise TargetError(
                f"{spec!r} is a method: its class {owner.__qualname__} "
                f"cannot be instantiated without arguments "
                f"({type(exc).__name__}: {exc})") from None
        target = getattr(instance, name)
    if not callable(target):
        raise TargetError(f"{spec!r} is not callable")
    return target
