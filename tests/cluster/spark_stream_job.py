"""Streaming driver program of the cluster tier: ``python spark_stream_job.py '<json>'``.

A Structured Streaming query ``readStream.format("icefloe")`` on a cluster whose hosts
share no filesystem: the query's checkpoint (``checkpointLocation``) is a directory on
the driver host's own disk (the classic driver's, or the Connect server's host), and the
sink is idempotent on S3: ``foreachBatch`` writes each micro-batch as one Parquet object
named after its batch id, so a batch Spark replays after a driver restart overwrites its
own object (exactly once by object). The function runs on the driver (classic) or in the
Connect server's Python process; it carries the sink's S3 settings in its closure.

Job keys: ``master`` (``spark://``) or ``remote`` (``sc://``), ``conf``, ``table``,
``options`` (Spark options with ``catalog.<prop>``), ``checkpoint`` (a path on the
driver host), ``sink`` (``{"bucket", "prefix", "endpoint"}``, with ``"access_key", "secret_key"`` or
without: then the writing process's ``AWS_*`` variables; a Connect job's function is
pickled into the plan the server may log, so it carries no key),
``available_now`` (else a 500 ms processing-time trigger), ``stop_file`` (a path on this
machine: the query stops once it exists). Prints a JSON line when the query started and
one when it stopped.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import icefloe.spark


def batch_writer(sink: dict[str, str]) -> Any:
    """The ``foreachBatch`` function: micro-batch ``batch_id`` to
    ``s3://bucket/prefix/batch-<batch_id>.parquet`` (overwritten when replayed)."""

    def write(df: Any, batch_id: int) -> None:
        import pyarrow.parquet as pq
        from pyarrow import fs

        table = df.toArrow()
        s3 = fs.S3FileSystem(endpoint_override=sink["endpoint"], scheme="http",
                             access_key=sink.get("access_key"),
                             secret_key=sink.get("secret_key"), region="us-east-1")
        pq.write_table(table, f"{sink['bucket']}/{sink['prefix']}/batch-{batch_id:08d}.parquet",
                       filesystem=s3)

    return write


def main() -> None:
    job = json.loads(sys.argv[1])
    if job.get("remote"):
        spark = icefloe.spark.session(remote=job["remote"], config=job.get("conf"))
        for archive in job.get("artifacts", ()):
            spark.addArtifacts(archive, archive=True)
    else:
        spark = icefloe.spark.session(job["master"], "icefloe-cluster-stream", preload=False,
                                      config=job.get("conf"))
        spark.sparkContext.setLogLevel("WARN")
    try:
        writer = (spark.readStream.format("icefloe").options(**job["options"])
                  .load(job["table"])
                  .writeStream.foreachBatch(batch_writer(job["sink"]))
                  .option("checkpointLocation", job["checkpoint"]))
        if job.get("available_now"):
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime="500 milliseconds")
        query = writer.start()
        print(json.dumps({"started": query.id}), flush=True)
        stop = Path(job["stop_file"]) if job.get("stop_file") else None
        while query.isActive and not (stop is not None and stop.exists()):
            query.awaitTermination(0.5)
        if query.isActive:
            query.stop()
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
        print(json.dumps({"stopped": True, "at": time.time()}), flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
