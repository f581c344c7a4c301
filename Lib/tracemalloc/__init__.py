"""Trace memory blocks allocated by Python (PEP 454).

The allocation hooks live in the C module ``_tracemalloc``; this module adds
the object model on top of the raw data it returns: snapshots, traces,
tracebacks, filters and statistics.

Raw data layout, as returned by ``_tracemalloc._get_traces()``:

* a trace is a tuple ``(domain, size, frames, total_nframe)``, or, in a
  snapshot taken with ``threads=True`` (``_get_traces_ex()``), a 5-tuple
  whose last item is the native id of the allocating thread;
* ``frames`` is a tuple of ``(filename, lineno)`` tuples, most recent call
  first;
* tracebacks are interned by the C engine, so all traces allocated from the
  same call context share the very same ``frames`` tuple object.

The statistics and filtering code relies on the last point: work is done
once per distinct ``frames`` object instead of once per trace, which keeps
snapshots of millions of traces cheap to analyse.

The package's other modules:

* ``_snapshotfile``: the file format of Snapshot.dump() and Snapshot.load();
* ``leaks``: run code in rounds and report the allocation sites that grow;
* ``testing``: the leak check as a unittest decorator and TestCase mixin;
* ``pytest_plugin``: the leak check as a pytest plugin;
* ``regrtest``: the tracemalloc side of ``python -m test -R``;
* ``__main__``: the command line, ``python -m tracemalloc``.
"""

from array import array as _array
from collections.abc import Sequence, Iterable
from functools import total_ordering
import fnmatch
from itertools import compress as _compress
import linecache
import math
import operator
import os.path

# The tracing engine itself.  The public functions are re-exported unchanged.
from _tracemalloc import (  # noqa: F401
    NATIVE_DOMAIN,
    clear_traces,
    get_native_traced_memory,
    get_sample,
    get_traceback_limit,
    get_traced_memory,
    get_tracemalloc_memory,
    is_tracing,
    is_tracing_allocations,
    is_tracing_native,
    is_tracing_native_frames,
    reset_peak,
    start,
    stop,
)
import _tracemalloc
from _tracemalloc import (  # noqa: F401
    _get_columns, _get_object_traceback, _get_traces_ex,
)
from tracemalloc import _labels
from tracemalloc._labels import (  # noqa: F401
    get_labels, get_object_labels, is_labelling_tasks, label, label_tasks,
)


def _get_traces(columns=False):
    """The traces of the blocks allocated now: upstream's private function,
    a list of (domain, size, frames, total_nframe) tuples.

    With *columns*, the engine's packed record of them instead, which
    Snapshot() takes as well.  take_snapshot() asks here, as upstream's
    does: code that replaces this function (upstream's test_create_snapshot
    does) gets what it returns into take_snapshot().
    """
    if columns:
        return _get_columns()
    return _tracemalloc._get_traces()


def sample_weight(size, interval):
    """How many blocks of *size* bytes one sampled block of that size
    stands for, at a mean sampling interval of *interval* bytes: 1/p, where
    p = 1 - exp(-size/interval) is the chance that a block of that size is
    sampled.  *interval* None (exact mode) gives 1.
    """
    if interval is None:
        return 1
    if size <= 0:
        return 1.0
    return 1.0 / -math.expm1(-size / interval)


def _rounded_estimate(size, count):
    """[size, count] of estimated bytes and blocks, rounded for a
    Statistic: a group that has samples counts at least one block."""
    return [round(size), max(1, round(count)) if count else 0]


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
    """One frame of a traceback: a filename and a line number.

    With native frames (start(native=True, native_frames=True)), a
    traceback also holds C frames: their filename and lineno are the C
    source file and line when the debug information has them (else the
    shared object's path and 0), function and library name the C function
    and its shared object, and is_native is true.
    """

    __slots__ = ('_frame',)

    def __init__(self, frame):
        # *frame* is a raw (filename, lineno) tuple, or (filename, lineno,
        # function, library) for a C frame, kept as is: comparing and
        # hashing frames is then comparing and hashing that tuple.
        self._frame = frame

    @property
    def filename(self):
        return self._frame[0]

    @property
    def lineno(self):
        return self._frame[1]

    @property
    def is_native(self):
        """True for a C frame (native frames)."""
        return len(self._frame) > 2

    @property
    def function(self):
        """The C function of a C frame ('??' if unknown); None for a
        Python frame."""
        return self._frame[2] if len(self._frame) > 2 else None

    @property
    def library(self):
        """The shared object (or executable) of a C frame; None for a
        Python frame."""
        return self._frame[3] if len(self._frame) > 2 else None

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
        if len(self._frame) > 2:
            return f"{self.filename}:{self.lineno} ({self.function})"
        return f"{self.filename}:{self.lineno}"

    def __repr__(self):
        if len(self._frame) > 2:
            return (f"<Frame filename={self.filename!r} "
                    f"lineno={self.lineno!r} function={self.function!r} "
                    f"library={self.library!r}>")
        return f"<Frame filename={self.filename!r} lineno={self.lineno!r}>"



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
        for frame in frames:
            filename, lineno = frame[0], frame[1]
            if len(frame) > 2:
                # A C frame (native frames): its function and library.
                lines.append(f'  File "{filename}", line {lineno}, '
                             f'in {frame[2]} [{os.path.basename(frame[3])}]')
                if not lineno:
                    continue
            else:
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
        return Traceback(*self._trace[2:4])

    @property
    def thread(self):
        """Native id of the thread that allocated the block (see
        threading.get_native_id()), 0 if unknown, or None if the snapshot
        was taken without threads=True."""
        return self._trace[4] if len(self._trace) > 4 else None

    @property
    def labels(self):
        """The labels the block was allocated under (see label()), as a new
        dict, or None if the snapshot was taken without labels=True."""
        if len(self._trace) > 5:
            return _labels.decode(self._trace[5])
        return None

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


class _Columns:
    """A snapshot's traces packed in columns, as _get_columns() gives them.

    One item per distinct call context in ``frames`` (its frames tuple),
    ``total_nframe`` and ``threads`` (lists; ``threads`` is None unless the
    snapshot was taken with threads=True), and one item per trace in
    ``domains``, ``sizes`` and ``indexes`` (the trace's call context): typed
    buffers ('I', 'Q', 'I') that hold 16 bytes per trace, where a list of
    trace tuples costs about 100.  Statistics and dump() work on the columns
    directly; the tuples are built only if someone asks for them.
    """

    __slots__ = ('frames', 'total_nframe', 'threads', 'domains', 'sizes',
                 'indexes', 'weights', 'labels', '_totals', '_totals_sample')

    def __init__(self, frames, total_nframe, threads, domains, sizes,
                 indexes, weights=None, labels=None):
        self.frames = frames
        self.total_nframe = total_nframe
        self.threads = threads
        # take_snapshot(labels=True): the label set of each call context,
        # its canonical str or None (see _labels); threads are then given
        # too.  Else None.
        self.labels = labels
        self.domains = domains
        self.sizes = sizes
        self.indexes = indexes
        # Sampled peak snapshots: the blocks each trace stands for (a
        # sequence of floats).  Else None: a sampled trace's weight follows
        # from its size (sample_weight()).
        self.weights = weights
        self._totals = None
        self._totals_sample = None

    @classmethod
    def _from_export(cls, frames, total_nframe, threads, domains, sizes,
                     indexes, weights=None, labels=None):
        # The export's columns are bytes in native order.
        if weights is not None:
            weights = memoryview(weights).cast('d')
        return cls(frames, total_nframe, threads,
                   memoryview(domains).cast('I'), memoryview(sizes).cast('Q'),
                   memoryview(indexes).cast('I'), weights, labels)

    def __reduce__(self):
        # Pickling and copy.deepcopy(): the buffers as arrays (memoryviews
        # do not pickle), the weights included.
        weights = self.weights
        if weights is not None:
            weights = _array('d', weights)
        return (_Columns, (list(self.frames), list(self.total_nframe),
                           None if self.threads is None
                           else list(self.threads),
                           _array('I', self.domains),
                           _array('Q', self.sizes),
                           _array('I', self.indexes), weights,
                           None if self.labels is None
                           else list(self.labels)))

    def __len__(self):
        return len(self.indexes)

    def trace(self, i):
        """The raw trace tuple of trace *i*."""
        tb = self.indexes[i]
        raw = (self.domains[i], self.sizes[i], self.frames[tb],
               self.total_nframe[tb])
        if self.labels is not None:
            raw += (self.threads[tb], self.labels[tb])
        elif self.threads is not None:
            raw += (self.threads[tb],)
        return raw

    def iter_traces(self):
        """An iterator over the raw trace tuples, made one at a time."""
        indexes = self.indexes
        columns = [self.domains, self.sizes,
                   map(self.frames.__getitem__, indexes),
                   map(self.total_nframe.__getitem__, indexes)]
        if self.threads is not None:
            columns.append(map(self.threads.__getitem__, indexes))
        if self.labels is not None:
            columns.append(map(self.labels.__getitem__, indexes))
        return zip(*columns)

    def traces(self):
        """The list of raw trace tuples, as _get_traces_ex() gives it."""
        if self.labels is not None:
            return list(self.iter_traces())
        return _tracemalloc._traces_from_columns(
            self.frames, self.total_nframe, self.threads, self.domains,
            self.sizes, self.indexes)

    def context_totals(self, sample=None):
        """(sizes, counts): two lists with the total size and the number of
        traces of each call context, computed once.  With *sample* (the
        interval of a sampled snapshot), the estimated bytes and blocks
        the traces stand for, rounded per call context.

        Raise ValueError if a trace's index is out of range."""
        if sample is not None or self.weights is not None:
            if self._totals_sample is None:
                self._totals_sample = self._estimated_totals(sample)
            return self._totals_sample
        if self._totals is None:
            self._totals = _tracemalloc._traceback_totals(
                self.indexes, self.sizes, len(self.frames))
        return self._totals

    def _estimated_totals(self, sample):
        ncontexts = len(self.frames)
        sizes = [0.0] * ncontexts
        counts = [0.0] * ncontexts
        weights = self.weights
        if weights is None:
            weights = [sample_weight(size, sample) for size in self.sizes]
        for index, size, weight in zip(self.indexes, self.sizes, weights):
            if index >= ncontexts:
                raise ValueError("traceback index out of range")
            sizes[index] += size * weight
            counts[index] += weight
        rounded = list(map(_rounded_estimate, sizes, counts))
        return ([size for size, _ in rounded], [count for _, count in rounded])

    def totals(self, sample=None):
        """[frames, size, count] per call context that has traces
        (estimates with *sample*: see context_totals())."""
        sizes, counts = self.context_totals(sample)
        return [[frames, size, count]
                for frames, size, count in zip(self.frames, sizes, counts)
                if count]

    def select(self, keep):
        """The columns of the traces whose item of *keep* is true."""
        keep = list(keep)
        weights = self.weights
        if weights is not None:
            weights = _array('d', _compress(weights, keep))
        return _Columns(self.frames, self.total_nframe, self.threads,
                        _array('I', _compress(self.domains, keep)),
                        _array('Q', _compress(self.sizes, keep)),
                        _array('I', _compress(self.indexes, keep)),
                        weights, self.labels)


class _Traces(Sequence):
    """Read-only sequence view of raw traces as Trace objects.

    Trace objects are created on access only: a snapshot may hold millions
    of traces, most of which are never looked at individually.

    Storage.  ``_data`` holds the traces in exactly one of three forms,
    which its type tells apart:

    1. the engine's record (``_tracemalloc.SnapshotColumns``), as
       take_snapshot() got it.  Making Python objects of it then would take
       them from the program's free lists (see take_snapshot()), so that
       waits until the traces are first read;
    2. _Columns: the record once read, or what load() and filter_traces()
       make;
    3. a list (or other sequence) of raw trace tuples: what Snapshot() was
       given (upstream's tests and upstream's pickles give lists).

    The form only moves forward, and each move drops the previous form, so
    that there is never a second copy: 1 -> 2 on the first read
    (_columns), 1 or 2 -> 3 only when private code reads or assigns
    ``_traces`` (the caller may change that list in place, so it must be
    the only copy).
    Everything public (len, indexing, iteration, ``in``, ==, pickling,
    statistics, filter_traces, dump) reads forms 2 and 3 as they are and
    keeps no per-trace object once it returns.
    """

    __slots__ = ('_data',)

    def __init__(self, traces):
        # *traces*: what _get_columns() returns, or a sequence of raw
        # trace tuples (_get_traces(), _get_traces_ex(), or made up).
        self._data = traces

    @classmethod
    def _from_columns(cls, columns):
        self = cls.__new__(cls)
        self._data = columns
        return self

    @property
    def _columns(self):
        # _Columns, or None if the traces are a list (form 3).
        data = self._data
        if type(data) is _tracemalloc.SnapshotColumns:
            data = self._data = _Columns._from_export(*data,
                                                      labels=data.labels)
        return data if type(data) is _Columns else None

    @property
    def _traces(self):
        # The raw tuples, for private code that wants a list (form 3).
        columns = self._columns
        if columns is not None:
            self._data = columns.traces()
        return self._data

    @_traces.setter
    def _traces(self, traces):
        self._data = traces

    def _raw(self):
        """An iterator over the raw trace tuples, whatever the form."""
        columns = self._columns
        if columns is not None:
            return columns.iter_traces()
        return iter(self._data)

    def __len__(self):
        data = self._data
        if type(data) is _tracemalloc.SnapshotColumns:
            # Four bytes per trace in the index column.
            return len(data.indexes) // 4
        return len(data)

    def __getitem__(self, index):
        columns = self._columns
        if columns is None:
            if isinstance(index, slice):
                return tuple(map(Trace, self._data[index]))
            return Trace(self._data[index])
        if isinstance(index, slice):
            return tuple(Trace(columns.trace(i))
                         for i in range(*index.indices(len(columns))))
        # Any object with __index__, as a list accepts.
        index = operator.index(index)
        if index < 0:
            index += len(columns)
        if not 0 <= index < len(columns):
            raise IndexError("list index out of range")
        return Trace(columns.trace(index))

    def __iter__(self):
        return map(Trace, self._raw())

    def __contains__(self, trace):
        return trace._trace in self._raw()

    def __eq__(self, other):
        if not isinstance(other, _Traces):
            return NotImplemented
        if self._columns is None and other._columns is None:
            # Two lists: compared as upstream compares them.
            return self._data == other._data
        if len(self) != len(other):
            return False
        return all(map(operator.eq, self._raw(), other._raw()))

    def __reduce__(self):
        # Pickled as upstream's can read it, _Traces(list of raw tuples);
        # columns hold memoryviews, which do not pickle.  The list only
        # lives while the pickle is made.  A sampled peak snapshot's
        # columns carry each trace's weight, which a list of raw tuples
        # cannot hold: they are pickled as columns (see _Columns.__reduce__;
        # upstream has no such snapshot to read).
        columns = self._columns
        if columns is not None and columns.weights is not None:
            return (_Traces, (columns,))
        return (_Traces, (list(self._raw()),))

    def __setstate__(self, state):
        # Upstream 3.11's _Traces is pickled as its __dict__, which is
        # {'_traces': list of raw tuples}.
        if not (isinstance(state, dict) and set(state) == {'_traces'}):
            raise TypeError(f"cannot unpickle _Traces from state "
                            f"{type(state).__name__}")
        self._data = state['_traces']

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
            described = any(self._match_frame_impl(frame[0], frame[1])
                            for frame in traceback)
            return described ^ (not self.inclusive)
        frame = traceback[0]
        if len(frame) > 2:
            # Native frames: the most recent Python frame decides, as for
            # statistics('lineno').
            frame = (_first_python_frame(traceback) or traceback)[0]
        return self._match_frame(frame[0], frame[1])

    def _match(self, trace):
        # A trace may have the allocating thread as a fifth item.
        domain, traceback = trace[0], trace[2]
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
        return (trace[0] == self.domain) ^ (not self.inclusive)


def _looks_at_frames_only(trace_filter):
    """Does *trace_filter* decide on the domain and frames of a trace only?

    True for Filter and DomainFilter themselves (not their subclasses, which
    may look at anything), and for the package's own filter classes that
    say so with a ``_frames_only = True`` class attribute of their own.
    """
    cls = type(trace_filter)
    return cls in (Filter, DomainFilter) or cls.__dict__.get('_frames_only',
                                                            False)


# --------------------------------------------------------------------------
# Grouping raw traces

def _sum_by_key(rows):
    """{key: [size, count]}, summed over the (key, size, count) rows."""
    totals = {}
    for key, size, count in rows:
        total = totals.get(key)
        if total is None:
            totals[key] = [size, count]
        else:
            total[0] += size
            total[1] += count
    return totals


def _first_python_frame(frames):
    """The most recent frame of *frames* as a 1-tuple: its most recent
    Python frame when it has C frames (native frames), so that grouping by
    line or file gives the same Python lines with native frames as
    without; ('<unknown>', 0) when it has C frames only (a thread that runs
    no Python code), as its traceback is without native frames."""
    if not frames or len(frames[0]) == 2:
        return frames[:1]
    for frame in frames:
        if len(frame) == 2:
            return (frame,)
    return (('<unknown>', 0),)


def _statistics(totals, frames_of):
    """{Traceback: Statistic} of _sum_by_key() totals; frames_of(key) is
    the frames of a key's traceback."""
    stats = {}
    for key, (size, count) in totals.items():
        traceback = Traceback(frames_of(key))
        stats[traceback] = Statistic(traceback, size, count)
    return stats


def _totals_by_frames_object(traces, sample=None):
    """Sum size and count of *traces* per distinct frames tuple object.

    Returns an iterable of [frames, size, count] lists.  Grouping is by
    object identity: id() is cheap, while hashing a frames tuple means
    hashing every frame in it.  The C engine makes identity equivalent to
    equality for real snapshots (interned tracebacks); for hand-made ones it
    merely gives several entries for equal tuples, which callers merge by
    value.
    """
    if sample is not None:
        return _estimated_totals_by_frames_object(traces, sample)
    totals = {}
    for trace in traces:
        size = trace[1]
        frames = trace[2]
        key = id(frames)
        try:
            total = totals[key]
        except KeyError:
            totals[key] = [frames, size, 1]
        else:
            total[1] += size
            total[2] += 1
    return totals.values()


def _estimated_totals_by_frames_object(traces, sample):
    """_totals_by_frames_object() of a sampled snapshot's traces: the
    estimated bytes and blocks, rounded per frames object."""
    totals = {}
    for trace in traces:
        size = trace[1]
        frames = trace[2]
        weight = sample_weight(size, sample)
        total = totals.setdefault(id(frames), [frames, 0.0, 0.0])
        total[1] += size * weight
        total[2] += weight
    return [[frames, *_rounded_estimate(size, count)]
            for frames, size, count in totals.values()]


# --------------------------------------------------------------------------
# Snapshots

class Snapshot:
    """Traces of the memory blocks allocated by Python at a point in time."""

    def __init__(self, traces, traceback_limit, *, sample=None):
        # *traces* is a list of raw trace tuples (see _Traces).
        self.traces = _Traces(traces)
        self.traceback_limit = traceback_limit
        # Native thread id -> thread name, for statistics('thread'); filled
        # by take_snapshot(threads=True) with the threads alive then.
        self.thread_names = {}
        # The mean sampling interval in bytes of a sampled snapshot: its
        # traces are the sampled blocks, and statistics estimate what they
        # stand for.  None: exact.
        self.sample = sample

    def __setstate__(self, state):
        # Pickles of upstream 3.11's snapshots have no thread_names.  The
        # state is the instance's __dict__, or (__dict__, slots) for a
        # subclass with __slots__.
        slots = None
        if isinstance(state, tuple):
            state, slots = state
        if state:
            vars(self).update(state)
        if slots:
            for name, value in slots.items():
                setattr(self, name, value)
        vars(self).setdefault('thread_names', {})
        vars(self).setdefault('sample', None)

    def dump(self, filename):
        """Write the snapshot into the file *filename*.

        A regular file (or a new path) is replaced atomically: readers see
        either the previous file or the complete new one, and the other
        names of a hard-linked file keep the previous content.  Anything
        else (a device such as /dev/null, a FIFO, /dev/stdout) is written
        in place, as open(filename, 'wb') would.  Read it back with
        Snapshot.load().
        """
        from tracemalloc import _snapshotfile

        _snapshotfile.write(filename, _snapshotfile.encode(self))

    @classmethod
    def load(cls, filename):
        """Read a snapshot written by Snapshot.dump().

        Raise ValueError if the file is not a valid snapshot file.  Loading
        only decodes data: it never runs code, whatever the file holds.
        """
        from tracemalloc import _snapshotfile

        with open(filename, 'rb') as fp:
            data = fp.read()
        try:
            return _snapshotfile.decode(cls, data)
        except _snapshotfile._SnapshotError as exc:
            raise ValueError(f"cannot load tracemalloc snapshot "
                             f"{os.fsdecode(filename)!r}: {exc}") from None

    def dump_pprof(self, filename, *, base=None, allocated=None):
        """Write the snapshot as a gzip-compressed pprof profile.

        Sample types ``inuse_objects/count`` and ``inuse_space/bytes``, one
        sample per traceback, with file names and line numbers.  With
        *base* (an older Snapshot), the profile is the difference: this
        snapshot's samples plus *base*'s negated, marked as pprof marks a
        base profile.  With *allocated* (a snapshot taken with
        take_snapshot(allocated=True)), the profile also has Go's
        ``alloc_objects/count`` and ``alloc_space/bytes`` from it.  A
        sampled snapshot gives its estimates.
        """
        from tracemalloc import _pprof

        _pprof.dump(self, filename, base=base, allocated=allocated)

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
        columns = getattr(self.traces, '_columns', None)
        if not filters:
            if columns is not None:
                return self._derived(columns.select([True] * len(columns)))
            return self._derived(list(self.traces._traces))

        include_filters = [f for f in filters if f.inclusive]
        exclude_filters = [f for f in filters if not f.inclusive]

        filter_trace = self._filter_trace
        frames_only = (all(_looks_at_frames_only(f) for f in filters)
                       and type(self)._filter_trace is Snapshot._filter_trace)
        if frames_only and columns is not None:
            # Decide once per (domain, call context), then pick the traces
            # without building their tuples.
            decisions = {}
            for key in set(zip(columns.domains, columns.indexes)):
                domain, tb = key
                raw = (domain, 0, columns.frames[tb],
                       columns.total_nframe[tb])
                decisions[key] = filter_trace(include_filters,
                                              exclude_filters, raw)
            keep = map(decisions.__getitem__,
                       zip(columns.domains, columns.indexes))
            return self._derived(columns.select(keep))

        traces = self.traces._traces
        if frames_only:
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
            if columns is not None and columns.weights is not None:
                # Keep the weights of a sampled peak snapshot.
                keep = [filter_trace(include_filters, exclude_filters, trace)
                        for trace in columns.iter_traces()]
                return self._derived(columns.select(keep))
            kept = [trace for trace in traces
                    if filter_trace(include_filters, exclude_filters, trace)]
        return self._derived(kept)

    def _derived(self, traces):
        # *traces*: a list of raw tuples, or _Columns.
        if isinstance(traces, _Columns):
            snapshot = Snapshot._from_columns(traces, self.traceback_limit)
        else:
            snapshot = Snapshot(traces, self.traceback_limit)
        snapshot.thread_names = dict(self.thread_names)
        snapshot.sample = getattr(self, 'sample', None)
        return snapshot

    @classmethod
    def _from_columns(cls, columns, traceback_limit):
        snapshot = cls([], traceback_limit)
        snapshot.traces = _Traces._from_columns(columns)
        return snapshot

    def _thread_key(self, thread):
        """The one-frame Traceback that stands for a thread in
        statistics('thread'): ('<thread NAME>', native id)."""
        if thread is None:
            return (('<thread unknown>', 0),)
        name = self.thread_names.get(thread)
        if name is None:
            name = f'{thread}' if thread else 'unknown'
        return ((f'<thread {name}>', thread),)

    def _group_by(self, key_type, cumulative):
        """Return {Traceback: Statistic} for the given grouping."""
        if key_type not in ('traceback', 'filename', 'lineno', 'thread',
                            'label'):
            raise ValueError(f"unknown key_type: {key_type!r}")
        if cumulative and key_type not in ('lineno', 'filename'):
            raise ValueError(f"cumulative mode cannot by used "
                             f"with key type {key_type!r}")
        if key_type == 'thread':
            return self._group_by_thread()
        if key_type == 'label':
            return self._group_by_context('labels', 5, _label_key)

        if key_type == 'traceback':
            def keys_of(frames):
                return (frames,)
        elif key_type == 'lineno':
            if cumulative:
                def keys_of(frames):
                    return [(frame,) for frame in frames]
            else:
                def keys_of(frames):
                    return (_first_python_frame(frames),)
        else:
            # Grouping by file: the key is a single frame with line 0.
            if cumulative:
                def keys_of(frames):
                    # a C frame stays one (its function and library)
                    return [((frame[0], 0) + tuple(frame[2:]),)
                            for frame in frames]
            else:
                def keys_of(frames):
                    # An empty traceback (a made-up or loaded snapshot)
                    # groups as by line: upstream raised IndexError.
                    first = _first_python_frame(frames)
                    return (((first[0][0], 0),) if first else (),)

        # Merge per-object totals into per-key totals.  In cumulative mode
        # a frame appearing twice in one traceback (recursion) counts twice,
        # as it always did.
        columns = getattr(self.traces, '_columns', None)
        sample = getattr(self, 'sample', None)
        if columns is not None:
            per_object = columns.totals(sample)
        else:
            per_object = _totals_by_frames_object(self.traces._traces,
                                                  sample)
        totals = _sum_by_key((key, size, count)
                             for frames, size, count in per_object
                             for key in keys_of(frames))
        return _statistics(totals, lambda key: key)

    def _group_by_thread(self):
        return self._group_by_context('threads', 4, self._thread_key)

    def _group_by_context(self, column, item, key_of):
        """{Traceback: Statistic} grouped by what each call context records
        beside its frames: its thread (column 'threads', item 4 of a raw
        trace) or its label set ('labels', item 5); key_of(value) is the
        one-frame traceback that stands for a value."""
        columns = getattr(self.traces, '_columns', None)
        sample = getattr(self, 'sample', None)
        if columns is not None:
            # Per call context: a context has one thread and one label set.
            sizes, counts = columns.context_totals(sample)
            values = (getattr(columns, column)
                      or [None] * len(columns.frames))
            per_value = zip(values, sizes, counts)
        elif sample is not None:
            per_value = []
            for trace in self.traces._traces:
                weight = sample_weight(trace[1], sample)
                per_value.append((trace[item] if len(trace) > item else None,
                                  trace[1] * weight, weight))
            totals = _sum_by_key(per_value)
            totals = {key: _rounded_estimate(size, count)
                      for key, (size, count) in totals.items()}
            return _statistics(totals, key_of)
        else:
            per_value = ((trace[item] if len(trace) > item else None,
                          trace[1], 1)
                         for trace in self.traces._traces)
        totals = _sum_by_key(row for row in per_value if row[2])
        return _statistics(totals, key_of)

    def _has_threads(self):
        """Whether the traces record their thread (take_snapshot(
        threads=True), or raw traces of five items)."""
        columns = getattr(self.traces, '_columns', None)
        if columns is not None:
            return columns.threads is not None
        return any(len(trace) > 4 for trace in self.traces._traces)

    def _traceback_thread_statistics(self):
        """[(Statistic, thread, label)]: the statistics by traceback, one
        per (traceback, thread, label set) triple; thread is a native id or
        None, label set a canonical str (see _labels) or None.  Sampled
        snapshots give their estimates, rounded per triple."""
        columns = getattr(self.traces, '_columns', None)
        sample = getattr(self, 'sample', None)
        if columns is not None:
            sizes, counts = columns.context_totals(sample)
            nothing = [None] * len(columns.frames)
            keys = zip(columns.frames, columns.threads or nothing,
                       columns.labels or nothing)
            rows = zip(keys, sizes, counts)
            totals = _sum_by_key(row for row in rows if row[2])
        else:
            rows = []
            for trace in self.traces._traces:
                thread = trace[4] if len(trace) > 4 else None
                label = trace[5] if len(trace) > 5 else None
                weight = (1 if sample is None
                          else sample_weight(trace[1], sample))
                rows.append(((trace[2], thread, label), trace[1] * weight,
                             weight))
            totals = _sum_by_key(rows)
            if sample is not None:
                totals = {key: _rounded_estimate(size, count)
                          for key, (size, count) in totals.items()}
        result = []
        for (frames, thread, label), (size, count) in totals.items():
            result.append((Statistic(Traceback(frames), size, count),
                           thread, label))
        return result

    def statistics(self, key_type, cumulative=False):
        """Return a list of Statistic objects grouped by *key_type*.

        *key_type* is 'filename', 'lineno', 'traceback', 'thread' or
        'label' (the fork's additions.  'thread', for snapshots taken with
        threads=True: one Statistic per thread, whose traceback is the
        single frame ('<thread NAME>', native thread id).  'label', for
        snapshots taken with labels=True: one Statistic per label set,
        whose traceback is the single frame ('<label k=v, ...>', 0), or
        ('<no label>', 0)).  With *cumulative*
        (only for 'filename' and 'lineno'), every frame of a traceback is
        credited, not only the most recent one.  Biggest first.
        """
        stats = list(self._group_by(key_type, cumulative).values())
        stats.sort(reverse=True, key=Statistic._sort_key)
        return stats

    def compare_to(self, old_snapshot, key_type, cumulative=False):
        """Return StatisticDiff objects for the changes since *old_snapshot*.

        Grouping works as in statistics().  Largest changes first.

        Both snapshots must be exact, or both sampled with the same
        interval (``sample``): else ValueError.  A sampled snapshot's
        statistics estimate what its few traced blocks stand for, so that a
        difference with an exact snapshot, or with one sampled at another
        rate, would mix two measures.
        """
        new_group = self._group_by(key_type, cumulative)
        old_group = old_snapshot._group_by(key_type, cumulative)
        _check_same_sampling(self, old_snapshot)
        diffs = _compare_grouped_stats(old_group, new_group)
        diffs.sort(reverse=True, key=StatisticDiff._sort_key)
        return diffs


def _label_key(text):
    """The one-frame Traceback that stands for a label set (canonical str
    or None) in statistics('label')."""
    if text is None:
        return (('<no label>', 0),)
    return ((f'<label {_labels.format_labels(text)}>', 0),)


def _sampling_text(sample):
    return ("exact" if sample is None else
            f"sampled with one sample per {sample} bytes")


def _check_same_sampling(new, old, what="compare"):
    """Raise ValueError unless the snapshots *new* and *old* are both exact
    or both sampled with the same interval."""
    new_sample = getattr(new, 'sample', None)
    old_sample = getattr(old, 'sample', None)
    if new_sample != old_sample:
        raise ValueError(
            f"cannot {what} a snapshot that is "
            f"{_sampling_text(new_sample)} with one that is "
            f"{_sampling_text(old_sample)}: sampled statistics are "
            f"estimates, valid against snapshots sampled with the same "
            f"interval only")


def _live_thread_names():
    """Native thread id -> name of the threads alive now."""
    import threading

    names = {}
    for thread in threading.enumerate():
        native_id = getattr(thread, 'native_id', None)
        if native_id is not None:
            names[native_id] = thread.name
    return names


def take_snapshot(*, peak=False, threads=False, allocated=False,
                  labels=False):
    """Return a Snapshot of the traces of the currently allocated blocks.

    The fork's additions: with *peak*, the snapshot holds the blocks that
    were live when traced memory last reached its peak (since start() or
    reset_peak()); sizes and counts per traceback are exact, and each block
    is given the average size of its traceback's blocks.  With *threads*,
    every trace records the thread that allocated it (Trace.thread) and
    statistics('thread') groups by thread.

    With *allocated* (tracing must have started with allocations=True),
    the snapshot holds what each traceback allocated since start() or
    clear_traces(), freed or not: its statistics are the bytes and blocks
    allocated there, and compare_to() of two such snapshots what was
    allocated between them.  Each traceback is one or two weighted traces,
    whatever the number of blocks (see "Allocation profiles" in the
    documentation).

    With *labels*, every trace records the labels it was allocated under
    (Trace.labels, see label()), and its thread as with *threads*;
    statistics('label') groups by label set.

    Under sampling, the peak is the highest value that the estimate of
    traced memory reached: an upper bound of the true peak, whose excess
    grows slowly with the number of allocations since start() or
    reset_peak() (see the "Sampled peaks" section of the documentation).
    """
    if not is_tracing():
        raise RuntimeError("the tracemalloc module must be tracing memory "
                           "allocations to take a snapshot")
    if peak and allocated:
        raise ValueError("take_snapshot(): peak and allocated cannot both "
                         "be true")
    traceback_limit = get_traceback_limit()
    # Columns, made by the engine without taking anything from the free
    # lists; the Python objects that work on them are made when they are
    # first used.  So, like upstream's, this snapshot reuses only the
    # argument tuples of Snapshot() and _Traces().  Keywords to
    # _get_columns() only when needed: the first call of a C function with
    # keywords makes a tuple of their names, which would come from the
    # program's free list.
    if labels:
        traces = _tracemalloc._get_labelled(peak=bool(peak),
                                            allocated=bool(allocated))
        threads = True
    elif allocated:
        traces = _tracemalloc._get_allocated(threads=bool(threads))
    elif peak or threads:
        traces = _get_columns(peak=bool(peak), threads=bool(threads))
    else:
        traces = _get_traces(True)
    snapshot = Snapshot(traces, traceback_limit, sample=get_sample())
    if threads:
        snapshot.thread_names = _live_thread_names()
    return snapshot


def dump_over(*args, **kwargs):
    """Write a profile when traced memory first reaches a size, then at
    each doubling (see tracemalloc._dumpover.dump_over)."""
    from tracemalloc import _dumpover

    return _dumpover.dump_over(*args, **kwargs)


def dump_on_memory_error(*args, **kwargs):
    """Write a profile after the first MemoryError raised by C code (see
    tracemalloc._dumpover.dump_on_memory_error)."""
    from tracemalloc import _dumpover

    return _dumpover.dump_on_memory_error(*args, **kwargs)


def dump_on_signal(*args, **kwargs):
    """Write a snapshot or a pprof profile each time a signal arrives (see
    tracemalloc._ondemand.dump_on_signal)."""
    from tracemalloc import _ondemand

    return _ondemand.dump_on_signal(*args, **kwargs)
