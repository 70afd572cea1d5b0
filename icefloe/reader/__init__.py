"""Reader: split -> Arrow batches, one pipeline of stages (README, "Layout"): open the file,
plan its columns, read the split's range, apply deletes, project and cast, add metadata
columns, batch. :class:`SplitReader` composes them."""

from icefloe.reader.context import ReadContext
from icefloe.reader.split_reader import SplitReader

__all__ = ["ReadContext", "SplitReader"]
