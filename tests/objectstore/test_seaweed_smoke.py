"""The SeaweedFS fixture is a real S3 server and REST catalog; the latency proxy really delays."""

from __future__ import annotations

import time

import pyarrow as pa
from pyiceberg.catalog import load_catalog

from tests.helpers.latency_proxy import LatencyProxy
from tests.helpers.seaweed import SeaweedFS


def test_rest_catalog_round_trip(seaweed: SeaweedFS) -> None:
    catalog = load_catalog("sw", **seaweed.rest_properties())
    catalog.create_namespace_if_not_exists("smoke")
    table = catalog.create_table("smoke.t", schema=pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": [1, 2, 3]}))
    assert table.metadata_location.startswith(f"s3://{seaweed.table_bucket}/")
    again = catalog.load_table("smoke.t")
    assert sorted(again.scan().to_arrow()["id"].to_pylist()) == [1, 2, 3]
    catalog.purge_table("smoke.t")


def test_latency_proxy_delays_each_round_trip(seaweed: SeaweedFS) -> None:
    from pyarrow import fs

    with LatencyProxy(("127.0.0.1", seaweed.s3_port), delay_s=0.05) as proxy:
        s3 = fs.S3FileSystem(
            endpoint_override=proxy.endpoint, access_key="AKIAICEFLOETEST",
            secret_key="icefloe-test-secret-key", region="us-east-1", scheme="http",
        )
        with s3.open_output_stream(f"{seaweed.bucket}/proxy/obj") as out:
            out.write(b"x" * 1000)
        start = time.monotonic()
        for _ in range(3):
            assert s3.get_file_info(f"{seaweed.bucket}/proxy/obj").size == 1000
        elapsed = time.monotonic() - start
    # three HEAD requests, each at least one 100 ms round trip
    assert elapsed >= 0.3
