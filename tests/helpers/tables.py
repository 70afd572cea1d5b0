"""Build real Iceberg tables (PyIceberg 0.12, SQLite catalog) for tests, including snapshot kinds
PyIceberg's public API cannot produce: position/equality deletes, ``replace`` compactions,
whole-file overwrites/deletes, rollbacks, expirations and drop/recreate.

Everything is written with PyIceberg's own machinery: data files through
``_dataframe_to_data_files``, delete files through its Parquet ``FileFormatWriter`` (so the
statistics are PyIceberg's), manifests through ``ManifestWriterV2`` and snapshots through a
``_SnapshotProducer`` subclass, so sequence numbers are assigned exactly as PyIceberg assigns
them (by the manifest list writer, then inherited by ADDED entries on read).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import (
    ArrowScan,
    ParquetFormatModel,
    _check_pyarrow_schema_compatible,
    _dataframe_to_data_files,
    schema_to_pyarrow,
)
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriterV2,
)
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table, Transaction
from pyiceberg.table.refs import SnapshotRefType
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update.snapshot import _OverwriteFiles
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import EMPTY_DICT, Identifier, Record
from pyiceberg.types import (
    DateType,
    DoubleType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
)

EVENTS_SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "kind", StringType(), required=False),
    NestedField(3, "ts", TimestampType(), required=False),
    NestedField(4, "day", DateType(), required=False),
    NestedField(5, "value", DoubleType(), required=False),
    identifier_field_ids=[1],
)
"""Schema of :func:`rows`: ``id`` required, the rest optional (as in ``rows()``'s Arrow schema)."""

EVENTS_SPEC_BY_DAY = PartitionSpec(
    PartitionField(source_id=4, field_id=1000, transform=IdentityTransform(), name="day")
)
"""Identity partitioning of EVENTS_SCHEMA on ``day``."""

POSITION_DELETE_SCHEMA = Schema(
    NestedField(2147483546, "file_path", StringType(), required=True),
    NestedField(2147483545, "pos", LongType(), required=True),
)
"""Position delete file schema with the reserved field ids from the Iceberg spec."""

_EPOCH_DAY = dt.date(2024, 1, 1)


def make_catalog(root: Path, name: str = "test") -> SqlCatalog:
    """SQLite catalog at ``root/catalog.db`` with warehouse ``file://root/warehouse``."""
    (root / "warehouse").mkdir(parents=True, exist_ok=True)
    return SqlCatalog(
        name, uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/warehouse"
    )


def make_table(
    catalog: Catalog,
    identifier: str = "db.events",
    schema: Schema = EVENTS_SCHEMA,
    partition_spec: PartitionSpec = UNPARTITIONED_PARTITION_SPEC,
) -> Table:
    """Create a format-version 2 table (and its namespace if missing)."""
    catalog.create_namespace_if_not_exists(Catalog.namespace_from(identifier))
    return catalog.create_table(
        identifier, schema, partition_spec=partition_spec, properties={"format-version": "2"}
    )


def rows(n: int, start: int = 0, days: int = 3, kinds: Sequence[str] = ("a", "b", "c")) -> pa.Table:
    """Deterministic EVENTS_SCHEMA rows with ids ``start .. start+n-1``.

    Row ``i`` has kind ``kinds[i % len(kinds)]``, day ``2024-01-01 + (i % days)``,
    ts = that day + ``i`` seconds, value ``i / 2``.
    """
    ids = list(range(start, start + n))
    day = [_EPOCH_DAY + dt.timedelta(days=i % days) for i in ids]
    return pa.table(
        {
            "id": ids,
            "kind": [kinds[i % len(kinds)] for i in ids],
            "ts": [
                dt.datetime.combine(d, dt.time()) + dt.timedelta(seconds=i)
                for d, i in zip(day, ids, strict=True)
            ],
            "day": day,
            "value": [i / 2 for i in ids],
        },
        schema=schema_to_pyarrow(EVENTS_SCHEMA),
    )


# --------------------------------------------------------------------------- commit machinery


class _DeleteManifestWriter(ManifestWriterV2):
    """PyIceberg's v2 manifest writer, writing a DELETES manifest instead of a DATA one."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


class _FilesCommit(_OverwriteFiles):
    """PyIceberg's ``_OverwriteFiles`` with a chosen operation that can also add delete files.

    Removes whole data files (``delete_data_file``), adds data files (``append_data_file``) and
    adds ``delete_files`` in one new DELETES manifest; every other existing manifest is kept.
    """

    def __init__(self, tx: Transaction, operation: Operation, delete_files: Iterable[DataFile]):
        # update_snapshot_summaries() rejects REPLACE: summarise as OVERWRITE, relabel later.
        super().__init__(Operation.OVERWRITE, tx, tx._table.io)
        self._final_operation = operation
        self._added_delete_files = list(delete_files)

    def _manifests(self) -> list[ManifestFile]:
        manifests = super()._manifests()
        if not self._added_delete_files:
            return manifests
        spec = self.spec(self._added_delete_files[0].spec_id)
        output = self.new_manifest_output()
        with _DeleteManifestWriter(
            spec, self.schema(), output, self._snapshot_id, self._compression
        ) as writer:
            for delete_file in self._added_delete_files:
                # sequence numbers stay None: the manifest list writer assigns the manifest's one
                # and readers inherit it into the ADDED entries.
                writer.add(
                    ManifestEntry.from_args(
                        status=ManifestEntryStatus.ADDED,
                        snapshot_id=self._snapshot_id,
                        data_file=delete_file,
                    )
                )
        return [writer.to_manifest_file(), *manifests]

    def _process_manifests(self, manifests: list[ManifestFile]) -> list[ManifestFile]:
        # Like Java: carried-over manifests without live entries are dropped.
        return [
            m
            for m in manifests
            if m.added_snapshot_id == self._snapshot_id
            or m.has_added_files()
            or m.has_existing_files()
        ]

    def _summary(self, snapshot_properties: dict[str, str] = EMPTY_DICT) -> Summary:
        # Count the delete files in PyIceberg's summary collector (it handles their content types).
        data_files = self._added_data_files
        self._added_data_files = [*data_files, *self._added_delete_files]
        try:
            summary = super()._summary(snapshot_properties)
        finally:
            self._added_data_files = data_files
        return Summary(self._final_operation, **summary.additional_properties)


def _commit(
    table: Table,
    operation: Operation,
    add: Iterable[DataFile] = (),
    remove: Iterable[DataFile] = (),
    delete_files: Iterable[DataFile] = (),
) -> Snapshot:
    """Commit one snapshot on ``main`` of ``table`` (updated in place) and return it."""
    producer = _FilesCommit(Transaction(table, autocommit=True), operation, delete_files)
    for data_file in add:
        producer.append_data_file(data_file)
    for data_file in remove:
        producer.delete_data_file(data_file)
    producer.commit()
    snapshot = table.metadata.snapshot_by_id(producer.snapshot_id)
    assert snapshot is not None
    return snapshot


def live_data_files(table: Table) -> dict[str, DataFile]:
    """Live DATA files of the current snapshot, by path."""
    snapshot = table.current_snapshot()
    if snapshot is None:
        return {}
    return {
        entry.data_file.file_path: entry.data_file
        for manifest in snapshot.manifests(table.io)
        if manifest.content == ManifestContent.DATA
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True)
    }


def _data_files(table: Table, paths: Iterable[str]) -> list[DataFile]:
    live = live_data_files(table)
    if missing := [p for p in paths if p not in live]:
        raise ValueError(f"not live data files of the current snapshot: {missing}")
    return [live[p] for p in paths]


def _require_v2(table: Table) -> None:
    if table.format_version != 2:
        raise ValueError(f"delete files need a format-version 2 table, got {table.format_version}")


def _write_delete_file(
    table: Table,
    file_schema: Schema,
    data: pa.Table,
    content: DataFileContent,
    partition: Record,
    spec_id: int,
    equality_ids: list[int] | None = None,
    properties: dict[str, str] | None = None,
) -> DataFile:
    """Write ``data`` (carrying field ids) with PyIceberg's Parquet writer; return its DataFile."""
    spec = table.specs()[spec_id]
    name = f"{uuid.uuid4()}-deletes.parquet"
    if not spec.is_unpartitioned():
        name = f"{spec.partition_to_path(partition, table.schema())}/{name}"
    path = table.location_provider().new_data_location(name)
    output = table.io.new_output(path)
    with ParquetFormatModel().create_writer(
        output, file_schema, properties or table.properties
    ) as writer:
        writer.write(data)
    delete_file = DataFile.from_args(
        content=content,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=partition,
        file_size_in_bytes=len(output),
        sort_order_id=None,
        equality_ids=equality_ids,
        key_metadata=None,
        **writer.result().to_serialized_dict(),
    )
    delete_file.spec_id = spec_id  # not a struct field: from_args() silently drops it
    return delete_file


# --------------------------------------------------------------------------- public helpers


def add_position_deletes(
    table: Table, deletes: dict[str, list[int]], operation: Operation = Operation.DELETE
) -> Snapshot:
    """Commit ONE position delete file holding ``{data file path: [row positions]}``.

    The referenced files must be live data files of one partition (else ValueError); the file
    gets their partition/spec id and full ``file_path`` bounds (as Java writes them). New snapshot
    on ``main`` with ``operation`` and one added DELETES manifest; all other manifests are kept.
    """
    _require_v2(table)
    referenced = _data_files(table, deletes)
    if not referenced:
        raise ValueError("no position deletes given")
    if len({(f.spec_id, f.partition) for f in referenced}) != 1:
        raise ValueError("position deletes must reference data files of a single partition")
    pairs = sorted((path, pos) for path, positions in deletes.items() for pos in positions)
    data = pa.table(
        {"file_path": [p for p, _ in pairs], "pos": [pos for _, pos in pairs]},
        schema=schema_to_pyarrow(POSITION_DELETE_SCHEMA),
    )
    full_metrics = {**table.properties, "write.metadata.metrics.default": "full"}
    delete_file = _write_delete_file(
        table,
        POSITION_DELETE_SCHEMA,
        data,
        DataFileContent.POSITION_DELETES,
        referenced[0].partition,
        referenced[0].spec_id,
        properties=full_metrics,
    )
    return _commit(table, operation, delete_files=[delete_file])


def add_equality_deletes(
    table: Table,
    rows: pa.Table,
    equality_columns: list[str],
    partition: Record | None = None,
    operation: Operation = Operation.DELETE,
) -> Snapshot:
    """Commit one equality delete file with ``rows[equality_columns]``.

    The Parquet columns are the equality columns in the given order, carrying the table's
    field ids; ``equality_ids`` lists those ids. ``partition`` is required for partitioned
    tables (the default spec) and must be omitted or empty for unpartitioned ones.
    """
    _require_v2(table)
    spec = table.spec()
    if spec.is_unpartitioned():
        if partition:
            raise ValueError("unpartitioned table: no partition allowed")
        partition = Record()
    elif partition is None or len(partition) != len(spec.fields):
        raise ValueError(f"partitioned table: give a partition Record for {spec}")
    file_schema = Schema(*(table.schema().find_field(c) for c in equality_columns))
    data = rows.select(equality_columns).cast(schema_to_pyarrow(file_schema))
    delete_file = _write_delete_file(
        table,
        file_schema,
        data,
        DataFileContent.EQUALITY_DELETES,
        partition,
        spec.spec_id,
        equality_ids=[f.field_id for f in file_schema.fields],
    )
    return _commit(table, operation, delete_files=[delete_file])


def commit_replace(table: Table, files: list[str] | None = None) -> Snapshot:
    """Compact ``files`` (default: all live data files) into new files; operation ``replace``.

    Rows are read with PyIceberg's ArrowScan with position deletes applied (PyIceberg raises
    on tables with equality deletes) and rewritten per partition by PyIceberg's writer, so
    ``table.scan().to_arrow()`` holds the same rows before and after.
    """
    if files is not None:
        _data_files(table, files)  # raises for unknown paths
    tasks = [t for t in table.scan().plan_files() if files is None or t.file.file_path in files]
    if not tasks:
        raise ValueError("nothing to compact")
    data = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue()).to_table(tasks)
    added = list(_dataframe_to_data_files(table.metadata, data, table.io)) if data.num_rows else []
    return _commit(table, Operation.REPLACE, add=added, remove=[t.file for t in tasks])


def commit_overwrite_files(
    table: Table,
    delete_files: list[str],
    add: pa.Table | None,
    operation: Operation = Operation.OVERWRITE,
) -> Snapshot:
    """Remove the whole live data files ``delete_files`` and add ``add`` (written by PyIceberg,
    split per partition) in one snapshot with ``operation`` (default ``overwrite``)."""
    removed = _data_files(table, delete_files)
    added: list[DataFile] = []
    if add is not None and add.num_rows:
        _check_pyarrow_schema_compatible(
            table.schema(), add.schema, format_version=table.format_version
        )
        added = list(_dataframe_to_data_files(table.metadata, add, table.io))
    return _commit(table, operation, add=added, remove=removed)


def commit_delete_files(table: Table, files: list[str]) -> Snapshot:
    """Remove the whole live data files ``files`` in one snapshot with operation ``delete``."""
    return _commit(table, Operation.DELETE, remove=_data_files(table, files))


def rollback_to(table: Table, snapshot_id: int, ref: str = "main") -> None:
    """Point branch ``ref`` (created if missing) at the existing ``snapshot_id``; for ``main``
    this also sets the current snapshot. No ancestry check (like Java's setCurrentSnapshot)."""
    if table.metadata.snapshot_by_id(snapshot_id) is None:
        raise ValueError(f"unknown snapshot {snapshot_id}")
    existing = table.metadata.refs.get(ref)
    if existing is not None and existing.snapshot_ref_type != SnapshotRefType.BRANCH:
        raise ValueError(f"{ref} is not a branch")
    table.manage_snapshots().create_branch(snapshot_id, ref).commit()


def expire_snapshots(table: Table, snapshot_ids: list[int]) -> None:
    """Remove the snapshots from the table metadata (files are left alone).

    Raises ValueError for unknown snapshots or heads of branches/tags.
    """
    table.maintenance.expire_snapshots().by_ids(snapshot_ids).commit()


def drop_and_recreate(
    catalog: Catalog,
    identifier: str | Identifier,
    schema: Schema,
    partition_spec: PartitionSpec | None = None,
) -> Table:
    """Drop the table (files kept) and create a new format-version 2 table (new uuid) under the
    same identifier."""
    catalog.drop_table(identifier)
    return catalog.create_table(
        identifier,
        schema,
        partition_spec=partition_spec or UNPARTITIONED_PARTITION_SPEC,
        properties={"format-version": "2"},
    )
