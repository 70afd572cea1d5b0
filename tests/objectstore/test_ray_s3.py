"""Ray Data reads and the Ray continuous pipeline on tables in S3, behind the REST catalog
and a SQL catalog, checked against PyIceberg's scans; the Ray stream checkpoints to S3."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from tests.helpers.seaweed import SeaweedFS

ray = pytest.importorskip("ray")

import icefloe.ray  # noqa: E402
from icefloe.state import open_store  # noqa: E402
from tests.conftest import assert_same_rows  # noqa: E402
from tests.objectstore.conftest import History, S3Catalog, oracle  # noqa: E402
from tests.ray.conftest import RAY_WARNINGS, ray_local  # noqa: E402, F401

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_local"), *RAY_WARNINGS]


def _collect(ds: object) -> pa.Table:
    tables = [t for t in ray.get(ds.to_arrow_refs()) if t.num_rows]  # type: ignore[attr-defined]
    return pa.concat_tables(tables)


def test_ray_data_read(s3_catalog: S3Catalog, history: History) -> None:
    ds = icefloe.ray.read(history.identifier, options=s3_catalog.options(splitSize="1"))
    assert_same_rows(_collect(ds), oracle(history))
    ds = icefloe.ray.read(history.identifier,
                          options=s3_catalog.options(snapshotId=str(history.s["s4"])))
    assert_same_rows(_collect(ds), oracle(history, history.s["s4"]))


def test_ray_stream_checkpoints_to_s3(s3_catalog: S3Catalog, history: History,
                                      seaweed: SeaweedFS) -> None:
    ckpt = f"s3://{seaweed.bucket}/ray-ckpt/{uuid.uuid4().hex}"
    batches: list[pa.RecordBatch] = []
    with icefloe.ray.RayStream(history.identifier, options=s3_catalog.options(),
                               checkpoint=ckpt, num_readers=2, available_now=True) as stream:
        for item in stream:
            batches.append(item.batch)
            item.ack(wait=True)
    assert_same_rows(pa.Table.from_batches(batches), oracle(history))
    assert open_store(ckpt, seaweed.s3_properties()).read() is not None
