"""Driver program of the standalone-cluster test: run as ``python cluster_job.py <json args>``.

It needs its own JVM (the suite's local session owns the test process's), so the test
starts it as a subprocess. Args: ``master``, ``table``, ``options`` (Spark options incl.
``catalog.<prop>``), ``out`` (Parquet directory). Prints one JSON line: the backfill result
and the number of Spark partitions of the read.
"""

from __future__ import annotations

import json
import sys

import icefloe.spark


def main() -> None:
    args = json.loads(sys.argv[1])
    spark = icefloe.spark.session(args["master"], "icefloe-cluster-test", config={
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.executor.memory": "512m",
        "spark.executor.cores": "1",
        "spark.cores.max": "1",
    })
    spark.sparkContext.setLogLevel("ERROR")
    try:
        df = icefloe.spark.read(spark, args["table"], options=args["options"])
        partitions = df.rdd.getNumPartitions()
        executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size()
        result = icefloe.spark.backfill(args["table"], options=args["options"], to=args["out"])
        print(json.dumps({"rows": result.rows, "files": result.files,
                          "partitions": partitions, "block_managers": executors}))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
