"""Stage 4 of the read pipeline, second half: the residual row filter. Runs on a worker.

The read's ``filter`` option, bound to the table schema, applied to every batch after
its deletes (planning pruned files and row groups by statistics only; this keeps exactly
the matching rows). Row positions travel with the rows (``_pos``, row lineage).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pyiceberg.io.pyarrow import expression_to_pyarrow

from icefloe.reader.context import ReadContext


class RowFilter:
    """The residual filter of one read context, as an Arrow expression. Immutable after
    construction: may be shared across threads.

    Args:
        context: the read's context (``filter``, ``bound_filter``, ``schema``).
    """

    def __init__(self, context: ReadContext) -> None:
        # with the schema, nested fields resolve to their full path (``s.a``, not ``a``)
        self.expression = (
            None if context.filter is None
            else expression_to_pyarrow(context.bound_filter, context.schema)
        )
        """The Arrow expression, None when the read has no filter."""

    def apply(self, batch: pa.RecordBatch, positions: np.ndarray | None
              ) -> tuple[pa.RecordBatch, np.ndarray | None]:
        """The rows of ``batch`` (in the read schema) that match, and their
        ``positions`` (None stays None). A no-op without a filter or rows."""
        if self.expression is None or not batch.num_rows:
            return batch, positions
        if positions is not None:
            batch = batch.append_column("__pos", pa.array(positions))
        batch = pa.Table.from_batches([batch]).filter(self.expression).combine_chunks()
        batch = batch.to_batches()[0] if batch.num_rows else \
            pa.RecordBatch.from_pylist([], schema=batch.schema)
        if positions is not None:
            positions = batch.column("__pos").to_numpy()
        return batch, positions
