r"""The snapshot file format of Snapshot.dump() and Snapshot.load().

Layout (version 1):

    b"tracemalloc-snapshot\n"        magic line
    b"version 1\n"                   format version
    zlib-compressed UTF-8 JSON document:
    {
      "traceback_limit": int,
      "filenames": [str, ...],                  each filename stored once
      "tracebacks": [[file, line, ...], ...],   flat (filename index,
                                                 lineno) pairs, most
                                                 recent frame first
      "traces": {"domain": [int, ...],          one column per field,
                 "size": [int, ...],            all of the same length
                 "traceback": [int, ...],       (index into tracebacks)
                 "total_nframe": [int or null, ...],
                 "thread": [int, ...]},         only in snapshots taken
                                                 with threads=True
      "attributes": {name: value, ...}          extra snapshot attributes
    }

Attribute values use JSON scalars for None/bool/int/float/str and
[tag, payload] arrays for the containers and bytes (see _encode_value).

Everything is plain data validated on load: unlike pickle (the format of
standard CPython, which is refused), a crafted file can at worst be rejected
with ValueError, never run code.
"""

import os
from operator import itemgetter

from tracemalloc import _Traces

_SNAPSHOT_MAGIC = b"tracemalloc-snapshot\n"
_SNAPSHOT_VERSION = 1
# How long a version line may be before the file is considered garbage.
_MAX_VERSION_LINE = 64
_PICKLE_PROTO_OPCODE = b"\x80"
# Bounds of the compressed payload's expansion (see decode()).
_MAX_EXPANSION = 256
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


def encode(snapshot):
    """Return the bytes of a snapshot file for *snapshot*."""
    import json
    import zlib

    traces = snapshot.traces._traces
    lengths = set(map(len, traces))
    if traces and lengths != {4} and lengths != {5}:
        raise TypeError("cannot dump snapshot: traces must be "
                        "(domain, size, frames, total_nframe) tuples, "
                        "or all have the allocating thread as a fifth item")
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
    checks = [("domain", {int}), ("size", {int}),
              ("total_nframe", {int, type(None)})]
    if lengths == {5}:
        columns["thread"] = list(map(itemgetter(4), traces))
        checks.append(("thread", {int}))
    for name, allowed in checks:
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


def decode(cls, data):
    """Build a *cls* instance from the bytes of a snapshot file."""
    import json
    import zlib

    offset = _parse_header(data)

    # Expand the payload a chunk at a time, refusing a decompression bomb
    # before it is expanded: dump() compresses with zlib level 1, which
    # never shrinks data more than about 230 times, so a payload that
    # expands more than _MAX_EXPANSION times was not written by dump().
    compressed = data[offset:]
    limit = _MAX_EXPANSION * len(compressed) + _EXPANSION_SLACK
    decompressor = zlib.decompressobj()
    chunks = []
    size = 0
    try:
        while True:
            chunk = decompressor.decompress(compressed, _CHUNK_SIZE)
            compressed = decompressor.unconsumed_tail
            size += len(chunk)
            if size > limit:
                raise _SnapshotError(
                    f"the payload expands more than {_MAX_EXPANSION} times "
                    f"(a decompression bomb?): refused")
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
    if type(columns) is dict and "thread" in columns:
        names += ("thread",)
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
    if "thread" in columns:
        _check_column("thread", columns["thread"], {int})
    traces = list(zip(columns["domain"], columns["size"],
                      map(frames_table.__getitem__, traceback_ids),
                      *(columns[name] for name in names[3:])))

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
    # Snapshot's methods use thread_names: files written before it existed
    # get an empty one, and a present one must be what __init__ makes.
    thread_names = attributes.setdefault("thread_names", {})
    if type(thread_names) is not dict or not all(
            type(key) is int and type(name) is str
            for key, name in thread_names.items()):
        raise _SnapshotError("thread_names is not a dict of int to str")
    return traces, traceback_limit, attributes


def write_atomically(filename, data):
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
