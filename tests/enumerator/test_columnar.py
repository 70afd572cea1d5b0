"""Manifests decoded into columns (``icefloe.enumerator.columnar``) and planning on them.

Oracles: PyIceberg's manifest reading (``ManifestFile.fetch_manifest_entry``: rows, partition
values, stats) for the decoders; for planning, the per-entry path planning took before the
columns (PyIceberg's entries, ``FilterEvaluators.file_ok``, ``entry_splits``; for event time
the entries' lower bounds through ``order_unit``; for ``plan_added`` the entries the
snapshot ADDED): every split equal, ids, order and ordinals included. Each planning case runs
with the pure-Python decoder (``ICEFLOE_NATIVE_DECODER=0``) and, where the compiled one is
installed, with it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions.visitors import _InclusiveMetricsEvaluator
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import DataFileContent, ManifestContent, ManifestEntryStatus, ManifestFile
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot

from icefloe.enumerator import columnar
from icefloe.enumerator.deletes import DeleteIndex, partition_tuple
from icefloe.enumerator.discovery import (
    DataFileError,
    decoded_manifests,
    live_entries,
    snapshot_changes,
)
from icefloe.enumerator.event_time import EventTimeColumn, order_unit
from icefloe.enumerator.manifest_decoder import iter_live_data_files, partition_decoder
from icefloe.enumerator.planner import TableSplitPlanner
from icefloe.splits.split import FileSplit
from tests.conftest import append_partitioned
from tests.helpers.manifests import manifest_entries, write_all_types_manifest
from tests.helpers.tables import (
    EVENTS_SCHEMA,
    EVENTS_SPEC_BY_DAY,
    add_position_deletes,
    commit_overwrite_files,
    make_table,
    rows,
)
from tests.helpers.tables import live_data_files as table_data_files

DECODERS = ["fallback", "native"]
MERGE = {"commit.manifest-merge.enabled": "true", "commit.manifest.min-count-to-merge": "2"}


@pytest.fixture(params=DECODERS)
def decoder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which ``decode_manifest`` planning uses in the test (native: skipped if absent)."""
    if request.param == "fallback":
        monkeypatch.setenv(columnar.NATIVE_ENV, "0")
    else:
        monkeypatch.delenv(columnar.NATIVE_ENV, raising=False)
        if columnar.native_decoder() is None:
            pytest.skip("icefloe.enumerator._native_manifest is not built here")
    return str(request.param)


def _content(manifest: ManifestFile) -> bytes:
    with PyArrowFileIO().new_input(manifest.manifest_path).open() as f:
        return f.read()


def _decode(manifest: ManifestFile, stats_ids: tuple[int, ...] = (),
            added_only: bool = False) -> pa.RecordBatch:
    decode, _ = columnar.decoder()
    return decode(_content(manifest), manifest_seq=manifest.sequence_number,
                  added_by=manifest.added_snapshot_id, added_only=added_only,
                  stats_ids=stats_ids)


# --- the decoders against PyIceberg's reading -------------------------------------------

@pytest.mark.parametrize("codec", ["null", "deflate"])
@pytest.mark.parametrize(("version", "manifest_seq"), [(1, 0), (2, 5), (2, 0)])
@pytest.mark.parametrize("stats_ids", [(), (1, 4, 12), (99,)])
def test_decode_manifest_rows_are_pyiceberg_live_entries(
        tmp_path: Path, decoder: str, codec: str, version: int, manifest_seq: int,
        stats_ids: tuple[int, ...]) -> None:
    """Every primitive partition type (identity, bucket, truncate) with nulls, ADDED /
    EXISTING / DELETED entries, explicit and inherited sequence numbers, stats present
    and absent: the batch's rows and columns are PyIceberg's live entries."""
    entries = manifest_entries(version, DataFileContent.DATA)
    manifest = write_all_types_manifest(tmp_path / "m.avro", version, codec, entries, manifest_seq)
    content = _content(manifest)

    batch = _decode(manifest, stats_ids)

    assert batch.schema == columnar.batch_schema(stats_ids)
    assert batch.schema.names == [*columnar.BASE_COLUMNS, *columnar.stats_columns(stats_ids)]
    live = manifest.fetch_manifest_entry(PyArrowFileIO(), discard_deleted=True)
    got = batch.to_pylist()
    assert len(got) == len(live) == 8
    decode_partition = partition_decoder(_writer_schema(content))
    for row, entry in zip(got, live, strict=True):
        df = entry.data_file
        assert row["file_path"] == df.file_path
        assert row["file_format"] == df.file_format.name
        assert decode_partition(row["partition"]) == partition_tuple(df.partition)
        assert row["record_count"] == df.record_count
        assert row["file_size"] == df.file_size_in_bytes
        assert row["split_offsets"] == df.split_offsets
        assert row["sequence_number"] == entry.sequence_number
        for k in stats_ids:
            for column, stats in (("value_count", df.value_counts),
                                  ("null_count", df.null_value_counts),
                                  ("nan_count", df.nan_value_counts),
                                  ("lower", df.lower_bounds), ("upper", df.upper_bounds)):
                assert row[f"{column}_{k}"] == (stats or {}).get(k), (column, k)
    # and the same rows as the planning decoder's tuples (the per-entry path)
    files = list(iter_live_data_files(content, manifest))
    assert [r["file_path"] for r in got] == [f.file_path for f in files]
    assert [decode_partition(r["partition"]) for r in got] == [f.partition for f in files]
    if stats_ids == (1, 4, 12):  # not vacuous: some stats found, some absent
        assert any(r["lower_1"] for r in got) and any(r["lower_1"] is None for r in got)


def _writer_schema(content: bytes) -> str:
    from icefloe.enumerator.manifest_decoder import writer_schema
    return writer_schema(content)


def test_decode_manifest_added_only_keeps_the_snapshots_own_added_files(
        tmp_path: Path, decoder: str) -> None:
    manifest = write_all_types_manifest(tmp_path / "m.avro", 2, "deflate",
                                        manifest_entries(2, DataFileContent.DATA), 5)

    batch = _decode(manifest, added_only=True)

    expected = [e.data_file.file_path
                for e in manifest.fetch_manifest_entry(PyArrowFileIO(), discard_deleted=False)
                if e.status == ManifestEntryStatus.ADDED
                and e.snapshot_id == manifest.added_snapshot_id]
    assert batch.column("file_path").to_pylist() == expected
    assert 0 < len(expected) < batch.num_rows + 8


def test_decode_manifest_errors(tmp_path: Path, decoder: str) -> None:
    manifest = write_all_types_manifest(tmp_path / "m.avro", 2, "null",
                                        manifest_entries(2, DataFileContent.DATA), 5)
    content = _content(manifest)
    decode, _ = columnar.decoder()
    args: dict[str, Any] = {"manifest_seq": 5, "added_by": 1, "added_only": False,
                            "stats_ids": ()}
    with pytest.raises(ValueError):
        decode(b"PAR1" + b"\x00" * 64, **args)
    with pytest.raises((ValueError, EOFError)):
        decode(content[: len(content) // 2], **args)


def test_native_decoder_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(columnar.NATIVE_ENV, "0")
    assert columnar.native_decoder() is None
    assert columnar.decoder() == (columnar.decode_manifest, False)


def test_decode_in_order_is_ordered_and_bounded() -> None:
    pulled = 0
    pulled_at_first: list[int] = []
    lock = threading.Lock()

    def items() -> Iterator[int]:
        nonlocal pulled
        for i in range(50):
            with lock:
                pulled += 1
            yield i

    out = []
    for result in columnar.decode_in_order(lambda i: i * i, items(), parallel=True,
                                           lookahead=3):
        if not out:
            pulled_at_first.append(pulled)
        out.append(result)

    assert out == [i * i for i in range(50)]
    assert pulled_at_first == [4]  # the first result waits for 3 more submitted, no more
    assert list(columnar.decode_in_order(str, [1, 2], parallel=False)) == ["1", "2"]


def test_partition_values_decode_each_distinct_value_once(tmp_path: Path) -> None:
    manifest = write_all_types_manifest(tmp_path / "m.avro", 2, "null",
                                        manifest_entries(2, DataFileContent.DATA), 5)
    content = _content(manifest)
    schema = _writer_schema(content)
    batch = columnar.decode_manifest(content, manifest_seq=5, added_by=1, added_only=False,
                                     stats_ids=())
    values = columnar.PartitionValues(max_entries=2)

    distinct, indices = values.column(schema, batch.column("partition"))

    live = manifest.fetch_manifest_entry(PyArrowFileIO(), discard_deleted=True)
    assert [distinct[i] for i in indices] == [partition_tuple(e.data_file.partition)
                                              for e in live]
    assert len(distinct) == 2 < batch.num_rows  # two partitions among eight live files
    again, _ = values.column(schema, batch.column("partition"))
    assert again == distinct  # from the memo (two values: within max_entries)


# --- planning on the columns against the per-entry path ---------------------------------

@pytest.fixture(scope="module")
def tables(module_catalog: SqlCatalog) -> dict[str, Table]:
    out = {}
    plain = make_table(module_catalog, "db.plain")
    for start in range(0, 60, 10):
        plain.append(rows(10, start=start))
    out["plain"] = module_catalog.load_table("db.plain")

    by_day = make_table(module_catalog, "db.by_day", partition_spec=EVENTS_SPEC_BY_DAY)
    for start in range(0, 60, 20):
        append_partitioned(by_day, rows(20, start=start))
    by_day = module_catalog.load_table("db.by_day")
    files = sorted(table_data_files(by_day))
    commit_overwrite_files(by_day, [files[0]], rows(5, start=100))
    by_day = module_catalog.load_table("db.by_day")
    add_position_deletes(by_day, {sorted(table_data_files(by_day))[1]: [0]})
    out["by_day"] = module_catalog.load_table("db.by_day")

    module_catalog.create_namespace_if_not_exists("db")
    v1 = module_catalog.create_table("db.v1", EVENTS_SCHEMA, partition_spec=EVENTS_SPEC_BY_DAY,
                                     properties={"format-version": "1"})
    for start in range(0, 60, 30):
        append_partitioned(v1, rows(30, start=start))
    out["v1"] = module_catalog.load_table("db.v1")

    merged = module_catalog.create_table("db.merged", EVENTS_SCHEMA, properties=MERGE)
    for i in range(4):
        merged.append(rows(10, start=10 * i))
    merged.delete("id >= 12 and id < 15")  # copy-on-write: DELETED + ADDED in one snapshot
    merged.append(rows(10, start=100))
    out["merged"] = module_catalog.load_table("db.merged")
    return out


def _planner(table: Table, filter_text: str | None, split_size: int = 1 << 27,
             event_time: EventTimeColumn | None = None) -> TableSplitPlanner:
    return TableSplitPlanner(table.metadata, table.io, table.schema(), filter_text, True,
                             split_size, event_time=event_time)


def _entry_files(planner: TableSplitPlanner, table: Table, snapshot: Snapshot
                 ) -> Iterator[tuple[list[FileSplit], Any]]:
    """The per-entry path: each live file the filter keeps, as its splits, and its entry."""
    manifests = snapshot.manifests(table.io)
    deletes = planner.delete_index(snapshot, manifests)
    data = [m for m in manifests if m.content == ManifestContent.DATA
            and planner.filters.manifest_ok(m.partition_spec_id)(m)]
    ordinal = 0
    for entry in live_entries(table.io, data, snapshot.snapshot_id,
                              lambda e: planner.filters.file_ok(e.data_file)):
        splits = planner.entry_splits(entry, snapshot.snapshot_id, ordinal,
                                      deletes if deletes.count else None)
        ordinal += len(splits)
        yield splits, entry


def _entry_plan(planner: TableSplitPlanner, table: Table, snapshot: Snapshot
                ) -> list[FileSplit]:
    return [s for splits, _ in _entry_files(planner, table, snapshot) for s in splits]


PLANS = [
    ("plain", None, 1 << 27),
    ("plain", "id >= 45", 1 << 27),
    ("plain", "id < 10 and kind = 'b'", 1 << 27),
    ("plain", "id >= 10 or kind = 'b'", 1 << 27),
    ("plain", None, 700),  # files above the split size: the byte-range path
    ("by_day", None, 1 << 27),
    ("by_day", "day = '2024-01-02'", 1 << 27),
    ("by_day", "day >= '2024-01-02' and id < 50", 1 << 27),
    ("by_day", "id > 10000", 1 << 27),
    ("by_day", "ts >= '2024-01-02T00:00:40'", 1 << 27),
    ("v1", "id <= 20", 1 << 27),
    ("v1", None, 900),
    ("merged", "id = 17", 1 << 27),
]


@pytest.mark.parametrize(("name", "filter_text", "split_size"), PLANS)
def test_columnar_plan_equals_the_entry_path(tables: dict[str, Table], decoder: str,
                                             name: str, filter_text: str | None,
                                             split_size: int) -> None:
    table = tables[name]
    snapshot = table.current_snapshot()
    assert snapshot is not None
    planner = _planner(table, filter_text, split_size)

    planned = list(planner.plan_snapshot(snapshot))

    assert planned == _entry_plan(planner, table, snapshot)
    assert [s.ordinal for s in planned] == list(range(len(planned)))
    if filter_text is not None and filter_text != "id > 10000":
        assert planned, "a filter that keeps nothing would test nothing"
    for start in (1, len(planned) // 2, len(planned) + 3):
        assert list(planner.plan_snapshot(snapshot, start)) == planned[start:]


def test_plans_have_deletes_ranges_and_pruning(tables: dict[str, Table]) -> None:
    """The cases above are not vacuous."""
    def plan(name: str, filter_text: str | None, split_size: int = 1 << 27
             ) -> list[FileSplit]:
        table = tables[name]
        snapshot = table.current_snapshot()
        assert snapshot is not None
        return list(_planner(table, filter_text, split_size).plan_snapshot(snapshot))

    assert any(s.delete_files for s in plan("by_day", None))
    # files above the split size take the byte-range path (one row group each: one range)
    assert min(s.file_size for s in plan("plain", None, 700)) > 700
    assert 0 < len(plan("plain", "id >= 45")) < len(plan("plain", None))
    assert 0 < len(plan("by_day", "day = '2024-01-02'")) < len(plan("by_day", None))


@pytest.mark.parametrize("filter_text", [None, "id >= 20"])
def test_event_time_plan_equals_the_entry_path(tables: dict[str, Table], decoder: str,
                                               filter_text: str | None) -> None:
    table = tables["by_day"]
    snapshot = table.current_snapshot()
    assert snapshot is not None
    column = EventTimeColumn("ts", table.schema().find_field("ts").field_id, "MICROSECONDS")
    planner = _planner(table, filter_text, event_time=column)

    planned = list(planner.plan_snapshot(snapshot))

    files = [(splits, column.bound(entry.data_file.lower_bounds))
             for splits, entry in _entry_files(planner, table, snapshot)]
    assert planned == list(order_unit(files, column))
    assert planned and all(s.watermark_ms is not None for s in planned)


def _added_reference(planner: TableSplitPlanner, table: Table, snapshot: Snapshot
                     ) -> list[FileSplit]:
    """``plan_added`` per entry: the snapshot's ADDED entries (PyIceberg's records) the
    filter keeps, with the delete files it added."""
    changes = snapshot_changes(table.io, snapshot)
    deletes = None
    if changes.added_deletes:
        deletes = DeleteIndex(planner.unpartitioned)
        for entry in changes.added_deletes:
            deletes.add(entry)
    out: list[FileSplit] = []
    for entry in changes.added_data:
        if planner.filters.file_ok(entry.data_file):
            out += planner.entry_splits(entry, snapshot.snapshot_id, len(out), deletes)
    return out


@pytest.mark.parametrize("name", ["merged", "by_day"])
@pytest.mark.parametrize("filter_text", [None, "id >= 15"])
def test_plan_added_equals_the_entry_path(tables: dict[str, Table], decoder: str,
                                          name: str, filter_text: str | None) -> None:
    table = tables[name]
    planner = _planner(table, filter_text)
    planned_any = False
    for snapshot in table.snapshots():
        planned = list(planner.plan_added(snapshot))
        assert planned == _added_reference(planner, table, snapshot), snapshot.snapshot_id
        planned_any = planned_any or bool(planned)
    assert planned_any


def test_metrics_prefilter_drops_only_what_pyiceberg_drops(tables: dict[str, Table]) -> None:
    table = tables["plain"]
    snapshot = table.current_snapshot()
    assert snapshot is not None
    dropped = 0
    for text in ["id >= 45", "id > 44", "id < 10", "id <= 9", "id = 47",
                 "id >= 20 and id < 30", "ts >= '2024-01-02T00:00:40'",
                 "day <= '2024-01-01' and kind = 'b'"]:
        planner = _planner(table, text)
        prefilter = planner.filters.prefilter
        assert prefilter is not None, text
        evaluate = _InclusiveMetricsEvaluator(table.schema(), planner.filters.row_filter,
                                              True, False).eval
        data = [m for m in snapshot.manifests(table.io) if m.content == ManifestContent.DATA]
        for decoded in decoded_manifests(table.io, data, snapshot.snapshot_id,
                                         stats_ids=planner.filters.stats_ids):
            mask = prefilter.keep_mask(decoded.batch).tolist()
            entries = [e for e in decoded.manifest.fetch_manifest_entry(table.io)
                       if e.status != ManifestEntryStatus.DELETED]
            for keep, entry in zip(mask, entries, strict=True):
                if not keep:
                    dropped += 1
                    assert not evaluate(entry.data_file), (text, entry.data_file.file_path)
    assert dropped > 0
    # predicates it cannot decide exactly are left to the evaluator
    assert _planner(table, "kind = 'b'").filters.prefilter is None
    assert _planner(table, "id >= 10 or kind = 'b'").filters.prefilter is None


def test_unreadable_manifest_names_it_and_the_snapshot(tmp_path: Path, decoder: str) -> None:
    manifest = write_all_types_manifest(tmp_path / "m.avro", 2, "null",
                                        manifest_entries(2, DataFileContent.DATA), 5)
    (tmp_path / "m.avro").write_bytes(b"not avro at all")
    with pytest.raises(DataFileError, match=r"m\.avro.*snapshot 123"):
        list(decoded_manifests(PyArrowFileIO(), [manifest], 123))
