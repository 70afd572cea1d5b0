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
    │   └── SnapshotPolicyError                  a delete / overwrite snapshot the policy refuses
    ├── LineageError                             the followed position left the lineage
    │   ├── LineageBreakError                    position no longer an ancestor of the ref head
    │   ├── ExpiredPositionError                 position's snapshot was expired
    │   └── TableReplacedError                   table uuid / Nessie content id changed
    ├── SplitError                               a split cannot be decoded or read
    │   ├── SplitFormatError                     bytes of an unknown / future / corrupt version
    │   └── DataFileError                        a data or delete file is missing or unreadable
    ├── CheckpointError                          no usable checkpoint
    │   ├── CheckpointCorruptError               checksum / decode failure
    │   ├── CheckpointVersionError               written by a newer icefloe
    │   └── CheckpointMismatchError              a checkpoint of another table or ref
    ├── EngineError                              an engine (Spark / Ray) adapter problem
    ├── StreamClosedError                        the stream was stopped
    └── UnknownSplitError (also KeyError)        an ack of a split never handed out
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
    "RefNotFoundError",
    "SnapshotError",
    "SnapshotNotFoundError",
    "SnapshotPolicyError",
    "SplitError",
    "SplitFormatError",
    "StreamClosedError",
    "TableNotFoundError",
    "TableReplacedError",
    "UnknownSplitError",
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


class CheckpointError(IcefloeError):
    """No usable checkpoint could be read or written."""


class CheckpointCorruptError(CheckpointError):
    """A checkpoint failed its checksum or could not be decoded."""


class CheckpointVersionError(CheckpointError):
    """A checkpoint was written by a newer icefloe (format version not readable here)."""


class CheckpointMismatchError(CheckpointError):
    """A checkpoint belongs to another table, table incarnation or ref."""


class EngineError(IcefloeError):
    """An engine adapter (Spark, Ray) could not do its part."""


class StreamClosedError(IcefloeError):
    """The stream was stopped; no more items will come."""


class UnknownSplitError(IcefloeError, KeyError):
    """An ack names a split that is not registered (never handed out, or already
    acknowledged and committed)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""
