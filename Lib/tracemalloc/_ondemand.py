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

Any process of the fork can also be profiled without changing its code:
started with ``PYTHONTRACEMALLOCSIGNAL=USR2`` (or ``-X
tracemalloc_signal=USR2``), the interpreter calls _install_at_startup()
before site and the program run (Python/tracemalloc_startup.c), and
``python -m tracemalloc attach PID`` (tracemalloc._attach) sends the
signal.  The state machine of that handler (_OnDemand):

* tracing off: the signal starts sampling (one sample per
  STARTUP_INTERVAL bytes on average, or the interval of the option;
  STARTUP_NFRAME frames; with allocation totals when the build has them)
  and keeps a state file (state_path()) while it lasts;
* tracing that a signal started: the signal takes a snapshot of what is
  live and of what was allocated since the start, stops tracing, removes
  the state file, and writes one pprof profile with both from a thread;
* tracing that the program (or -X tracemalloc) started: each signal writes
  a profile, and tracing goes on.

Its files are never readable by others unless the umask allows more than
0o600 (_write_private()).
"""

import atexit
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
    if _on_demand is not None:
        # Tracing that a signal started in the parent goes on in the child
        # (the next signal writes the child's profile and stops it), but
        # the state file is the parent's; its profiles get the child's pid
        # as dump_on_signal()'s do.
        _on_demand.state_file = None
        _on_demand.pattern = _with_pid(_on_demand.pattern)


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
        # and another thread's message could land between.
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
            snapshot = _live_snapshot(tracemalloc)
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


# --------------------------------------------------------------------------
# Profiles of any process, on demand: PYTHONTRACEMALLOCSIGNAL=USR2 (or
# -X tracemalloc_signal=USR2[:INTERVAL]) at startup, then a signal, or
# `python -m tracemalloc attach PID`.

# Tracing that a signal starts: frames per traceback (with this engine N
# costs nothing per allocation), and the mean sampling interval when the
# option gives none (the suggested interval of "Sampling in production").
STARTUP_NFRAME = 25
STARTUP_INTERVAL = 512 * 1024

# The file name of the default pattern, in default_directory().
STARTUP_NAME = 'tracemalloc-{pid}-{n}.pb.gz'

# tempfile.gettempdir()'s candidates, without its probe (a file written to
# each): `attach` computes the same directory from the process's
# environment.
_TEMP_VARIABLES = ('TMPDIR', 'TEMP', 'TMP')
_TEMP_FALLBACKS = ('/tmp', '/var/tmp', '/usr/tmp')

# The handler installed at startup, if any.
_on_demand = None


def default_directory(environ=None):
    """The directory of the default pattern: the first of $TMPDIR, $TEMP
    and $TMP in *environ* (default: os.environ) that is an absolute path to
    a directory, else the first of /tmp, /var/tmp and /usr/tmp that is
    one, else the current directory."""
    if environ is None:
        environ = os.environ
    for name in _TEMP_VARIABLES:
        value = environ.get(name)
        if value and os.path.isabs(value) and os.path.isdir(value):
            return value
    for value in _TEMP_FALLBACKS:
        if os.path.isdir(value):
            return value
    return os.getcwd()


def default_pattern(environ=None):
    """The pattern used when PYTHONTRACEMALLOCDUMP (and -X
    tracemalloc_dump) is not given: tracemalloc-{pid}-{n}.pb.gz in
    default_directory(), its braces escaped."""
    directory = default_directory(environ)
    escaped = directory.replace('{', '{{').replace('}', '}}')
    return os.path.join(escaped, STARTUP_NAME)


def state_path(pattern, pid, environ=None):
    """The state file that process *pid*, whose absolute dump pattern is
    *pattern*, keeps while tracing that a signal started is on:
    .tracemalloc-PID.sampling in the directory of its profiles (in
    default_directory() when that directory changes with {n} or {time})."""
    directory = os.path.dirname(pattern)
    fields = {field for _, field, _, _ in string.Formatter().parse(directory)
              if field is not None}
    if fields - {'pid'}:
        directory = default_directory(environ)
    else:
        directory = directory.format(pid=pid)
    return os.path.join(directory, f".tracemalloc-{pid}.sampling")


def _write_private(path, write):
    """Call write(temporary_path), then rename the file that it wrote to
    *path*: a file whose mode is 0o600 less the umask, never readable by
    another user unless the umask says so.

    The file is written in a directory of mode 0o700 made beside *path*
    (so that the rename stays on one file system), where no one else can
    open it while it is written whatever mode its writer gives it; it
    starts as an empty file made with mode 0o600 (the kernel applies the
    umask), whose mode is given back to it once written."""
    directory, name = os.path.split(path)
    private = os.path.join(
        directory, f".{name}.{os.getpid()}.{os.urandom(4).hex()}.d")
    os.mkdir(private, 0o700)
    inner = os.path.join(private, name)
    try:
        fd = os.open(inner, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                     | getattr(os, 'O_CLOEXEC', 0), 0o600)
        try:
            mode = os.fstat(fd).st_mode & 0o777
        finally:
            os.close(fd)
        write(inner)
        os.chmod(inner, mode)
        os.replace(inner, path)
    finally:
        for leftover in os.listdir(private):
            try:
                os.unlink(os.path.join(private, leftover))
            except OSError:
                pass
        try:
            os.rmdir(private)
        except OSError:
            pass


def _keyword_parameters(function):
    """The names of *function*'s parameters, without importing inspect
    (a writer thread must not import: see _import_writers())."""
    code = getattr(getattr(function, '__func__', function), '__code__', None)
    if code is None:
        return ()
    return code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]


def _labelled(tracemalloc):
    """take_snapshot()'s keywords that make a production profile's samples
    carry their thread and their labels (tracemalloc.label()), where this
    build has them."""
    if 'labels' in _keyword_parameters(tracemalloc.take_snapshot):
        return {'labels': True}
    if 'threads' in _keyword_parameters(tracemalloc.take_snapshot):
        return {'threads': True}
    return {}


def _live_snapshot(tracemalloc):
    """The snapshot of what is live, each sample with its thread and its
    labels (see _labelled())."""
    return tracemalloc.take_snapshot(**_labelled(tracemalloc))


def _allocated_snapshot(tracemalloc):
    """The snapshot of what was allocated since tracing started, or None:
    when this build has no allocation totals, or when tracing did not keep
    them."""
    if 'allocated' not in _keyword_parameters(tracemalloc.take_snapshot):
        return None
    is_tracing_allocations = getattr(tracemalloc, 'is_tracing_allocations',
                                     None)
    if is_tracing_allocations is not None and not is_tracing_allocations():
        return None
    try:
        return tracemalloc.take_snapshot(allocated=True,
                                         **_labelled(tracemalloc))
    except (RuntimeError, ValueError):
        return None


def _session():
    """The engine's count of starts (None on a build without it): another
    value than at the signal's start means that the program restarted
    tracing itself."""
    import _tracemalloc

    session = getattr(_tracemalloc, '_tracing_session', None)
    return session() if session is not None else None


def _signal_name(signum):
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class _OnDemand:
    """The handler that PYTHONTRACEMALLOCSIGNAL installs: the state
    machine described at the top of this module."""

    def __init__(self, signum, pattern, format, interval, option):
        self.signum = signum
        self.pattern = pattern
        self.format = format
        # None: exact tracing (the option's ":exact").
        self.interval = interval
        self.option = option
        self.previous = None
        # Tracing that this handler started, and when.
        self.started = False
        self.started_at = None
        self.allocations = False
        self.state_file = None

    def __call__(self, signum, frame):
        # A signal handler: nothing propagates into the code that the
        # signal interrupted.
        try:
            self._handle()
        except BaseException as exc:
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            _report(f"{_signal_name(self.signum)}: {type(exc).__name__}: "
                    f"{exc}")

    def _handle(self):
        import tracemalloc

        if self.started and (not tracemalloc.is_tracing()
                             or _session() != self.session):
            # The program stopped the tracing that the signal started (and
            # maybe started its own, which the signal must not stop).
            self._forget_start()
        if not tracemalloc.is_tracing():
            self._start(tracemalloc)
        else:
            self._dump(tracemalloc, stop=self.started)

    def _describe_mode(self):
        if self.interval is None:
            return "exact: every allocation traced"
        return (f"sampled: one sample per {self.interval} bytes on "
                f"average")

    def _start(self, tracemalloc):
        name = _signal_name(self.signum)
        options = {} if self.interval is None else {'sample': self.interval}
        try:
            tracemalloc.start(STARTUP_NFRAME, allocations=True, **options)
            allocations = True
        except TypeError:
            # A build without allocation totals.
            tracemalloc.start(STARTUP_NFRAME, **options)
            allocations = False
        self.started = True
        self.started_at = time.monotonic()
        self.session = _session()
        self.allocations = allocations
        self._write_state_file()
        totals = ", with allocation totals" if allocations else ""
        _report(f"{name}: tracing started, {self._describe_mode()} "
                f"({STARTUP_NFRAME} frames{totals}); send {name} again to "
                f"write the profile and stop")

    def _write_state_file(self):
        path = state_path(self.pattern, os.getpid())
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC
                         | getattr(os, 'O_CLOEXEC', 0), 0o600)
            try:
                os.write(fd, (f"pid {os.getpid()}\n"
                              f"started {time.time():.3f}\n"
                              f"interval {self.interval or 0}\n"
                              f"pattern {self.pattern}\n").encode(
                                  'utf-8', 'surrogateescape'))
            finally:
                os.close(fd)
        except OSError as exc:
            # attach waits for it; a signal sent by hand does not need it.
            _report(f"cannot write the state file {path}: {exc}")
            return
        self.state_file = path

    def _forget_start(self):
        self.started = False
        self.started_at = None
        path, self.state_file = self.state_file, None
        if path is not None:
            try:
                os.unlink(path)
            except OSError:
                pass

    def _dump(self, tracemalloc, stop):
        name = _signal_name(self.signum)
        busy = _busy
        if not busy.acquire(blocking=False):
            _report(f"{name}: a profile is still being written; this "
                    f"signal is ignored")
            return
        try:
            snapshot = _live_snapshot(tracemalloc)
            allocated = _allocated_snapshot(tracemalloc)
            if stop:
                elapsed = time.monotonic() - self.started_at
                tracemalloc.stop()
                self._forget_start()
                note = (f"; tracing stopped after {elapsed:.1f} s")
            else:
                note = "; tracing goes on"
            _start_writer(snapshot, allocated, self.format, self.pattern,
                          busy, name, note, "pprof (in use)")
        except BaseException:
            busy.release()
            raise


def _start_writer(snapshot, allocated, format, pattern, busy, what, note,
                  inuse_kind):
    """Number the next profile, name it from *pattern* and write it from a
    thread of its own ("tracemalloc-dump"), which releases *busy* (held by
    the caller) when done and reports on stderr: "{what}: KIND written to
    PATH{note}", KIND being "snapshot", "pprof (in use and allocated)"
    with *allocated*, else *inuse_kind*.  The on-demand handler's and the
    dump threshold's (tracemalloc._dumpover) profiles."""
    global _counter
    _counter += 1
    path = pattern.format(
        pid=os.getpid(), n=_counter,
        time=time.strftime('%Y%m%dT%H%M%SZ', time.gmtime()))
    writer = threading.Thread(
        target=_write_profile,
        args=(snapshot, allocated, format, path, busy, what, note,
              inuse_kind),
        name="tracemalloc-dump")
    writer.start()


def _write_profile(snapshot, allocated, format, path, busy, what, note,
                   inuse_kind):
    try:
        if format != 'pprof':
            kind = "snapshot"
            _write_private(path, snapshot.dump)
        elif allocated is not None:
            kind = "pprof (in use and allocated)"
            _write_private(path, lambda temporary: snapshot.dump_pprof(
                temporary, allocated=allocated))
        else:
            kind = inuse_kind
            _write_private(path, snapshot.dump_pprof)
    except Exception as exc:
        _report(f"{what}: cannot write the profile to {path}: "
                f"{type(exc).__name__}: {exc}{note}")
    else:
        _report(f"{what}: {kind} written to {path}{note}")
    finally:
        busy.release()


def _remove_state_file():
    if _on_demand is not None:
        _on_demand._forget_start()


def _install_at_startup(signum, option, interval, exact, pattern,
                        pattern_option):
    """Install the handler that -X tracemalloc_signal or
    PYTHONTRACEMALLOCSIGNAL asked for (*option*, "NAME=VALUE"): the
    interpreter calls it at startup (Python/tracemalloc_startup.c), before
    site.  *interval* 0 is the default interval, *exact* asks for exact
    tracing; *pattern* is the dump pattern that *pattern_option* gave, or
    None for default_pattern().  A pattern that cannot be used raises
    ValueError with a message naming its option: the interpreter stops
    with it."""
    global _on_demand
    if pattern is None:
        pattern = default_pattern()
        source = f"the default dump pattern {pattern!r} of {option}"
    else:
        source = f"{pattern_option}={pattern}"
    try:
        pattern = _check_pattern(pattern)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{source}: {exc}") from None
    _import_writers()
    handler = _OnDemand(signum, pattern, _guess_format(pattern),
                        None if exact else (interval or STARTUP_INTERVAL),
                        option)
    try:
        handler.previous = signal.signal(signum, handler)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{option}: cannot handle "
                         f"{_signal_name(signum)}: {exc}") from None
    _on_demand = handler
    atexit.register(_remove_state_file)
    return handler
