"""Ray driver program of the cluster tier: ``python ray_job.py '<json>'`` (run by the tests).

Job keys: ``address`` (``ray://head:10001``, Ray Client) and ``reads``: a list of
``{"table", "options", "out"}`` (options with ``catalog.<prop>``; ``out`` a Parquet file
on the driver).
icefloe reaches the cluster's workers through ``runtime_env={"py_modules": [icefloe]}``:
the nodes have Ray and icefloe's dependencies, not icefloe. Prints one JSON line.
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
        for read in job["reads"]:
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
