"""The Nessie REST API v2 payloads icefloe reads, as values: references, Iceberg table
content, commit-log entries and operations, and the parsing of their JSON (standard library
only). :mod:`icefloe.catalog.nessie_client` does the HTTP; this module holds what the bytes
mean, so each can be read (and tested) on its own.

Parsers raise :class:`~icefloe.errors.CatalogError` naming the server for a malformed payload,
and :class:`~icefloe.errors.InvalidOptionError` for a bad reference or key given by a user.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, cast

from icefloe.errors import CatalogError, InvalidOptionError

__all__ = [
    "IcebergTableContent",
    "LogEntry",
    "Operation",
    "Reference",
    "check_key",
    "encode_key",
    "format_key",
    "parse_iceberg",
    "parse_list",
    "parse_log_entry",
    "parse_ref",
    "parse_reference",
]

RefType = Literal["BRANCH", "TAG"]
OperationType = Literal["PUT", "DELETE", "UNMODIFIED"]

_HASH_RE = re.compile(r"^[0-9a-fA-F]{8,64}$")
_KEY_SEPARATOR_IN_ELEMENT = "\u001d"  # Nessie's legacy escape of '.' inside a key element


@dataclass(frozen=True)
class Reference:
    """A named Nessie reference: a branch or a tag and the commit hash it points at."""

    name: str
    type: RefType
    hash: str


@dataclass(frozen=True)
class IcebergTableContent:
    """Nessie ``ICEBERG_TABLE`` content: where the table metadata is, plus on-reference state.

    ``content_id`` is stable across renames and branches; a different id under the same key
    means the table was dropped and re-created. ``snapshot_id`` is -1 for a table without
    snapshots (Nessie's convention).
    """

    content_id: str
    metadata_location: str
    snapshot_id: int
    schema_id: int
    spec_id: int
    sort_order_id: int


@dataclass(frozen=True)
class Operation:
    """One operation of a commit as returned by the commit log (``fetch=ALL``).

    ``type`` is ``PUT``, ``DELETE`` or ``UNMODIFIED`` (Nessie's JSON calls the latter
    ``UNCHANGED``; servers do not persist it, so logs rarely carry it). ``content`` is set
    only for a PUT of an Iceberg table; ``content_type`` names the PUT content's Nessie type
    (``ICEBERG_TABLE``, ``NAMESPACE``, ``ICEBERG_VIEW``, ...) and is None otherwise.
    """

    type: OperationType
    key: tuple[str, ...]
    content: IcebergTableContent | None = None
    content_type: str | None = None


@dataclass(frozen=True)
class LogEntry:
    """One commit of a reference's history.

    ``parent_hash`` is the first parent (None only if the server omits it); ``commit_time``
    is timezone-aware, or None if the server omits it; ``operations`` is empty when the log
    was fetched without operations.
    """

    hash: str
    parent_hash: str | None
    message: str
    commit_time: datetime | None
    operations: tuple[Operation, ...] = ()


def parse_ref(ref: str) -> tuple[str, str | None]:
    """Split ``name`` or ``name@hash`` into ``(name, hash_or_None)``.

    Raises:
        InvalidOptionError: empty name, or a hash that is not 8-64 hex digits.
    """
    if not isinstance(ref, str) or not ref.strip():
        raise InvalidOptionError("ref", f"{ref!r} is not a reference; give 'name' or 'name@hash'")
    name, sep, hash_ = ref.partition("@")
    if not name:
        raise InvalidOptionError(
            "ref", f"{ref!r} has no branch or tag name; give 'name' or 'name@hash'"
        )
    if not sep:
        return name, None
    if not _HASH_RE.match(hash_):
        raise InvalidOptionError(
            "ref", f"{ref!r}: the part after '@' must be a commit hash of 8-64 hex digits"
        )
    return name, hash_.lower()


def format_key(key: tuple[str, ...]) -> str:
    """Human-readable form of a content key, for messages (``db.table``)."""
    return ".".join(key)


def encode_key(key: tuple[str, ...]) -> str:
    """Encode a content key for a URL path segment (Nessie's legacy representation).

    Elements are joined with ``.``; a ``.`` inside an element becomes U+001D; the result is
    percent-encoded as a single path segment.
    """
    joined = ".".join(e.replace(".", _KEY_SEPARATOR_IN_ELEMENT) for e in key)
    return urllib.parse.quote(joined, safe="")


def check_key(key: tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(key, str) or not key or not all(isinstance(e, str) and e for e in key):
        raise InvalidOptionError(
            "key", f"{key!r} is not a content key; give a non-empty tuple of non-empty strings"
        )
    return tuple(key)



# ---------------------------------------------------------------------- payloads


def parse_list(body: dict[str, Any], field: str, uri: str) -> list[Any]:
    value = body.get(field, [])
    if value is None:
        return []
    if not isinstance(value, list):
        raise CatalogError(f"Nessie at {uri} sent a malformed {field!r} (not a list)")
    return value


def parse_reference(raw: Any, uri: str) -> Reference:
    try:
        type_ = str(raw["type"]).upper()
        if type_ not in ("BRANCH", "TAG"):
            raise ValueError(type_)
        return Reference(name=str(raw["name"]), type=cast(RefType, type_), hash=str(raw["hash"]))
    except (TypeError, KeyError, ValueError) as err:
        raise CatalogError(f"Nessie at {uri} sent a malformed reference ({err!r})") from None


def parse_iceberg(raw: dict[str, Any], uri: str) -> IcebergTableContent:
    try:
        return IcebergTableContent(
            content_id=str(raw["id"]),
            metadata_location=str(raw["metadataLocation"]),
            snapshot_id=int(raw.get("snapshotId", -1)),
            schema_id=int(raw.get("schemaId", 0)),
            spec_id=int(raw.get("specId", 0)),
            sort_order_id=int(raw.get("sortOrderId", 0)),
        )
    except (TypeError, KeyError, ValueError) as err:
        raise CatalogError(
            f"Nessie at {uri} sent malformed ICEBERG_TABLE content ({err!r})"
        ) from None


def _parse_key(raw: Any) -> tuple[str, ...]:
    elements = raw.get("elements") if isinstance(raw, dict) else None
    if not isinstance(elements, list) or not elements:
        raise ValueError(f"bad content key {raw!r}")
    return tuple(str(e) for e in elements)


def _parse_operation(raw: dict[str, Any]) -> Operation:
    type_ = str(raw.get("type", "")).upper()
    key = _parse_key(raw.get("key"))
    if type_ == "PUT":
        content = raw.get("content")
        ctype = content.get("type") if isinstance(content, dict) else None
        iceberg = None
        if isinstance(content, dict) and ctype == "ICEBERG_TABLE":
            iceberg = parse_iceberg(content, "")
        return Operation("PUT", key, iceberg, str(ctype) if ctype else None)
    if type_ == "DELETE":
        return Operation("DELETE", key)
    if type_ in ("UNCHANGED", "UNMODIFIED"):
        return Operation("UNMODIFIED", key)
    raise ValueError(f"unknown operation type {type_!r}")


def _parse_time(value: Any) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(str(value))


def parse_log_entry(raw: Any, uri: str) -> LogEntry:
    try:
        meta = raw["commitMeta"]
        parent = raw.get("parentCommitHash")
        if parent is None:
            parents = meta.get("parentCommitHashes") or []
            parent = parents[0] if parents else None
        return LogEntry(
            hash=str(meta["hash"]),
            parent_hash=str(parent) if parent is not None else None,
            message=str(meta.get("message") or ""),
            commit_time=_parse_time(meta.get("commitTime")),
            operations=tuple(_parse_operation(op) for op in raw.get("operations") or ()),
        )
    except (TypeError, KeyError, ValueError, CatalogError) as err:
        raise CatalogError(f"Nessie at {uri} sent a malformed commit log entry ({err!r})") from None
