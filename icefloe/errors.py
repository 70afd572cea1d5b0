"""icefloe's exceptions: one root, typed leaves, messages that say what to do.

The hierarchy::

    IcefloeError
    ├── InvalidOptionError (also ValueError)     an option's value, alias or combination
    ├── CatalogError                             the catalog cannot be opened or answered
    │   ├── TableNotFoundError                   no table under that identifier
    │   ├── RefNotFoundError                     no branch / tag / commit under that name
    │   └── CatalogAuthError                     the catalog refused the credentials
    ├── SnapshotError                            a snapshot cannot serve the request
    │   ├── SnapshotNotFoundError                no snapshot with that id / before that time
    │   ├── SnapshotPolicyError                  a delete / overwrite snapshot the policy refuses
    │   └── SchemaChangedError                   a stream met a schema change it may not pass
    ├── LineageError                             the followed position left the lineage
    │   ├── LineageBreakError                    position no longer an ancestor of the ref head
    │   ├── ExpiredPositionError                 position's snapshot was expired
    │   └── TableReplacedError                   table uuid / Nessie content id changed
    ├── SplitError                               a split cannot be decoded or read
    │   ├── SplitFormatError                     bytes of an unknown / future / corrupt version
    │   ├── DataFileError                        a data or delete file is missing or unreadable
    │   └── MissingStatsError                    a data file has no bound for watermarkColumn
    ├── CheckpointError                          no usable checkpoint
    │   ├── CheckpointCorruptError               checksum / decode failure
    │   ├── CheckpointVersionError               written by a newer icefloe
    │   └── CheckpointMismatchError              a checkpoint of another table or ref
    ├── UnsupportedTypeError                     a column of a type icefloe cannot read yet
    ├── EngineError                              an engine (Spark / Ray) adapter problem
    ├── OutputError                              an output target exists or cannot be written
    ├── StreamClosedError                        the stream was stopped
    └── UnknownSplitError (also KeyError)        an ack names a split the stream does not hold
"""

from __future__ import annotations

__all__ = [
    "CatalogAuthError",
    "CatalogError",
    "CheckpointCorruptError",
    "CheckpointError",
    "CheckpointMismatchError",
    "CheckpointVersionError",
    "DataFileError",
    "EngineError",
    "ExpiredPositionError",
    "IcefloeError",
    "InvalidOptionError",
    "LineageBreakError",
    "LineageError",
    "MissingStatsError",
    "OutputError",
    "RefNotFoundError",
    "SchemaChangedError",
    "SnapshotError",
    "SnapshotNotFoundError",
    "SnapshotPolicyError",
    "SplitError",
    "SplitFormatError",
    "StreamClosedError",
    "TableNotFoundError",
    "TableReplacedError",
    "UnknownSplitError",
    "UnsupportedTypeError",
]


class IcefloeError(Exception):
    """Root of every error icefloe raises on purpose."""


class InvalidOptionError(IcefloeError, ValueError):
    """An option is unknown, unparseable, contradicts another, or does not fit the mode.

    Attributes:
        option: the canonical name of the offending option (or the unknown key as given).
    """

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"option {option!r}: {message}")
        self.option = option


class CatalogError(IcefloeError):
    """The catalog could not be opened or did not answer."""


class TableNotFoundError(CatalogError):
    """No table exists under the identifier."""


class RefNotFoundError(CatalogError):
    """No branch, tag or commit exists under the name."""


class CatalogAuthError(CatalogError):
    """The catalog refused the credentials (the credentials are never part of the message)."""


class SnapshotError(IcefloeError):
    """A snapshot cannot serve the request."""


class SnapshotNotFoundError(SnapshotError):
    """No snapshot with that id, or none at or before that timestamp."""


class SnapshotPolicyError(SnapshotError):
    """A snapshot's operation is refused by the configured policy.

    Attributes:
        snapshot_id: the refused snapshot.
        operation: its Iceberg operation (``delete``, ``overwrite``, ...).
    """

    def __init__(self, snapshot_id: int, operation: str, message: str) -> None:
        super().__init__(message)
        self.snapshot_id = snapshot_id
        self.operation = operation


class SchemaChangedError(SnapshotError):
    """A stream met a snapshot committed under another schema (``onSchemaChange``).

    Attributes:
        snapshot_id: the first snapshot in the new schema (None: the change was found
            when a stream restarted on its checkpoint).
        change: a :class:`icefloe.enumerator.schema_track.SchemaChange` (None when the
            stream's schema is no longer in the table metadata).
    """

    def __init__(self, snapshot_id: int | None, change: object, message: str) -> None:
        super().__init__(message)
        self.snapshot_id = snapshot_id
        self.change = change

    def __reduce__(self) -> tuple[object, ...]:  # picklable across Ray / Spark workers
        return (type(self), (self.snapshot_id, self.change, str(self)))


class LineageError(IcefloeError):
    """The position being followed is no longer usable on the ref's lineage."""


class LineageBreakError(LineageError):
    """The position's snapshot is no longer an ancestor of the ref head (rollback, reset)."""


class ExpiredPositionError(LineageError):
    """The position's snapshot was expired from the table metadata."""


class TableReplacedError(LineageError):
    """The table was dropped and re-created (its uuid or Nessie content id changed)."""


class SplitError(IcefloeError):
    """A split cannot be decoded or read."""


class SplitFormatError(SplitError):
    """Split bytes are corrupt, foreign, or of a version this icefloe cannot read."""


class DataFileError(SplitError):
    """A data or delete file named by a split is missing or unreadable."""


class MissingStatsError(SplitError):
    """A data file has no lower bound for ``watermarkColumn`` in its statistics (metrics
    mode ``none`` / ``counts``), so it cannot be placed in event-time order.

    Attributes:
        file_path: the data file.
        column: the watermark column.
    """

    def __init__(self, message: str, file_path: str = "", column: str = "") -> None:
        super().__init__(message)
        self.file_path = file_path
        self.column = column


class CheckpointError(IcefloeError):
    """No usable checkpoint could be read or written."""


class CheckpointCorruptError(CheckpointError):
    """A checkpoint failed its checksum or could not be decoded."""


class CheckpointVersionError(CheckpointError):
    """A checkpoint was written by a newer icefloe (format version not readable here)."""


class CheckpointMismatchError(CheckpointError):
    """A checkpoint belongs to another table, table incarnation or ref."""


class UnsupportedTypeError(IcefloeError):
    """A column the read needs has a type icefloe cannot read (yet): raised at planning,
    before any data is read, never wrong data.

    Attributes:
        column: the column's full name (``s.inner.geo`` for a nested field).
        type_name: its Iceberg type (``geometry``, ``unknown``, ...).
    """

    def __init__(self, column: str, type_name: str, message: str) -> None:
        super().__init__(message)
        self.column = column
        self.type_name = type_name


class EngineError(IcefloeError):
    """An engine adapter (Spark, Ray) could not do its part."""


class OutputError(IcefloeError):
    """An output target (``--to``, a sink directory) exists where it must not, or cannot be
    written; nothing was written to it."""


class StreamClosedError(IcefloeError):
    """The stream was stopped; no more items will come (and no more acks are taken)."""


class UnknownSplitError(IcefloeError, KeyError):
    """An ack names a split that is not registered (or was already committed)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""
