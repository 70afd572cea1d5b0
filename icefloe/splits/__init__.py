"""Splits: the FileSplit value, its versioned serializer, and split sizing."""

from icefloe.splits.serde import deserialize_split, serialize_split
from icefloe.splits.sizing import byte_ranges, pack, pack_for
from icefloe.splits.split import DeleteFileRef, FileSplit, make_split_id

__all__ = [
    "DeleteFileRef",
    "FileSplit",
    "byte_ranges",
    "deserialize_split",
    "make_split_id",
    "pack",
    "pack_for",
    "serialize_split",
]
