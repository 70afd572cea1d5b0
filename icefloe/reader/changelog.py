"""Reading change splits: which rows of a commit's files changed, as change rows.

Runs on a worker, for a :class:`~icefloe.reader.split_reader.SplitReader` whose context
is a changelog read (``context.changelog``). The rows themselves are read by the
pipeline's stages (a :class:`~icefloe.reader.file_reader.FileReader`) under
:meth:`ReadContext.data_context` (same projection, filter and metadata columns, plus
``_pos``), so delete files, schema evolution and every file format are applied exactly
as in any other read; this module decides which rows are changes and labels them
(:data:`~icefloe.reader.context.CHANGE_FIELDS`).

- A single added (removed) range: its rows live after (before) the commit, streamed
  batch by batch as INSERT (DELETE); ``resume_rows`` counts source records, as usual.
- A group (``CHANGE_EXISTING`` files, or a commit with both sides): the group's DELETE
  and INSERT rows are gathered, carry-over rows (equal in every read column on both
  sides: a file rewritten with those rows unchanged) cancel pairwise, and with
  ``computeUpdates`` a DELETE and an INSERT of one key become UPDATE_BEFORE /
  UPDATE_AFTER. Memory follows the group's change, not the table. Output is
  deterministic (file order, then position), and ``resume_rows`` counts change rows.

For a ``CHANGE_EXISTING`` file with position deletes / deletion vectors only, the changed
positions come from the delete files before and after; with none the data file is not
opened, else only the Parquet row groups holding them are read (ORC and Avro: from the
first changed position to the last). With equality deletes on either side the file is
read twice (rows live before, rows live after).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict, deque
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from icefloe.reader.context import CHANGE_FIELDS, ReadContext
from icefloe.reader.file_reader import FileReader
from icefloe.reader.ranges import row_group_start
from icefloe.splits.split import (
    CHANGE_ADDED,
    CHANGE_EXISTING,
    CONTENT_EQUALITY_DELETES,
    ChangeFile,
    DeleteFileRef,
    FileSplit,
)

INSERT, DELETE = "INSERT", "DELETE"
UPDATE_BEFORE, UPDATE_AFTER = "UPDATE_BEFORE", "UPDATE_AFTER"
_EMPTY = np.empty(0, dtype=np.int64)


def _hashable(value: Any) -> Any:
    """A row value as a hashable key (lists and structs as tuples; maps as item tuples)."""
    if isinstance(value, dict):
        return tuple((k, _hashable(v)) for k, v in value.items())
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, tuple):
        return tuple(_hashable(v) for v in value)
    return value


def _take(table: pa.Table, indices: list[int]) -> pa.Table:
    return table.take(pa.array(indices, pa.int64()))


def _row_keys(table: pa.Table, names: list[str]) -> list[Any]:
    """One hashable key per row of ``table`` over the columns ``names``."""
    columns = [table.column(n).to_pylist() for n in names]
    return [tuple(_hashable(v) for v in row) for row in zip(*columns, strict=True)]


class ChangeReader:
    """Reads the change splits of one changelog context. One per reader thread (as the
    :class:`FileReader` it reads the rows with).

    Args:
        context: the changelog read's context (``changelog`` set).
    """

    def __init__(self, context: ReadContext) -> None:
        self.context = context
        self.data = FileReader(self.context.data_context())
        """The plain read the rows come from (its batches carry ``_pos``)."""
        self._drop_pos = "_pos" not in self.context.metadata_columns
        self._compare = [f.name for f in self.context.projected_schema.fields]
        self._keys = list(self.context.identifier_columns)

    # -- splits -> labelled batches -------------------------------------------------

    def read_progress(self, split: FileSplit) -> Iterator[tuple[pa.RecordBatch, int]]:
        """``(batch, consumed)`` of a change split (see the module docstring for what
        ``consumed`` counts)."""
        if len(split.changes) == 1 and split.changes[0].kind != CHANGE_EXISTING:
            change = split.changes[0]
            added = change.kind == CHANGE_ADDED
            inner = self._data_split(split, change, change.deletes_after if added
                                     else change.deletes_before, split.resume_rows)
            label = INSERT if added else DELETE
            for batch, consumed in self.data.read_progress(inner):
                yield self._label(batch, split, label), consumed
            return
        table = self._group(split)
        size = self.context.batch_size
        for start in range(split.resume_rows, table.num_rows, size):
            chunk = table.slice(start, size).combine_chunks()
            batches = chunk.to_batches()
            batch = batches[0] if batches else \
                pa.RecordBatch.from_pylist([], schema=self.context.arrow_schema)
            yield batch, start + chunk.num_rows

    def _data_split(self, split: FileSplit, change: ChangeFile,
                    deletes: tuple[DeleteFileRef, ...], resume_rows: int) -> FileSplit:
        return FileSplit(
            split_id=split.split_id, file_path=change.path, file_format=change.file_format,
            start=change.start, length=change.length, record_count=change.record_count,
            file_size=change.file_size, file_record_count=change.record_count,
            spec_id=change.spec_id, partition=change.partition,
            snapshot_id=split.snapshot_id, sequence_number=change.sequence_number,
            ordinal=split.ordinal, delete_files=deletes, resume_rows=resume_rows)

    def _label(self, batch: pa.RecordBatch | pa.Table, split: FileSplit,
               change_type: str | pa.Array) -> Any:
        """``batch`` without the helper ``_pos`` and with the change columns."""
        if self._drop_pos:
            batch = batch.drop_columns(["_pos"])
        n = batch.num_rows
        types = pa.array([change_type] * n, pa.string()) if isinstance(change_type, str) \
            else change_type
        values = {
            "_change_type": types,
            "_change_ordinal": pa.array(np.full(n, split.change_ordinal, dtype=np.int32)),
            "_commit_snapshot_id": pa.array(np.full(n, split.snapshot_id, dtype=np.int64)),
            "_commit_timestamp": pa.array(
                np.full(n, split.commit_timestamp_ms * 1000, dtype=np.int64)
            ).cast(CHANGE_FIELDS["_commit_timestamp"]),
        }
        arrays = list(batch.columns) + [values[name] for name in CHANGE_FIELDS]
        schema = self.context.arrow_schema
        if isinstance(batch, pa.Table):
            return pa.Table.from_arrays(arrays, schema=schema)
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    # -- groups ---------------------------------------------------------------------

    def _read_all(self, split: FileSplit, change: ChangeFile,
                  deletes: tuple[DeleteFileRef, ...]) -> pa.Table:
        inner = self._data_split(split, change, deletes, 0)
        batches = [b for b, _ in self.data.read_progress(inner)]
        return pa.Table.from_batches(batches, schema=self.data.context.arrow_schema)

    def _existing(self, split: FileSplit, change: ChangeFile) -> tuple[pa.Table, pa.Table]:
        """(rows live before and not after, rows live after and not before) of a file
        whose delete files changed."""
        schema = self.data.context.arrow_schema
        empty = schema.empty_table()
        if any(d.content == CONTENT_EQUALITY_DELETES
               for d in (*change.deletes_before, *change.deletes_after)):
            before = self._read_all(split, change, change.deletes_before)
            after = self._read_all(split, change, change.deletes_after)
            after_pos, before_pos = after.column("_pos"), before.column("_pos")
            return (before.filter(pc.invert(pc.is_in(before_pos, value_set=after_pos))),
                    after.filter(pc.invert(pc.is_in(after_pos, value_set=before_pos))))
        positions = self.data.deletes.deleted_positions
        was = positions(self._data_split(split, change, change.deletes_before, 0))
        now = positions(self._data_split(split, change, change.deletes_after, 0))
        was = _EMPTY if was is None else was
        now = _EMPTY if now is None else now
        deleted, undeleted = np.setdiff1d(now, was), np.setdiff1d(was, now)
        changed = np.union1d(deleted, undeleted)
        if not len(changed):
            return empty, empty
        gone: list[pa.RecordBatch] = []
        new: list[pa.RecordBatch] = []
        for inner, last in self._ranges_holding(split, change, changed):
            for batch, _ in self.data.read_progress(inner):
                pos = batch.column("_pos")
                if deleted.size:
                    gone.append(batch.filter(pc.is_in(pos, value_set=pa.array(deleted))))
                if undeleted.size:
                    new.append(batch.filter(pc.is_in(pos, value_set=pa.array(undeleted))))
                if batch.num_rows and pos[-1].as_py() >= last:
                    break
        return (pa.Table.from_batches(gone, schema=schema),
                pa.Table.from_batches(new, schema=schema))

    def _ranges_holding(self, split: FileSplit, change: ChangeFile, positions: np.ndarray
                        ) -> list[tuple[FileSplit, int]]:
        """Reads of ``change``'s file that cover the sorted ``positions``, each with the
        last position it must reach: one per Parquet row group holding some (its byte
        range: the other row groups are never fetched or decoded); for ORC and Avro one
        read from the first position to the last."""
        first, last = int(positions[0]), int(positions[-1])
        if change.file_format != "PARQUET":
            return [(self._data_split(split, change, (), first), last)]
        stream, _ = self.data.files.open_for_parquet(change.path)
        try:
            metadata = pq.ParquetFile(stream).metadata
        finally:
            stream.close()
        out: list[tuple[FileSplit, int]] = []
        row = 0
        for i in range(metadata.num_row_groups):
            group = metadata.row_group(i)
            lo, hi = np.searchsorted(positions, [row, row + group.num_rows])
            if hi > lo:
                inner = dataclasses.replace(
                    self._data_split(split, change, (), 0),
                    start=row_group_start(group), length=1)  # holds its first byte only
                out.append((inner, int(positions[hi - 1])))
            row += group.num_rows
        return out

    def _group(self, split: FileSplit) -> pa.Table:
        """The group's change rows, labelled, in deterministic order."""
        deletes: list[pa.Table] = []
        inserts: list[pa.Table] = []
        for change in split.changes:
            if change.kind == CHANGE_ADDED:
                inserts.append(self._read_all(split, change, change.deletes_after))
            elif change.kind == CHANGE_EXISTING:
                gone, new = self._existing(split, change)
                deletes.append(gone)
                inserts.append(new)
            else:
                deletes.append(self._read_all(split, change, change.deletes_before))
        schema = self.data.context.arrow_schema
        removed = pa.concat_tables(deletes) if deletes else schema.empty_table()
        added = pa.concat_tables(inserts) if inserts else schema.empty_table()
        removed, added = cancel_carry_over(removed, added, self._compare)
        pairs: tuple[list[int], list[int]] = ([], [])
        if self.context.compute_updates:
            pairs = pair_updates(removed, added, self._keys)
        parts = [self._label(part, split, label)
                 for part, label in labelled_parts(removed, added, *pairs)]
        return pa.concat_tables(parts)


def labelled_parts(removed: pa.Table, added: pa.Table, left: list[int], right: list[int]
                   ) -> list[tuple[pa.Table, str | pa.Array]]:
    """The output order of one commit's (or range's) changes, with their labels: the
    unpaired removed rows (DELETE), each update pair as UPDATE_BEFORE then UPDATE_AFTER
    (``removed[left[k]]``, ``added[right[k]]``), the unpaired added rows (INSERT)."""
    paired_d, paired_i = set(left), set(right)
    parts: list[tuple[pa.Table, str | pa.Array]] = [
        (_take(removed, [i for i in range(removed.num_rows) if i not in paired_d]), DELETE)]
    if left:
        both = pa.concat_tables([_take(removed, left), _take(added, right)])
        n = len(left)
        order = [k // 2 + (n if k % 2 else 0) for k in range(2 * n)]
        parts.append((_take(both, order),
                      pa.array([UPDATE_BEFORE, UPDATE_AFTER] * n, pa.string())))
    parts.append((_take(added, [i for i in range(added.num_rows) if i not in paired_i]),
                  INSERT))
    return parts


def cancel_carry_over(removed: pa.Table, added: pa.Table,
                      names: list[str]) -> tuple[pa.Table, pa.Table]:
    """``removed`` and ``added`` without their carry-over rows: each row of ``removed``
    equal (in ``names``) to a row of ``added`` cancels the first such row still there.
    The multiset difference both ways; order otherwise kept."""
    if not removed.num_rows or not added.num_rows:
        return removed, added
    waiting: dict[Any, deque[int]] = defaultdict(deque)
    for index, key in enumerate(_row_keys(added, names)):
        waiting[key].append(index)
    keep_removed: list[int] = []
    dropped: set[int] = set()
    for index, key in enumerate(_row_keys(removed, names)):
        queue = waiting.get(key)
        if queue:
            dropped.add(queue.popleft())
        else:
            keep_removed.append(index)
    if not dropped:
        return removed, added
    return (_take(removed, keep_removed),
            _take(added, [i for i in range(added.num_rows) if i not in dropped]))


def pair_updates(removed: pa.Table, added: pa.Table,
                 keys: list[str]) -> tuple[list[int], list[int]]:
    """Row indices ``(removed, added)`` of DELETE / INSERT pairs with the same key (in
    ``keys``), paired in order; rows of a key with more on one side stay unpaired."""
    if not removed.num_rows or not added.num_rows or not keys:
        return [], []
    waiting: dict[Any, deque[int]] = defaultdict(deque)
    for index, key in enumerate(_row_keys(added, keys)):
        waiting[key].append(index)
    left: list[int] = []
    right: list[int] = []
    for index, key in enumerate(_row_keys(removed, keys)):
        queue = waiting.get(key)
        if queue:
            left.append(index)
            right.append(queue.popleft())
    return left, right


def net_changes(table: pa.Table, compare: list[str], keys: list[str],
                compute_updates: bool) -> pa.Table:
    """A range's change rows (``table``, labelled) collapsed to their net effect.

    The rows removed (DELETE, UPDATE_BEFORE) and added (INSERT, UPDATE_AFTER) anywhere in
    the range cancel pairwise when equal in ``compare`` (a row inserted then deleted, or
    deleted then put back, gives nothing): what is left is the multiset difference of the
    table before the range and after it, labelled DELETE / INSERT, or with
    ``compute_updates`` UPDATE_BEFORE / UPDATE_AFTER where one key is on both sides. Each
    row keeps its own commit columns. Runs on the driver (a bounded read's whole result).
    """
    types = table.column("_change_type")
    gone = pc.is_in(types, value_set=pa.array([DELETE, UPDATE_BEFORE]))
    removed, added = table.filter(gone), table.filter(pc.invert(gone))
    removed, added = cancel_carry_over(removed, added, compare)
    left: list[int] = []
    right: list[int] = []
    if compute_updates:
        left, right = pair_updates(removed, added, keys)

    def relabel(part: pa.Table, label: str | pa.Array) -> pa.Table:
        index = part.schema.get_field_index("_change_type")
        values = pa.array([label] * part.num_rows, pa.string()) if isinstance(label, str) \
            else label
        return part.set_column(index, part.schema.field(index), values)

    return pa.concat_tables([relabel(part, label)
                             for part, label in labelled_parts(removed, added, left, right)])


def net_of(context: ReadContext, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``batches`` (every change row of a range, in ``context``'s schema) collapsed by
    :func:`net_changes`, in batches of ``context.batch_size`` rows. Runs where the whole
    range is read: the local engine's driver, or the one Spark or Ray task of the plan."""
    table = pa.Table.from_batches(list(batches), schema=context.arrow_schema)
    net = net_changes(table, [f.name for f in context.projected_schema.fields],
                      list(context.identifier_columns), context.compute_updates)
    yield from net.combine_chunks().to_batches(context.batch_size)
