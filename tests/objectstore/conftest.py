"""Tables in S3 (SeaweedFS) behind two real catalogs: SeaweedFS's Iceberg REST catalog and
a SQLite catalog whose warehouse is in S3. Built once per session per catalog and only
read by the tests; a test that writes creates its own table.

A test reaches a catalog as a user would: ``catalog.<prop>`` options (what Spark, Ray and
CLI users pass), PyIceberg's environment variables, or a ``Catalog`` object.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.table import Table

from tests.helpers.seaweed import SeaweedFS
from tests.helpers.tables import (
    EVENTS_SPEC_BY_DAY,
    add_equality_deletes,
    add_position_deletes,
    live_data_files,
    make_table,
    rows,
)

CATALOG_KINDS = ("rest", "sql")


@dataclass
class S3Catalog:
    """One catalog over SeaweedFS, with its PyIceberg properties."""

    kind: str
    properties: dict[str, str]
    catalog: Catalog

    def options(self, **extra: Any) -> dict[str, Any]:
        """Source options naming the catalog by ``catalog.<prop>`` options only."""
        return {"catalog": f"sw{self.kind}",
                **{f"catalog.{k}": v for k, v in self.properties.items()}, **extra}

    def new_table(self, prefix: str = "t", partitioned: bool = False) -> Table:
        """A new, empty format-version 2 table of EVENTS_SCHEMA under a unique name."""
        identifier = f"objectstore.{prefix}_{uuid.uuid4().hex[:10]}"
        spec = EVENTS_SPEC_BY_DAY if partitioned else None
        return make_table(self.catalog, identifier, **({"partition_spec": spec} if spec else {}))


@dataclass
class History:
    """The shared table and the snapshots of its history (ids in commit order).

    - ``s1``: append ids 0..59 (tag ``t1``); ``s2``: append 100..159 (branch ``b1``);
    - ``b1`` then gets an append 500..519 of its own (``main`` does not see it);
    - ``s3``: a position delete of rows 0..9 of one file of ``s2``;
    - ``s4``: an equality delete of ids 20..24 (rows of ``s1``); ``s5``: append 200..229.
    """

    table: Table
    identifier: str
    s: dict[str, int] = field(default_factory=dict)
    eq_deleted: frozenset[int] = frozenset()
    branch_head: int = 0


def _head(table: Table) -> int:
    snapshot = table.current_snapshot()
    assert snapshot is not None
    return snapshot.snapshot_id


def build_history(case: S3Catalog) -> History:
    table = case.new_table("events", partitioned=True)
    history = History(table, ".".join(table.name()))
    table.append(rows(60, start=0))
    history.s["s1"] = _head(table)
    before = set(live_data_files(table))
    table.append(rows(60, start=100))
    history.s["s2"] = _head(table)
    table.manage_snapshots().create_tag(history.s["s1"], "t1").create_branch(
        history.s["s2"], "b1").commit()
    table.append(rows(20, start=500), branch="b1")
    table.refresh()
    history.branch_head = table.metadata.refs["b1"].snapshot_id
    live = live_data_files(table)
    target = sorted(p for p in live if p not in before and "day=2024-01-01" in p)[0]
    add_position_deletes(table, {target: list(range(10))})
    history.s["s3"] = _head(table)
    gone = rows(60).filter(pc.is_in(rows(60).column("id"),
                                    value_set=pa.array(range(20, 25), pa.int64())))
    # equality deletes are partition-scoped: one delete file per day of the deleted ids
    for day in sorted(set(gone.column("day").to_pylist())):
        partition = next(f.partition for p, f in live.items() if f"day={day}" in p)
        add_equality_deletes(table, gone.filter(pc.equal(gone.column("day"), day)), ["id"],
                             partition=partition)
    history.s["s4"] = _head(table)
    history.eq_deleted = frozenset(gone.column("id").to_pylist())
    table.append(rows(30, start=200))
    history.s["s5"] = _head(table)
    return history


def _catalog_properties(seaweed: SeaweedFS, kind: str, root: Path) -> dict[str, str]:
    if kind == "rest":
        return seaweed.rest_properties()
    props = seaweed.sql_properties(root / "catalog.db")
    props["warehouse"] = f"s3://{seaweed.bucket}/sql-{uuid.uuid4().hex[:8]}"
    return props


@pytest.fixture(scope="session", params=CATALOG_KINDS)
def s3_catalog(request: pytest.FixtureRequest, seaweed: SeaweedFS,
               tmp_path_factory: pytest.TempPathFactory) -> S3Catalog:
    """A REST catalog (params ``rest``) or a SQLite catalog (``sql``), data in S3."""
    kind = request.param
    props = _catalog_properties(seaweed, kind, tmp_path_factory.mktemp(f"s3-{kind}"))
    return S3Catalog(kind, props, load_catalog(f"sw{kind}", **props))


@pytest.fixture(scope="session")
def history(s3_catalog: S3Catalog) -> History:
    """The shared table of :class:`History` in ``s3_catalog`` (read only)."""
    return build_history(s3_catalog)


def oracle(history: History, snapshot_id: int | None = None) -> pa.Table:
    """PyIceberg's rows of ``history.table`` at ``snapshot_id`` (default: the head).

    PyIceberg applies position deletes but refuses equality deletes; from ``s4`` on, the
    rows are its scan of ``s3`` without the equality-deleted ids, plus its incremental
    scan of the appends after ``s4``.
    """
    table = history.table
    snapshot_id = snapshot_id or history.s["s5"]
    order = [history.s[k] for k in ("s1", "s2", "s3", "s4", "s5")]
    if snapshot_id not in order[3:]:
        return table.scan(snapshot_id=snapshot_id).to_arrow()
    before = table.scan(snapshot_id=history.s["s3"]).to_arrow()
    kept = before.filter(pc.invert(pc.is_in(before.column("id"),
                                            value_set=pa.array(sorted(history.eq_deleted)))))
    if snapshot_id == history.s["s4"]:
        return kept
    added = table.incremental_append_scan(from_snapshot_id_exclusive=history.s["s4"],
                                          to_snapshot_id_inclusive=snapshot_id).to_arrow()
    return pa.concat_tables([kept, added])
