r"""The snapshot file format of Snapshot.dump() and Snapshot.load().

Version 2, written by dump():

    b"tracemalloc-snapshot\n"        magic line
    b"version 2\n"                   format version
    8 bytes: the payload's size once expanded (unsigned, little-endian)
    zlib-compressed payload:
        8 bytes: the length L of the document (unsigned, little-endian)
        L bytes: UTF-8 JSON document
        {
          "traceback_limit": int,
          "filenames": [str, ...],             each filename stored once
          "frames": [file, line, ...],         flat (filename index,
                                                lineno) pairs, each
                                                distinct frame once
          "tracebacks": [[frame, ...], ...],   one per call context: frame
                                                indexes, most recent first
          "total_nframe": [int or null, ...],  one per call context
          "threads": [int, ...] or null,       one per call context, for
                                                snapshots taken with
                                                threads=True
          "native_frames": [int, ...]          optional: the C frames
                                                (native frames), flat
                                                (frame index, function,
                                                library) triples, the
                                                last two indexes into
                                                filenames
          "labels": [str or null, ...]         optional: one per call
                                                context, its label set
                                                (tracemalloc.label(): the
                                                canonical str), for
                                                snapshots taken with
                                                labels=True
          "count": int,                        the number of traces
          "attributes": {name: value, ...},    extra snapshot attributes
          "domains": "zero",                   optional: every domain is
                                                0, the column is left out
          "size_bytes": 4,                     optional: sizes take 4
                                                bytes each (default 8)
          "weights": [float, ...]              optional: each trace's
                                                weight, in a sampled peak
                                                snapshot (see
                                                Snapshot.sample)
        }
        count x uint32: each trace's domain     \
        count x uint64: each trace's size        > little-endian columns
        count x uint32: each trace's call        /
                        context (index into tracebacks)

Version 1 (read, and written only for traces whose domain or size does not
fit the columns' types) is a zlib-compressed UTF-8 JSON document after the
header:

    {
      "traceback_limit": int,
      "filenames": [str, ...],
      "tracebacks": [[file, line, ...], ...],   flat (filename index,
                                                 lineno) pairs
      "traces": {"domain": [int, ...],          one column per field,
                 "size": [int, ...],            all of the same length
                 "traceback": [int, ...],       (index into tracebacks)
                 "total_nframe": [int or null, ...],
                 "thread": [int, ...],          only with threads=True
                 "label": [str or null, ...]},  only with labels=True
      "attributes": {name: value, ...}
    }

A sampled snapshot has the attribute "sample", its mean sampling interval
in bytes (a positive int; None or absent: exact).

Attribute values use JSON scalars for None/bool/int/float/str and
[tag, payload] arrays for the containers and bytes (see _encode_value).

Everything is plain data validated on load: unlike pickle (the format of
standard CPython, which is refused), a crafted file can at worst be rejected
with ValueError, never run code.  Sizes are checked before anything is
allocated: the declared expanded size against the file's size, the
declared trace count against the payload's size.
"""

import os
import stat
import sys
from array import array
from operator import itemgetter

from tracemalloc import _Columns, _Traces

_SNAPSHOT_MAGIC = b"tracemalloc-snapshot\n"
_SNAPSHOT_VERSION = 2
_READABLE_VERSIONS = (1, 2)
# How long a version line may be before the file is considered garbage.
_MAX_VERSION_LINE = 64
_PICKLE_PROTO_OPCODE = b"\x80"
# Bounds of the compressed payload's expansion (see decode()): version 1
# is JSON, version 2 mostly packed columns, which zlib can shrink up to
# about 1032 times (its limit).
_MAX_EXPANSION = 256
_MAX_EXPANSION_V2 = 1100
_EXPANSION_SLACK = 1 << 20
_CHUNK_SIZE = 1 << 20


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


def _check_labels(name, column):
    """A column of label sets: canonical strs (see tracemalloc._labels) or
    None."""
    from tracemalloc import _labels
    _check_column(name, column, {str, type(None)})
    for text in set(column) - {None}:
        if not _labels.is_canonical(text):
            raise _SnapshotError(f"{name} holds a malformed label set")


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


def _check_traces(traces):
    lengths = set(map(len, traces))
    if traces and lengths not in ({4}, {5}, {6}):
        raise TypeError("cannot dump snapshot: traces must be "
                        "(domain, size, frames, total_nframe) tuples, "
                        "or all have the allocating thread as a fifth item "
                        "(and all their label set as a sixth)")
    if lengths == {6} and set(map(type, map(itemgetter(5), traces))) - {
            str, type(None)}:
        raise TypeError("cannot dump snapshot: trace label holds values "
                        "that are not str or None")
    return lengths


def _encode_attributes(snapshot):
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
    return attributes


def encode(snapshot, version=_SNAPSHOT_VERSION):
    """Return the bytes of a snapshot file for *snapshot*.

    Version 2 unless a trace's domain or size does not fit its column
    (made-up traces only: the engine's always fit), or *version* is 1.
    """
    if type(snapshot.traceback_limit) is not int:
        raise TypeError("cannot dump snapshot: traceback_limit must be an int")
    columns = getattr(snapshot.traces, '_columns', None)
    if columns is not None and columns.weights is not None:
        # Only version 2 stores weights (the engine's traces always fit).
        return _encode_v2(snapshot, columns)
    if version == 2:
        if columns is None:
            columns = _columns_from_traces(snapshot.traces._traces)
        if columns is not None:
            return _encode_v2(snapshot, columns)
    return _encode_v1(snapshot)


def _columns_from_traces(traces):
    """_Columns for a list of raw trace tuples, or None if a domain or a
    size does not fit (TypeError for what no version can store)."""
    lengths = _check_traces(traces)
    for name, position, allowed in (("domain", 0, {int}), ("size", 1, {int}),
                                    ("total_nframe", 3, {int, type(None)})):
        try:
            _check_column(name, list(map(itemgetter(position), traces)),
                          allowed)
        except _SnapshotError as exc:
            raise TypeError(f"cannot dump snapshot: trace {exc}") from None
    try:
        domains = array('I', map(itemgetter(0), traces))
        sizes = array('Q', map(itemgetter(1), traces))
    except OverflowError:
        return None
    # A call context per distinct (frames, total_nframe[, thread]): by
    # frames object first (cheap), by value once per object.
    by_value = {}
    frames_index = {}
    for frames in {id(t[2]): t[2] for t in traces}.values():
        frames_index[id(frames)] = by_value.setdefault(frames, len(by_value))
    frames_list = list(by_value)
    contexts = {}
    if lengths in ({5}, {6}):
        if set(map(type, map(itemgetter(4), traces))) - {int}:
            raise TypeError("cannot dump snapshot: trace thread holds "
                            "values that are not int")
        keys = zip(map(frames_index.__getitem__, map(id, map(
            itemgetter(2), traces))), *(map(itemgetter(i), traces)
                                        for i in range(3, max(lengths))))
    else:
        keys = zip(map(frames_index.__getitem__, map(id, map(
            itemgetter(2), traces))), map(itemgetter(3), traces))
    indexes = array('I', [contexts.setdefault(key, len(contexts))
                          for key in keys])
    with_threads = lengths in ({5}, {6})
    return _Columns([frames_list[key[0]] for key in contexts],
                    [key[1] for key in contexts],
                    [key[2] for key in contexts] if with_threads else None,
                    domains, sizes, indexes, None,
                    [key[3] for key in contexts] if lengths == {6}
                    else None)


def _little_endian(column, typecode):
    """The bytes of *column* (a buffer of *typecode* items), little-endian."""
    if sys.byteorder == 'little':
        return memoryview(column).cast('B')
    swapped = array(typecode, column)
    swapped.byteswap()
    return swapped.tobytes()


def _encode_v2(snapshot, columns):
    import json
    import zlib
    from _tracemalloc import _frame_table, _narrow_columns

    # Each distinct (filename, lineno) numbered once, and the call contexts
    # as JSON arrays of those numbers, in C: a program has few distinct
    # frames, but its call contexts hold up to traceback_limit frames each,
    # and a loop over them in Python was most of dump()'s time.
    frames_list = columns.frames
    if type(frames_list) is not list:
        frames_list = list(frames_list)
    distinct, tracebacks_text = _frame_table(frames_list)
    filename_index = {}
    flat_frames = []
    native = []
    for number, frame in enumerate(distinct):
        flat_frames.append(filename_index.setdefault(frame[0],
                                                     len(filename_index)))
        flat_frames.append(frame[1])
        if len(frame) > 2:
            # A C frame (native frames): its function and library, as
            # indexes into the same string table.
            native.append(number)
            native.append(filename_index.setdefault(frame[2],
                                                    len(filename_index)))
            native.append(filename_index.setdefault(frame[3],
                                                    len(filename_index)))
    total_nframe = list(columns.total_nframe)
    threads = None if columns.threads is None else list(columns.threads)
    try:
        _check_column("total_nframe", total_nframe, {int, type(None)})
        if threads is not None:
            _check_column("thread", threads, {int})
    except _SnapshotError as exc:
        raise TypeError(f"cannot dump snapshot: trace {exc}") from None

    count = len(columns)
    document = {
        "traceback_limit": snapshot.traceback_limit,
        "filenames": list(filename_index),
        "frames": flat_frames,
        "total_nframe": total_nframe,
        "threads": threads,
        "count": count,
        "attributes": _encode_attributes(snapshot),
    }
    # Usually every domain is 0 and every size fits in 4 bytes: narrower
    # columns are less for zlib to compress, which is most of dump()'s
    # time.
    zero_domains, narrow_sizes = _narrow_columns(columns.domains,
                                                 columns.sizes)
    if zero_domains:
        document["domains"] = "zero"
        domains = b""
    else:
        domains = _little_endian(columns.domains, 'I')
    if columns.weights is not None:
        document["weights"] = [float(weight) for weight in columns.weights]
    if native:
        document["native_frames"] = native
    if getattr(columns, 'labels', None) is not None:
        labels = list(columns.labels)
        try:
            _check_column("label", labels, {str, type(None)})
        except _SnapshotError as exc:
            raise TypeError(f"cannot dump snapshot: trace {exc}") from None
        document["labels"] = labels
    if narrow_sizes is not None:
        document["size_bytes"] = 4
        sizes = narrow_sizes
    else:
        sizes = _little_endian(columns.sizes, 'Q')
    # ensure_ascii keeps undecodable filenames (lone surrogates) intact.
    # The call contexts' array, already JSON, goes in as the last member.
    text = json.dumps(document, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=True).encode("ascii")
    text = b"".join((text[:-1], b',"tracebacks":', tracebacks_text, b"}"))
    compressor = zlib.compressobj(1)
    parts = [len(text).to_bytes(8, "little"), text, domains, sizes,
             _little_endian(columns.indexes, 'I')]
    expanded = sum(map(len, (memoryview(part).cast('B') for part in parts)))
    compressed = [compressor.compress(part) for part in parts]
    compressed.append(compressor.flush())
    header = (_SNAPSHOT_MAGIC + b"version 2\n"
              + expanded.to_bytes(8, "little"))
    return header + b"".join(compressed)


def _encode_v1(snapshot):
    import json
    import zlib

    # A list for the time of the call: reading _traces would make it the
    # snapshot's only copy of the traces.
    traces = list(snapshot.traces._raw())
    lengths = _check_traces(traces)

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
    checks = [("domain", {int}), ("size", {int}),
              ("total_nframe", {int, type(None)})]
    if lengths in ({5}, {6}):
        columns["thread"] = list(map(itemgetter(4), traces))
        checks.append(("thread", {int}))
    if lengths == {6}:
        columns["label"] = list(map(itemgetter(5), traces))
        checks.append(("label", {str, type(None)}))
    for name, allowed in checks:
        try:
            _check_column(name, columns[name], allowed)
        except _SnapshotError as exc:
            raise TypeError(f"cannot dump snapshot: trace {exc}") from None

    attributes = _encode_attributes(snapshot)

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
    header = _SNAPSHOT_MAGIC + b"version 1\n"
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
    if version not in _READABLE_VERSIONS:
        raise _SnapshotError(f"unsupported snapshot format version "
                             f"{version} (this Python reads versions "
                             f"1 and 2)")
    return version, end + 1


def _expand(compressed, limit, what):
    """Decompress *compressed* a chunk at a time, refusing to expand it
    beyond *limit* bytes (*what* says why there is a limit)."""
    import zlib

    decompressor = zlib.decompressobj()
    chunks = []
    size = 0
    try:
        while True:
            chunk = decompressor.decompress(compressed, _CHUNK_SIZE)
            compressed = decompressor.unconsumed_tail
            size += len(chunk)
            if size > limit:
                raise _SnapshotError(f"the payload expands beyond {what}: "
                                     f"refused")
            chunks.append(chunk)
            if decompressor.eof or not (chunk or compressed):
                break
    except zlib.error as exc:
        raise _SnapshotError(f"corrupt payload ({exc})") from None
    payload = b"".join(chunks)
    del chunks
    if not decompressor.eof:
        raise _SnapshotError("the file is truncated (incomplete payload)")
    if decompressor.unused_data:
        raise _SnapshotError("corrupt payload (trailing data)")
    return payload


# Bounds on what a document holds per byte, checked before it is parsed.
# JSON objects cost memory per byte of text: ints about 10 bytes, but an
# empty container ("[]," or "{},") 20 and an empty string 19, which at
# 256 times expansion would be 5,000 bytes per byte of file.  What dump()
# writes has at least 5 bytes per container (a call context's list of
# frames with its total_nframe, "[3],1," in version 2, "[3,12]," in
# version 1) and 8 per string (filenames and names are longer, with their
# quotes and comma), plus a few of each for the layout.
_BYTES_PER_CONTAINER = 5
_BYTES_PER_STRING = 8
_LAYOUT_SLACK = 1024


def _parse_json(text):
    import json

    containers = text.count(b"[") + text.count(b"{")
    if containers > len(text) // _BYTES_PER_CONTAINER + _LAYOUT_SLACK:
        raise _SnapshotError("corrupt payload (more lists and objects than "
                             "a snapshot has)")
    if text.count(b'"') // 2 > len(text) // _BYTES_PER_STRING + _LAYOUT_SLACK:
        raise _SnapshotError("corrupt payload (more strings than a snapshot "
                             "has)")
    try:
        return json.loads(text.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise _SnapshotError(f"corrupt payload ({exc})") from None


def decode(cls, data):
    """Build a *cls* instance from the bytes of a snapshot file."""
    version, offset = _parse_header(data)
    if version == 1:
        # dump() compressed with zlib level 1, which never shrinks JSON
        # more than about 230 times: a payload that expands more than
        # _MAX_EXPANSION times was not written by dump().
        compressed = data[offset:]
        payload = _expand(compressed,
                          _MAX_EXPANSION * len(compressed) + _EXPANSION_SLACK,
                          f"{_MAX_EXPANSION} times its compressed size (a "
                          f"decompression bomb?)")
        document = _parse_json(payload)
        try:
            traces, traceback_limit, attributes = _decode_document(document)
        except _SnapshotError as exc:
            raise _SnapshotError(f"corrupt payload ({exc})") from None
        traces = _Traces(traces)
    else:
        traces, traceback_limit, attributes = _decode_v2(data, offset)

    # An attribute named as a method (statistics, dump) or any other
    # descriptor of the class would hide it: the snapshot would load and
    # then fail.  A plain class-level value (a subclass's default) may be
    # set per instance.
    for name in attributes:
        try:
            shadowed = getattr(cls, name)
        except AttributeError:
            continue
        if callable(shadowed) or hasattr(type(shadowed), '__get__'):
            raise _SnapshotError(f"the attribute {name!r} would hide "
                                 f"{cls.__name__}.{name}")

    # Like unpickling, restore the state without calling __init__(), so
    # that subclasses with another constructor signature load too.
    snapshot = cls.__new__(cls)
    snapshot.traces = traces
    snapshot.traceback_limit = traceback_limit
    vars(snapshot).update(attributes)
    return snapshot


def _decode_v2(data, offset):
    if len(data) - offset < 8:
        raise _SnapshotError("the file is truncated (incomplete header)")
    declared = int.from_bytes(data[offset:offset + 8], "little")
    compressed = memoryview(data)[offset + 8:]
    # Refused before anything is expanded: no zlib stream expands more
    # than about 1032 times.
    if declared > _MAX_EXPANSION_V2 * len(compressed) + _EXPANSION_SLACK:
        raise _SnapshotError(
            f"the payload declares {declared} bytes, more than "
            f"{_MAX_EXPANSION_V2} times its compressed size (a "
            f"decompression bomb?): refused")
    payload = _expand(compressed, declared, "its declared size")
    if len(payload) != declared:
        raise _SnapshotError("corrupt payload (shorter than declared)")
    if len(payload) < 8:
        raise _SnapshotError("corrupt payload (no document)")
    length = int.from_bytes(payload[:8], "little")
    if length > len(payload) - 8:
        raise _SnapshotError("corrupt payload (document length)")
    # The document is JSON, which dump() compresses at zlib level 1 (at
    # most about 230 times): the columns' larger bound must not let it
    # expand into millions of objects per KiB of file.
    if length > _MAX_EXPANSION * len(compressed) + _EXPANSION_SLACK:
        raise _SnapshotError(f"the document expands beyond "
                             f"{_MAX_EXPANSION} times the compressed "
                             f"payload (a decompression bomb?): refused")
    document = _parse_json(payload[8:8 + length])
    try:
        return _decode_document_v2(document, memoryview(payload)[8 + length:])
    except _SnapshotError as exc:
        raise _SnapshotError(f"corrupt payload ({exc})") from None


def _read_column(typecode, data):
    column = array(typecode)
    column.frombytes(data)
    if sys.byteorder != 'little':
        column.byteswap()
    return column


def _decode_document_v2(document, columns_data):
    """Validate a version 2 document and its columns; return (traces,
    traceback_limit, attributes), traces a _Traces over _Columns."""
    expected_keys = {"traceback_limit", "filenames", "frames", "tracebacks",
                     "total_nframe", "threads", "count", "attributes"}
    optional_keys = {"domains", "size_bytes", "weights", "labels",
                     "native_frames"}
    if (type(document) is not dict or not expected_keys <= set(document)
            or set(document) - expected_keys - optional_keys):
        raise _SnapshotError("unexpected document layout")
    # The columns' widths: a domain column of zeros may be left out, and
    # sizes may take 4 bytes each.
    domain_bytes = 4
    if "domains" in document:
        if document["domains"] != "zero":
            raise _SnapshotError("domains is not \"zero\"")
        domain_bytes = 0
    size_bytes = document.get("size_bytes", 8)
    if type(size_bytes) is not int or size_bytes not in (4, 8):
        raise _SnapshotError("size_bytes is not 4 or 8")
    traceback_limit = document["traceback_limit"]
    if type(traceback_limit) is not int or traceback_limit < 0:
        raise _SnapshotError("traceback_limit is not a non-negative "
                             "integer")
    filenames = document["filenames"]
    _check_column("filenames", filenames, {str})

    frames_table = list(_frame_pairs("frames", document["frames"],
                                     filenames))
    native = document.get("native_frames")
    if native is not None:
        _check_column("native_frames", native, {int})
        if len(native) % 3:
            raise _SnapshotError("native_frames length is not a multiple "
                                 "of 3")
        _check_indexes("frame", native[0::3], len(frames_table))
        _check_indexes("filename", native[1::3], len(filenames))
        _check_indexes("filename", native[2::3], len(filenames))
        for number, function, library in zip(native[0::3], native[1::3],
                                             native[2::3]):
            filename, lineno = frames_table[number][:2]
            frames_table[number] = (filename, lineno, filenames[function],
                                    filenames[library])

    tracebacks = document["tracebacks"]
    if type(tracebacks) is not list:
        raise _SnapshotError("tracebacks is not a list")
    frames_list = []
    for frame_ids in tracebacks:
        _check_column("traceback", frame_ids, {int})
        _check_indexes("frame", frame_ids, len(frames_table))
        frames_list.append(tuple(map(frames_table.__getitem__, frame_ids)))

    total_nframe = document["total_nframe"]
    _check_column("total_nframe", total_nframe, {int, type(None)})
    _check_non_negative("total_nframe", total_nframe)
    threads = document["threads"]
    if threads is not None:
        _check_column("threads", threads, {int})
        _check_non_negative("threads", threads)
    labels = document.get("labels")
    if labels is not None:
        _check_labels("labels", labels)
        if threads is None:
            raise _SnapshotError("labels without threads")
    if len(total_nframe) != len(tracebacks) or (
            threads is not None and len(threads) != len(tracebacks)) or (
            labels is not None and len(labels) != len(tracebacks)):
        raise _SnapshotError("per-traceback lists differ in length")

    count = document["count"]
    if type(count) is not int or count < 0:
        raise _SnapshotError("count is not a non-negative integer")
    # The declared count must match the data exactly, checked before the
    # columns are allocated.
    width = domain_bytes + size_bytes + 4
    if width * count != len(columns_data):
        raise _SnapshotError(f"{count} traces declared, but the columns "
                             f"hold {len(columns_data)} bytes")
    if domain_bytes:
        domains = _read_column('I', columns_data[:4 * count])
    else:
        domains = array('I', bytes(4 * count))
    start = domain_bytes * count
    end = start + size_bytes * count
    if size_bytes == 8:
        sizes = _read_column('Q', columns_data[start:end])
    else:
        sizes = array('Q', _read_column('I', columns_data[start:end]))
    indexes = _read_column('I', columns_data[end:])
    weights = document.get("weights")
    if weights is not None:
        if (type(weights) is not list or len(weights) != count
                or not all(type(weight) in (int, float)
                           and 0 < weight < float("inf")
                           for weight in weights)):
            raise _SnapshotError("weights is not a list of one positive "
                                 "number per trace")
        weights = array('d', weights)
        # An estimate (size times weight, one block times weight) must be
        # a byte count that an int64 holds, as pprof writes it.
        if any(weight >= 2.0 ** 63 or size * weight >= 2.0 ** 63
               for size, weight in zip(sizes, weights)):
            raise _SnapshotError("a weight makes an estimate out of range")
    columns = _Columns(frames_list, total_nframe, threads, domains, sizes,
                       indexes, weights, labels)
    try:
        # Checks every index (and keeps the totals for statistics()).
        columns.context_totals()
    except ValueError:
        raise _SnapshotError("traceback index out of range") from None
    return (_Traces._from_columns(columns), traceback_limit,
            _decode_attributes(document["attributes"]))


def _frame_pairs(name, flat, filenames):
    """The (filename, lineno) tuples of *flat*, a list of (filename index,
    lineno) pairs laid end to end, checked."""
    _check_column(name, flat, {int})
    if len(flat) % 2:
        raise _SnapshotError(f"odd {name} length")
    filename_ids = flat[0::2]
    _check_indexes("filename", filename_ids, len(filenames))
    _check_non_negative(f"{name} line number", flat[1::2])
    return zip(map(filenames.__getitem__, filename_ids), flat[1::2])


# What the interpreter can hold: a line number is an unsigned int in a
# frame (upstream's too), total_nframe a C int, a thread id an unsigned
# long.
_LIMITS = {"total_nframe": 2 ** 31, "threads": 2 ** 64, "thread": 2 ** 64}
_LINENO_LIMIT = 2 ** 32
# The largest sampling interval of the engine (_PyTraceMalloc_SAMPLE_MAX).
_SAMPLE_MAX = 2 ** 48


def _check_non_negative(name, values):
    """Refuse a negative int in *values* (None items are skipped): line
    numbers, total_nframe and thread ids are never negative; nor above
    what the interpreter holds (_LIMITS), which pprof's int64 fields could
    not take either."""
    numbers = [value for value in values if value is not None]
    if numbers and min(numbers) < 0:
        raise _SnapshotError(f"negative {name}")
    limit = _LIMITS.get(name, _LINENO_LIMIT)
    if numbers and max(numbers) >= limit:
        raise _SnapshotError(f"{name} out of range (at least {limit})")


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
    if type(traceback_limit) is not int or traceback_limit < 0:
        raise _SnapshotError("traceback_limit is not a non-negative "
                             "integer")

    filenames = document["filenames"]
    _check_column("filenames", filenames, {str})

    tracebacks = document["tracebacks"]
    if type(tracebacks) is not list:
        raise _SnapshotError("tracebacks is not a list")
    frames_table = [tuple(_frame_pairs("traceback", flat, filenames))
                    for flat in tracebacks]

    columns = document["traces"]
    names = ("domain", "size", "traceback", "total_nframe")
    if type(columns) is dict and "thread" in columns:
        names += ("thread",)
        if "label" in columns:
            names += ("label",)
    if type(columns) is not dict or set(columns) != set(names):
        raise _SnapshotError("unexpected traces layout")
    _check_column("domain", columns["domain"], {int})
    _check_column("size", columns["size"], {int})
    _check_column("traceback", columns["traceback"], {int})
    _check_column("total_nframe", columns["total_nframe"],
                  {int, type(None)})
    _check_non_negative("total_nframe", columns["total_nframe"])
    if len({len(columns[name]) for name in names}) != 1:
        raise _SnapshotError("trace columns differ in length")
    traceback_ids = columns["traceback"]
    _check_indexes("traceback", traceback_ids, len(frames_table))
    # Traces of one call context share one frames tuple, as in a snapshot
    # taken from the engine.
    if "thread" in columns:
        _check_column("thread", columns["thread"], {int})
        _check_non_negative("thread", columns["thread"])
    if "label" in columns:
        _check_labels("label", columns["label"])
    traces = list(zip(columns["domain"], columns["size"],
                      map(frames_table.__getitem__, traceback_ids),
                      *(columns[name] for name in names[3:])))

    return traces, traceback_limit, _decode_attributes(
        document["attributes"])


def _decode_attributes(attributes):
    if type(attributes) is not dict:
        raise _SnapshotError("attributes is not an object")
    try:
        attributes = {name: _decode_value(value)
                      for name, value in attributes.items()}
    except RecursionError:
        raise _SnapshotError("attribute nested too deeply") from None
    if {'traces', 'traceback_limit'} & set(attributes):
        raise _SnapshotError("reserved attribute name")
    # Snapshot's methods use thread_names: files written before it existed
    # get an empty one, and a present one must be what __init__ makes.
    thread_names = attributes.setdefault("thread_names", {})
    if type(thread_names) is not dict or not all(
            type(key) is int and type(name) is str
            for key, name in thread_names.items()):
        raise _SnapshotError("thread_names is not a dict of int to str")
    # Statistics weigh the traces of a sampled snapshot by its interval.
    sample = attributes.setdefault("sample", None)
    if sample is not None and (type(sample) is not int or sample < 1):
        raise _SnapshotError("sample is not None or a positive integer")
    if sample is not None and sample > _SAMPLE_MAX:
        raise _SnapshotError(f"sample is above the largest interval "
                             f"that tracemalloc.start() takes "
                             f"({_SAMPLE_MAX})")
    return attributes


def write(filename, data):
    """Write *data* to *filename*: replace a regular file atomically, write
    anything else in place.

    A regular file, or a new path, is replaced through a temporary file in
    the same directory and a rename (write_atomically()).  A rename
    replaces the directory entry, not what it names: a device (/dev/null),
    a FIFO, a socket or a terminal would be replaced by a regular file (or,
    for /dev/stdout, fail), so those are opened and written in place as
    open(filename, 'wb') would.
    """
    path = _replaceable_path(filename)
    if path is not None:
        # A file that open(filename, 'wb') refuses (mode 0444 for a user
        # other than root, an immutable or append-only file) is refused
        # here too, with the error that open() gives: the rename would
        # replace it, although the directory allows it.
        # Opening for writing without O_TRUNC changes nothing in it.
        try:
            fd = os.open(filename, os.O_WRONLY | getattr(os, 'O_BINARY', 0)
                         | getattr(os, 'O_CLOEXEC', 0)
                         | getattr(os, 'O_NONBLOCK', 0))
        except FileNotFoundError:
            pass
        else:
            os.close(fd)
        if _replace(path, data):
            return
    # In place, as open(filename, 'wb') would: a device, a FIFO, or a file
    # that cannot be replaced (its directory is not writable, or a sticky
    # directory protects it) although it can be written.  The error, if
    # any, names *filename*, never a temporary file.
    with open(filename, 'wb') as fp:
        fp.write(data)


def _replaceable_path(filename):
    """The path of the regular file (or of the new file) that *filename*
    names, with symbolic links resolved; None if it must be written in
    place."""
    try:
        target = os.stat(filename)
    except FileNotFoundError:
        target = None
    except OSError:
        # Unreachable or not a file: open() says why.
        return None
    path = os.path.realpath(filename)
    if target is None:
        return path
    if not stat.S_ISREG(target.st_mode):
        return None
    # The resolved name must lead to the same file.  It does not for a
    # descriptor link (/dev/stdout, /dev/fd/N, /proc/PID/fd/N) of a deleted
    # file, which realpath() cannot follow.
    try:
        resolved = os.lstat(path)
    except OSError:
        return None
    if not os.path.samestat(target, resolved):
        return None
    # Even when it names a regular file, a descriptor link stands for the
    # file that the process has open (a redirected standard output): a
    # rename would leave the descriptor on the old file, so write through
    # the link, in place.
    if _through_descriptor_link(filename):
        return None
    return path


def _through_descriptor_link(filename):
    """Does resolving *filename* pass through a directory of open file
    descriptors (/proc/PID/fd, which /dev/fd and /dev/stdout lead to)?"""
    path = os.path.abspath(os.fsdecode(os.fspath(filename)))
    # A symbolic link loop ends in an error in os.stat() before this is
    # called; the bound only guards against a changing file system.
    for _ in range(64):
        directory = os.path.realpath(os.path.dirname(path))
        if _is_descriptor_directory(directory):
            return True
        path = os.path.join(directory, os.path.basename(path))
        try:
            target = os.readlink(path)
        except OSError:
            return False
        path = os.path.join(directory, target)
    return False


def _is_descriptor_directory(directory):
    # Linux: /proc/PID/fd or /proc/PID/task/TID/fd; the BSDs and macOS:
    # /dev/fd itself.
    if directory == '/dev/fd':
        return True
    parts = directory.split(os.sep)
    return len(parts) >= 4 and parts[1] == 'proc' and parts[-1] == 'fd'


def write_atomically(filename, data):
    """Write *data* to *filename* through a temporary file and a rename.

    Raise OSError if the temporary file cannot be created or renamed.
    """
    if not _replace(filename, data, fail=True):
        # Another user's file, whose owner a rename would change.
        with open(filename, 'wb') as fp:
            fp.write(data)


def _replace(filename, data, fail=False):
    """Write *data* to *filename* through a temporary file and a rename.
    Return False (leaving nothing behind) if the temporary file cannot be
    created in *filename*'s directory or renamed over *filename* and
    *fail* is false, or cannot be given the owner and group of the file it
    replaces (whatever *fail*); True once written.

    The rename gives *filename* a new file: the other names of a hard-linked
    file keep the previous content.

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
        except OSError:
            if fail:
                raise
            return False
    try:
        with open(fd, 'wb') as fp:
            fp.write(data)
            fp.flush()
            os.fsync(fp.fileno())
        try:
            previous = os.stat(path)
        except OSError:
            previous = None
        if previous is not None:
            # Keep the owner and group of the file being replaced, as
            # open(filename, 'wb') would: a baseline that root rewrites
            # stays its owner's.  When they cannot be kept (another user's
            # file, not root), the file is written in place instead.
            created = os.stat(temp_path)
            if ((previous.st_uid, previous.st_gid)
                    != (created.st_uid, created.st_gid)):
                try:
                    os.chown(temp_path, previous.st_uid, previous.st_gid)
                except OSError:
                    _unlink(temp_path)
                    return False
            # Keep the permissions of the file being replaced (after the
            # chown, which may clear the set-user-ID bits).
            try:
                os.chmod(temp_path, previous.st_mode & 0o7777)
            except OSError:
                pass
        try:
            os.replace(temp_path, path)
        except OSError:
            if fail:
                raise
            _unlink(temp_path)
            return False
    except BaseException:
        _unlink(temp_path)
        raise
    return True


def _unlink(path):
    try:
        os.unlink(path)
    except OSError:
        pass
