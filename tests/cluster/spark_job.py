"""Driver program of the cluster tier: ``python spark_job.py '<json>'`` (run by the tests).

Job keys: ``master`` (a ``spark://`` URL) or ``remote`` (``sc://``), ``conf`` (session
settings), ``reads``: a list of ``{"table", "options", "out"}`` (Spark options with
``catalog.<prop>``; ``out`` a Parquet file on the driver for the rows read). Prints one
JSON line: the rows of each read and the block managers of the session (classic).
"""

from __future__ import annotations

import json
import sys

import pyarrow.parquet as pq

import icefloe.spark


def main() -> None:
    job = json.loads(sys.argv[1])
    if job.get("remote"):
        spark = icefloe.spark.session(remote=job["remote"], config=job.get("conf"))
    else:
        spark = icefloe.spark.session(job["master"], "icefloe-cluster", preload=False,
                                      config=job.get("conf"))
        spark.sparkContext.setLogLevel("WARN")
    try:
        report: dict[str, object] = {"rows": []}
        for read in job["reads"]:
            table = icefloe.spark.read(spark, read["table"], options=read["options"]).toArrow()
            pq.write_table(table, read["out"])
            report["rows"].append(table.num_rows)  # type: ignore[attr-defined]
        if not job.get("remote"):
            status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus()
            report["block_managers"] = int(status.size())
        print(json.dumps(report), flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
