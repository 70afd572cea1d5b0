"""Stage 6 of the read pipeline: add metadata columns. Runs on a worker.

``_pos`` (the row's position in its data file), ``_file``, ``_snapshot_id``,
``_sequence_number`` from the split, and the row lineage columns of format v3
(``_row_id``, ``_last_updated_sequence_number``) as the spec reads them: the value the
file stores where it stores one, else inherited from the data file.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from icefloe.reader.context import ROW_LINEAGE_FIELD_IDS, ReadContext
from icefloe.reader.plan import FilePlan
from icefloe.splits.split import FileSplit


class MetadataColumns:
    """Appends a read context's metadata columns to batches. Holds no state but the
    context's column list: may be shared across threads.

    Args:
        context: the read's context (``metadata_columns``, in output order).
    """

    def __init__(self, context: ReadContext) -> None:
        self.names = context.metadata_columns
        self.lineage = [n for n in self.names if n in ROW_LINEAGE_FIELD_IDS]
        self.needs_positions = "_pos" in self.names or bool(self.lineage)
        """Whether :meth:`add` needs the rows' file positions."""

    def add(self, batch: pa.RecordBatch, split: FileSplit, positions: np.ndarray | None,
            raw: pa.RecordBatch, first_pos: int, plan: FilePlan) -> pa.RecordBatch:
        """``batch`` (rows of ``split``'s file at ``positions``, given when
        :attr:`needs_positions`) with the metadata columns appended, in context order.
        ``raw`` is the file's batch the rows came from (its first row at ``first_pos``):
        stored row lineage values are taken from it."""
        batch = self._add_split_columns(batch, split, positions)
        if self.lineage:
            batch = self._add_lineage(batch, split, positions, raw, first_pos, plan)
        return batch

    def _add_split_columns(self, batch: pa.RecordBatch, split: FileSplit,
                           positions: np.ndarray | None) -> pa.RecordBatch:
        n = batch.num_rows
        arrays = list(batch.columns)
        names = list(batch.schema.names)
        for name in self.names:
            if name == "_pos":
                arrays.append(pa.array(positions, type=pa.int64()))
            elif name == "_file":
                arrays.append(pa.array([split.file_path] * n, type=pa.string()))
            elif name == "_snapshot_id":
                arrays.append(pa.array(np.full(n, split.snapshot_id, dtype=np.int64)))
            elif name == "_sequence_number":
                arrays.append(pa.array(np.full(n, split.sequence_number, dtype=np.int64)))
            else:  # row lineage: filled in by _add_lineage
                arrays.append(pa.nulls(n, pa.int64()))
            names.append(name)
        return pa.RecordBatch.from_arrays(arrays, names=names)

    def _add_lineage(self, batch: pa.RecordBatch, split: FileSplit,
                     positions: np.ndarray | None, raw: pa.RecordBatch, first_pos: int,
                     plan: FilePlan) -> pa.RecordBatch:
        """``_row_id`` / ``_last_updated_sequence_number`` as the v3 spec reads them
        ("Row Lineage"): the value the file stores, where it stores one; else the data
        file's ``first_row_id`` plus the row's position (null when the file has no
        ``first_row_id``), and the data file's data sequence number."""
        assert positions is not None
        arrays = list(batch.columns)
        for name in self.lineage:
            if name == "_row_id":
                inherited = None if split.first_row_id is None \
                    else pa.array(positions + split.first_row_id)
            else:
                inherited = pa.array(np.full(len(positions), split.sequence_number,
                                             dtype=np.int64))
            stored_name = (plan.lineage or {}).get(name)
            if stored_name is not None:
                stored = raw.column(stored_name).take(pa.array(positions - first_pos))
                stored = stored.cast(pa.int64())
                value = stored if inherited is None else pc.coalesce(stored, inherited)
            else:
                value = inherited if inherited is not None else pa.nulls(len(positions),
                                                                         pa.int64())
            arrays[batch.schema.get_field_index(name)] = value
        return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)
