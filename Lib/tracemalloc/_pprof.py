"""Export a snapshot as a pprof profile (``Snapshot.dump_pprof()``).

pprof's format is the protocol buffer message ``perftools.profiles.Profile``
(profile.proto of the pprof project), gzip-compressed on disk.  It is what
``go tool pprof``, Pyroscope/Grafana, Datadog and Google Cloud Profiler read.
The message is encoded here by hand, with the few wire types that it needs:
no protobuf library is required.

What a profile holds:

- two sample types, ``inuse_objects/count`` and ``inuse_space/bytes``
  (the names of Go's heap profiles, so that pprof's ``-sample_index``
  names work as they do there), ``inuse_space`` the default;
- one sample per traceback of ``snapshot.statistics('traceback')``, with
  its count and size; a sampled snapshot's statistics are estimates, and so
  are the values;
- one location per (filename, line number), and one function per location:
  a tracemalloc frame has no function name, so the function's name is
  ``BASENAME:LINE`` (what pprof's views and flame graphs then show),
  its system name the full file name, its file name the full file name and
  its start line the line.  The location's line repeats the line number.
  The sample's location list starts with the most recent call (pprof puts
  the leaf first); a traceback as long as the traceback limit (it may
  have been cut) ends with the location ``<older calls beyond the
  traceback limit>`` (line 0), and an empty one is ``<unknown>`` (line 0),
  as in the HTML report;
- strings in UTF-8, as protobuf requires: a file name that is not valid
  UTF-8 (the bytes that os.fsdecode() keeps as surrogates) or that holds a
  lone surrogate is written with each surrogate as a backslash escape,
  ``\\xNN`` for an undecodable byte, ``\\uDNNN`` for a lone surrogate
  (``caf\\xe9.py``);
- a period: ``space/bytes`` and the sampling interval of a sampled snapshot
  (``snapshot.sample``), 1 for an exact one (every byte is seen);
- comments that say whether the snapshot is exact or sampled, and its
  traceback limit.

With *base* (an older snapshot), the profile is the one that pprof builds
for ``pprof -diff_base=OLD NEW``: the new snapshot's samples, then the
base's samples with their values negated and the label ``pprof::base`` set
to ``true``.  Summed per line, the values are new minus old; pprof's
``-diff_base`` views and tools that know the label show the difference.
"""

import gzip
import os
import re

__all__ = ['encode', 'dump']

# Field numbers of profile.proto (package perftools.profiles).
_PROFILE_SAMPLE_TYPE = 1
_PROFILE_SAMPLE = 2
_PROFILE_MAPPING = 3
_PROFILE_LOCATION = 4
_PROFILE_FUNCTION = 5
_PROFILE_STRING_TABLE = 6
_PROFILE_PERIOD_TYPE = 11
_PROFILE_PERIOD = 12
_PROFILE_COMMENT = 13
_PROFILE_DEFAULT_SAMPLE_TYPE = 14

_VALUE_TYPE_TYPE = 1
_VALUE_TYPE_UNIT = 2

_SAMPLE_LOCATION_ID = 1
_SAMPLE_VALUE = 2
_SAMPLE_LABEL = 3

_LABEL_KEY = 1
_LABEL_STR = 2

_MAPPING_ID = 1
_MAPPING_FILENAME = 5
_MAPPING_HAS_FUNCTIONS = 7
_MAPPING_HAS_FILENAMES = 8
_MAPPING_HAS_LINE_NUMBERS = 9

_LOCATION_ID = 1
_LOCATION_MAPPING_ID = 2
_LOCATION_LINE = 4

_LINE_FUNCTION_ID = 1
_LINE_LINE = 2

_FUNCTION_ID = 1
_FUNCTION_NAME = 2
_FUNCTION_SYSTEM_NAME = 3
_FUNCTION_FILENAME = 4
_FUNCTION_START_LINE = 5

# Wire types.
_VARINT = 0
_LENGTH_DELIMITED = 2

# The label of pprof's base-profile convention (pprof -diff_base).
BASE_LABEL_KEY = 'pprof::base'
BASE_LABEL_VALUE = 'true'

# The labels of a sample of a snapshot taken with threads=True: the name
# of the thread that allocated (as statistics('thread') names it), and its
# native id.
THREAD_LABEL_KEY = 'thread'
THREAD_ID_LABEL_KEY = 'thread_id'

# The root of a traceback that may be cut at the traceback limit, and the
# frame of a trace without one (the HTML report's names).
LIMIT_FRAME = ('<older calls beyond the traceback limit>', 0)
UNKNOWN_FRAME = ('<unknown>', 0)

_INT64_MAX = (1 << 63) - 1

# The sample types, with the names and units of Go's heap profiles, so
# that pprof's -sample_index names work as they do there; inuse_space is
# the default.
_INUSE_TYPES = (('inuse_objects', 'count'), ('inuse_space', 'bytes'))
_ALLOC_TYPES = (('alloc_objects', 'count'), ('alloc_space', 'bytes'))


# --------------------------------------------------------------------------
# Wire format

def _varint(value):
    """The base-128 varint of *value*; a negative int64 is encoded as its
    two's complement on 64 bits (ten bytes), as protobuf encodes int64."""
    if 0 <= value < 0x80:
        return bytes((value,))
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _key(field, wire_type):
    return _varint((field << 3) | wire_type)


def _int_field(field, value):
    # proto3: a scalar equal to its default (0) is not written.
    if not value:
        return b''
    return _key(field, _VARINT) + _varint(value)


def _bytes_field(field, data):
    return _key(field, _LENGTH_DELIMITED) + _varint(len(data)) + data


def _packed_field(field, values):
    if not values:
        return b''
    return _bytes_field(field, b''.join(map(_varint, values)))


# A surrogate code point: what os.fsdecode() makes of a byte of a file name
# that is not UTF-8 (U+DC80..U+DCFF, surrogateescape), or a lone surrogate
# that a str may hold.  Neither can be written as UTF-8.
_SURROGATE = re.compile('[\ud800-\udfff]')


def _escape_surrogate(match):
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:
        # The byte that surrogateescape stood for, as Python writes it.
        return f'\\x{code - 0xDC00:02x}'
    return f'\\u{code:04x}'


def _utf8(text):
    """*text* as UTF-8, for the string table: protobuf's string fields
    must be valid UTF-8 (readers reject the whole profile otherwise).  A
    surrogate is written as a backslash escape: \\xNN for a byte of a
    non-UTF-8 file name (surrogateescape), \\uDNNN for a lone surrogate."""
    try:
        return text.encode('utf-8')
    except UnicodeEncodeError:
        return _SURROGATE.sub(_escape_surrogate, text).encode('utf-8')


# --------------------------------------------------------------------------
# The profile

class _Profile:
    """The tables of one profile being built: strings, functions and
    locations, each deduplicated, and the encoded samples."""

    def __init__(self):
        self._strings = {'': 0}        # string_table[0] must be ""
        # (filename, lineno) -> the varint of its location id
        self._locations = {}
        self._encoded_locations = []
        self._encoded_functions = []
        self._samples = []

    def string(self, text):
        index = self._strings.get(text)
        if index is None:
            index = self._strings[text] = len(self._strings)
        return index

    def location(self, frame):
        """Return the varint of the location id of *frame*, a (filename,
        lineno) pair; create the location and its function the first
        time."""
        encoded_id = self._locations.get(frame)
        if encoded_id is not None:
            return encoded_id
        function = None
        try:
            if isinstance(frame, tuple) and len(frame) == 4:
                # A C frame (native frames): its function and library.
                filename, lineno, function, library = frame
                if (not isinstance(function, str)
                        or not isinstance(library, str)):
                    filename = lineno = None
            else:
                filename, lineno = frame
        except (TypeError, ValueError):
            filename = lineno = None
        if (not isinstance(filename, str) or isinstance(lineno, bool)
                or not isinstance(lineno, int)
                or not 0 <= lineno <= _INT64_MAX):
            raise ValueError(f"cannot encode the frame {frame!r}: a frame "
                             f"is a (filename: str, lineno: int) pair")
        location_id = len(self._locations) + 1
        encoded_id = self._locations[frame] = _varint(location_id)
        # One function per location (see the module's docstring): its id
        # is the location's.
        function_id = location_id
        if function is not None:
            # pprof shows a C frame by its function's name, and its
            # library as the system name.
            name = function
            system_name = library
        elif frame in (LIMIT_FRAME, UNKNOWN_FRAME):
            name = system_name = filename
        else:
            name = f"{os.path.basename(filename) or filename}:{lineno}"
            system_name = filename
        self._encoded_functions.append(
            _int_field(_FUNCTION_ID, function_id)
            + _int_field(_FUNCTION_NAME, self.string(name))
            + _int_field(_FUNCTION_SYSTEM_NAME, self.string(system_name))
            + _int_field(_FUNCTION_FILENAME, self.string(filename))
            + _int_field(_FUNCTION_START_LINE, lineno))
        line = (_int_field(_LINE_FUNCTION_ID, function_id)
                + _int_field(_LINE_LINE, lineno))
        self._encoded_locations.append(
            _int_field(_LOCATION_ID, location_id)
            + _int_field(_LOCATION_MAPPING_ID, 1)
            + _bytes_field(_LOCATION_LINE, line))
        return encoded_id

    def add_sample(self, encoded_location_ids, values, encoded_labels=b''):
        """Add a sample: *encoded_location_ids* is the concatenation of the
        varints of its location ids (the leaf first), *encoded_labels* its
        Label fields, encoded (see label())."""
        self._samples.append(
            _bytes_field(_SAMPLE_LOCATION_ID, encoded_location_ids)
            + _packed_field(_SAMPLE_VALUE, values)
            + encoded_labels)

    def label(self, key, text):
        """The Sample.label field of the label *key* = *text*."""
        return _bytes_field(_SAMPLE_LABEL,
                            _int_field(_LABEL_KEY, self.string(key))
                            + _int_field(_LABEL_STR, self.string(text)))

    def value_type(self, type_name, unit):
        return (_int_field(_VALUE_TYPE_TYPE, self.string(type_name))
                + _int_field(_VALUE_TYPE_UNIT, self.string(unit)))

    def encode(self, *, period, comments, sample_types):
        sample_types = [self.value_type(name, unit)
                        for name, unit in sample_types]
        default_sample_type = self.string('inuse_space')
        period_type = self.value_type('space', 'bytes')
        comment_ids = [self.string(comment) for comment in comments]
        # A single mapping says that the locations carry their functions,
        # files and lines already: pprof then does not try to symbolize
        # addresses (there are none).
        mapping = (_int_field(_MAPPING_ID, 1)
                   + _int_field(_MAPPING_FILENAME, self.string('python'))
                   + _int_field(_MAPPING_HAS_FUNCTIONS, 1)
                   + _int_field(_MAPPING_HAS_FILENAMES, 1)
                   + _int_field(_MAPPING_HAS_LINE_NUMBERS, 1))

        parts = [_bytes_field(_PROFILE_SAMPLE_TYPE, sample_type)
                 for sample_type in sample_types]
        parts.extend(_bytes_field(_PROFILE_SAMPLE, sample)
                     for sample in self._samples)
        parts.append(_bytes_field(_PROFILE_MAPPING, mapping))
        parts.extend(_bytes_field(_PROFILE_LOCATION, location)
                     for location in self._encoded_locations)
        parts.extend(_bytes_field(_PROFILE_FUNCTION, function)
                     for function in self._encoded_functions)
        # Every string is in the table by now; dicts keep insertion order,
        # which is the order of the indexes.
        parts.extend(_bytes_field(_PROFILE_STRING_TABLE, _utf8(text))
                     for text in self._strings)
        parts.append(_bytes_field(_PROFILE_PERIOD_TYPE, period_type))
        parts.append(_int_field(_PROFILE_PERIOD, period))
        # comment is a packed repeated int64 in proto3.
        parts.append(_packed_field(_PROFILE_COMMENT, comment_ids))
        parts.append(_int_field(_PROFILE_DEFAULT_SAMPLE_TYPE,
                                default_sample_type))
        return b''.join(parts)


def _check_snapshot(snapshot, what):
    import tracemalloc

    if not isinstance(snapshot, tracemalloc.Snapshot):
        raise TypeError(f"{what} must be a tracemalloc.Snapshot, "
                        f"not {type(snapshot).__name__}")
    sample = getattr(snapshot, 'sample', None)
    if sample is not None and (isinstance(sample, bool)
                               or not isinstance(sample, int)
                               or sample < 1):
        raise ValueError(f"{what} has an invalid sampling interval: "
                         f"{sample!r}")
    return sample


def _describe(snapshot, sample):
    kind = ("exact: every allocation traced" if sample is None else
            f"sampled: one sample per {sample} bytes on average, "
            f"values are estimates")
    return f"{kind}; traceback limit {snapshot.traceback_limit}"


def _checked_value(value, what):
    # Non-negative, so that a base's negated value is an int64 too.
    if (isinstance(value, bool) or not isinstance(value, int)
            or not 0 <= value <= _INT64_MAX):
        raise ValueError(f"cannot encode the {what} {value!r} in a pprof "
                         f"profile: it must be a non-negative 64-bit "
                         f"integer")
    return value


def _leaf_first(traceback):
    """The (filename, lineno) pairs of *traceback*, the most recent call
    first (Traceback iterates oldest first; pprof wants the leaf first)."""
    frames = getattr(traceback, '_frames', None)
    if type(frames) is tuple:
        # The package's own Traceback: its frames as stored, without a
        # Frame object for each.
        return frames[::-1]
    return tuple([(frame.filename, frame.lineno)
                  for frame in traceback])[::-1]


def _traceback_limit(snapshot):
    limit = snapshot.traceback_limit
    if not isinstance(limit, int) or limit <= 1:
        # With one frame per traceback, every traceback is cut: a marker
        # under each would say nothing.
        return None
    return limit


def _add_sample(profile, traceback, limit, values, encoded_labels):
    frames = _leaf_first(traceback)
    if not frames:
        frames = (UNKNOWN_FRAME,)
    elif (limit is not None and len(frames[-1]) == 2
          and sum(len(f) == 2 for f in frames) >= limit):
        # (The limit counts Python frames; C frames of native frames come
        # in addition, and a stack whose root is a C frame is whole.)
        # The root of a traceback that fills the limit says that it may
        # be cut (the grouped statistics do not keep the number of
        # frames that the engine saw), as the HTML report's call graph
        # does, rather than pass for the program's entry point.
        frames += (LIMIT_FRAME,)
    location = profile.location
    profile.add_sample(b''.join([location(frame) for frame in frames]),
                       values, encoded_labels)


def _thread_label(profile, snapshot, thread):
    """The Sample.label fields that name *thread* (a native id, or None:
    no label), as statistics('thread') names it."""
    if thread is None:
        return b''
    name = snapshot.thread_names.get(thread) or str(thread)
    return (profile.label(THREAD_LABEL_KEY, name)
            + profile.label(THREAD_ID_LABEL_KEY, str(thread)))


def _context_labels(profile, text):
    """The Sample.label fields of a label set (tracemalloc.label(): a
    canonical str, or None: none)."""
    if text is None:
        return b''
    from tracemalloc import _labels
    return b''.join(profile.label(key, value)
                    for key, value in _labels.decode(text).items())


def _rows(snapshot):
    """[(Statistic, thread, label set)] of *snapshot* by traceback: by
    (traceback, thread, label set) when its traces record their thread
    (and labels), else thread and label set None."""
    if snapshot._has_threads():
        return snapshot._traceback_thread_statistics()
    return [(stat, None, None) for stat in snapshot.statistics('traceback')]


def _add_samples(profile, snapshot, sign, encoded_labels):
    limit = _traceback_limit(snapshot)
    for stat, thread, label in _rows(snapshot):
        values = (sign * _checked_value(stat.count, 'count'),
                  sign * _checked_value(stat.size, 'size'))
        _add_sample(profile, stat.traceback, limit, values,
                    encoded_labels + _thread_label(profile, snapshot, thread)
                    + _context_labels(profile, label))


def _add_allocation_samples(profile, snapshot, allocated):
    """One sample per traceback (and thread) of either snapshot, with the
    values alloc_objects, alloc_space (from *allocated*), inuse_objects and
    inuse_space (from *snapshot*), 0 where a snapshot lacks it."""
    rows = {}
    names = {}
    for first, source in ((0, allocated), (2, snapshot)):
        for stat, thread, label in _rows(source):
            row = rows.setdefault((stat.traceback, thread, label),
                                  [0, 0, 0, 0])
            row[first] = _checked_value(stat.count, 'count')
            row[first + 1] = _checked_value(stat.size, 'size')
            if thread is not None and thread not in names:
                names[thread] = source
    limit = _traceback_limit(snapshot)
    for (traceback, thread, label), values in rows.items():
        labels = (_thread_label(profile, names[thread], thread)
                  if thread is not None else b'')
        _add_sample(profile, traceback, limit, values,
                    labels + _context_labels(profile, label))


def encode(snapshot, *, base=None, allocated=None):
    """Return *snapshot* as an uncompressed pprof ``Profile`` message.

    With *base* (an older snapshot), the profile is the difference in
    pprof's base-profile convention: *snapshot*'s samples, then *base*'s
    negated and labelled ``pprof::base=true``.

    With *allocated* (a snapshot of take_snapshot(allocated=True)), the
    profile is a heap profile as Go writes them: the sample types
    alloc_objects, alloc_space, inuse_objects and inuse_space, each sample
    a traceback of either snapshot.
    """
    sample = _check_snapshot(snapshot, "snapshot")
    base_sample = None
    import tracemalloc
    if base is not None:
        if allocated is not None:
            raise ValueError("a pprof profile takes base or allocated, not "
                             "both")
        base_sample = _check_snapshot(base, "base")
        tracemalloc._check_same_sampling(snapshot, base,
                                         "take the difference of")

    profile = _Profile()
    comments = [f"tracemalloc snapshot, {_describe(snapshot, sample)}"]
    sample_types = _INUSE_TYPES
    if allocated is not None:
        _check_snapshot(allocated, "allocated")
        tracemalloc._check_same_sampling(snapshot, allocated,
                                         "combine")
        _add_allocation_samples(profile, snapshot, allocated)
        sample_types = _ALLOC_TYPES + _INUSE_TYPES
        comments.append("alloc_objects and alloc_space: what was allocated "
                        "since tracing started, freed or not")
    else:
        _add_samples(profile, snapshot, 1, b'')
    if base is not None:
        _add_samples(profile, base, -1,
                     profile.label(BASE_LABEL_KEY, BASE_LABEL_VALUE))
        comments.append(
            f"difference from a base snapshot ({_describe(base, base_sample)}"
            f"): its samples are negated and labelled "
            f"{BASE_LABEL_KEY}={BASE_LABEL_VALUE}")
    # period: the bytes between two sampling points; every byte is one in
    # exact mode.
    period = 1 if sample is None else sample
    return profile.encode(period=period, comments=comments,
                          sample_types=sample_types)


def dump(snapshot, filename, *, base=None, allocated=None):
    """Write *snapshot* (the difference from *base*, if given) to
    *filename* as a gzip-compressed pprof profile.

    As Snapshot.dump(): a regular file (or a new path) is replaced
    through a temporary file and a rename, so that readers never see half
    a profile; a device, a FIFO or /dev/stdout is written in place.
    """
    from tracemalloc import _snapshotfile

    data = encode(snapshot, base=base, allocated=allocated)
    try:
        os.fspath(filename)
    except TypeError:
        raise TypeError(f"filename must be a str, bytes or os.PathLike, "
                        f"not {type(filename).__name__}") from None
    # mtime=0: the same snapshot gives the same bytes.
    # Level 6, as pprof's own writer (Go's default): level 9 takes several
    # times longer for a few percent.
    _snapshotfile.write(filename,
                        gzip.compress(data, compresslevel=6, mtime=0))
