"""Driver program of the cluster tier: ``python spark_job.py '<json>'`` (run by the tests).

Job keys: ``master`` (a ``spark://`` URL) or ``remote`` (``sc://``), ``conf`` (session
settings), ``table``, ``options`` (Spark options, ``catalog.<prop>`` included), ``out``
(a Parquet file on the driver for the rows read), ``changelog`` (bool). Prints one JSON
line: rows read and the executors that served the session.
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
        options = dict(job["options"])
        if job.get("changelog"):
            options["changelog"] = "true"
        table = icefloe.spark.read(spark, job["table"], options=options).toArrow()
        pq.write_table(table, job["out"])
        report = {"rows": table.num_rows}
        if not job.get("remote"):
            status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus()
            report["block_managers"] = int(status.size())
        print(json.dumps(report), flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
