"""The embedded engine: parallel reader threads (bounded) and the local stream."""

from icefloe.local.engine import SplitBatch, read_batches, read_splits

__all__ = ["SplitBatch", "read_batches", "read_splits"]
