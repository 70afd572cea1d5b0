"""Event-time order (watermarkColumn) of bounded plans, against PyIceberg's statistics."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from pyiceberg.catalog import Catalog

from icefloe import IcebergSource, InvalidOptionError, MissingStatsError
from tests.helpers.event_time import (
    BASE,
    HOURS,
    event_table,
    event_time_order,
    hour_rows,
    pyiceberg_bounds,
)


@pytest.fixture
def table(catalog: Catalog):
    return event_table(catalog)


def _paths(src: IcebergSource) -> list[str]:
    return [s.file_path for s in src.plan()]


def test_bounded_plan_is_in_the_order_of_pyiceberg_lower_bounds(catalog: Catalog,
                                                                 table) -> None:
    oracle = event_time_order(table)
    plain = _paths(IcebergSource("db.events", catalog))
    assert sorted(plain) == sorted(oracle) and plain != oracle  # the option must matter
    splits = list(IcebergSource("db.events", catalog, {"watermarkColumn": "ts"}).plan())
    assert [s.file_path for s in splits] == oracle
    assert [s.ordinal for s in splits] == list(range(len(HOURS)))  # ordinals: event-time ranks
    bounds = pyiceberg_bounds(table)
    assert [s.watermark_ms for s in splits] == [bounds[s.file_path] // 1000 for s in splits]
    assert splits[0].watermark_ms == int(BASE.replace(tzinfo=dt.UTC).timestamp() * 1000)


def test_same_plan_in_any_process_and_split_ids_unchanged(catalog: Catalog, table) -> None:
    opts = {"watermarkColumn": "ts"}
    first = list(IcebergSource("db.events", catalog, opts).plan())
    again = list(IcebergSource("db.events", catalog, opts).plan())
    assert first == again
    plain = {s.split_id for s in IcebergSource("db.events", catalog).plan()}
    assert {s.split_id for s in first} == plain


def test_long_column_with_time_unit(catalog: Catalog, table) -> None:
    splits = list(IcebergSource("db.events", catalog, {
        "watermark-column": "ts_ms", "watermark-time-unit": "milliseconds"}).plan())
    bounds = pyiceberg_bounds(table, "ts_ms")
    assert [s.file_path for s in splits] == event_time_order(table, "ts_ms")
    assert [s.watermark_ms for s in splits] == [bounds[s.file_path] for s in splits]
    seconds = list(IcebergSource("db.events", catalog, {
        "watermarkColumn": "ts_ms", "watermarkTimeUnit": "SECONDS"}).plan())
    assert [s.watermark_ms for s in seconds] == [bounds[s.file_path] * 1000 for s in splits]


def test_incremental_range_merges_snapshots_in_event_time(catalog: Catalog, table) -> None:
    first = table.history()[0].snapshot_id
    splits = list(IcebergSource("db.events", catalog, {
        "watermarkColumn": "ts", "startSnapshotId": str(first)}).plan())
    bounds = pyiceberg_bounds(table)
    got = [bounds[s.file_path] for s in splits]
    assert got == sorted(got) and len(got) == len(HOURS) - 1


def test_filter_still_prunes(catalog: Catalog, table) -> None:
    splits = list(IcebergSource("db.events", catalog, {
        "watermarkColumn": "ts", "filter": "ts >= '2026-01-01T03:00:00+00:00'"}).plan())
    assert [s.watermark_ms for s in splits] == sorted(s.watermark_ms for s in splits)
    assert len(splits) == 3


def test_rows_read_in_event_time_order(catalog: Catalog, table) -> None:
    got = IcebergSource("db.events", catalog, {"watermarkColumn": "ts"}).to_arrow(
        parallelism=1)
    expected = table.scan().to_arrow().sort_by("ts")
    assert got.column("ts").to_pylist() == expected.column("ts").to_pylist()


@pytest.mark.parametrize(("options", "match"), [
    ({"watermarkColumn": "nope"}, "no column 'nope'"),
    ({"watermarkColumn": "kind"}, "must be a timestamp"),
    ({"watermarkColumn": "ts", "watermarkTimeUnit": "SECONDS"}, "long watermarkColumn only"),
    ({"watermarkTimeUnit": "SECONDS"}, "applies only with watermarkColumn"),
    ({"watermarkColumn": "ts_ms", "watermarkTimeUnit": "fortnights"}, "not one of"),
    ({"watermarkColumn": "ts", "watermarkMissingStats": "middle"}, "not one of"),
    ({"withEventTimeOrder": "true"}, "watermarkColumn=<the withWatermark column>"),
    ({"watermarkColumn": "ts", "changelog": "true"}, "cannot be combined with changelog"),
])
def test_bad_options_fail_before_any_manifest_is_read(catalog: Catalog, table,
                                                      options, match) -> None:
    # the manifests are gone: an error that needed them would be a DataFileError
    head = table.current_snapshot()
    for manifest in head.manifests(table.io):
        Path(manifest.manifest_path.removeprefix("file://")).unlink()
    with pytest.raises(InvalidOptionError, match=match):
        list(IcebergSource("db.events", catalog, options).plan())


def _table_with_statless_file(catalog: Catalog):
    table = event_table(catalog, hours=(2, 0))
    with table.transaction() as tx:
        tx.set_properties({"write.metadata.metrics.column.ts": "none"})
    table.append(hour_rows(1))
    with table.transaction() as tx:
        tx.remove_properties("write.metadata.metrics.column.ts")
    table.append(hour_rows(3))
    bounds = pyiceberg_bounds(table)
    statless = [p for p, b in bounds.items() if b is None]
    assert len(statless) == 1  # PyIceberg wrote no bound for that file
    return table, statless[0]


def test_file_without_bound_is_a_typed_error_or_read_first_or_last(catalog: Catalog) -> None:
    table, statless = _table_with_statless_file(catalog)
    with pytest.raises(MissingStatsError, match="watermarkMissingStats") as info:
        list(IcebergSource("db.events", catalog, {"watermarkColumn": "ts"}).plan())
    assert info.value.file_path == statless and info.value.column == "ts"
    assert statless in str(info.value)
    first = list(IcebergSource("db.events", catalog, {
        "watermarkColumn": "ts", "watermarkMissingStats": "first"}).plan())
    last = list(IcebergSource("db.events", catalog, {
        "watermarkColumn": "ts", "watermarkMissingStats": "last"}).plan())
    ordered = event_time_order(table)
    assert [s.file_path for s in first] == [statless, *ordered]
    assert [s.file_path for s in last] == [*ordered, statless]
    assert first[0].watermark_ms is None and last[-1].watermark_ms is None
