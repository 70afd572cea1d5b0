"""Filtered planning through the planning-only manifest decoder (issue 20).

A row filter used to send planning to PyIceberg's full manifest entries (the metrics
evaluator reads the column stats). The decoder now reads the stats itself and offers each
entry to the same PyIceberg evaluators. Two oracles:

- PyIceberg's ``table.scan(row_filter=...).plan_files()``: the same set of data files;
- the entry path planning used before (PyIceberg's entries, ``FilterEvaluators.file_ok``):
  the same splits, byte for byte (ids, order, ordinals, deletes).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.manifest import ManifestContent
from pyiceberg.table import Table
from pyiceberg.typedef import Record

from icefloe.enumerator.discovery import live_entries
from icefloe.enumerator.planner import TableSplitPlanner
from icefloe.splits.split import FileSplit
from tests.conftest import append_partitioned
from tests.helpers.tables import (
    EVENTS_SCHEMA,
    EVENTS_SPEC_BY_DAY,
    add_equality_deletes,
    add_position_deletes,
    commit_overwrite_files,
    make_table,
    rows,
)
from tests.helpers.tables import live_data_files as table_data_files

FILTERS = [
    "id >= 45",
    "id < 10",
    "id = 47",
    "id in (3, 47, 200)",
    "id > 10000",
    "not (id < 30)",
    "kind = 'b'",
    "kind is null",
    "kind is not null",
    "kind like 'z%'",
    "day = '2024-01-02'",
    "day >= '2024-01-02' and id < 50",
    "day = '2024-01-01' or kind = 'q'",
    "ts >= '2024-01-02T00:00:40'",
    "value > 20.0",
    "value is nan",
    "value is not nan",
    "value is null",
]


def _odd_rows() -> pa.Table:
    """Rows whose stats exercise nulls, NaN and one-value columns."""
    return pa.table({
        "id": [500, 501, 502, 503],
        "kind": [None, None, "q", "q"],
        "ts": [dt.datetime(2024, 1, 1, 0, 0, s) for s in range(4)],
        "day": [dt.date(2024, 1, 1)] * 4,
        "value": [float("nan"), 1.0, None, float("nan")],
    }, schema=schema_to_pyarrow(EVENTS_SCHEMA))


def _all_null_kind() -> pa.Table:
    data = rows(3, start=600)
    return data.set_column(1, "kind", pa.array([None] * 3, pa.string()))


@pytest.fixture(scope="module")
def tables(module_catalog: SqlCatalog) -> dict[str, Table]:
    """An unpartitioned table, a day-partitioned one (with DELETED / EXISTING entries and
    delete files) and a v1 table; each with many small files of distinct id ranges."""
    out = {}
    plain = make_table(module_catalog, "db.plain")
    for start in range(0, 60, 10):
        plain.append(rows(10, start=start))
    plain.append(_odd_rows())
    plain.append(_all_null_kind())
    out["plain"] = module_catalog.load_table("db.plain")

    by_day = make_table(module_catalog, "db.by_day", partition_spec=EVENTS_SPEC_BY_DAY)
    for start in range(0, 60, 20):
        append_partitioned(by_day, rows(20, start=start))
    append_partitioned(by_day, _odd_rows())
    by_day = module_catalog.load_table("db.by_day")
    files = sorted(table_data_files(by_day))
    commit_overwrite_files(by_day, [files[0]], rows(5, start=100))
    by_day = module_catalog.load_table("db.by_day")
    live = sorted(table_data_files(by_day))
    add_position_deletes(by_day, {live[1]: [0]})
    out["by_day"] = module_catalog.load_table("db.by_day")

    # PyIceberg's plan_files refuses equality deletes: this one has the entry path only
    eq = make_table(module_catalog, "db.eq", partition_spec=EVENTS_SPEC_BY_DAY)
    for start in range(0, 60, 20):
        append_partitioned(eq, rows(20, start=start))
    eq = module_catalog.load_table("db.eq")
    path = sorted(table_data_files(eq))[2]
    day = table_data_files(eq)[path].partition
    add_equality_deletes(eq, pa.table({"id": [41]}), ["id"], partition=Record(*day))
    out["eq"] = module_catalog.load_table("db.eq")

    module_catalog.create_namespace_if_not_exists("db")
    v1 = module_catalog.create_table("db.v1", EVENTS_SCHEMA, partition_spec=EVENTS_SPEC_BY_DAY,
                                     properties={"format-version": "1"})
    for start in range(0, 60, 30):
        append_partitioned(v1, rows(30, start=start))
    out["v1"] = module_catalog.load_table("db.v1")
    return out


def _planner(table: Table, filter_text: str | None) -> TableSplitPlanner:
    return TableSplitPlanner(table.metadata, table.io, table.schema(), filter_text, True,
                             1 << 27)


def _entry_path_splits(planner: TableSplitPlanner, table: Table) -> list[FileSplit]:
    """What ``plan_snapshot`` returned before (PyIceberg's full entries, ``file_ok``)."""
    snapshot = table.current_snapshot()
    assert snapshot is not None
    manifests = snapshot.manifests(table.io)
    deletes = planner.delete_index(snapshot, manifests)
    data = [m for m in manifests if m.content == ManifestContent.DATA
            and planner.filters.manifest_ok(m.partition_spec_id)(m)]
    out: list[FileSplit] = []
    ordinal = 0
    for entry in live_entries(table.io, data, snapshot.snapshot_id,
                              lambda e: planner.filters.file_ok(e.data_file)):
        for split in planner.entry_splits(entry, snapshot.snapshot_id, ordinal, deletes):
            out.append(split)
            ordinal += 1
    return out


@pytest.mark.parametrize("name", ["plain", "by_day", "v1", "eq"])
@pytest.mark.parametrize("filter_text", FILTERS)
def test_filtered_plan_matches_pyiceberg_and_the_entry_path(
        tables: dict[str, Table], name: str, filter_text: str) -> None:
    table = tables[name]
    snapshot = table.current_snapshot()
    assert snapshot is not None
    planner = _planner(table, filter_text)

    planned = list(planner.plan_snapshot(snapshot))

    if name != "eq":
        expected = {t.file.file_path for t in table.scan(row_filter=filter_text).plan_files()}
        assert {s.file_path for s in planned} == expected
    assert planned == _entry_path_splits(planner, table)
    assert [s.ordinal for s in planned] == list(range(len(planned)))


def test_filters_prune(tables: dict[str, Table]) -> None:
    """The cases above are not vacuous: metrics and partitions prune, deletes survive."""
    def count(name: str, filter_text: str | None) -> int:
        table = tables[name]
        snapshot = table.current_snapshot()
        assert snapshot is not None
        return len(list(_planner(table, filter_text).plan_snapshot(snapshot)))

    assert count("plain", "id >= 45") < count("plain", None)
    assert count("plain", "kind is null") < count("plain", None)
    assert count("plain", "value is null") < count("plain", None)
    assert count("by_day", "day = '2024-01-02'") < count("by_day", None)
    assert count("by_day", "id > 10000") == 0
    snapshot = tables["by_day"].current_snapshot()
    assert snapshot is not None
    planned = list(_planner(tables["by_day"], "id < 1000").plan_snapshot(snapshot))
    assert any(s.delete_files for s in planned)
    snapshot = tables["eq"].current_snapshot()
    assert snapshot is not None
    planned = list(_planner(tables["eq"], "id > 30").plan_snapshot(snapshot))
    assert any(s.delete_files for s in planned)


def test_start_ordinal_counts_kept_files(tables: dict[str, Table]) -> None:
    table = tables["by_day"]
    snapshot = table.current_snapshot()
    assert snapshot is not None
    planner = _planner(table, "id >= 20")
    everything = list(planner.plan_snapshot(snapshot))
    assert list(planner.plan_snapshot(snapshot, start_ordinal=2)) == everything[2:]


def _kept(planner: TableSplitPlanner) -> Any:
    return planner.filters.stats_ok(0)


def test_no_filter_has_no_stats_check(tables: dict[str, Table]) -> None:
    assert _kept(_planner(tables["plain"], None)) is None
    assert _kept(_planner(tables["plain"], "id > 3")) is not None
