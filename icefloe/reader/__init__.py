"""Reader: split -> Arrow batches (projection, schema evolution, deletes, filters)."""

from icefloe.reader.context import ReadContext
from icefloe.reader.split_reader import SplitReader

__all__ = ["ReadContext", "SplitReader"]
