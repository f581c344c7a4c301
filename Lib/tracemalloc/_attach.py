"""``python -m tracemalloc attach PID``: a profile of a running process.

The process must have opted in at startup, with PYTHONTRACEMALLOCSIGNAL
(or -X tracemalloc_signal): its interpreter then handles the signal with
the state machine of tracemalloc._ondemand.  attach reads what it needs
from /proc (Linux), sends the signal, and watches the file system for the
profile; it never stops the process, and uses neither ptrace nor a
debugger:

1. /proc/PID/environ and /proc/PID/cmdline: the signal, the dump pattern
   and -E/-I (a process whose environment attach cannot read is not
   ours);
2. /proc/PID/status: SigCgt must have the signal's bit, the proof that the
   handler is installed (the option alone is not: -E ignores the variable,
   and a program may have replaced the handler with SIG_DFL);
3. the signal; then either a new file matching the pattern appears
   (tracing was on: the process wrote its profile, and tracing goes on),
   or the state file appears (tracing was off: the signal started it);
   then, after --duration seconds, the signal again, and the profile.
   A child made by fork() names its profiles as _ondemand._with_pid()
   says when the pattern has no {pid} (_profile_globs()).

Exit status 0 with the profile's path on standard output; 2 with one line
on standard error otherwise.
"""

import argparse
import fnmatch
import glob
import os
import signal
import string
import sys
import time

from tracemalloc import _ondemand

EXIT_OK = 0
EXIT_FAILED = 2

DEFAULT_DURATION = 5.0
DEFAULT_TIMEOUT = 10.0

# How often the file system is looked at while waiting.
_POLL = 0.02


class AttachError(Exception):
    """Why attach gives up: its message is the one line printed."""


def _parse_signal(text):
    """The signal number of an option's value (SIGNAL[:INTERVAL]), as the
    interpreter reads it; AttachError if attach does not know it."""
    name = text.split(':', 1)[0].strip().upper()
    if name.isdigit():
        return int(name)
    if not name.startswith('SIG'):
        name = 'SIG' + name
    try:
        return int(getattr(signal, name))
    except (AttributeError, TypeError):
        raise AttachError(f"unknown signal {text!r}") from None


def _read_process(pid):
    """(environ dict, argv list, uid) of process *pid*."""
    proc = f"/proc/{pid}"
    if not os.path.isdir("/proc/self"):
        raise AttachError("attach needs the /proc file system (Linux)")
    try:
        uid = os.stat(proc).st_uid
    except FileNotFoundError:
        raise AttachError(f"no process {pid}") from None
    try:
        with open(f"{proc}/environ", 'rb') as fp:
            environ_data = fp.read()
        with open(f"{proc}/cmdline", 'rb') as fp:
            cmdline_data = fp.read()
    except PermissionError:
        raise AttachError(
            f"process {pid} is not ours (it belongs to {_user_name(uid)}; "
            f"we are {_user_name(os.getuid())}): cannot read its "
            f"environment") from None
    except (FileNotFoundError, ProcessLookupError):
        raise AttachError(f"no process {pid} (it exited)") from None
    environ = {}
    for item in environ_data.split(b'\0'):
        name, sep, value = item.partition(b'=')
        if sep:
            environ[os.fsdecode(name)] = os.fsdecode(value)
    argv = [os.fsdecode(arg) for arg in cmdline_data.split(b'\0')[:-1]]
    return environ, argv, uid


def _user_name(uid):
    try:
        import pwd
        return f"user {pwd.getpwuid(uid).pw_name}"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _interpreter_options(argv):
    """({-X name: value}, ignores_environment) of a Python command line:
    the options before the script, -c, -m or -."""
    xoptions = {}
    ignore_environment = False
    args = iter(argv[1:])
    for arg in args:
        if arg == '--' or not arg.startswith('-') or arg == '-':
            break
        if arg == '--check-hash-based-pycs':
            next(args, None)
            continue
        if arg.startswith('--'):
            continue            # --help, --version...: no value
        flags = arg[1:]
        while flags:
            flag, flags = flags[0], flags[1:]
            if flag in 'XW':
                value = flags if flags else next(args, '')
                if flag == 'X':
                    name, _, option_value = value.partition('=')
                    xoptions[name] = option_value
                flags = ''
            elif flag in 'cm':
                return xoptions, ignore_environment
            elif flag in 'EI':
                ignore_environment = True
    return xoptions, ignore_environment


def _sigcgt_has(pid, signum):
    """Whether process *pid* catches *signum* (SigCgt of /proc/PID/status)."""
    try:
        with open(f"/proc/{pid}/status") as fp:
            for line in fp:
                if line.startswith('SigCgt:'):
                    mask = int(line.split()[1], 16)
                    return bool(mask >> (signum - 1) & 1)
    except (FileNotFoundError, ProcessLookupError):
        raise AttachError(f"no process {pid} (it exited)") from None
    return False


def _glob_of(pattern, pid):
    """A glob that matches the names that *pattern* gives process *pid*
    (any process's, for *pid* None)."""
    parts = []
    for literal, field, spec, conversion in string.Formatter().parse(
            pattern):
        parts.append(glob.escape(literal))
        if field == 'pid' and pid is not None:
            # As the process formats it ({pid:08d} included).
            try:
                text = ('{0' + (f'!{conversion}' if conversion else '')
                        + (f':{spec}' if spec else '') + '}').format(pid)
            except (ValueError, TypeError):
                text = str(pid)
            parts.append(glob.escape(text))
        elif field is not None:
            parts.append('*')
    return ''.join(parts)


def _files(expression, others=None):
    """{path: (inode, mtime_ns)} of the files that *expression* matches,
    but not the glob *others*."""
    found = {}
    for path in glob.glob(expression):
        if others is not None and fnmatch.fnmatchcase(path, others):
            continue
        try:
            st = os.stat(path)
        except OSError:
            continue
        found[path] = (st.st_ino, st.st_mtime_ns)
    return found


def _is_forked_child(pid):
    """Whether process *pid* is a copy of its parent made by fork()
    without exec(): their auxiliary vectors (/proc/PID/auxv) are equal.
    exec() makes a new one, with the addresses of a new random layout
    (AT_RANDOM, AT_PHDR...); fork() copies it.  False when either cannot
    be read."""
    try:
        with open(f"/proc/{pid}/stat", 'rb') as fp:
            # The parent's pid, after the command name in parentheses and
            # the state.
            ppid = int(fp.read().rpartition(b')')[2].split()[1])
        with open(f"/proc/{pid}/auxv", 'rb') as fp:
            auxv = fp.read()
        with open(f"/proc/{ppid}/auxv", 'rb') as fp:
            parent_auxv = fp.read()
    except (OSError, ValueError, IndexError):
        return False
    return bool(auxv) and auxv == parent_auxv


def _state(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns)


def _profile_globs(pattern, pid):
    """[(glob, others)]: the globs of the names of process *pid*'s
    profiles, each with a glob of names that it matches and that are
    another process's (or None).

    A pattern with {pid} gives each process names of its own.  Without
    it, a child made by fork() writes its profiles under the pattern with
    -pid{pid} added (see _ondemand._with_pid()), and the process that
    started with the pattern (not a forked child) under the pattern
    itself, whose {n} or {time} field also matches its children's names:
    those are left out."""
    fields = {field for _, field, _, _ in string.Formatter().parse(pattern)
              if field is not None}
    if 'pid' in fields:
        return [(_glob_of(pattern, pid), None)]
    forked = _ondemand._with_pid(pattern)
    globs = [(_glob_of(forked, pid), None)]
    if not _is_forked_child(pid):
        globs.append((_glob_of(pattern, pid), _glob_of(forked, None)))
    return globs


class Target:
    """What attach knows of process *pid* before it sends anything."""

    def __init__(self, pid):
        self.pid = pid
        environ, argv, self.uid = _read_process(pid)
        xoptions, ignore_environment = _interpreter_options(argv)
        use_environ = {} if ignore_environment else environ
        if 'tracemalloc_signal' in xoptions:
            self.option = f"-X tracemalloc_signal={xoptions['tracemalloc_signal']}"
            spec = xoptions['tracemalloc_signal']
        elif use_environ.get('PYTHONTRACEMALLOCSIGNAL'):
            spec = use_environ['PYTHONTRACEMALLOCSIGNAL']
            self.option = f"PYTHONTRACEMALLOCSIGNAL={spec}"
        else:
            if environ.get('PYTHONTRACEMALLOCSIGNAL'):
                why = (f"PYTHONTRACEMALLOCSIGNAL is in its environment but "
                       f"its command line has -E or -I, which ignore it")
            else:
                why = ("neither PYTHONTRACEMALLOCSIGNAL nor -X "
                       "tracemalloc_signal was given when it started")
            raise AttachError(
                f"process {pid} did not opt in to profiles on demand: {why} "
                f"(start it with PYTHONTRACEMALLOCSIGNAL=USR2)")
        self.signum = _parse_signal(spec)
        self.signal_name = _ondemand._signal_name(self.signum)
        if not _sigcgt_has(pid, self.signum):
            raise AttachError(
                f"process {pid} did not opt in to profiles on demand: it "
                f"has {self.option} but no handler for {self.signal_name} "
                f"(not a Python of this fork, or its program replaced the "
                f"handler)")
        if 'tracemalloc_dump' in xoptions:
            pattern = xoptions['tracemalloc_dump']
        elif use_environ.get('PYTHONTRACEMALLOCDUMP'):
            pattern = use_environ['PYTHONTRACEMALLOCDUMP']
        else:
            # The process computed it from the same variables (TMPDIR...).
            pattern = _ondemand.default_pattern(environ)
        if not os.path.isabs(pattern):
            # The process made it absolute from its directory at startup:
            # the best guess is its directory now.
            try:
                cwd = os.readlink(f"/proc/{pid}/cwd")
            except OSError as exc:
                raise AttachError(
                    f"the dump pattern {pattern!r} of process {pid} is "
                    f"relative and its directory cannot be read: "
                    f"{exc.strerror}") from None
            pattern = os.path.join(
                cwd.replace('{', '{{').replace('}', '}}'), pattern)
        self.pattern = pattern
        self._globs = _profile_globs(pattern, pid)
        self.state_file = _ondemand.state_path(pattern, pid, environ)

    def profiles(self):
        """{path: (inode, mtime_ns)} of the profiles of the process on
        disk."""
        found = {}
        for expression, others in self._globs:
            found.update(_files(expression, others))
        return found

    def send(self):
        try:
            os.kill(self.pid, self.signum)
        except ProcessLookupError:
            raise AttachError(f"process {self.pid} exited") from None
        except PermissionError:
            raise AttachError(
                f"process {self.pid} is not ours (it belongs to "
                f"{_user_name(self.uid)}): cannot send it "
                f"{self.signal_name}") from None

    def alive(self):
        try:
            with open(f"/proc/{self.pid}/stat", 'rb') as fp:
                # The state, after the command name in parentheses: Z is a
                # zombie, X dead.
                return fp.read().rpartition(b')')[2].split()[0] not in b'ZX'
        except (OSError, IndexError):
            return False


def _new_profile(target, before):
    for path, state in target.profiles().items():
        if before.get(path) != state:
            return path
    return None


def _no_answer(target, timeout, what):
    return AttachError(
        f"process {target.pid} did not answer {target.signal_name} within "
        f"{timeout:g} s ({what}; a main thread blocked in C code handles "
        f"the signal only when it returns to Python)")


def attach(pid, duration=DEFAULT_DURATION, timeout=DEFAULT_TIMEOUT,
           log=None):
    """Profile process *pid*; return the path of the profile written.

    Raise AttachError when the process did not opt in, is not ours, exited
    or did not answer within *timeout* seconds.  *log*, if given, is called
    with each step's message.
    """
    if log is None:
        log = lambda message: None
    target = Target(pid)
    before = target.profiles()
    state_before = _state(target.state_file)
    target.send()
    log(f"sent {target.signal_name} to process {pid} ({target.option}); "
        f"profiles: {target.pattern}")
    deadline = time.monotonic() + timeout
    while True:
        path = _new_profile(target, before)
        if path is not None:
            if state_before is not None:
                log("tracing started by an earlier signal: stopped now")
            else:
                log("tracing was on: the process wrote a profile and goes on "
                    "tracing")
            return path
        state = _state(target.state_file)
        if state is not None and state != state_before:
            break
        if not target.alive():
            raise AttachError(f"process {pid} exited")
        if time.monotonic() > deadline:
            raise _no_answer(target, timeout, "no profile, and tracing did "
                             "not start")
        time.sleep(_POLL)
    log(f"tracing started: the profile covers the next {duration:g} s")
    end = time.monotonic() + duration
    while time.monotonic() < end:
        if not target.alive():
            raise AttachError(f"process {pid} exited while traced")
        time.sleep(min(_POLL * 5, max(0.0, end - time.monotonic())))
    before = target.profiles()
    target.send()
    deadline = time.monotonic() + timeout
    while True:
        path = _new_profile(target, before)
        if path is not None:
            return path
        if not target.alive():
            raise AttachError(f"process {pid} exited")
        if time.monotonic() > deadline:
            raise _no_answer(target, timeout, "tracing started but no "
                             "profile was written")
        time.sleep(_POLL)


def _seconds(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of seconds, not {text!r}") from None
    if not value >= 0 or value == float('inf'):
        raise argparse.ArgumentTypeError(
            f"expected a number of seconds >= 0, not {text!r}")
    return value


def _pid(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a process id, not {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(
            f"expected a process id > 0, not {text!r}")
    return value


def command_attach(argv, prog):
    """`attach PID [--duration S] [--timeout S] [-q]`."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Write a pprof profile of a running process that "
                    "started with PYTHONTRACEMALLOCSIGNAL (or -X "
                    "tracemalloc_signal), and print its path.  If tracing "
                    "is on in the process, one signal makes it write a "
                    "profile; if not, the signal starts sampling, and a "
                    "second one, --duration seconds later, writes the "
                    "profile (in use, and allocated during the duration) "
                    "and stops it.  Exit status 0, or 2 when the process "
                    "did not opt in, is not ours or did not answer.")
    parser.add_argument("pid", metavar="PID", type=_pid)
    parser.add_argument("--duration", metavar="S", type=_seconds,
                        default=DEFAULT_DURATION,
                        help=f"seconds between the start of tracing and the "
                             f"profile, when the signal starts it (default "
                             f"{DEFAULT_DURATION:g})")
    parser.add_argument("--timeout", metavar="S", type=_seconds,
                        default=DEFAULT_TIMEOUT,
                        help=f"seconds to wait for each answer of the "
                             f"process (default {DEFAULT_TIMEOUT:g})")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="print the path only, no progress on stderr")
    options = parser.parse_args(argv)

    def log(message):
        if not options.quiet:
            sys.stderr.write(f"{prog}: {message}\n")
            sys.stderr.flush()

    try:
        path = attach(options.pid, options.duration, options.timeout, log)
    except AttachError as exc:
        sys.stderr.write(f"{prog}: error: {exc}\n")
        return EXIT_FAILED
    print(path)
    return EXIT_OK
