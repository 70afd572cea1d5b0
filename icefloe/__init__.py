"""icefloe: parallel, checkpointed reads of Apache Iceberg tables (FLIP-27 style).

The public API is this module's ``__all__``; engine adapters live in
``icefloe.spark`` and ``icefloe.ray`` (optional extras, imported lazily).
"""

import importlib
from typing import TYPE_CHECKING, Any

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
    MissingStatsError,
    OutputError,
    RefNotFoundError,
    SchemaChangedError,
    SnapshotError,
    SnapshotNotFoundError,
    SnapshotPolicyError,
    SplitError,
    SplitFormatError,
    StreamClosedError,
    TableNotFoundError,
    TableReplacedError,
    UnknownSplitError,
    UnsupportedTypeError,
)

if TYPE_CHECKING:
    from icefloe.coordinator import Lag, Stats, StreamItem, StreamMetrics
    from icefloe.local.stream import LocalStream
    from icefloe.options import SourceOptions
    from icefloe.source import IcebergSource
    from icefloe.splits import DeleteFileRef, FileSplit, deserialize_split, serialize_split
    from icefloe.state.position import Position
    from icefloe.tuning import TuneResult, tune

# Imported on first use (PEP 562), so that a reader process (a Spark executor's Python
# worker, a Ray actor) importing ``icefloe.reader`` pays for neither the catalog stack
# (SQLAlchemy) nor anything else it does not use.
_LAZY = {
    "SourceOptions": "icefloe.options",
    "IcebergSource": "icefloe.source",
    "DeleteFileRef": "icefloe.splits",
    "FileSplit": "icefloe.splits",
    "deserialize_split": "icefloe.splits",
    "serialize_split": "icefloe.splits",
    "Lag": "icefloe.coordinator",
    "LocalStream": "icefloe.local.stream",
    "Position": "icefloe.state.position",
    "Stats": "icefloe.coordinator",
    "StreamItem": "icefloe.coordinator",
    "StreamMetrics": "icefloe.coordinator",
    "TuneResult": "icefloe.tuning",
    "tune": "icefloe.tuning",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'icefloe' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


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
    "Lag",
    "LineageBreakError",
    "LineageError",
    "LocalStream",
    "MissingStatsError",
    "OutputError",
    "Position",
    "RefNotFoundError",
    "SchemaChangedError",
    "SnapshotError",
    "SnapshotNotFoundError",
    "SnapshotPolicyError",
    "SourceOptions",
    "SplitError",
    "SplitFormatError",
    "Stats",
    "StreamClosedError",
    "StreamItem",
    "StreamMetrics",
    "TableNotFoundError",
    "TableReplacedError",
    "TuneResult",
    "UnknownSplitError",
    "UnsupportedTypeError",
    "deserialize_split",
    "serialize_split",
    "tune",
]
