"""Ray driver program of the cluster tier: ``python ray_job.py '<json>'`` (run by the tests).

Runs on the head host, as a user runs a driver there with their code checked out: Ray Data
needs a driver on a node (over Ray Client its streaming executor fails). Job keys:
``address`` (the head's ``host:port``), ``reads``: a list of ``{"table", "options",
"out"}`` (options with ``catalog.<prop>``; ``out`` a Parquet file on the head host), and
``stream``: ``{"table", "options", "checkpoint"}`` for an available-now stream whose
delivered ids are reported.
icefloe reaches the other nodes through ``runtime_env={"py_modules": [icefloe]}``: they
have Ray and icefloe's dependencies, not icefloe. Prints one JSON line.
"""

from __future__ import annotations

import json
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import ray

import icefloe
import icefloe.ray


def main() -> None:
    job = json.loads(sys.argv[1])
    ray.init(job["address"], runtime_env={"py_modules": [icefloe]}, log_to_driver=False)
    try:
        report: dict[str, object] = {"rows": []}
        if job.get("stream"):  # an available-now stream, its checkpoint in S3
            from icefloe.ray.stream import RayStream

            spec = job["stream"]
            ids: list[int] = []
            with RayStream(spec["table"], options=spec["options"],
                           checkpoint=spec["checkpoint"], available_now=True, num_readers=2,
                           reader_num_cpus=0.5, checkpoint_interval_s=0) as stream:
                for item in stream:
                    ids += item.batch.column("id").to_pylist()
                    item.ack(wait=True)
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
