"""A profile before the OOM killer: ``tracemalloc.dump_over()``.

``tracemalloc.dump_over("1536 MiB")`` (or ``-X tracemalloc_dump_over=SIZE``,
``PYTHONTRACEMALLOCDUMPOVER=SIZE`` at startup) writes a profile the first
time traced memory reaches SIZE, then each time it doubles (3 GiB, 6 GiB...),
and says so on standard error.

No thread polls: the engine compares traced memory with the threshold each
time it grows (Python/tracemalloc_dumpover.c) and, when it is reached, asks
the main thread to run _dump_over() at its next safe point, as a signal
handler runs.  There the snapshot is taken (the memory of that moment),
and a thread of its own encodes and writes it, through tracemalloc's
on-demand writer (tracemalloc._ondemand): the same file patterns, the same
private files (mode 0o600 less the umask), the same one-line reports, and
one dump at a time.
"""

import os

from tracemalloc import _ondemand

__all__ = ['dump_over', 'dump_on_memory_error']

# What dump_over() asked for: (size, pattern, format), or None.
_settings = None

# What dump_on_memory_error() asked for: (pattern, format), or None.
_memory_error_settings = None


def _after_fork_in_child():
    # As dump_on_signal()'s: a pattern without {pid} gets the child's, so
    # that a child never writes the names its parent writes (the {n}
    # counter, shared with tracemalloc._ondemand, starts again at 1).
    global _settings, _memory_error_settings
    if _settings is not None:
        size, pattern, format = _settings
        _settings = (size, _ondemand._with_pid(pattern), format)
    if _memory_error_settings is not None:
        pattern, format = _memory_error_settings
        _memory_error_settings = (_ondemand._with_pid(pattern), format)


if hasattr(os, 'register_at_fork'):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _parse_size(size):
    from tracemalloc import _budget

    if isinstance(size, bool) or not isinstance(size, (int, str)):
        raise TypeError(f"size must be an int, a str such as '1536 MiB' "
                        f"or None, not {type(size).__name__}")
    try:
        value = _budget.parse_size(size)
    except ValueError:
        raise ValueError(f"size must be a positive size such as 1000000, "
                         f"'512MiB' or '2 GB', not {size!r}") from None
    if value < 1:
        raise ValueError(f"size must be at least 1 byte, not {size!r}")
    if value >= 1 << 64:
        raise ValueError(f"size must be below 2**64 bytes, not {size!r}")
    return value


def dump_over(size, path=None, *, format=None):
    """Write a profile the first time traced memory reaches *size* bytes
    (an int, or a str such as '1536 MiB'), then each time it doubles;
    ``dump_over(None)`` turns it off.  Return the previous size, or None.

    *path* is a pattern as for dump_on_signal() ({pid}, {n}, {time});
    None is the pattern of -X tracemalloc_dump (or PYTHONTRACEMALLOCDUMP)
    as the interpreter read it at startup, a relative one taken from the
    directory it started in; else tracemalloc-{pid}-{n}.pb.gz in the
    temporary directory.  In a child made by os.fork(), a pattern without
    {pid} gets -pid{pid} before its suffix, as for dump_on_signal().
    *format* is 'pprof', 'snapshot' or None (from the suffix).  The
    threshold counts what is traced: set tracing on first, or at the same
    time (a threshold set while tracing is off waits for tracing).
    """
    global _settings
    import _tracemalloc

    previous = None if _settings is None else _settings[0]
    if size is None:
        _tracemalloc._set_dump_over(0)
        _settings = None
        return previous
    size = _parse_size(size)
    pattern, format = _check_output(path, format)
    _settings = (size, pattern, format)
    _tracemalloc._set_dump_over(size)
    return previous


def dump_on_memory_error(enabled=True, path=None, *, format=None):
    """Write a profile after the first MemoryError that C code raises
    (an allocation that failed), once; ``dump_on_memory_error(False)``
    turns it off.  *path* and *format* are as for dump_over().

    The profile is taken at the main thread's next safe point after the
    error, as a signal handler runs: it shows what was live then, which
    is what filled the memory (the allocation that failed is not in it).
    With memory exhausted, the snapshot itself may fail: that is said on
    standard error, and nothing else happens.
    """
    global _memory_error_settings
    import _tracemalloc

    if not enabled:
        _tracemalloc._set_dump_on_memory_error(False)
        _memory_error_settings = None
        return
    _memory_error_settings = _check_output(path, format)
    _tracemalloc._set_dump_on_memory_error(True)


def _check_output(path, format):
    """(pattern, format) for *path* and *format*, checked."""
    if path is None:
        # The pattern that the interpreter read at startup (-X
        # tracemalloc_dump wins over PYTHONTRACEMALLOCDUMP, -E ignores the
        # variable), a relative one taken from the directory it started in.
        import _tracemalloc

        startup = _tracemalloc._startup_dump_pattern()
        path = startup[0] if startup else _ondemand.default_pattern()
    pattern = _ondemand._check_pattern(path)
    if format is None:
        format = _ondemand._guess_format(pattern)
    elif format not in _ondemand._FORMATS:
        raise ValueError(f"format must be 'pprof', 'snapshot' or None, "
                         f"not {format!r}")
    _ondemand._import_writers()
    return pattern, format


def _install_at_startup(size, option, memory_error, pattern,
                        pattern_option):
    """Set the dumps that -X tracemalloc_dump_over (PYTHONTRACEMALLOCDUMPOVER)
    and -X tracemalloc_dump_on_memory_error asked for (*option*,
    "NAME=VALUE"; *size* 0: no threshold); the interpreter calls it at
    startup, before site.  A pattern that cannot be used raises ValueError
    naming its option."""
    if pattern is None:
        pattern = _ondemand.default_pattern()
        source = f"the default dump pattern {pattern!r} of {option}"
    else:
        source = f"{pattern_option}={pattern}"
    try:
        if size:
            dump_over(size, pattern)
        if memory_error:
            dump_on_memory_error(True, pattern)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{source}: {exc}") from None


def _dump_memory_error():
    """The engine's pending call after the first MemoryError (main thread,
    between two bytecodes).  Never raises."""
    settings = _memory_error_settings
    if settings is None:
        return
    try:
        _start_dump(settings, "MemoryError", "; no other is written "
                    "(dump_on_memory_error() arms it again)")
    except Exception as exc:
        _ondemand._report(f"MemoryError: profile not written: "
                          f"{type(exc).__name__}: {exc}")


def _size_text(size):
    from tracemalloc import _leakcore

    return _leakcore.format_size(size)


def _dump_over(crossed, threshold, next_threshold):
    """The engine's pending call (main thread, between two bytecodes):
    traced memory was *crossed* bytes when it reached *threshold*; the next
    dump comes at *next_threshold* (0: none).  Never raises."""
    try:
        _dump(crossed, threshold, next_threshold)
    except Exception as exc:
        _ondemand._report(f"dump over {_size_text(threshold)}: profile not "
                          f"written: {type(exc).__name__}: {exc}")


def _dump(crossed, threshold, next_threshold):
    settings = _settings
    if settings is None:
        return
    what = (f"traced memory reached {_size_text(crossed)} (threshold "
            f"{_size_text(threshold)})")
    after = (f"; next dump at {_size_text(next_threshold)}"
             if next_threshold else "")
    _start_dump(settings[1:], what, after)


def _start_dump(settings, what, after):
    """Take the snapshot now and write it from a thread, with the pattern
    and format of *settings*; *what* and *after* frame the report."""
    import tracemalloc

    pattern, format = settings
    if not tracemalloc.is_tracing():
        _ondemand._report(f"{what}, but tracing is off: no profile written")
        return
    busy = _ondemand._busy
    if not busy.acquire(blocking=False):
        _ondemand._report(f"{what}: a profile is still being written; no "
                          f"other is written{after}")
        return
    try:
        snapshot = _ondemand._live_snapshot(tracemalloc)
        allocated = _ondemand._allocated_snapshot(tracemalloc)
        _ondemand._start_writer(snapshot, allocated, format, pattern, busy,
                                what, after, "pprof")
    except BaseException:
        busy.release()
        raise
