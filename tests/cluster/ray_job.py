"""Ray driver program of the cluster tier: ``python ray_job.py '<json>'`` (run by the tests).

Runs on the head host, as a user runs a driver there with their code checked out: Ray Data
needs a driver on a node (over Ray Client its streaming executor fails). Job keys:
``address`` (the head's ``host:port``), ``reads``: a list of ``{"table", "options",
"out"}`` (options with ``catalog.<prop>``; ``out`` a Parquet file on the head host), and
``stream``: ``{"table", "options", "checkpoint"}`` for an available-now stream whose
delivered ids are reported; with ``stop_file`` (a path on the head host) a continuous
stream until that file exists, and with ``sink`` (``{"bucket", "prefix", "endpoint",
"access_key", "secret_key"}``) every item written to S3 before it is acked;
``delay_s`` after each ack (a slow consumer).
icefloe reaches the other nodes through ``runtime_env={"py_modules": [icefloe]}``: they
have Ray and icefloe's dependencies, not icefloe. Prints one JSON line.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import ray

import icefloe
import icefloe.ray


def s3_sink(spec: dict[str, str]) -> Any:
    """An idempotent S3 sink: each item's rows as ``<prefix>/<split id>-<offset>.parquet``
    (a re-delivered item overwrites its own object), written before the item is acked."""
    from pyarrow import fs

    s3 = fs.S3FileSystem(endpoint_override=spec["endpoint"], scheme="http",
                         access_key=spec["access_key"], secret_key=spec["secret_key"],
                         region="us-east-1")

    def write(item: Any) -> None:
        name = f"{spec['bucket']}/{spec['prefix']}/{item.split_id}-{item.consumed:012d}.parquet"
        pq.write_table(pa.Table.from_batches([item.batch]), name, filesystem=s3)

    return write


def stop_when(path: Path, stream: Any) -> None:
    """Stop ``stream`` (its final checkpoint written) once ``path`` exists."""
    while not path.exists():
        time.sleep(0.2)
    stream.stop()


def main() -> None:
    job = json.loads(sys.argv[1])
    ray.init(job["address"], runtime_env={"py_modules": [icefloe]}, log_to_driver=False)
    try:
        report: dict[str, object] = {"rows": []}
        if job.get("stream"):  # an available-now stream, its checkpoint in S3
            from icefloe.ray.stream import RayStream

            spec = job["stream"]
            ids: list[int] = []
            sink = s3_sink(spec["sink"]) if spec.get("sink") else None
            with RayStream(spec["table"], options=spec["options"],
                           checkpoint=spec["checkpoint"],
                           available_now=not spec.get("stop_file"), num_readers=2,
                           reader_num_cpus=0.5, checkpoint_interval_s=0) as stream:
                if spec.get("stop_file"):
                    threading.Thread(target=stop_when, daemon=True,
                                     args=(Path(spec["stop_file"]), stream)).start()
                for item in stream:
                    if sink is not None:
                        sink(item)
                    ids += item.batch.column("id").to_pylist()
                    item.ack(wait=True)
                    time.sleep(spec.get("delay_s", 0))  # a slow consumer: time to kill it
            report["ids"] = ids
        for read in job.get("reads", ()):
            dataset = icefloe.ray.read(read["table"], options=read["options"])
            table = pa.concat_tables(ray.get(dataset.to_arrow_refs()))
            pq.write_table(table, read["out"])
            report["rows"].append(table.num_rows)  # type: ignore[attr-defined]
        report["nodes"] = sorted(n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"])
        print(json.dumps(report), flush=True)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
