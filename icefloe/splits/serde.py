"""Versioned msgpack serialization of FileSplit (durable: used in checkpoints).

Layout: ``b"IFSP"`` magic, one version byte, then a msgpack array of the fields in
declaration order. Every version ever written stays readable (golden bytes under
``tests/splits/golden``). New fields are appended and get defaults when older bytes are
read. Versions: 1, the first; 2 appends ``first_row_id`` (Iceberg v3 row lineage); 3
appends ``changes``, ``change_ordinal`` and ``commit_timestamp_ms`` (changelog reads); 4
appends ``schema_id`` (a stream's schema after a change); 5 appends ``watermark_ms`` (event
time, ``watermarkColumn``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import uuid
from collections.abc import Callable
from typing import Any

import msgpack

from icefloe.errors import SplitFormatError
from icefloe.splits.split import ChangeFile, DeleteFileRef, FileSplit

MAGIC = b"IFSP"
CURRENT_VERSION = 5

_EXT_DECIMAL = 1
_EXT_UUID = 2
_EXT_DATE = 3
_EXT_DATETIME = 4


def _default(obj: Any) -> Any:
    if isinstance(obj, decimal.Decimal):
        return msgpack.ExtType(_EXT_DECIMAL, str(obj).encode())
    if isinstance(obj, uuid.UUID):
        return msgpack.ExtType(_EXT_UUID, obj.bytes)
    if isinstance(obj, dt.datetime):
        return msgpack.ExtType(_EXT_DATETIME, obj.isoformat().encode())
    if isinstance(obj, dt.date):
        return msgpack.ExtType(_EXT_DATE, obj.isoformat().encode())
    raise TypeError(f"cannot serialize {type(obj).__name__} in a split")


def _ext_hook(code: int, data: bytes) -> Any:
    if code == _EXT_DECIMAL:
        return decimal.Decimal(data.decode())
    if code == _EXT_UUID:
        return uuid.UUID(bytes=data)
    if code == _EXT_DATETIME:
        return dt.datetime.fromisoformat(data.decode())
    if code == _EXT_DATE:
        return dt.date.fromisoformat(data.decode())
    return msgpack.ExtType(code, data)


def pack_value(value: Any) -> bytes:
    """msgpack with icefloe's extension types (decimal, uuid, date, datetime)."""
    return msgpack.packb(value, default=_default, use_bin_type=True)


def unpack_value(data: bytes) -> Any:
    return msgpack.unpackb(data, ext_hook=_ext_hook, raw=False, strict_map_key=False)


def _deletes_to_list(deletes: tuple[DeleteFileRef, ...]) -> list[list[Any]]:
    return [[d.path, d.content, d.file_format, d.sequence_number, d.record_count, d.file_size,
             list(d.equality_ids), d.referenced_data_file, d.content_offset, d.content_size]
            for d in deletes]


def _deletes_from_list(deletes: list[list[Any]]) -> tuple[DeleteFileRef, ...]:
    return tuple(DeleteFileRef(d[0], d[1], d[2], d[3], d[4], d[5], tuple(d[6]), d[7], d[8], d[9])
                 for d in deletes)


def _split_to_list(split: FileSplit) -> list[Any]:
    return [
        split.split_id, split.file_path, split.file_format, split.start, split.length,
        split.record_count, split.file_size, split.file_record_count, split.spec_id,
        list(split.partition), split.snapshot_id, split.sequence_number, split.ordinal,
        _deletes_to_list(split.delete_files),
        split.resume_rows,
        split.first_row_id,
        [[c.kind, c.path, c.file_format, c.start, c.length, c.file_size, c.record_count,
          c.spec_id, list(c.partition), c.sequence_number, _deletes_to_list(c.deletes_before),
          _deletes_to_list(c.deletes_after)] for c in split.changes],
        split.change_ordinal,
        split.commit_timestamp_ms,
        split.schema_id,
        split.watermark_ms,
    ]


def _split_from_list_v1(fields: list[Any]) -> FileSplit:
    (split_id, path, fmt, start, length, records, size, file_records, spec_id, partition,
     snapshot_id, seq, ordinal, deletes, resume_rows) = fields
    return FileSplit(
        split_id=split_id, file_path=path, file_format=fmt, start=start, length=length,
        record_count=records, file_size=size, file_record_count=file_records, spec_id=spec_id,
        partition=tuple(partition), snapshot_id=snapshot_id, sequence_number=seq,
        ordinal=ordinal,
        delete_files=_deletes_from_list(deletes),
        resume_rows=resume_rows,
    )


def _split_from_list_v2(fields: list[Any]) -> FileSplit:
    *v1, first_row_id = fields
    if first_row_id is not None and not isinstance(first_row_id, int):
        raise TypeError(f"first_row_id {first_row_id!r} is not an integer")
    return dataclasses.replace(_split_from_list_v1(v1), first_row_id=first_row_id)


def _split_from_list_v3(fields: list[Any]) -> FileSplit:
    *v2, changes, change_ordinal, commit_timestamp_ms = fields
    if not isinstance(change_ordinal, int) or not isinstance(commit_timestamp_ms, int):
        raise TypeError(f"change ordinal / commit timestamp {change_ordinal!r}, "
                        f"{commit_timestamp_ms!r} are not integers")
    return dataclasses.replace(
        _split_from_list_v2(v2),
        changes=tuple(ChangeFile(c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], tuple(c[8]),
                                 c[9], _deletes_from_list(c[10]), _deletes_from_list(c[11]))
                      for c in changes),
        change_ordinal=change_ordinal, commit_timestamp_ms=commit_timestamp_ms)


def _split_from_list_v4(fields: list[Any]) -> FileSplit:
    *v3, schema_id = fields
    if schema_id is not None and (isinstance(schema_id, bool) or not isinstance(schema_id, int)):
        raise TypeError(f"schema_id {schema_id!r} is not an integer")
    return dataclasses.replace(_split_from_list_v3(v3), schema_id=schema_id)


def _split_from_list_v5(fields: list[Any]) -> FileSplit:
    *v4, watermark_ms = fields
    if watermark_ms is not None and (isinstance(watermark_ms, bool)
                                     or not isinstance(watermark_ms, int)):
        raise TypeError(f"watermark_ms {watermark_ms!r} is not an integer")
    return dataclasses.replace(_split_from_list_v4(v4), watermark_ms=watermark_ms)


_READERS: dict[int, Callable[[list[Any]], FileSplit]] = {
    1: _split_from_list_v1, 2: _split_from_list_v2, 3: _split_from_list_v3,
    4: _split_from_list_v4, 5: _split_from_list_v5,
}


def split_to_obj(split: FileSplit) -> list[Any]:
    """The current-version field list of a split (for embedding in other payloads)."""
    return [CURRENT_VERSION, _split_to_list(split)]


def split_from_obj(obj: Any) -> FileSplit:
    """Inverse of :func:`split_to_obj`, for any version ever written."""
    try:
        version, fields = obj
    except (TypeError, ValueError):
        raise SplitFormatError(f"not a split payload: {obj!r:.80}") from None
    reader = _READERS.get(version)
    if reader is None:
        raise SplitFormatError(
            f"split format version {version} is not readable by this icefloe (it reads "
            f"versions {sorted(_READERS)}); upgrade icefloe to read it"
        )
    try:
        return reader(fields)
    except (TypeError, ValueError, LookupError) as exc:  # LookupError: a short nested list
        raise SplitFormatError(f"corrupt split payload of version {version}: {exc}") from exc


def serialize_split(split: FileSplit) -> bytes:
    """Bytes of ``split`` in the newest format version."""
    return MAGIC + bytes([CURRENT_VERSION]) + pack_value(_split_to_list(split))


def deserialize_split(data: bytes) -> FileSplit:
    """Read split bytes of any version ever written.

    Raises:
        SplitFormatError: foreign bytes, an unknown (future) version, or corrupt payload.
    """
    if len(data) < len(MAGIC) + 1 or data[: len(MAGIC)] != MAGIC:
        raise SplitFormatError(
            f"not icefloe split bytes (expected magic {MAGIC!r}, got {bytes(data[:4])!r})"
        )
    version = data[len(MAGIC)]
    try:
        fields = unpack_value(data[len(MAGIC) + 1 :])
    except Exception as exc:
        raise SplitFormatError(f"corrupt split bytes of version {version}: {exc}") from exc
    return split_from_obj([version, fields])
