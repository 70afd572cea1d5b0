"""icefloe's compiled manifest decoder: one data manifest's live entries as Arrow columns.

Runs on the enumerator (planning), on any thread. Implements the contract of
``icefloe.enumerator.columnar.decode_manifest`` (issue 31): :func:`decode_manifest`
returns, in file order, one row per entry that
``manifest_decoder.iter_live_data_files(content, manifest, added_only=added_only)``
yields for a manifest with ``sequence_number == manifest_seq`` and
``added_snapshot_id == added_by``, with the columns :data:`BASE_COLUMNS` and, for each
``k`` in ``stats_ids``, ``value_count_k``, ``null_count_k``, ``nan_count_k`` (int64) and
``lower_k``, ``upper_k`` (binary), null where the stats map is null / absent or has no
key ``k``. ``partition`` is the raw Avro bytes of the entry's partition record.

How: the file's writer schema (its header) is compiled once (cached per schema) into a
flat program of Avro types, with the fields planning needs marked by field id; the C
core (``_core.c``) walks it over every entry with the GIL released, steps over all other
fields (and over the stats maps unless ``stats_ids`` asks for them), inflates deflate
blocks with zlib, and fills Arrow buffers, wrapped here with ``pa.Array.from_buffers``:
no Python object per entry. Calls from several threads at once are safe and decode in
parallel. Importing this package fails with ImportError where the extension was not
built (no compiler at install time): planning then uses the pure-Python decoder.

Also :func:`split_ids`: icefloe's split ids for many splits at once, byte-identical to
:func:`icefloe.splits.split.split_id_maker`.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import numpy as np
import pyarrow as pa

from icefloe.enumerator._native_manifest import _core
from icefloe.enumerator.manifest_columns import batch_schema

IMPLEMENTATION = "c"

# node kinds and captures: keep in step with _core.c
(K_NULL, K_BOOL, K_LONG, K_FLOAT, K_DOUBLE, K_BYTES, K_FIXED, K_ARRAY, K_MAP, K_UNION,
 K_RECORD) = range(11)
(C_NONE, C_STATUS, C_SNAPSHOT, C_SEQ, C_PATH, C_FORMAT, C_PARTITION, C_RECORDS, C_SIZE,
 C_SPLITS, C_VC, C_NC, C_NAN, C_LOWER, C_UPPER) = range(15)

_PRIMITIVES = {"null": K_NULL, "boolean": K_BOOL, "int": K_LONG, "long": K_LONG,
               "float": K_FLOAT, "double": K_DOUBLE, "bytes": K_BYTES, "string": K_BYTES}
_ENTRY_CAPTURES = {0: C_STATUS, 1: C_SNAPSHOT, 3: C_SEQ}
_DATA_FILE_ID = 2
_FILE_CAPTURES = {100: C_PATH, 101: C_FORMAT, 102: C_PARTITION, 103: C_RECORDS,
                  104: C_SIZE, 132: C_SPLITS}
_STATS_CAPTURES = {109: C_VC, 110: C_NC, 137: C_NAN, 125: C_LOWER, 128: C_UPPER}
_REQUIRED = {C_STATUS: "status", C_PATH: "file_path", C_FORMAT: "file_format",
             C_RECORDS: "record_count", C_SIZE: "file_size_in_bytes"}
_MAGIC = b"Obj\x01"

BASE_COLUMNS = tuple(batch_schema(()))
"""The columns before the stats columns (the contract's table: one definition,
:func:`icefloe.enumerator.manifest_columns.batch_schema`, for both decoders)."""


class _Compiler:
    """A writer schema (parsed Avro JSON) as the C core's program: int32 nodes; a record
    node is ``[K_RECORD, n, (type node, capture) * n]``, an array ``[K_ARRAY, item, hint]``
    (:meth:`array_hint`), a
    map ``[K_MAP, value]``, a union ``[K_UNION, n, branch nodes]``, a fixed
    ``[K_FIXED, size]``, any other ``[kind]``."""

    def __init__(self, with_stats: bool) -> None:
        self.with_stats = with_stats
        self.program: list[int] = []
        self.named: dict[str, tuple[int, Any]] = {}
        self.found: set[int] = set()

    def emit(self, words: list[int]) -> int:
        at = len(self.program)
        self.program += words
        return at

    def node(self, schema: Any, namespace: str = "", level: str = "") -> int:
        """The program node of one Avro type (``level``: "entry" for manifest_entry,
        "file" for its data_file, where fields are captured by field id)."""
        if isinstance(schema, str):
            if schema in _PRIMITIVES:
                return self.emit([_PRIMITIVES[schema]])
            for name in (schema, f"{namespace}.{schema}"):
                if name in self.named:
                    return self.named[name][0]
            raise ValueError(f"manifest schema: unknown Avro type {schema!r}")
        if isinstance(schema, list):
            branches = [self.node(branch, namespace) for branch in schema]
            return self.emit([K_UNION, len(branches), *branches])
        if not isinstance(schema, dict):
            raise ValueError(f"manifest schema: bad Avro type {schema!r}")
        kind = schema.get("type")
        if kind == "record":
            namespace = schema.get("namespace", namespace)
            words: list[int] = []
            for field in schema["fields"]:
                field_id = field.get("field-id")
                capture = C_NONE
                child_level = ""
                if level == "entry":
                    capture = _ENTRY_CAPTURES.get(field_id, C_NONE)
                    child_level = "file" if field_id == _DATA_FILE_ID else ""
                elif level == "file":
                    capture = _FILE_CAPTURES.get(field_id, C_NONE)
                    if self.with_stats:
                        capture = _STATS_CAPTURES.get(field_id, capture)
                at = self.node(field["type"], namespace, child_level)
                if capture:
                    self.check(capture, at, field)
                    self.found.add(capture)
                words += [at, capture]
            at = self.emit([K_RECORD, len(schema["fields"]), *words])
            self.name(schema, namespace, at)
            return at
        if kind == "enum":
            at = self.emit([K_LONG])
            self.name(schema, namespace, at)
            return at
        if kind == "fixed":
            at = self.emit([K_FIXED, int(schema["size"])])
            self.name(schema, namespace, at)
            return at
        if kind == "array":
            item = self.node(schema["items"], namespace)
            return self.emit([K_ARRAY, item, self.array_hint(item)])
        if kind == "map":
            return self.emit([K_MAP, self.node(schema["values"], namespace)])
        return self.node(kind, namespace)  # a primitive with attributes (logicalType ...)

    def array_hint(self, item: int) -> int:
        """How the C core steps over the items of an array: ``m > 0``: each is m ints /
        longs; ``-1``: an int then bytes (Iceberg's int -> bytes map); 0: walk them."""
        words = self.program
        if words[item] == K_LONG:
            return 1
        if words[item] != K_RECORD:
            return 0
        kinds = [words[words[item + 2 + 2 * i]] for i in range(words[item + 1])]
        if kinds and all(kind == K_LONG for kind in kinds):
            return len(kinds)
        return -1 if kinds == [K_LONG, K_BYTES] else 0

    def name(self, schema: dict[str, Any], namespace: str, at: int) -> None:
        name = schema.get("name", "")
        self.named[name] = (at, schema)
        if "." not in name and namespace:
            self.named[f"{namespace}.{name}"] = (at, schema)

    def value_kinds(self, at: int) -> list[int]:
        """The kinds a field's value can have (its union's non-null branches)."""
        if self.program[at] == K_UNION:
            return [self.program[b] for b in self.program[at + 2:at + 2 + self.program[at + 1]]
                    if self.program[b] != K_NULL]
        return [self.program[at]]

    def check(self, capture: int, at: int, field: dict[str, Any]) -> None:
        """The C core reads a captured field as its shape: refuse any other."""
        kinds = self.value_kinds(at)
        if capture in (C_PATH, C_FORMAT):
            ok = kinds == [K_BYTES]
        elif capture == C_PARTITION:
            ok = kinds == [K_RECORD]
        elif capture in (C_SPLITS, C_VC, C_NC, C_NAN, C_LOWER, C_UPPER):
            array = at if self.program[at] == K_ARRAY else next(
                (b for b in self.program[at + 2:at + 2 + self.program[at + 1]]
                 if self.program[b] == K_ARRAY), -1) if self.program[at] == K_UNION else -1
            ok = kinds == [K_ARRAY]
            if ok and capture == C_SPLITS:
                ok = self.program[self.program[array + 1]] == K_LONG
            elif ok:
                item = self.program[array + 1]
                want = K_BYTES if capture in (C_LOWER, C_UPPER) else K_LONG
                ok = (self.program[item] == K_RECORD and self.program[item + 1] == 2
                      and self.program[self.program[item + 2]] == K_LONG
                      and self.program[self.program[item + 4]] == want)
        else:
            ok = kinds == [K_LONG]
        if not ok:
            raise ValueError(f"manifest schema: field {field.get('name')!r} (id "
                             f"{field.get('field-id')}) has an unexpected type "
                             f"{json.dumps(field.get('type'))[:200]}")


@lru_cache(maxsize=64)
def _program(avro_schema: str, with_stats: bool) -> tuple[bytes, int]:
    """The C core's program of one writer schema and its root node (cached: a table's
    manifests share a few schemas)."""
    compiler = _Compiler(with_stats)
    try:
        root = compiler.node(json.loads(avro_schema), "", "entry")
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        raise ValueError(f"not a manifest: a malformed Avro schema ({exc!r})") from exc
    missing = [name for capture, name in _REQUIRED.items() if capture not in compiler.found]
    if missing:
        raise ValueError(f"not a data manifest: its entries have no {', '.join(missing)}")
    return np.asarray(compiler.program, dtype=np.int32).tobytes(), root


def _long_bytes(value: int) -> bytes:
    """One Avro long (zigzag varint)."""
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _reframe(content: bytes, sync: bytes) -> bytes:
    """The blocks of a manifest whose codec the C core lacks (bzip2, snappy, zstandard),
    decompressed by PyIceberg's codec and framed again uncompressed."""
    from icefloe.enumerator.manifest_decoder import avro_blocks, open_avro

    decoder, header, decompress = open_avro(content)
    parts = []
    try:
        for count, data in avro_blocks(decoder, header.sync, decompress):
            parts += [_long_bytes(count), _long_bytes(len(data)), data, sync]
    except (ValueError, EOFError):
        raise
    except Exception as exc:  # the codec's own error type (zstandard, snappy, bz2)
        raise ValueError(f"a corrupt compressed block: {exc}") from exc
    return b"".join(parts)


def _buf(data: bytes) -> pa.Buffer:
    return pa.py_buffer(data)


def decode_manifest(content: bytes, *, manifest_seq: int, added_by: int | None,
                    added_only: bool, stats_ids: tuple[int, ...]) -> pa.RecordBatch:
    """The live entries of one data manifest file's bytes as a record batch (the module
    contract). Safe to call from several threads at once; the decoding releases the GIL.

    Raises:
        ValueError: not an Avro file, an unknown codec or status, a bad sync marker, a
            schema that is not a data manifest's.
        EOFError: the bytes end inside the header or a block.
    """
    magic, meta, sync, offset = _core.header(content)
    if magic != _MAGIC:  # checked by header() too
        raise ValueError(f"not an Avro file (magic {magic!r})")
    codec = meta.get("avro.codec", b"gzip").decode()  # PyIceberg's default: refused
    if "avro.schema" not in meta:
        raise ValueError("not a manifest: its Avro header has no avro.schema")
    schema = meta["avro.schema"].decode()
    if codec not in ("null", "deflate"):
        from pyiceberg.avro.codecs import KNOWN_CODECS

        if codec not in KNOWN_CODECS:
            raise ValueError(f"Unsupported codec: {codec}")
        content, offset, codec = _reframe(content, sync), 0, "null"
    program, root = _program(schema, bool(stats_ids))
    rows, buffers = _core.decode(content, offset, sync, codec == "deflate", program, root,
                                 manifest_seq, added_by, added_only, stats_ids)
    return _batch(rows, buffers, tuple(stats_ids))


@lru_cache(maxsize=256)
def _schema(stats_ids: tuple[int, ...]) -> pa.Schema:
    """The batch's schema: :data:`BASE_COLUMNS`, then the stats columns of ``stats_ids``."""
    return batch_schema(stats_ids)


_SPLITS_TYPE = pa.list_(pa.int64())


def _batch(n: int, raw: list[bytes | None], stats_ids: tuple[int, ...]) -> pa.RecordBatch:
    """The record batch of the C core's buffers (order: ``decode`` in _core.c)."""
    b = [None if x is None else pa.py_buffer(x) for x in raw]
    string, binary, int64 = pa.string(), pa.binary(), pa.int64()
    from_buffers = pa.Array.from_buffers
    arrays = [
        from_buffers(string, n, [None, b[1], b[2]]),
        from_buffers(string, n, [None, b[4], b[5]]),
        from_buffers(binary, n, [None, b[7], b[8]]),
        from_buffers(int64, n, [None, b[9]]),
        from_buffers(int64, n, [None, b[10]]),
        from_buffers(_SPLITS_TYPE, n, [b[11], b[12]],
                     children=[from_buffers(int64, len(raw[13] or b"") // 8, [None, b[13]])]),
        from_buffers(int64, n, [b[14], b[15]]),
    ]
    at = 16
    for _ in stats_ids:
        for _kind in range(3):  # value, null and NaN counts
            arrays.append(from_buffers(int64, n, [b[at], b[at + 1]]))
            at += 2
        for _kind in range(2):  # lower and upper bounds
            arrays.append(from_buffers(binary, n, [b[at], b[at + 1], b[at + 2]]))
            at += 3
    return pa.RecordBatch.from_arrays(arrays, schema=_schema(stats_ids))


def split_ids(snapshot_id: int, paths: pa.Array, path_index: np.ndarray, starts: np.ndarray,
              lengths: np.ndarray) -> pa.Array:
    """icefloe's split ids of n splits at once, as a ``pa.string()`` array: id ``i`` is
    ``split_id_maker(snapshot_id)(paths[path_index[i]], starts[i], lengths[i])`` byte
    for byte (``"<snapshot_id>-"`` and the hex blake2b, digest size 10, of
    ``"<snapshot_id>|<path>|<start>|<length>"``). ``paths``: a ``pa.string()`` array
    (e.g. the ``file_path`` column of :func:`decode_manifest`, no nulls); ``path_index``,
    ``starts``, ``lengths``: int64 arrays of n values. The hashing releases the GIL.

    Raises:
        ValueError: a path index out of range, arrays of different lengths.
    """
    if not pa.types.is_string(paths.type):
        raise ValueError(f"split_ids: paths must be a pa.string() array, not {paths.type}")
    if paths.null_count:
        raise ValueError("split_ids: a null path")
    offsets = pa.concat_arrays([paths]) if paths.offset else paths  # no slice offset
    _, off, data = offsets.buffers()
    off_bytes = off.to_pybytes()[:4 * (len(offsets) + 1)] if off is not None else b"\0" * 4
    ids = _core.split_ids(int(snapshot_id), off_bytes, data or b"",
                          np.ascontiguousarray(path_index, dtype=np.int64),
                          np.ascontiguousarray(starts, dtype=np.int64),
                          np.ascontiguousarray(lengths, dtype=np.int64))
    n = len(path_index)
    width = len(ids) // n if n else 0
    offs = np.arange(0, (n + 1) * width, width, dtype=np.int32)[:n + 1]
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offs),
                                                   pa.py_buffer(ids)])


__all__ = ["BASE_COLUMNS", "IMPLEMENTATION", "decode_manifest", "split_ids"]
