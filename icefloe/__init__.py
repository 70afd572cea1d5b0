"""icefloe: parallel, checkpointed reads of Apache Iceberg tables (FLIP-27 style).

The public API is this module's ``__all__``; engine adapters live in
``icefloe.spark`` and ``icefloe.ray`` (optional extras, imported lazily).
"""

from icefloe.errors import (
    CatalogAuthError,
    CatalogError,
    CheckpointCorruptError,
    CheckpointError,
    CheckpointMismatchError,
    CheckpointVersionError,
    DataFileError,
    EngineError,
    ExpiredPositionError,
    IcefloeError,
    InvalidOptionError,
    LineageBreakError,
    LineageError,
    RefNotFoundError,
    SnapshotError,
    SnapshotNotFoundError,
    SnapshotPolicyError,
    SplitError,
    SplitFormatError,
    StreamClosedError,
    TableNotFoundError,
    TableReplacedError,
)
from icefloe.options import SourceOptions
from icefloe.source import IcebergSource
from icefloe.splits import DeleteFileRef, FileSplit, deserialize_split, serialize_split

__version__ = "0.1.0"

__all__ = [
    "CatalogAuthError",
    "CatalogError",
    "CheckpointCorruptError",
    "CheckpointError",
    "CheckpointMismatchError",
    "CheckpointVersionError",
    "DataFileError",
    "DeleteFileRef",
    "EngineError",
    "ExpiredPositionError",
    "FileSplit",
    "IcebergSource",
    "IcefloeError",
    "InvalidOptionError",
    "LineageBreakError",
    "LineageError",
    "RefNotFoundError",
    "SnapshotError",
    "SnapshotNotFoundError",
    "SnapshotPolicyError",
    "SourceOptions",
    "SplitError",
    "SplitFormatError",
    "StreamClosedError",
    "TableNotFoundError",
    "TableReplacedError",
    "deserialize_split",
    "serialize_split",
]
