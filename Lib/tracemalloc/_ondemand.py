"""Profiles of a running process, on demand: ``tracemalloc.dump_on_signal()``.

A service started with tracing on (``-X tracemalloc``, or sampled with
``-X tracemalloc_sample=512KiB``) calls ``tracemalloc.dump_on_signal()``
once; from then on ``kill -USR2 PID`` makes it write a pprof profile (or a
snapshot file) of the memory that it holds, without a restart.

The signal handler runs, as every Python signal handler does, in the main
thread between two bytecodes.  It takes the snapshot there, so that the
profile is the memory of that moment, then encodes and writes it in a
thread of its own ("tracemalloc-dump"), so that the service's main thread
pauses only while the snapshot is taken.  The thread is not a daemon: a
dump under way is finished before the interpreter exits.

Nothing that the dump does raises into the program: an error (tracing off,
a disk full, a directory gone) is said in one line on standard error, and
so is each file written.
"""

import os
import signal
import string
import sys
import threading
import time

__all__ = ['dump_on_signal']

DEFAULT_PATH = 'tracemalloc-{pid}-{n}.pb.gz'

# The fields of a path pattern, with the value used to check a pattern
# when it is installed.
_FIELDS = {'pid': 1, 'n': 1, 'time': '20260101T000000Z'}

_FORMATS = ('pprof', 'snapshot')

# Suffixes that mean a pprof profile when format=None.
_PPROF_SUFFIXES = ('.pb.gz', '.pb', '.pprof')

# Installed handlers: signal number -> _Dumper.  Changed only by the main
# thread (dump_on_signal() is main-thread only, as signal.signal()).
_installed = {}

# The {n} of the next dump, shared by every installed signal, so that two
# signals with one pattern never write the same name.
_counter = 0

# Held from a signal's snapshot until its file is written: a signal that
# arrives meanwhile (the handler can run again inside itself) is reported
# and ignored instead of starting a second dump.
_busy = threading.Lock()


def _after_fork_in_child():
    global _busy, _counter
    # A dump that the parent was writing has no thread in the child: its
    # lock would stay held, and every signal of the child be ignored.
    _busy = threading.Lock()
    # The child numbers its own dumps from 1, and a pattern without {pid}
    # gets the child's process id, so that parent and child never write
    # the same file.
    _counter = 0
    for dumper in _installed.values():
        dumper.pattern = _with_pid(dumper.pattern)


def _with_pid(pattern):
    """*pattern*, with ``-pid{pid}`` before its suffix if it has no {pid}
    field: ``dump-{n}.pb.gz`` becomes ``dump-{n}-pid{pid}.pb.gz``."""
    fields = {field for _, field, _, _ in string.Formatter().parse(pattern)}
    if 'pid' in fields:
        return pattern
    directory, name = os.path.split(pattern)
    for suffix in _PPROF_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            stem = name[:-len(suffix)]
            break
    else:
        stem, suffix = os.path.splitext(name)
        if '{' in suffix or '}' in suffix:
            stem, suffix = name, ''
    return os.path.join(directory, f"{stem}-pid{{pid}}{suffix}")


def _import_writers():
    # Import now, in the thread that installs the handler, everything that
    # writing a dump imports.  A dump's thread that imported them itself
    # would hold their import locks while it runs: a child forked then
    # inherits the locks held by a thread that it does not have, and its
    # own dumps would wait for them forever.
    import json
    import zlib
    from tracemalloc import _pprof, _snapshotfile


if hasattr(os, 'register_at_fork'):
    os.register_at_fork(after_in_child=_after_fork_in_child)

# SIGUSR2 where there is one; Windows has SIGBREAK (Ctrl+Break) instead.
_DEFAULT_SIGNAL = getattr(signal, 'SIGUSR2', getattr(signal, 'SIGBREAK', 0))


def _report(message):
    stream = sys.stderr
    if stream is None:
        # No standard error (pythonw, a daemon that closed it): print()
        # would write to standard output instead.
        return
    try:
        # One write of the whole line: print() writes the newline apart,
        # and another thread's message could land between (issue 29, 2.20).
        stream.write(f"tracemalloc: {message}\n")
        stream.flush()
    except Exception:
        # No standard error to tell: the dump stays silent rather than
        # raise into the program.
        pass


def _check_pattern(path):
    """Return the absolute pattern for *path*; raise TypeError or
    ValueError if it is not a usable pattern."""
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    elif not isinstance(path, str):
        try:
            path = os.fspath(path)
        except TypeError:
            raise TypeError(f"path must be a str or os.PathLike, not "
                            f"{type(path).__name__}") from None
        if isinstance(path, bytes):
            path = os.fsdecode(path)
    if not path:
        raise ValueError("path must not be empty")
    try:
        for _, field, _, _ in string.Formatter().parse(path):
            if field is not None and field not in _FIELDS:
                raise ValueError(
                    f"unknown field {{{field}}}" if field else
                    "a field must be named")
        path.format(**_FIELDS)       # fields that format
    except (ValueError, IndexError, KeyError, AttributeError) as exc:
        raise ValueError(
            f"invalid path pattern {path!r}: {exc}; the fields are "
            f"{{pid}}, {{n}} and {{time}} (write {{{{ and }}}} for "
            f"braces)") from None
    # A service may change its working directory later (a daemon goes to
    # /): the pattern is the one that the caller meant now.
    cwd = os.getcwd()
    if not os.path.isabs(path):
        # The directory's own braces are text, not fields.
        escaped = cwd.replace('{', '{{').replace('}', '}}')
        path = os.path.join(escaped, path)
    # The directory of this process's first dump must exist: {pid} is
    # this process's.  A directory named after {n} or {time} is new for
    # each dump, and cannot be checked now: a dump then says if it is
    # missing.
    directory = os.path.dirname(os.path.join(
        cwd, path.format(**dict(_FIELDS, pid=os.getpid()))))
    fields = {field for _, field, _, _
              in string.Formatter().parse(os.path.dirname(path))
              if field is not None}
    if not fields & {'n', 'time'} and not os.path.isdir(directory):
        raise ValueError(f"invalid path pattern {path!r}: directory "
                         f"{directory!r} does not exist")
    return path


def _guess_format(path):
    return 'pprof' if path.endswith(_PPROF_SUFFIXES) else 'snapshot'


class _Dumper:
    """The handler of one signal: what to write, and where."""

    def __init__(self, signum, pattern, format, previous):
        self.signum = signum
        self.pattern = pattern
        self.format = format
        self.previous = previous

    def __call__(self, signum, frame):
        # A signal handler: whatever happens, nothing propagates into the
        # code that the signal interrupted.
        try:
            self._dump()
        except BaseException as exc:
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            _report(f"profile not written: {type(exc).__name__}: {exc}")

    def _signal_name(self):
        try:
            return signal.Signals(self.signum).name
        except ValueError:
            return f"signal {self.signum}"

    def _dump(self):
        global _counter
        import tracemalloc

        if not tracemalloc.is_tracing():
            _report(f"{self._signal_name()}: not tracing, no profile "
                    f"written (start tracing with -X tracemalloc or "
                    f"tracemalloc.start())")
            return
        busy = _busy
        if not busy.acquire(blocking=False):
            _report(f"{self._signal_name()}: a profile is still being "
                    f"written; this signal is ignored")
            return
        try:
            snapshot = tracemalloc.take_snapshot()
            _counter += 1
            path = self.pattern.format(
                pid=os.getpid(), n=_counter,
                time=time.strftime('%Y%m%dT%H%M%SZ', time.gmtime()))
            writer = threading.Thread(
                target=self._write, args=(snapshot, path, busy),
                name="tracemalloc-dump")
            writer.start()
        except BaseException:
            busy.release()
            raise

    def _write(self, snapshot, path, busy):
        try:
            if self.format == 'pprof':
                snapshot.dump_pprof(path)
            else:
                snapshot.dump(path)
        except Exception as exc:
            _report(f"cannot write the profile to {path}: "
                    f"{type(exc).__name__}: {exc}")
        else:
            _report(f"{self._signal_name()}: {self.format} written to "
                    f"{path}")
        finally:
            busy.release()


def _check_signal(signum):
    if isinstance(signum, bool) or not isinstance(signum, int):
        raise TypeError(f"signum must be a signal number or None, not "
                        f"{type(signum).__name__}")
    if signum not in signal.valid_signals():
        raise ValueError(f"invalid signal number {signum}")
    return int(signum)


def dump_on_signal(signum=_DEFAULT_SIGNAL, path=DEFAULT_PATH, *,
                   format=None):
    """Write a pprof profile (or a snapshot file) each time *signum*
    arrives; return the signal's previous handler.

    *path* is a pattern with the fields {pid} (the process id), {n} (1 for
    the first profile written, then 2...) and {time} (UTC, as
    20261201T221500Z); a relative pattern is taken from the current
    directory now, not when a signal arrives.  *format* is 'pprof' (a
    gzip-compressed pprof profile, as Snapshot.dump_pprof()) or 'snapshot'
    (a snapshot file, as Snapshot.dump()); None chooses 'pprof' for a path
    ending in .pb.gz, .pb or .pprof, 'snapshot' otherwise.

    The handler takes a snapshot (tracemalloc must be tracing then; if it
    is not, it writes nothing and says so on stderr) and writes it in a
    thread.  Errors are reported on stderr, never raised into the program.

    A child made by os.fork() keeps the handlers; its dumps are numbered
    from 1 again, and a pattern without {pid} gets ``-pid{pid}`` before
    its suffix in the child (``dump-{n}.pb.gz`` is written as
    ``dump-1-pid4242.pb.gz``), so that the child never writes the
    parent's names.

    ``dump_on_signal(None)`` removes every handler installed this way and
    puts back the handlers that they replaced.  Like signal.signal(), it
    must be called from the main thread.
    """
    if signum is None:
        for dumper in reversed(list(_installed.values())):
            signal.signal(dumper.signum, dumper.previous)
        _installed.clear()
        return None
    signum = _check_signal(signum)
    pattern = _check_pattern(path)
    _import_writers()
    if format is None:
        format = _guess_format(pattern)
    elif format not in _FORMATS:
        raise ValueError(f"format must be 'pprof', 'snapshot' or None, "
                         f"not {format!r}")
    old = _installed.get(signum)
    # Installing twice on one signal replaces the pattern; the handler to
    # put back stays the one from before the first installation.
    original = old.previous if old is not None else signal.getsignal(signum)
    dumper = _Dumper(signum, pattern, format, original)
    previous = signal.signal(signum, dumper)
    _installed[signum] = dumper
    return previous
