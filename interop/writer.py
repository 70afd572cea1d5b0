"""Write the interop tables with Java Iceberg 1.10.2 (Spark 3.5 SQL) and Spark's oracle reads.

Run in ``.venv-interop``: ``.venv-interop/bin/python interop/writer.py`` (``make interop-data``).
Into ``build/interop/<key>/`` (see ``cache.py``), once per key:
- ``catalog.db`` + ``warehouse/``: a JDBC (SQLite) catalog named ``interop``, namespace ``ns``;
- ``oracle/<case>/``: what Spark's own Iceberg reader returns for each case (Parquet);
- ``cases.json``: the cases, each with the table, the icefloe options meaning the same read,
  and either the oracle directory and its column names, or the error Spark raised.

Case kinds: ``head``, ``snapshot`` (every snapshot still in the table, on any ref),
``timestamp`` (``as-of-timestamp`` at each commit of main), ``ref`` (branches, tags),
``range`` (appends between two snapshots), ``filter``, ``columns``, ``metadata``
(``_file``, ``_pos``; v3 ``_row_id``, ``_last_updated_sequence_number``) and ``stream``
(Iceberg's own Structured Streaming source from the oldest snapshot under each skip policy,
``Trigger.AvailableNow`` into a Parquet sink).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cache
from duckdb_oracle import add_duckdb_oracle
from session import CATALOG, spark_session

NS = "ns"
MOR = ("'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', "
       "'write.merge.mode'='merge-on-read'")
COW = ("'write.delete.mode'='copy-on-write', 'write.update.mode'='copy-on-write', "
       "'write.merge.mode'='copy-on-write'")
STREAM_POLICIES = {
    "default": {},
    "skip_delete": {"streaming-skip-delete-snapshots": "true"},
    "skip_overwrite": {"streaming-skip-overwrite-snapshots": "true"},
    "skip_both": {"streaming-skip-delete-snapshots": "true",
                  "streaming-skip-overwrite-snapshots": "true"},
}
TIMESTAMP_TABLES = ("mor", "compact", "evolve", "refs", "history", "v1")
STREAM_TABLES = ("appends", "mor", "cow", "v3dv", "compact", "history", "v1")
CHANGELOG_TABLES = ("appends", "cow", "mor", "v3dv", "compact", "v1")
"""Tables whose history Spark's changelog view reads (or refuses: merge-on-read deletes)."""
SCHEMA_CHANGES: dict[str, tuple[str, ...]] = {
    "add": ("ADD COLUMN extra string",),
    "rename": ("RENAME COLUMN name TO label",),
    "rename_nested": ("RENAME COLUMN info.a TO alpha",),
    "drop": ("DROP COLUMN old",),
    "readd": ("DROP COLUMN old", "ADD COLUMN old string"),
    "int_long": ("ALTER COLUMN n TYPE bigint",),
    "float_double": ("ALTER COLUMN score TYPE double",),
    "reorder": ("ALTER COLUMN score FIRST",),
    "spec": ("ADD PARTITION FIELD bucket(4, id)",),
}
"""The ``schema_changes`` step: table ``sc_<kind>`` gets these ``ALTER TABLE`` statements
between its two appends (issue 19: schema changes while a stream runs)."""
EVENT_TIME_HOURS = (3, 0, 5, 1, 4, 2)
"""The ``event_time`` step: one append (one file) per hour, out of event-time order."""
EVENT_TIME_BASE = 1_767_225_600  # 2026-01-01T00:00:00Z, epoch seconds


class Writer:
    """Builds the tables through one Spark session."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.spark = spark_session(home)
        self.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{NS}")
        self.tables: list[str] = []
        self.schema_change_tables: dict[str, dict[str, Any]] = {}
        self.notes: dict[str, list[str]] = {}

    def t(self, name: str) -> str:
        return f"{CATALOG}.{NS}.{name}"

    def sql(self, text: str) -> Any:
        return self.spark.sql(text)

    def create(self, name: str, columns: str, props: str, partitioned: str = "") -> str:
        self.tables.append(name)
        part = f"PARTITIONED BY ({partitioned})" if partitioned else ""
        self.sql(f"CREATE TABLE {self.t(name)} ({columns}) USING iceberg {part} "
                 f"TBLPROPERTIES ({props})")
        return self.t(name)

    def rows(self, name: str, start: int, stop: int, parts: str = "abc") -> None:
        """Append ids [start, stop) with part, v and n columns (two files per partition)."""
        n = len(parts)
        self.sql(f"INSERT INTO {self.t(name)} SELECT id, "
                 f"substr('{parts}', cast(id % {n} AS int) + 1, 1) AS part, "
                 f"concat('v', id) AS v, cast(id * 3 AS int) AS n "
                 f"FROM range({start}, {stop}, 1, 2)")

    def snapshot_ids(self, name: str) -> list[int]:
        return [r[0] for r in self.sql(
            f"SELECT snapshot_id FROM {self.t(name)}.snapshots ORDER BY committed_at").collect()]

    # -- the tables ---------------------------------------------------------------------

    def appends(self) -> None:
        self.create("appends", "id bigint, part string, v string, n int", "'format-version'='2'")
        for lo in (0, 20, 40):
            self.rows("appends", lo, lo + 20)

    def mor(self) -> None:
        t = self.create("mor", "id bigint, part string, v string, n int",
                        f"'format-version'='2', {MOR}, 'write.delete.granularity'='file'", "part")
        self.rows("mor", 0, 40)
        self.rows("mor", 40, 60)
        self.sql(f"DELETE FROM {t} WHERE id % 7 = 0")  # file-scoped position deletes
        self.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('write.delete.granularity'='partition')")
        self.sql(f"DELETE FROM {t} WHERE id % 5 = 0")  # partition-scoped position deletes
        self.sql(f"UPDATE {t} SET v = concat(v, '-u') WHERE id % 3 = 0")
        self.sql(f"""MERGE INTO {t} d USING (SELECT id, part, concat('m', id) AS v,
                 cast(id AS int) AS n FROM range(50, 70)) s ON d.id = s.id
                 WHEN MATCHED AND s.id % 2 = 0 THEN DELETE
                 WHEN MATCHED THEN UPDATE SET d.v = s.v
                 WHEN NOT MATCHED THEN INSERT *""".replace(
            "SELECT id, part", "SELECT id, substr('abc', cast(id % 3 AS int) + 1, 1) AS part"))
        self.rows("mor", 100, 110)

    def cow(self) -> None:
        t = self.create("cow", "id bigint, part string, v string, n int",
                        f"'format-version'='2', {COW}", "part")
        self.rows("cow", 0, 30)
        self.sql(f"DELETE FROM {t} WHERE id % 4 = 0")
        self.sql(f"UPDATE {t} SET n = -n WHERE id % 5 = 1")
        self.sql(f"""MERGE INTO {t} d USING (SELECT id, substr('abc', cast(id % 3 AS int) + 1, 1)
                 AS part, 'm' AS v, 0 AS n FROM range(25, 35)) s ON d.id = s.id
                 WHEN MATCHED THEN UPDATE SET d.v = s.v WHEN NOT MATCHED THEN INSERT *""")
        self.sql(f"DELETE FROM {t} WHERE part = 'c'")  # whole partition: a metadata delete
        self.rows("cow", 40, 50, parts="ab")

    def v3dv(self) -> None:
        t = self.create("v3dv", "id bigint, part string, v string, n int",
                        f"'format-version'='3', {MOR}", "part")
        self.rows("v3dv", 0, 60)
        self.sql(f"DELETE FROM {t} WHERE id % 4 = 0")  # one DV per data file, one Puffin file
        self.sql(f"UPDATE {t} SET v = 'u' WHERE id % 5 = 0")  # DVs merged with the old ones
        self.rows("v3dv", 60, 70)
        self.sql(f"DELETE FROM {t} WHERE id % 7 = 1")

    def upgraded(self) -> None:
        t = self.create("upgraded", "id bigint, part string, v string, n int",
                        f"'format-version'='2', {MOR}", "part")
        self.rows("upgraded", 0, 30)
        self.sql(f"DELETE FROM {t} WHERE id % 3 = 0")  # v2 position delete files
        self.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('format-version'='3')")
        self.sql(f"DELETE FROM {t} WHERE id % 4 = 1")  # v3: DVs absorbing the v2 deletes
        self.rows("upgraded", 30, 40)

    def compact(self) -> None:
        t = self.create("compact", "id bigint, part string, v string, n int",
                        f"'format-version'='2', {MOR}", "part")
        for lo in (0, 15, 30):
            self.rows("compact", lo, lo + 15)
        self.sql(f"DELETE FROM {t} WHERE id % 6 = 0")
        self.sql(f"DELETE FROM {t} WHERE id % 6 = 1")
        self.sql(f"CALL {CATALOG}.system.rewrite_position_delete_files(table => '{NS}.compact', "
                 "options => map('rewrite-all', 'true'))")
        self.sql(f"CALL {CATALOG}.system.rewrite_data_files(table => '{NS}.compact', "
                 "options => map('min-input-files', '2'))")
        self.rows("compact", 45, 60)
        self.sql(f"DELETE FROM {t} WHERE id % 10 = 9")
        self.sql(f"CALL {CATALOG}.system.rewrite_data_files(table => '{NS}.compact', "
                 "strategy => 'sort', sort_order => 'id DESC NULLS LAST', "
                 "options => map('rewrite-all', 'true'))")
        self.sql(f"CALL {CATALOG}.system.rewrite_manifests('{NS}.compact')")
        self.rows("compact", 60, 65)

    def evolve(self) -> None:
        t = self.create("evolve", "id int, info struct<a: int, b: string>, price float, "
                        "amount decimal(9,2), old string, cat string",
                        "'format-version'='2'", "cat")
        self.sql(f"""INSERT INTO {t} VALUES
                 (1, named_struct('a', 10, 'b', 'x'), 1.5, 12.34, 'o1', 'k1'),
                 (2, NULL, NULL, NULL, NULL, NULL),
                 (2147483647, named_struct('a', NULL, 'b', 'y'), 3.25, -9999999.99, 'o3', 'k2')""")
        self.sql(f"ALTER TABLE {t} RENAME COLUMN info.a TO a2")
        self.sql(f"ALTER TABLE {t} RENAME COLUMN cat TO category")
        self.sql(f"ALTER TABLE {t} ALTER COLUMN id TYPE bigint")
        self.sql(f"ALTER TABLE {t} ALTER COLUMN price TYPE double")
        self.sql(f"ALTER TABLE {t} ALTER COLUMN amount TYPE decimal(18,2)")
        self.sql(f"ALTER TABLE {t} DROP COLUMN old")
        self.sql(f"ALTER TABLE {t} ADD COLUMN old string")
        self.sql(f"ALTER TABLE {t} ADD COLUMN info.c bigint")
        self.sql(f"""INSERT INTO {t} (id, info, price, amount, category, old) VALUES
                 (9000000000, named_struct('a2', 5, 'b', 'z', 'c', 7), 1e300, 1234567890123.45,
                  'k1', 'new')""")
        self.sql(f"ALTER TABLE {t} ADD PARTITION FIELD bucket(4, id)")
        self.sql(f"ALTER TABLE {t} DROP PARTITION FIELD category")
        self.sql(f"""INSERT INTO {t} (id, info, price, amount, category, old) VALUES
                 (-5, NULL, -0.0, 0.01, 'k3', NULL), (6, named_struct('a2', NULL, 'b', NULL,
                  'c', NULL), 2.0, NULL, NULL, 'n6')""")

    def refs(self) -> None:
        t = self.create("refs", "id bigint, part string, v string, n int",
                        f"'format-version'='2', {MOR}")
        self.rows("refs", 0, 10)
        self.sql(f"ALTER TABLE {t} CREATE TAG t1")
        self.sql(f"ALTER TABLE {t} CREATE BRANCH b1")
        self.sql(f"INSERT INTO {t}.branch_b1 VALUES (100, 'z', 'on-b1', 1)")
        self.sql(f"DELETE FROM {t}.branch_b1 WHERE id < 3")
        self.rows("refs", 10, 15)
        self.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('write.wap.enabled'='true')")
        self.spark.conf.set("spark.wap.id", "wap1")
        self.sql(f"INSERT INTO {t} VALUES (200, 'w', 'staged', 2)")
        self.spark.conf.unset("spark.wap.id")
        staged = self.sql(f"SELECT snapshot_id FROM {t}.snapshots "
                          "WHERE summary['wap.id'] = 'wap1'").collect()[0][0]
        self.rows("refs", 15, 20)
        self.sql(f"CALL {CATALOG}.system.cherrypick_snapshot('{NS}.refs', {staged})")
        self.sql(f"ALTER TABLE {t} CREATE TAG t2")

    def history(self) -> None:
        self.create("history", "id bigint, part string, v string, n int", "'format-version'='2'")
        for lo in (0, 10, 20):
            self.rows("history", lo, lo + 10)
        s1, s2, _s3 = self.snapshot_ids("history")
        self.sql(f"CALL {CATALOG}.system.rollback_to_snapshot('{NS}.history', {s2})")
        self.rows("history", 30, 40)
        now = datetime.now(UTC) + timedelta(seconds=1)
        self.sql(f"CALL {CATALOG}.system.expire_snapshots(table => '{NS}.history', "
                 f"older_than => TIMESTAMP '{now:%Y-%m-%d %H:%M:%S.%f}', retain_last => 2)")
        self.rows("history", 40, 50)
        self.notes["history"] = [f"rolled back to {s2}; {s1} and the orphaned third expired"]

    def types(self) -> None:
        from pyspark.sql import types as T

        schema = T.StructType([
            T.StructField("id", T.IntegerType()),
            T.StructField("b", T.BooleanType()), T.StructField("i", T.IntegerType()),
            T.StructField("l", T.LongType()), T.StructField("f", T.FloatType()),
            T.StructField("d", T.DoubleType()), T.StructField("dec38", T.DecimalType(38, 10)),
            T.StructField("dec9", T.DecimalType(9, 2)), T.StructField("dt", T.DateType()),
            T.StructField("ts", T.TimestampType()), T.StructField("tsntz", T.TimestampNTZType()),
            T.StructField("s", T.StringType()), T.StructField("bin", T.BinaryType()),
            T.StructField("arr", T.ArrayType(T.IntegerType())),
            T.StructField("arr_s", T.ArrayType(T.StringType())),
            T.StructField("m", T.MapType(T.StringType(), T.LongType())),
            T.StructField("st", T.StructType([
                T.StructField("x", T.IntegerType()), T.StructField("y", T.StringType()),
                T.StructField("z", T.StructType([T.StructField("w", T.DoubleType())]))])),
        ])
        utc = UTC
        rows = [
            (1, True, -2**31, -2**63, -3.4028235e38, -1.7976931348623157e308,
             Decimal("-9999999999999999999999999999.9999999999"), Decimal("-9999999.99"),
             date(1, 1, 1), datetime(1, 1, 1, tzinfo=utc), datetime(1, 1, 1),
             "", b"", [], [], {}, (None, None, None)),
            (2, False, 2**31 - 1, 2**63 - 1, 3.4028235e38, 1.7976931348623157e308,
             Decimal("9999999999999999999999999999.9999999999"), Decimal("9999999.99"),
             date(9999, 12, 31), datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=utc),
             datetime(9999, 12, 31, 23, 59, 59, 999999), "ünï😀code\x00z", bytes(range(256)),
             [None, 1, -1], [None, ""], {"k": None, "": 1}, (1, "y", (None,))),
            (3,) + (None,) * 16,
            (4, None, 0, 0, float("nan"), float("inf"), Decimal("0E-10"), Decimal("0.00"),
             date(1970, 1, 1), datetime(1970, 1, 1, tzinfo=utc), datetime(1970, 1, 1),
             None, None, None, [None], None, (None, None, None)),
            (5, True, None, 1, -0.0, float("-inf"), None, Decimal("-0.01"),
             date(1969, 12, 31), datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=utc),
             datetime(2262, 4, 12), "s", b"\x00", [7], ["a"], {"a": 1}, (2, None, (float("nan"),))),
        ]
        self.create("types", ", ".join(f"{f.name} {f.dataType.simpleString()}"
                                       for f in schema.fields), "'format-version'='2'")
        self.spark.createDataFrame(rows[:3], schema).coalesce(1).writeTo(self.t("types")).append()
        self.spark.createDataFrame(rows[3:], schema).coalesce(1).writeTo(self.t("types")).append()

    def nested_nulls(self) -> None:
        t = self.create("nested_nulls", "id int, al array<struct<a: int, b: string>>, "
                        "ms map<string, struct<a: int, b: string>>, "
                        "st struct<inner: array<struct<a: int>>>", "'format-version'='2'")
        self.sql(f"""INSERT INTO {t} VALUES
            (1, NULL, NULL, NULL),
            (2, array(), map(), named_struct('inner', array())),
            (3, array(named_struct('a', 1, 'b', 'x'), NULL), map('k', named_struct('a', 2, 'b',
             NULL), 'n', NULL), named_struct('inner', NULL)),
            (4, array(named_struct('a', NULL, 'b', NULL)), map('e', named_struct('a', NULL,
             'b', NULL)), named_struct('inner', array(NULL, named_struct('a', 5)))),
            (5, NULL, map(), named_struct('inner', NULL))""")

    def parts(self) -> None:
        t = self.create("parts", "id int, p_int int, p_long bigint, p_str string, "
                        "p_date date, p_ts timestamp, p_bool boolean, p_dec decimal(10,2), "
                        "p_bin binary, v string",
                        "'format-version'='2'",
                        "p_int, p_long, p_str, p_date, p_ts, p_bool, p_dec, p_bin")
        self.sql(f"""INSERT INTO {t} VALUES
            (1, 1, 10, 'a', DATE'2024-01-01', TIMESTAMP'2024-01-01 10:00:00', true, 1.50,
             X'00', 'r1'),
            (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'all-null'),
            (3, -2147483648, -9223372036854775808, '', DATE'0001-01-01',
             TIMESTAMP'1969-12-31 23:59:59.999999', false, -99999999.99, X'', 'extremes'),
            (4, 1, NULL, 'a b/c=d%', DATE'2024-01-01', NULL, true, NULL, X'FF', 'odd-chars'),
            (5, 2147483647, 9223372036854775807, 'ü', DATE'9999-12-31',
             TIMESTAMP'2024-06-30 00:00:00', NULL, 0.00, NULL, 'r5')""")
        self.sql(f"DELETE FROM {t} WHERE p_str IS NULL")  # drops a whole null partition

    def transforms(self) -> None:
        """Every partition transform Java writes, one source column each (Iceberg refuses
        two time transforms of one column): hours, days, months, years, truncate of a
        string, a long and a decimal, bucket; with nulls (issue 31: the manifest decoders
        read these partition values)."""
        t = self.create("transforms", "id int, ts_h timestamp, ts_d timestamp, d_m date, "
                        "d_y date, s string, l bigint, dec decimal(10,2), v string",
                        "'format-version'='2'",
                        "hours(ts_h), days(ts_d), months(d_m), years(d_y), truncate(2, s), "
                        "truncate(10, l), truncate(100, dec), bucket(3, id)")
        self.sql(f"""INSERT INTO {t} VALUES
            (1, TIMESTAMP'2024-01-01 10:30:00', TIMESTAMP'2024-01-01 10:30:00',
             DATE'2024-01-15', DATE'2024-01-15', 'alpha', 17, 12.34, 'r1'),
            (2, TIMESTAMP'1969-12-31 23:59:59', TIMESTAMP'1969-12-31 23:59:59',
             DATE'1969-12-31', DATE'1969-12-31', 'b', -17, -0.01, 'pre-epoch'),
            (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'all-null'),
            (4, TIMESTAMP'2024-01-01 11:00:00', TIMESTAMP'2024-01-02 00:00:00',
             DATE'2024-02-01', DATE'2025-01-01', 'alps', 19, 99.99, 'r4'),
            (5, TIMESTAMP'2024-01-01 10:59:59', TIMESTAMP'2024-01-01 23:59:59',
             DATE'2024-01-31', DATE'2024-12-31', 'al', 10, 1.00, 'r5')""")

    def formats(self) -> None:
        cols = ("id bigint, s string, dec decimal(10,2), ts timestamp, "
                "al array<struct<a: int>>, m map<string, int>")
        vals = lambda lo: f"""SELECT id, concat('s', id), cast(id AS decimal(10,2)) / 4,
            timestamp_seconds(id * 3600), if(id % 3 = 0, NULL, array(named_struct('a',
            cast(id AS int)))), if(id % 4 = 0, NULL, map('k', cast(id AS int)))
            FROM range({lo}, {lo + 10}, 1, 2)"""  # noqa: E731
        for fmt in ("orc", "avro"):
            t = self.create(fmt, cols, f"'format-version'='2', {MOR}, "
                            f"'write.format.default'='{fmt}'")
            self.sql(f"INSERT INTO {t} {vals(0)}")
            self.sql(f"DELETE FROM {t} WHERE id % 4 = 1")
            self.sql(f"INSERT INTO {t} {vals(10)}")
        t = self.create("mixed", cols, "'format-version'='2'")
        for lo, fmt in ((0, "parquet"), (10, "orc"), (20, "avro")):
            self.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('write.format.default'='{fmt}')")
            self.sql(f"INSERT INTO {t} {vals(lo)}")

    def v1(self) -> None:
        t = self.create("v1", "id bigint, part string, v string, n int", "'format-version'='1'",
                        "part")
        self.rows("v1", 0, 30)
        self.sql(f"DELETE FROM {t} WHERE id % 4 = 0")  # copy-on-write: an overwrite
        self.sql(f"INSERT OVERWRITE {t} SELECT id, 'b', 'ow', 0 FROM range(100, 103)")
        self.rows("v1", 30, 40)
        self.sql(f"DELETE FROM {t} WHERE part = 'c'")  # whole partition: a delete

    def schema_changes(self) -> None:
        """One table ``sc_<kind>`` per kind of schema change (``SCHEMA_CHANGES``): append A
        (ids 0..9), the change, append B (ids 10..19) written in the new schema. The stream
        tests (tests/interop/test_schema_changes.py) start on the metadata of A and commit
        the rest while the stream runs; the oracle step leaves these tables out."""
        for kind, changes in SCHEMA_CHANGES.items():
            name = f"sc_{kind}"
            t = self.create(name, "id bigint, name string, score float, n int, "
                            "info struct<a: int, b: string>, old string", "'format-version'='2'")
            self.sql(f"INSERT INTO {t} {self._sc_select(name, 0, 10)}")
            for change in changes:
                self.sql(f"ALTER TABLE {t} {change}")
            self.sql(f"INSERT INTO {t} {self._sc_select(name, 10, 20)}")
            a, b = self.snapshot_ids(name)
            self.schema_change_tables[kind] = {"table": name, "changes": list(changes),
                                               "snapshot_a": a, "snapshot_b": b}

    def _sc_select(self, name: str, lo: int, hi: int) -> str:
        """``SELECT`` of ids [lo, hi) in the table's current columns, in their order, each
        cast to its current type (a long ``n`` and a double ``score`` get values the narrow
        types cannot hold)."""
        def value(field: Any) -> str:
            kind = field.dataType.simpleString()
            if field.name == "id":
                raw = "id"
            elif field.name in ("name", "label"):
                raw = "if(id % 5 = 4, NULL, concat('name', id))"
            elif field.name == "score":
                raw = "cast(id AS double) / 3" if kind == "double" else "id / 4.0"
            elif field.name == "n":
                raw = "id * 3 + 3000000000" if kind == "bigint" else "id * 3"
            elif field.name == "info":
                parts = ", ".join(
                    f"'{f.name}', " + ("cast(id AS int)" if f.dataType.simpleString() == "int"
                                       else "concat('b', id)")
                    for f in field.dataType.fields)
                raw = f"if(id % 7 = 3, NULL, named_struct({parts}))"
            else:  # old, extra
                raw = f"concat('{field.name}', id)"
            return f"cast({raw} AS {kind}) AS {field.name}"

        fields = self.spark.table(self.t(name)).schema.fields
        return (f"SELECT {', '.join(value(f) for f in fields)} "
                f"FROM range({lo}, {hi}, 1, 2)")

    def event_time(self) -> None:
        """``event_time``: files appended out of event-time order (issue 28), twelve events
        every five minutes of one hour per append. Read by tests/interop/test_event_time.py
        only (no oracle cases: the oracle is the files' bounds as PyIceberg reads them)."""
        t = self.t("event_time")
        self.sql(f"CREATE TABLE {t} (id bigint, ts timestamp) USING iceberg "
                 "TBLPROPERTIES ('format-version'='2')")
        for hour in EVENT_TIME_HOURS:
            self.sql(f"INSERT INTO {t} SELECT {hour} * 1000 + id AS id, "
                     f"timestamp_seconds({EVENT_TIME_BASE} + {hour} * 3600 + id * 300) AS ts "
                     "FROM range(0, 12, 1, 1)")

    # -- the oracle -----------------------------------------------------------------------

    def oracle(self) -> list[dict[str, Any]]:
        cases: list[dict[str, Any]] = []
        for name in self.tables:
            if not name.startswith("sc_"):  # schema_changes: read by their own tests only
                cases += self.table_cases(name)
        for name in STREAM_TABLES:
            for policy, opts in STREAM_POLICIES.items():
                cases.append(self.stream_case(name, policy, opts))
        return cases

    def table_cases(self, name: str) -> list[dict[str, Any]]:
        t = self.t(name)

        def reader() -> Any:  # a new DataFrameReader each time: options stick to one
            return self.spark.read

        cases: list[dict[str, Any]] = []

        def add(kind: str, label: str, options: dict[str, str],
                read: Callable[[], Any], **extra: Any) -> None:
            case_id = f"{name}-{kind}-{label}" if label else f"{name}-{kind}"
            cases.append(self.run_case(case_id, name, kind, options, read, **extra))

        snaps = self.sql(f"SELECT snapshot_id, parent_id, operation, committed_at "
                         f"FROM {t}.snapshots ORDER BY committed_at").collect()
        main = list(dict.fromkeys(r[0] for r in self.sql(
            f"SELECT snapshot_id FROM {t}.history WHERE is_current_ancestor "
            "ORDER BY made_current_at").collect()))  # a rollback logs a snapshot twice
        ops = {r[0]: r[2] for r in snaps}
        add("head", "", {}, lambda: self.spark.table(t))
        for i, (sid, _parent, op, _at) in enumerate(snaps):
            add("snapshot", f"{i}-{op}", {"snapshotId": str(sid)},
                lambda sid=sid: self.sql(f"SELECT * FROM {t} VERSION AS OF {sid}"),
                snapshot_id=sid, operation=op)
        log = self.sql(f"SELECT made_current_at, snapshot_id FROM {t}.history "
                       "ORDER BY made_current_at").collect()
        for i, (at, sid) in enumerate(log if name in TIMESTAMP_TABLES else []):
            ms = int(at.replace(tzinfo=UTC).timestamp() * 1000)
            add("timestamp", str(i), {"asOfTimestamp": str(ms)},
                lambda at=at: self.sql(f"SELECT * FROM {t} TIMESTAMP AS OF '{at}'"),
                snapshot_id=sid)
        for (ref,) in self.sql(f"SELECT name FROM {t}.refs ORDER BY name").collect():
            if ref == "main":
                continue
            add("ref", ref, {"ref": ref},
                lambda ref=ref: self.sql(f"SELECT * FROM {t} VERSION AS OF '{ref}'"))
        if len(main) >= 2:
            add("range", "all", {"startSnapshotId": str(main[0]), "endSnapshotId": str(main[-1])},
                lambda: reader().option("start-snapshot-id", main[0])
                .option("end-snapshot-id", main[-1]).table(t))
            for parent, sid in itertools.pairwise(main):
                if ops.get(sid) == "append":
                    add("range", f"to-{main.index(sid)}",
                        {"startSnapshotId": str(parent), "endSnapshotId": str(sid)},
                        lambda parent=parent, sid=sid: reader().option("start-snapshot-id", parent)
                        .option("end-snapshot-id", sid).table(t))
        columns = [f.name for f in self.spark.table(t).schema.fields]
        if "part" in columns:
            add("filter", "id-part", {"filter": "id >= 10 AND part = 'a'"},
                lambda: self.spark.table(t).where("id >= 10 AND part = 'a'"))
            add("columns", "v-id", {"columns": "v,id"},
                lambda: self.spark.table(t).select("v", "id"))
        add("metadata", "file-pos", {"metadataColumns": "_file,_pos"},
            lambda: self.spark.table(t).select(*columns, "_file", "_pos"))
        if name in CHANGELOG_TABLES:  # Spark's changelog view (copy-on-write only)
            for label, args in (("all", ""), ("updates", ", compute_updates => true, "
                                               "identifier_columns => array('id')")):
                view = f"{name}_changes_{label}"
                options = {"changelog": "true"}
                if label == "updates":
                    options.update(computeUpdates="true", identifierColumns="id")
                add("changelog", label, options,
                    lambda view=view, args=args: self._changelog_view(name, view, args))
        if name in ("v3dv", "upgraded"):
            add("metadata", "row-lineage",
                {"metadataColumns": "_row_id,_last_updated_sequence_number"},
                lambda: self.spark.table(t).select(*columns, "_row_id",
                                                   "_last_updated_sequence_number"))
        return cases

    def _changelog_view(self, name: str, view: str, args: str) -> Any:
        """Iceberg's ``create_changelog_view`` over the whole history of ``name``."""
        self.sql(f"CALL {CATALOG}.system.create_changelog_view(table => '{NS}.{name}', "
                 f"changelog_view => '{view}'{args})")
        return self.sql(f"SELECT * FROM {view}")

    def run_case(self, case_id: str, table: str, kind: str, options: dict[str, str],
                 read: Callable[[], Any], **extra: Any) -> dict[str, Any]:
        case: dict[str, Any] = {"id": case_id, "table": table, "kind": kind,
                                "options": options, **extra}
        out = self.home / "oracle" / case_id
        try:
            df = read()
            case["columns"] = df.columns
            df.coalesce(1).write.mode("overwrite").parquet(str(out))
            case["oracle"] = str(out.relative_to(self.home))
            case["rows"] = _count(out)
        except Exception as exc:  # what Spark refuses is a case too
            case["error"] = _first_line(exc)
        return case

    def stream_case(self, name: str, policy: str, opts: dict[str, str]) -> dict[str, Any]:
        case_id = f"{name}-stream-{policy}"
        case: dict[str, Any] = {"id": case_id, "table": name, "kind": "stream",
                                "policy": policy, "options": opts}
        out = self.home / "oracle" / case_id
        ckpt = self.home / "stream-ckpt" / case_id
        try:
            query = (self.spark.readStream.format("iceberg").options(**opts).load(self.t(name))
                     .writeStream.format("parquet").option("path", str(out))
                     .option("checkpointLocation", str(ckpt))
                     .trigger(availableNow=True).start())
            query.awaitTermination()
            case["columns"] = self.spark.table(self.t(name)).columns
            case["oracle"] = str(out.relative_to(self.home))
            case["rows"] = _count(out)
        except Exception as exc:
            case["error"] = _first_line(exc)
        return case


def _count(directory: Path) -> int:
    """Rows of the Parquet files Spark wrote into ``directory`` (from their footers)."""
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(p).metadata.num_rows for p in directory.glob("*.parquet"))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    for line in text.splitlines():
        if "Exception" in line or "Error" in line or "Cannot" in line:
            return line.strip()[:400]
    return text.splitlines()[0][:400]


def main() -> int:
    home = cache.home()
    if cache.complete(home):
        print(f"interop: tables already written in {home}")
        return 0
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)
    started = time.monotonic()
    writer = Writer(home)
    only = [s for s in os.environ.get("INTEROP_ONLY", "").split(",") if s]  # debugging aid
    for step in only or ("appends", "mor", "cow", "v3dv", "upgraded", "compact", "evolve", "refs",
                 "history", "types", "nested_nulls", "parts", "transforms", "formats", "v1",
                 "schema_changes", "event_time"):
        t0 = time.monotonic()
        try:
            getattr(writer, step)()
        except Exception:
            traceback.print_exc()
            raise SystemExit(f"interop: writing {step} failed") from None
        print(f"interop: wrote {step} in {time.monotonic() - t0:.1f}s", flush=True)
    t0 = time.monotonic()
    cases = writer.oracle()
    print(f"interop: {len(cases)} oracle cases in {time.monotonic() - t0:.1f}s", flush=True)
    writer.spark.stop()
    t0 = time.monotonic()
    add_duckdb_oracle(home, cases)
    print(f"interop: DuckDB oracle in {time.monotonic() - t0:.1f}s", flush=True)
    manifest = {"catalog": CATALOG, "namespace": NS, "tables": writer.tables,
                "schema_changes": writer.schema_change_tables, "notes": writer.notes,
                "seconds": round(time.monotonic() - started, 1), "cases": cases}
    tmp = home / "cases.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=1, default=str))
    tmp.rename(home / "cases.json")
    print(f"interop: done in {manifest['seconds']}s -> {home}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
