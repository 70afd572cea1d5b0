"""A PySpark worker daemon that imports icefloe once, before it forks Python workers.

Spark starts Python workers (driver-side planners and executor readers) by forking a
daemon process. PySpark's own daemon has imported only PySpark, so every new worker pays
for importing icefloe, PyIceberg and PyArrow (seconds each on a small machine). This
daemon imports them first; forked workers inherit them. Enabled by
:func:`icefloe.spark.session` (``spark.python.daemon.module=icefloe.spark.daemon``);
usable only where every Python worker's interpreter has icefloe installed.
"""

from __future__ import annotations

from pyspark import daemon

# preloaded for the workers this daemon forks: the reader path (PyIceberg, PyArrow) and
# the planner path (catalogs)
import icefloe.spark.executor
import icefloe.spark.planning  # noqa: F401

if __name__ == "__main__":
    daemon.manager()
