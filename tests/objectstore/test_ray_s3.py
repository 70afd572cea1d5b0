"""Ray Data reads and the Ray continuous pipeline on tables in S3, behind the REST catalog
and a SQL catalog, checked against PyIceberg's scans; the Ray stream checkpoints to S3."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog

from tests.helpers.seaweed import SeaweedFS

ray = pytest.importorskip("ray")

import icefloe.ray  # noqa: E402
from icefloe.state import open_store  # noqa: E402
from tests.conftest import assert_same_rows  # noqa: E402
from tests.helpers.tables import make_table, rows  # noqa: E402
from tests.objectstore.conftest import History, S3Catalog, oracle  # noqa: E402
from tests.ray.conftest import RAY_WARNINGS, ray_local  # noqa: E402, F401

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_local"), *RAY_WARNINGS]


def _collect(ds: object) -> pa.Table:
    tables = [t for t in ray.get(ds.to_arrow_refs()) if t.num_rows]  # type: ignore[attr-defined]
    return pa.concat_tables(tables)


def test_ray_data_read(s3_catalog: S3Catalog, history: History) -> None:
    ds = icefloe.ray.read(history.identifier, options=s3_catalog.options(splitSize="1"))
    assert_same_rows(_collect(ds), oracle(history))  # position and equality deletes


def test_ray_stream_checkpoints_to_s3(seaweed: SeaweedFS) -> None:
    """One catalog only (REST): actors take ~40 s to start on a loaded 2-core machine."""
    catalog = load_catalog("swrest", **seaweed.rest_properties())
    table = make_table(catalog, f"objectstore.ray_{uuid.uuid4().hex[:10]}")
    for i in range(3):
        table.append(rows(40, start=100 * i))
    ckpt = f"s3://{seaweed.bucket}/ray-ckpt/{uuid.uuid4().hex}"
    options = {"catalog": "swrest",
               **{f"catalog.{k}": v for k, v in seaweed.rest_properties().items()}}
    batches: list[pa.RecordBatch] = []
    with icefloe.ray.RayStream(".".join(table.name()), options=options, checkpoint=ckpt,
                               num_readers=1, available_now=True) as stream:
        for item in stream:
            batches.append(item.batch)
            item.ack(wait=True)
    assert_same_rows(pa.Table.from_batches(batches), table.scan().to_arrow())
    saved = open_store(ckpt, seaweed.s3_properties()).read()
    assert saved is not None and saved.position.snapshot_id == table.current_snapshot().snapshot_id
