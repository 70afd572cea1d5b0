"""Stages 4 to 6 for one raw batch: deletes, filter, projection, metadata, cast. Runs on a worker.

:class:`BatchProcessor` takes a raw batch of a data file (its first row at a known file
position) to an output batch: projected onto the read schema
(:class:`~icefloe.reader.projection.Projector`), rows removed by the split's deletes
(:func:`~icefloe.reader.deletes.keep_mask`) and by the residual filter
(:class:`~icefloe.reader.row_filter.RowFilter`), the output's columns selected,
metadata columns added (:class:`~icefloe.reader.metadata.MetadataColumns`), cast to the
output schema (:class:`~icefloe.reader.casts.OutputCaster`). Deletes apply after the
projection because equality deletes compare read-schema columns (renamed, promoted).

A batch whose plan learned the fast path (a relabel, nothing else to do) goes straight
to the output in one step (:meth:`BatchProcessor.fast`): small files of a run are
gathered and converted that way (:mod:`icefloe.reader.groups`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from icefloe.reader.casts import OutputCaster
from icefloe.reader.context import ReadContext
from icefloe.reader.deletes import NO_DELETES, SplitDeletes, keep_mask
from icefloe.reader.metadata import MetadataColumns
from icefloe.reader.plan import FilePlan
from icefloe.reader.projection import Projector
from icefloe.reader.row_filter import RowFilter
from icefloe.splits.split import FileSplit


class BatchProcessor:
    """Turns raw batches of a read context's files into output batches. One per reader
    thread (its projector and caster cache per schema; not thread-safe).

    Args:
        context: the read's context.
    """

    def __init__(self, context: ReadContext) -> None:
        self.context = context
        self.caster = OutputCaster(context.arrow_schema)
        self.row_filter = RowFilter(context)
        self.metadata = MetadataColumns(context)
        self.projector = Projector(context, self.caster,
                                   filtered=self.row_filter.expression is not None)

    def fast(self, raw: pa.RecordBatch, plan: FilePlan) -> pa.RecordBatch:
        """``raw`` (of schema ``plan.direct_source``, ``plan.fast`` set) straight to the
        output: see :meth:`icefloe.reader.projection.Projector.fast`."""
        return self.projector.fast(raw, plan)

    def process(self, raw: pa.RecordBatch, first_pos: int, split: FileSplit, plan: FilePlan,
                missing: dict[int, Any], deletes: SplitDeletes = NO_DELETES
                ) -> pa.RecordBatch:
        """The output batch of ``raw``: rows of ``split``'s file from position
        ``first_pos`` on, in the file's schema restricted to ``plan``'s columns;
        ``missing`` holds the values of read-schema fields the file lacks (by field id,
        from :meth:`icefloe.reader.plan.FilePlanner.missing_values`). May be empty (every
        row deleted or filtered).

        Raises:
            ValueError, pyarrow.ArrowException: a column that cannot be projected or cast
                (the caller names the file).
        """
        fast = plan.fast
        if fast is not None and deletes.empty and not missing \
                and raw.schema.equals(plan.direct_source):
            return self.projector.fast(raw, plan)
        n = raw.num_rows
        batch = self.projector.project(raw, plan, missing)
        keep = keep_mask(batch, plan.read_schema, deletes, first_pos)
        positions: np.ndarray | None = None
        if self.metadata.needs_positions:
            positions = np.arange(first_pos, first_pos + n, dtype=np.int64)
        if keep is not None:
            batch = batch.filter(pa.array(keep))
            if positions is not None:
                positions = positions[keep]
        batch, positions = self.row_filter.apply(batch, positions)
        out_names = self.projector.out_names
        if batch.schema.names != out_names:
            batch = batch.select(out_names)
        if self.metadata.names:
            batch = self.metadata.add(batch, split, positions, raw, first_pos, plan)
        if not batch.schema.equals(self.context.arrow_schema):
            batch = self.caster.conform(batch)
        return batch
