"""Trace memory blocks allocated by Python (PEP 454).

The allocation hooks live in the C module ``_tracemalloc``; this module adds
the object model on top of the raw data it returns: snapshots, traces,
tracebacks, filters and statistics.

Raw data layout, as returned by ``_tracemalloc._get_traces()``:

* a trace is a tuple ``(domain, size, frames, total_nframe)``;
* ``frames`` is a tuple of ``(filename, lineno)`` tuples, most recent call
  first;
* tracebacks are interned by the C engine, so all traces allocated from the
  same call context share the very same ``frames`` tuple object.

The statistics and filtering code relies on the last point: work is done
once per distinct ``frames`` object instead of once per trace, which keeps
snapshots of millions of traces cheap to analyse.

Running ``python -m tracemalloc script.py`` reports the allocation sites of
memory that the script left allocated; see ``_main()``.
"""

from collections.abc import Sequence, Iterable
from functools import total_ordering
from operator import itemgetter
import fnmatch
import linecache
import os.path

# The tracing engine itself.  The public functions are re-exported unchanged.
from _tracemalloc import (  # noqa: F401
    clear_traces,
    get_traceback_limit,
    get_traced_memory,
    get_tracemalloc_memory,
    is_tracing,
    reset_peak,
    start,
    stop,
)
from _tracemalloc import _get_object_traceback, _get_traces


# --------------------------------------------------------------------------
# Formatting helpers

_SIZE_UNITS = ('B', 'KiB', 'MiB', 'GiB', 'TiB')


def _format_size(size, sign):
    """Format a number of bytes for humans, e.g. '66 B' or '+1.5 MiB'.

    *sign* asks for an explicit '+' on positive values (used for diffs).
    Sizes are kept to 3 or 4 significant digits: a unit is only left for the
    next one once the value reaches 10 * 1024, and values below 100 in a unit
    above bytes get one decimal.
    """
    plus = '+' if sign else ''
    last_unit = _SIZE_UNITS[-1]
    for unit in _SIZE_UNITS:
        magnitude = abs(size)
        if unit != 'B' and magnitude < 100:
            return f"{size:{plus}.1f} {unit}"
        if magnitude < 10 * 1024 or unit == last_unit:
            return f"{size:{plus}.0f} {unit}"
        size /= 1024


# --------------------------------------------------------------------------
# Statistics

class Statistic:
    """Memory allocated from one place: total size and number of blocks."""

    __slots__ = ('traceback', 'size', 'count')

    def __init__(self, traceback, size, count):
        self.traceback = traceback
        self.size = size
        self.count = count

    def _key(self):
        return (self.traceback, self.size, self.count)

    def __hash__(self):
        return hash(self._key())

    def __eq__(self, other):
        if not isinstance(other, Statistic):
            return NotImplemented
        return self._key() == other._key()

    def __str__(self):
        text = ("%s: size=%s, count=%i"
                % (self.traceback, _format_size(self.size, False),
                   self.count))
        if self.count:
            average = self.size / self.count
            text += f", average={_format_size(average, False)}"
        return text

    def __repr__(self):
        return ("<Statistic traceback=%r size=%i count=%i>"
                % (self.traceback, self.size, self.count))

    def _sort_key(self):
        # Biggest consumers first (the caller sorts in reverse order); the
        # traceback only breaks ties, so that the order is deterministic.
        return (self.size, self.count, self.traceback)


class StatisticDiff:
    """How the memory allocated from one place changed between snapshots."""

    __slots__ = ('traceback', 'size', 'size_diff', 'count', 'count_diff')

    def __init__(self, traceback, size, size_diff, count, count_diff):
        self.traceback = traceback
        self.size = size
        self.size_diff = size_diff
        self.count = count
        self.count_diff = count_diff

    def _key(self):
        return (self.traceback, self.size, self.size_diff,
                self.count, self.count_diff)

    def __hash__(self):
        return hash(self._key())

    def __eq__(self, other):
        if not isinstance(other, StatisticDiff):
            return NotImplemented
        return self._key() == other._key()

    def __str__(self):
        text = ("%s: size=%s (%s), count=%i (%+i)"
                % (self.traceback,
                   _format_size(self.size, False),
                   _format_size(self.size_diff, True),
                   self.count, self.count_diff))
        if self.count:
            average = self.size / self.count
            text += f", average={_format_size(average, False)}"
        return text

    def __repr__(self):
        return ("<StatisticDiff traceback=%r size=%i (%+i) count=%i (%+i)>"
                % (self.traceback, self.size, self.size_diff,
                   self.count, self.count_diff))

    def _sort_key(self):
        # Largest changes first, whatever their direction.
        return (abs(self.size_diff), self.size,
                abs(self.count_diff), self.count,
                self.traceback)


def _compare_grouped_stats(old_group, new_group):
    """Pair two {Traceback: Statistic} mappings into StatisticDiff objects.

    Places only present in *new_group* count as entirely new; places only
    present in *old_group* as entirely released.  The result is unsorted.
    """
    diffs = []
    for traceback, new in new_group.items():
        old = old_group.get(traceback)
        if old is None:
            diffs.append(StatisticDiff(traceback, new.size, new.size,
                                       new.count, new.count))
        else:
            diffs.append(StatisticDiff(traceback,
                                       new.size, new.size - old.size,
                                       new.count, new.count - old.count))
    for traceback, old in old_group.items():
        if traceback not in new_group:
            diffs.append(StatisticDiff(traceback, 0, -old.size,
                                       0, -old.count))
    return diffs


# --------------------------------------------------------------------------
# Frames and tracebacks

@total_ordering
class Frame:
    """One frame of a traceback: a filename and a line number."""

    __slots__ = ('_frame',)

    def __init__(self, frame):
        # *frame* is a raw (filename, lineno) tuple, kept as is: comparing
        # and hashing frames is then comparing and hashing that tuple.
        self._frame = frame

    @property
    def filename(self):
        return self._frame[0]

    @property
    def lineno(self):
        return self._frame[1]

    def __eq__(self, other):
        if not isinstance(other, Frame):
            return NotImplemented
        return self._frame == other._frame

    def __lt__(self, other):
        if not isinstance(other, Frame):
            return NotImplemented
        return self._frame < other._frame

    def __hash__(self):
        return hash(self._frame)

    def __str__(self):
        return f"{self.filename}:{self.lineno}"

    def __repr__(self):
        return f"<Frame filename={self.filename!r} lineno={self.lineno!r}>"


# Older spelling of the Frame class, still referred to by some test helpers.
_Frame = Frame


@total_ordering
class Traceback(Sequence):
    """Sequence of Frame objects, from the oldest call to the most recent."""

    __slots__ = ('_frames', '_total_nframe')

    def __init__(self, frames, total_nframe=None):
        # The engine reports frames most recent first, the public API
        # exposes them oldest first (like the traceback module): store them
        # in API order once, so that indexing needs no arithmetic.
        self._frames = tuple(reversed(frames))
        self._total_nframe = total_nframe

    @property
    def total_nframe(self):
        return self._total_nframe

    def __len__(self):
        return len(self._frames)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return tuple(map(Frame, self._frames[index]))
        return Frame(self._frames[index])

    def __iter__(self):
        return map(Frame, self._frames)

    def __contains__(self, frame):
        return frame._frame in self._frames

    def __hash__(self):
        return hash(self._frames)

    def __eq__(self, other):
        if not isinstance(other, Traceback):
            return NotImplemented
        return self._frames == other._frames

    def __lt__(self, other):
        if not isinstance(other, Traceback):
            return NotImplemented
        return self._frames < other._frames

    def __str__(self):
        # A traceback is summarised by its oldest frame.
        return str(self[0])

    def __repr__(self):
        text = f"<Traceback {tuple(self)}"
        if self._total_nframe is not None:
            text += f" total_nframe={self._total_nframe}"
        return text + ">"

    def format(self, limit=None, most_recent_first=False):
        """Return the traceback as a list of lines, without newlines.

        A positive *limit* keeps the *limit* most recent frames; zero or a
        negative *limit* keeps ``frames[:limit]``, that is it drops the
        ``abs(limit)`` most recent frames.
        """
        frames = self._frames
        if limit is not None:
            frames = frames[-limit:] if limit > 0 else frames[:limit]
        if most_recent_first:
            frames = reversed(frames)

        lines = []
        for filename, lineno in frames:
            lines.append(f'  File "{filename}", line {lineno}')
            source = linecache.getline(filename, lineno).strip()
            if source:
                lines.append(f'    {source}')
        return lines


def get_object_traceback(obj):
    """Return the Traceback where *obj* was allocated.

    Return None if memory allocations are not being traced, or if the
    allocation of *obj* was not traced.
    """
    frames = _get_object_traceback(obj)
    if frames is None:
        return None
    return Traceback(frames)


# --------------------------------------------------------------------------
# Traces

class Trace:
    """A traced memory block: its domain, size and allocation traceback."""

    __slots__ = ('_trace',)

    def __init__(self, trace):
        # *trace* is a raw (domain, size, frames, total_nframe) tuple.
        self._trace = trace

    @property
    def domain(self):
        return self._trace[0]

    @property
    def size(self):
        return self._trace[1]

    @property
    def traceback(self):
        return Traceback(*self._trace[2:])

    def __eq__(self, other):
        if not isinstance(other, Trace):
            return NotImplemented
        return self._trace == other._trace

    def __hash__(self):
        return hash(self._trace)

    def __str__(self):
        return f"{self.traceback}: {_format_size(self.size, False)}"

    def __repr__(self):
        return (f"<Trace domain={self.domain} "
                f"size={_format_size(self.size, False)}, "
                f"traceback={self.traceback!r}>")


class _Traces(Sequence):
    """Read-only sequence view of raw traces as Trace objects.

    Trace objects are created on access only: a snapshot may hold millions
    of traces, most of which are never looked at individually.
    """

    def __init__(self, traces):
        # *traces* is the raw list returned by _get_traces() (or any
        # sequence of raw trace tuples).
        self._traces = traces

    def __len__(self):
        return len(self._traces)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return tuple(map(Trace, self._traces[index]))
        return Trace(self._traces[index])

    def __contains__(self, trace):
        return trace._trace in self._traces

    def __eq__(self, other):
        if not isinstance(other, _Traces):
            return NotImplemented
        return self._traces == other._traces

    def __repr__(self):
        return f"<Traces len={len(self)}>"


# --------------------------------------------------------------------------
# Filters

def _normalize_filename(filename):
    """Normalise a filename for matching: OS case rules, '.pyc' -> '.py'."""
    filename = os.path.normcase(filename)
    if filename.endswith('.pyc'):
        filename = filename[:-1]
    return filename


class BaseFilter:
    """Base class of trace filters.

    *inclusive* tells whether the filter keeps (True) or drops (False) the
    traces that it describes.
    """

    def __init__(self, inclusive):
        self.inclusive = inclusive

    def _match(self, trace):
        """Return True if the raw *trace* passes this filter."""
        raise NotImplementedError


class Filter(BaseFilter):
    """Filter traces on the filename and line number of their frames.

    *filename_pattern* is a fnmatch pattern.  *lineno* None matches any line.
    With *all_frames* every frame is checked, otherwise only the most recent
    one.  *domain*, when not None, restricts the filter to one domain.
    """

    def __init__(self, inclusive, filename_pattern,
                 lineno=None, all_frames=False, domain=None):
        super().__init__(inclusive)
        self._filename_pattern = _normalize_filename(filename_pattern)
        self.lineno = lineno
        self.all_frames = all_frames
        self.domain = domain

    @property
    def filename_pattern(self):
        return self._filename_pattern

    def _match_frame_impl(self, filename, lineno):
        # Does the frame fall in the described set, regardless of whether
        # the filter includes or excludes that set?
        filename = _normalize_filename(filename)
        if not fnmatch.fnmatch(filename, self._filename_pattern):
            return False
        return self.lineno is None or lineno == self.lineno

    def _match_frame(self, filename, lineno):
        # XOR with "not inclusive" turns "described" into "passes".
        return self._match_frame_impl(filename, lineno) ^ (not self.inclusive)

    def _match_traceback(self, traceback):
        # *traceback* is a raw frames tuple, most recent frame first.
        if self.all_frames:
            described = any(self._match_frame_impl(filename, lineno)
                            for filename, lineno in traceback)
            return described ^ (not self.inclusive)
        filename, lineno = traceback[0]
        return self._match_frame(filename, lineno)

    def _match(self, trace):
        domain, size, traceback, total_nframe = trace
        result = self._match_traceback(traceback)
        if self.domain is None:
            return result
        # Outside of its domain, an inclusive filter keeps nothing and an
        # exclusive filter drops nothing.
        if self.inclusive:
            return result and domain == self.domain
        return result or domain != self.domain


class DomainFilter(BaseFilter):
    """Filter traces on their domain (address space)."""

    def __init__(self, inclusive, domain):
        super().__init__(inclusive)
        self._domain = domain

    @property
    def domain(self):
        return self._domain

    def _match(self, trace):
        domain, size, traceback, total_nframe = trace
        return (domain == self.domain) ^ (not self.inclusive)


# --------------------------------------------------------------------------
# Grouping raw traces

def _totals_by_frames_object(traces):
    """Sum size and count of *traces* per distinct frames tuple object.

    Returns an iterable of [frames, size, count] lists.  Grouping is by
    object identity: id() is cheap, while hashing a frames tuple means
    hashing every frame in it.  The C engine makes identity equivalent to
    equality for real snapshots (interned tracebacks); for hand-made ones it
    merely gives several entries for equal tuples, which callers merge by
    value.
    """
    totals = {}
    for _, size, frames, _ in traces:
        key = id(frames)
        try:
            total = totals[key]
        except KeyError:
            totals[key] = [frames, size, 1]
        else:
            total[1] += size
            total[2] += 1
    return totals.values()


# --------------------------------------------------------------------------
# Snapshots

class Snapshot:
    """Traces of the memory blocks allocated by Python at a point in time."""

    def __init__(self, traces, traceback_limit):
        # *traces* is a list of raw trace tuples (see _Traces).
        self.traces = _Traces(traces)
        self.traceback_limit = traceback_limit

    def dump(self, filename):
        """Write the snapshot into the file *filename*.

        The file is replaced atomically: readers see either the previous
        file or the complete new one.  Read it back with Snapshot.load().
        """
        _write_atomically(filename, _encode_snapshot(self))

    @classmethod
    def load(cls, filename):
        """Read a snapshot written by Snapshot.dump().

        Raise ValueError if the file is not a valid snapshot file.  Loading
        only decodes data: it never runs code, whatever the file holds.
        """
        with open(filename, 'rb') as fp:
            data = fp.read()
        try:
            return _decode_snapshot(cls, data)
        except _SnapshotError as exc:
            raise ValueError(f"cannot load tracemalloc snapshot "
                             f"{os.fsdecode(filename)!r}: {exc}") from None

    def _filter_trace(self, include_filters, exclude_filters, trace):
        # A trace is kept if it passes at least one inclusive filter (when
        # there are any) and passes every exclusive filter.
        if include_filters and not any(trace_filter._match(trace)
                                       for trace_filter in include_filters):
            return False
        return all(trace_filter._match(trace)
                   for trace_filter in exclude_filters)

    def filter_traces(self, filters):
        """Return a new Snapshot holding the traces kept by *filters*.

        *filters* is an iterable of Filter and DomainFilter objects.  With no
        filter, the new snapshot gets a copy of all traces.
        """
        if not isinstance(filters, Iterable):
            raise TypeError(f"filters must be a list of filters, "
                            f"not {type(filters).__name__}")
        filters = list(filters)
        traces = self.traces._traces
        if not filters:
            return Snapshot(list(traces), self.traceback_limit)

        include_filters = [f for f in filters if f.inclusive]
        exclude_filters = [f for f in filters if not f.inclusive]

        filter_trace = self._filter_trace
        if (all(type(f) in _FRAMES_ONLY_FILTERS for f in filters)
                and type(self)._filter_trace is Snapshot._filter_trace):
            # These filters only look at the domain and the frames, and a
            # frames tuple is shared by all traces of a call context: decide
            # once per (domain, frames object).
            decisions = {}
            kept = []
            for trace in traces:
                key = (trace[0], id(trace[2]))
                keep = decisions.get(key)
                if keep is None:
                    keep = filter_trace(include_filters, exclude_filters,
                                        trace)
                    decisions[key] = keep
                if keep:
                    kept.append(trace)
        else:
            # A custom filter may look at anything, such as the size.
            kept = [trace for trace in traces
                    if filter_trace(include_filters, exclude_filters, trace)]
        return Snapshot(kept, self.traceback_limit)

    def _group_by(self, key_type, cumulative):
        """Return {Traceback: Statistic} for the given grouping."""
        if key_type not in ('traceback', 'filename', 'lineno'):
            raise ValueError(f"unknown key_type: {key_type!r}")
        if cumulative and key_type not in ('lineno', 'filename'):
            raise ValueError(f"cumulative mode cannot by used "
                             f"with key type {key_type!r}")

        if key_type == 'traceback':
            def keys_of(frames):
                return (frames,)
        elif key_type == 'lineno':
            if cumulative:
                def keys_of(frames):
                    return [(frame,) for frame in frames]
            else:
                def keys_of(frames):
                    return (frames[:1],)
        else:
            # Grouping by file: the key is a single frame with line 0.
            if cumulative:
                def keys_of(frames):
                    return [((frame[0], 0),) for frame in frames]
            else:
                def keys_of(frames):
                    return (((frames[0][0], 0),),)

        # Merge per-object totals into per-key totals.  In cumulative mode
        # a frame appearing twice in one traceback (recursion) counts twice,
        # as it always did.
        totals = {}
        for frames, size, count in _totals_by_frames_object(
                self.traces._traces):
            for key in keys_of(frames):
                total = totals.get(key)
                if total is None:
                    totals[key] = [size, count]
                else:
                    total[0] += size
                    total[1] += count

        stats = {}
        for key, (size, count) in totals.items():
            traceback = Traceback(key)
            stats[traceback] = Statistic(traceback, size, count)
        return stats

    def statistics(self, key_type, cumulative=False):
        """Return a list of Statistic objects grouped by *key_type*.

        *key_type* is 'filename', 'lineno' or 'traceback'.  With *cumulative*
        (only for 'filename' and 'lineno'), every frame of a traceback is
        credited, not only the most recent one.  Biggest first.
        """
        stats = list(self._group_by(key_type, cumulative).values())
        stats.sort(reverse=True, key=Statistic._sort_key)
        return stats

    def compare_to(self, old_snapshot, key_type, cumulative=False):
        """Return StatisticDiff objects for the changes since *old_snapshot*.

        Grouping works as in statistics().  Largest changes first.
        """
        new_group = self._group_by(key_type, cumulative)
        old_group = old_snapshot._group_by(key_type, cumulative)
        diffs = _compare_grouped_stats(old_group, new_group)
        diffs.sort(reverse=True, key=StatisticDiff._sort_key)
        return diffs


def take_snapshot():
    """Return a Snapshot of the traces of the currently allocated blocks."""
    if not is_tracing():
        raise RuntimeError("the tracemalloc module must be tracing memory "
                           "allocations to take a snapshot")
    traces = _get_traces()
    traceback_limit = get_traceback_limit()
    return Snapshot(traces, traceback_limit)


# --------------------------------------------------------------------------
# Snapshot files
#
# Layout (version 1):
#
#     b"tracemalloc-snapshot\n"        magic line
#     b"version 1\n"                   format version
#     zlib-compressed UTF-8 JSON document:
#     {
#       "traceback_limit": int,
#       "filenames": [str, ...],                  each filename stored once
#       "tracebacks": [[file, line, ...], ...],   flat (filename index,
#                                                  lineno) pairs, most
#                                                  recent frame first
#       "traces": {"domain": [int, ...],          one column per field,
#                  "size": [int, ...],            all of the same length
#                  "traceback": [int, ...],       (index into tracebacks)
#                  "total_nframe": [int or null, ...]},
#       "attributes": {name: value, ...}          extra snapshot attributes
#     }
#
# Attribute values use JSON scalars for None/bool/int/float/str and
# [tag, payload] arrays for the containers and bytes (see _encode_value).
#
# Everything is plain data validated on load: unlike pickle, a crafted file
# can at worst be rejected with ValueError, never run code.

_SNAPSHOT_MAGIC = b"tracemalloc-snapshot\n"
_SNAPSHOT_VERSION = 1
# How long a version line may be before the file is considered garbage.
_MAX_VERSION_LINE = 64
_PICKLE_PROTO_OPCODE = b"\x80"


class _SnapshotError(Exception):
    """Internal: why a snapshot file was rejected (becomes ValueError)."""


def _check_column(name, column, allowed_types):
    # set(map(type, ...)) checks a million values at C speed.  Exact types:
    # bool is a subclass of int but means something else.
    if not isinstance(column, list):
        raise _SnapshotError(f"{name} is not a list")
    unexpected = set(map(type, column)) - allowed_types
    if unexpected:
        kinds = ", ".join(sorted(t.__name__ for t in unexpected))
        raise _SnapshotError(f"{name} holds values of type {kinds}")


def _encode_value(value):
    """Encode a snapshot attribute value as JSON-compatible data.

    Only plain data is accepted, so that loading never has to create
    objects of arbitrary classes.
    """
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if kind is bytes:
        return ["bytes", value.hex()]
    if kind in (list, tuple, set, frozenset):
        return [kind.__name__, [_encode_value(item) for item in value]]
    if kind is dict:
        pairs = []
        for key, item in value.items():
            pairs.append([_encode_value(key), _encode_value(item)])
        return ["dict", pairs]
    raise TypeError(f"values of type {kind.__name__} are not supported "
                    f"(supported: None, bool, int, float, str, bytes, list, "
                    f"tuple, set, frozenset, dict)")


def _decode_value(data):
    """Inverse of _encode_value(), validating everything."""
    if data is None or type(data) in (bool, int, float, str):
        return data
    if not (type(data) is list and len(data) == 2 and type(data[0]) is str):
        raise _SnapshotError("malformed attribute value")
    tag, payload = data
    if tag == "bytes":
        if type(payload) is not str:
            raise _SnapshotError("malformed bytes attribute value")
        try:
            return bytes.fromhex(payload)
        except ValueError:
            raise _SnapshotError("malformed bytes attribute value") from None
    if type(payload) is not list:
        raise _SnapshotError(f"malformed {tag} attribute value")
    try:
        if tag == "dict":
            result = {}
            for pair in payload:
                if type(pair) is not list or len(pair) != 2:
                    raise _SnapshotError("malformed dict attribute value")
                result[_decode_value(pair[0])] = _decode_value(pair[1])
            return result
        containers = {"list": list, "tuple": tuple,
                      "set": set, "frozenset": frozenset}
        if tag not in containers:
            raise _SnapshotError(f"unknown attribute value type {tag!r}")
        return containers[tag](_decode_value(item) for item in payload)
    except TypeError:
        # An unhashable value used as a dict key or set item.
        raise _SnapshotError(f"malformed {tag} attribute value") from None


def _encode_snapshot(snapshot):
    """Return the bytes of a snapshot file for *snapshot*."""
    import json
    import zlib

    traces = snapshot.traces._traces
    if traces and set(map(len, traces)) != {4}:
        raise TypeError("cannot dump snapshot: traces must be "
                        "(domain, size, frames, total_nframe) tuples")
    if type(snapshot.traceback_limit) is not int:
        raise TypeError("cannot dump snapshot: traceback_limit must be an int")

    # Table of distinct tracebacks.  Look each frames object up by identity
    # first (cheap), and by value only once per distinct object.
    frames_column = list(map(itemgetter(2), traces))
    ids = list(map(id, frames_column))
    index_by_value = {}
    index_by_id = {}
    for key, frames in dict(zip(ids, frames_column)).items():
        index_by_id[key] = index_by_value.setdefault(frames,
                                                     len(index_by_value))

    filename_index = {}
    tracebacks = []
    for frames in index_by_value:
        flat = []
        for filename, lineno in frames:
            if type(filename) is not str or type(lineno) is not int:
                raise TypeError("cannot dump snapshot: frames must be "
                                "(str, int) tuples")
            flat.append(filename_index.setdefault(filename,
                                                  len(filename_index)))
            flat.append(lineno)
        tracebacks.append(flat)

    columns = {
        "domain": list(map(itemgetter(0), traces)),
        "size": list(map(itemgetter(1), traces)),
        "traceback": list(map(index_by_id.__getitem__, ids)),
        "total_nframe": list(map(itemgetter(3), traces)),
    }
    for name, allowed in (("domain", {int}), ("size", {int}),
                          ("total_nframe", {int, type(None)})):
        try:
            _check_column(name, columns[name], allowed)
        except _SnapshotError as exc:
            raise TypeError(f"cannot dump snapshot: trace {exc}") from None

    attributes = {}
    for name, value in vars(snapshot).items():
        if name in ('traces', 'traceback_limit'):
            continue
        try:
            attributes[name] = _encode_value(value)
        except TypeError as exc:
            raise TypeError(f"cannot dump snapshot attribute {name!r}: "
                            f"{exc}") from None
        except RecursionError:
            raise ValueError(f"cannot dump snapshot attribute {name!r}: "
                             f"value is recursive or too deeply nested"
                             ) from None

    document = {
        "traceback_limit": snapshot.traceback_limit,
        "filenames": list(filename_index),
        "tracebacks": tracebacks,
        "traces": columns,
        "attributes": attributes,
    }
    # ensure_ascii keeps undecodable filenames (lone surrogates) intact.
    payload = json.dumps(document, separators=(",", ":"), ensure_ascii=True,
                         allow_nan=True)
    header = _SNAPSHOT_MAGIC + b"version %d\n" % _SNAPSHOT_VERSION
    return header + zlib.compress(payload.encode("ascii"), 1)


def _parse_header(data):
    """Check the magic and version lines; return the offset of the payload."""
    if not data:
        raise _SnapshotError("the file is empty, not a snapshot file")
    if not data.startswith(_SNAPSHOT_MAGIC):
        if _SNAPSHOT_MAGIC.startswith(data):
            raise _SnapshotError("the file is truncated (incomplete header)")
        if data.startswith(_PICKLE_PROTO_OPCODE):
            raise _SnapshotError(
                "not a snapshot file: it looks like a pickle (the format "
                "of standard CPython), which is never loaded because "
                "unpickling can run arbitrary code")
        raise _SnapshotError("not a snapshot file (bad magic line)")

    start = len(_SNAPSHOT_MAGIC)
    end = data.find(b"\n", start, start + _MAX_VERSION_LINE)
    if end < 0:
        if len(data) - start < _MAX_VERSION_LINE:
            raise _SnapshotError("the file is truncated (incomplete header)")
        raise _SnapshotError("corrupt header (version line)")
    words = data[start:end].split(b" ")
    if (len(words) != 2 or words[0] != b"version"
            or not words[1].isdigit() or not words[1].isascii()):
        raise _SnapshotError("corrupt header (version line)")
    version = int(words[1])
    if version != _SNAPSHOT_VERSION:
        raise _SnapshotError(f"unsupported snapshot format version "
                             f"{version} (this Python reads version "
                             f"{_SNAPSHOT_VERSION})")
    return end + 1


def _decode_snapshot(cls, data):
    """Build a *cls* instance from the bytes of a snapshot file."""
    import json
    import zlib

    offset = _parse_header(data)

    decompressor = zlib.decompressobj()
    try:
        payload = decompressor.decompress(data[offset:])
    except zlib.error as exc:
        raise _SnapshotError(f"corrupt payload ({exc})") from None
    if not decompressor.eof:
        raise _SnapshotError("the file is truncated (incomplete payload)")
    if decompressor.unused_data:
        raise _SnapshotError("corrupt payload (trailing data)")
    try:
        document = json.loads(payload.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise _SnapshotError(f"corrupt payload ({exc})") from None

    try:
        traces, traceback_limit, attributes = _decode_document(document)
    except _SnapshotError as exc:
        raise _SnapshotError(f"corrupt payload ({exc})") from None

    # Like unpickling, restore the state without calling __init__(), so
    # that subclasses with another constructor signature load too.
    snapshot = cls.__new__(cls)
    snapshot.traces = _Traces(traces)
    snapshot.traceback_limit = traceback_limit
    vars(snapshot).update(attributes)
    return snapshot


def _check_indexes(name, indexes, length):
    if indexes and not (0 <= min(indexes) and max(indexes) < length):
        raise _SnapshotError(f"{name} index out of range")


def _decode_document(document):
    """Validate the decoded JSON document of a snapshot file.

    Return (traces, traceback_limit, attributes).  Every value is checked,
    so that a damaged or crafted file cannot produce a snapshot that fails
    later, in code far from load().
    """
    expected_keys = {"traceback_limit", "filenames", "tracebacks",
                     "traces", "attributes"}
    if type(document) is not dict or set(document) != expected_keys:
        raise _SnapshotError("unexpected document layout")

    traceback_limit = document["traceback_limit"]
    if type(traceback_limit) is not int:
        raise _SnapshotError("traceback_limit is not an integer")

    filenames = document["filenames"]
    _check_column("filenames", filenames, {str})

    tracebacks = document["tracebacks"]
    if type(tracebacks) is not list:
        raise _SnapshotError("tracebacks is not a list")
    frames_table = []
    for flat in tracebacks:
        _check_column("traceback", flat, {int})
        if len(flat) % 2:
            raise _SnapshotError("odd traceback length")
        filename_ids = flat[0::2]
        _check_indexes("filename", filename_ids, len(filenames))
        frames_table.append(tuple(zip(map(filenames.__getitem__,
                                          filename_ids),
                                      flat[1::2])))

    columns = document["traces"]
    names = ("domain", "size", "traceback", "total_nframe")
    if type(columns) is not dict or set(columns) != set(names):
        raise _SnapshotError("unexpected traces layout")
    _check_column("domain", columns["domain"], {int})
    _check_column("size", columns["size"], {int})
    _check_column("traceback", columns["traceback"], {int})
    _check_column("total_nframe", columns["total_nframe"],
                  {int, type(None)})
    if len({len(columns[name]) for name in names}) != 1:
        raise _SnapshotError("trace columns differ in length")
    traceback_ids = columns["traceback"]
    _check_indexes("traceback", traceback_ids, len(frames_table))
    # Traces of one call context share one frames tuple, as in a snapshot
    # taken from the engine.
    traces = list(zip(columns["domain"], columns["size"],
                      map(frames_table.__getitem__, traceback_ids),
                      columns["total_nframe"]))

    attributes = document["attributes"]
    if type(attributes) is not dict:
        raise _SnapshotError("attributes is not an object")
    try:
        attributes = {name: _decode_value(value)
                      for name, value in attributes.items()}
    except RecursionError:
        raise _SnapshotError("attribute nested too deeply") from None
    if {'traces', 'traceback_limit'} & set(attributes):
        raise _SnapshotError("reserved attribute name")
    return traces, traceback_limit, attributes


def _write_atomically(filename, data):
    """Write *data* to *filename* through a temporary file and a rename.

    A crash or an exception half way leaves any previous file untouched and
    no partial file behind.
    """
    # Follow symbolic links so that the link keeps pointing to the file and
    # the temporary file is on the same file system as the target.
    path = os.path.realpath(os.fsdecode(os.fspath(filename)))
    directory, name = os.path.split(path)
    flags = (os.O_WRONLY | os.O_CREAT | os.O_EXCL
             | getattr(os, 'O_BINARY', 0))
    while True:
        temp_path = os.path.join(
            directory, f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
        try:
            # Mode 0o666 lets the umask decide, as open() would.
            fd = os.open(temp_path, flags, 0o666)
            break
        except FileExistsError:
            continue
    try:
        with open(fd, 'wb') as fp:
            fp.write(data)
            fp.flush()
            os.fsync(fp.fileno())
        try:
            # Keep the permissions of the file being replaced.
            os.chmod(temp_path, os.stat(path).st_mode & 0o7777)
        except OSError:
            pass
        os.replace(temp_path, path)
    except BaseException:
        try:
            os.unlink(temp_path)
        except OSError:
            pass
        raise


# --------------------------------------------------------------------------
# python -m tracemalloc: leak report for a script or a module

_DEFAULT_NFRAME = 25
_DEFAULT_TOP = 10


class _LeakReportNoise(BaseFilter):
    """Exclusive filter dropping the allocations that the report tool causes.

    A trace is dropped if its most recent frame is in one of *filenames*
    (the tool itself, runpy which runs the target, the import bootstrap whose
    allocations are module code objects, '<unknown>'), or if any of its
    frames is one of the (filename, lineno) pairs of *code_lines* (code that
    the tool runs after the target finished, such as printing its error).
    """

    def __init__(self, filenames, code_lines):
        super().__init__(False)
        self._filenames = frozenset(filenames)
        self._code_lines = frozenset(code_lines)

    def _match(self, trace):
        frames = trace[2]
        if frames and frames[0][0] in self._filenames:
            return False
        return self._code_lines.isdisjoint(frames)


# Filters that only look at the domain and frames of a trace, so that
# filter_traces() may decide once per distinct frames tuple.
_FRAMES_ONLY_FILTERS = (Filter, DomainFilter, _LeakReportNoise)


def _code_lines(function):
    """Return the set of (filename, lineno) pairs of *function*'s body."""
    code = function.__code__
    return {(code.co_filename, lineno)
            for _, _, lineno in code.co_lines() if lineno is not None}


def _build_arg_parser():
    import argparse

    def positive_int(text):
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise argparse.ArgumentTypeError(
                f"must be a positive integer, not {text!r}")
        return value

    parser = argparse.ArgumentParser(
        prog="python -m tracemalloc",
        usage="%(prog)s [options] (script.py | -m module) [args ...]",
        description="Run a Python script (or a module with -m) with memory "
                    "tracing on, then report on standard error where the "
                    "memory that it still holds at exit was allocated.")
    parser.add_argument(
        "-n", "--nframe", type=positive_int, default=_DEFAULT_NFRAME,
        metavar="N",
        help="number of frames to store per traceback when the tool starts "
             "tracing (default: %(default)s); ignored if tracing is already "
             "on, e.g. with -X tracemalloc")
    parser.add_argument(
        "--top", type=positive_int, default=_DEFAULT_TOP, metavar="K",
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
        "-m", dest="run_module", action="store_true",
        help="run a module, like python -m")
    # Everything from the script (or module) name on belongs to the target,
    # even what looks like an option of this tool.
    parser.add_argument(
        "command", nargs=argparse.REMAINDER,
        help="script path (or module name with -m) and its arguments")
    return parser


def _parse_args(argv):
    """Parse the command line; exit with a usage message if it is wrong."""
    parser = _build_arg_parser()
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
    return parser, options


def _target_globals(exc):
    """Return the globals of the target's module code that raised *exc*.

    The module-level frame is the first frame of the traceback that belongs
    to neither this tool nor runpy.  None if the target never ran (e.g. a
    syntax error).
    """
    tb = _skip_runner_frames(exc.__traceback__)
    return tb.tb_frame.f_globals if tb is not None else None


def _runner_files():
    """Filenames of the code that runs the target: this tool and runpy."""
    import runpy

    return {_main.__code__.co_filename, runpy.run_path.__code__.co_filename}


def _skip_runner_frames(tb):
    """Skip the leading traceback entries of this tool and of runpy."""
    runner_files = _runner_files()
    while tb is not None and tb.tb_frame.f_code.co_filename in runner_files:
        tb = tb.tb_next
    return tb


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
    runner_files = _runner_files()
    frames = traceback._frames              # oldest first
    start = 0
    while start < len(frames) and frames[start][0] in runner_files:
        start += 1
    if start == len(frames):
        return traceback
    return Traceback(tuple(reversed(frames[start:])))


def _format_report(stats, options, traceback_limit, file):
    """Write the leak report for the StatisticDiff list *stats*."""
    grown = [stat for stat in stats if stat.size_diff > 0]
    shown = grown[:options.top]
    write = file.write
    if not grown:
        write(f"tracemalloc: no memory allocated by {options.target} is "
              f"still held at exit\n")
        file.flush()
        return
    write(f"tracemalloc: memory allocated by {options.target} and still "
          f"held at exit: top {len(shown)} of {len(grown)} sites, grouped "
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


def _main(argv=None):
    """Entry point of ``python -m tracemalloc``; return the exit status."""
    import gc
    import sys
    # Modules used once the target runs or has run (runpy, pkgutil that
    # runpy imports lazily, traceback to print errors): import them now so
    # that their import does not show up in the report.
    import pkgutil  # noqa: F401
    import runpy  # noqa: F401
    import traceback  # noqa: F401

    parser, options = _parse_args(argv)

    # Set up the target's environment, like "python script.py" would.
    sys.argv[:] = [options.target] + options.args
    if not options.run_module:
        sys.path[0] = os.path.dirname(os.path.abspath(options.target))

    if not is_tracing():
        try:
            start(options.nframe)
        except ValueError as exc:
            parser.error(f"argument -n/--nframe: {exc}")

    noise = _LeakReportNoise(
        filenames=(*_runner_files(),
                   "<frozen importlib._bootstrap>",
                   "<frozen importlib._bootstrap_external>",
                   "<unknown>"),
        code_lines=_code_lines(_print_target_error))
    # filter_traces() fills an isinstance() cache on first use: fill it now,
    # before the baseline, as it is not the target's doing.
    Snapshot([], 1).filter_traces([noise])

    # What was allocated before the target started (at interpreter startup
    # with -X tracemalloc, or by this tool) is not the target's doing: the
    # report is the growth since this snapshot.
    baseline = take_snapshot().filter_traces([noise])

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
    final = take_snapshot().filter_traces([noise])
    stats = final.compare_to(baseline, options.group_by)
    _format_report(stats, options, final.traceback_limit, report_file)
    if options.output:
        final.dump(options.output)
        print(f"tracemalloc: snapshot written to {options.output}",
              file=report_file)
    # Only now may the target's module-level objects go away.
    del target_globals
    return status


if __name__ == "__main__":
    # Run the main() of the regular "tracemalloc" module rather than of this
    # __main__ copy, so that the report uses the same classes as any
    # "import tracemalloc" done by the target.
    import sys
    import tracemalloc
    sys.exit(tracemalloc._main())
