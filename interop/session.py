"""A local Spark 3.5 session with Java Iceberg 1.10.2 and a JDBC (SQLite) catalog.

Runs in ``.venv-interop`` only (see ``interop/setup.sh``). The catalog is
``org.apache.iceberg.jdbc.JdbcCatalog`` on ``<home>/catalog.db`` (schema version V1, the
``iceberg_tables`` layout PyIceberg's ``SqlCatalog`` reads), warehouse ``<home>/warehouse``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

CATALOG = "interop"
"""The catalog name, for Spark (``interop.ns.t``) and for PyIceberg's ``SqlCatalog``."""

SQLITE_JDBC = "/usr/share/java/sqlite-jdbc.jar"


def _jars() -> list[str]:
    import snowpark_connect_deps_iceberg  # the wheel that ships Iceberg's Spark jars

    base = Path(snowpark_connect_deps_iceberg.__file__).parent / "jars"
    wanted = ["iceberg-spark-runtime-3.5_2.12-1.10.2.jar",
              "iceberg-spark-extensions-3.5_2.12-1.10.2.jar"]
    jars = [str(base / name) for name in wanted]
    shaded = Path(sys.prefix) / "jackson-iceberg-shaded.jar"
    jars += [str(shaded), SQLITE_JDBC]
    missing = [j for j in jars if not os.path.exists(j)]
    if missing:
        raise SystemExit(f"interop: missing {missing}; run `make interop-env`")
    return jars


def spark_session(home: Path, app: str = "icefloe-interop"):  # type: ignore[no-untyped-def]
    """The session: local[2], UTC, Iceberg's SQL extensions, catalog ``interop`` at ``home``."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["TZ"] = "UTC"  # PySpark turns timestamps into naive local datetimes
    time.tzset()
    warehouse = home / "warehouse"
    warehouse.mkdir(parents=True, exist_ok=True)
    prefix = f"spark.sql.catalog.{CATALOG}"
    builder = (
        SparkSession.builder.master("local[2]").appName(app)
        .config("spark.jars", ",".join(_jars()))
        .config("spark.sql.extensions",
                "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config(prefix, "org.apache.iceberg.spark.SparkCatalog")
        .config(f"{prefix}.type", "jdbc")
        .config(f"{prefix}.uri", f"jdbc:sqlite:{home / 'catalog.db'}")
        .config(f"{prefix}.jdbc.schema-version", "V1")
        .config(f"{prefix}.warehouse", f"file://{warehouse}")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config(f"{prefix}.cache-enabled", "false")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.parquet.datetimeRebaseModeInWrite", "CORRECTED")
        .config("spark.sql.avro.datetimeRebaseModeInWrite", "CORRECTED")
        .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def pyiceberg_properties(home: Path) -> dict[str, str]:
    """The PyIceberg ``SqlCatalog`` properties that read the same catalog (name ``interop``)."""
    return {"uri": f"sqlite:///{home / 'catalog.db'}", "warehouse": f"file://{home / 'warehouse'}"}
