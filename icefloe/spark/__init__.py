"""icefloe on Spark: the ``icefloe`` PySpark Python Data Source (batch reads).

::

    import icefloe.spark
    icefloe.spark.register(spark)
    df = (spark.read.format("icefloe").option("catalog", "local")
          .option("snapshotId", "123").load("ns.events"))

Spark's filters are pushed into the scan only with ``option("pushFilters", "true")``: read
:data:`icefloe.spark.planning.PUSH_FILTERS` first (a PySpark 4.3 bug makes a pushed-down
DataFrame reuse its pruned plan for later unfiltered queries). The ``filter`` option
(a PyIceberg expression) prunes without that hazard.

Streaming: ``spark.readStream.format("icefloe")``; :func:`progress_lag` turns a query's
``lastProgress`` into icefloe's lag.

Needs the ``spark`` extra (``pip install 'icefloe[spark]'``); ``import icefloe`` never
imports PySpark.
"""

from __future__ import annotations

try:
    import pyspark  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "icefloe.spark needs PySpark; install the extra: pip install 'icefloe[spark]'"
    ) from exc

from icefloe.spark.datasource import IcefloeDataSource, IcefloePushdownReader, IcefloeReader
from icefloe.spark.session import (
    BackfillResult,
    backfill,
    catalog_options,
    read,
    register,
    session,
)
from icefloe.spark.streaming import progress_lag

__all__ = [
    "BackfillResult",
    "IcefloeDataSource",
    "IcefloePushdownReader",
    "IcefloeReader",
    "backfill",
    "catalog_options",
    "progress_lag",
    "read",
    "register",
    "session",
]
