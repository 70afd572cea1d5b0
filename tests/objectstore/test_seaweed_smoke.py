"""The SeaweedFS fixture is a real S3 server and REST catalog; the latency proxy really delays."""

from __future__ import annotations

import time
from pathlib import Path

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


def test_starting_a_running_server_again_starts_no_second_one(tmp_path: Path) -> None:
    """``with SeaweedFS(...).start() as server`` (start, then the context's start) runs one
    ``weed`` process, and leaving the block stops it: a second start used to launch a
    second process and own only that one, leaving the first running after the stop."""
    import os

    with SeaweedFS(tmp_path / "sw").start() as server:
        assert server.proc is not None
        pid = server.proc.pid
        procs = [p for p in os.listdir("/proc") if p.isdigit()
                 and str(tmp_path) in _cmdline(p)]
        assert procs == [str(pid)]
    assert not os.path.exists(f"/proc/{pid}") or _cmdline(str(pid)) == ""


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""
