"""Avro data-file decoders compared: which one icefloe reads Avro data files with.

``python -m benchmarks.bench_avro_decoders [--rows N] [--reps R]``
``python -m benchmarks.bench_avro_decoders --manifests [--files N] [--reps R]``: the
manifest decoders instead (issue 31), see :func:`manifest_main`.

One Iceberg Avro data file (default 1M rows, 10 columns: longs, ints, doubles, a float,
two strings, a boolean, a date, a timestamptz; ~5% nulls in the optional columns;
deflate, 4,096 records per block) written by PyIceberg's own Avro writer, cached under
``benchmarks/data/``. Each contender turns the whole file into an Arrow table:

- ``icefloe``: :class:`icefloe.reader.avro.AvroFile` (generated per-schema block decoder
  over PyIceberg's Cython ``BinaryDecoder``, column lists -> Arrow arrays);
- ``pyiceberg``: ``pyiceberg.avro.file.AvroFile`` with the Iceberg read schema (a
  ``Record`` per row), then the records' values as Arrow columns;
- ``fastavro``: ``fastavro.reader`` (a dict per row), then ``pa.Table.from_pylist``. Not
  a dependency of icefloe: it runs only when importable (e.g. installed with
  ``uv pip install --target DIR fastavro`` and ``PYTHONPATH=DIR``).

A second table times the decoding alone (rows as Python records / dicts, icefloe's
column lists), without building Arrow arrays.

Each contender's result is compared with the values as generated (column by column);
rates are medians of interleaved runs (:func:`benchmarks.common.interleaved`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from pyiceberg.avro.file import AvroFile as PyIcebergAvroFile
from pyiceberg.avro.file import AvroOutputFile
from pyiceberg.io.pyarrow import PyArrowFileIO, schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.typedef import Record
from pyiceberg.types import (
    BooleanType,
    DateType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestamptzType,
)

from benchmarks.common import DATA_DIR, fmt_rate, fmt_s, interleaved, md_table, median
from icefloe.reader.avro import AvroFile

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "a", IntegerType(), required=False),
    NestedField(3, "b", LongType(), required=False),
    NestedField(4, "c", DoubleType(), required=False),
    NestedField(5, "d", FloatType(), required=False),
    NestedField(6, "s", StringType(), required=False),
    NestedField(7, "t", StringType(), required=False),
    NestedField(8, "flag", BooleanType(), required=False),
    NestedField(9, "day", DateType(), required=False),
    NestedField(10, "ts", TimestamptzType(), required=False),
)
BLOCK_ROWS = 4096


def _column_values(n: int) -> list[list[Any]]:
    rng = np.random.default_rng(7)
    nulls = rng.random((9, n)) < 0.05
    base = int(dt.datetime(2024, 1, 1, tzinfo=dt.UTC).timestamp() * 1_000_000)

    def opt(i: int, values: list[Any]) -> list[Any]:
        return [None if nulls[i][j] else v for j, v in enumerate(values)]

    return [
        list(range(n)),
        opt(0, rng.integers(-1_000_000, 1_000_000, n).tolist()),
        opt(1, rng.integers(-(1 << 40), 1 << 40, n).tolist()),
        opt(2, rng.random(n).tolist()),
        opt(3, rng.random(n).astype(np.float32).tolist()),
        opt(4, [f"user-{v}" for v in rng.integers(0, 100_000, n)]),
        opt(5, [("event-kind-" + "x" * int(v)) for v in rng.integers(0, 24, n)]),
        opt(6, (rng.random(n) < 0.5).tolist()),
        opt(7, rng.integers(19_000, 20_000, n).tolist()),
        opt(8, (base + rng.integers(0, 10**12, n)).tolist()),
    ]


def avro_file(rows: int) -> Path:
    """The cached benchmark file of ``rows`` records (written once, ~1 min per 1M rows)."""
    path = DATA_DIR / f"avro-decoders-{rows}.avro"
    if path.exists():
        return path
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    columns = _column_values(rows)
    tmp = path.with_suffix(".tmp")
    output = PyArrowFileIO().new_output(str(tmp))
    with AvroOutputFile[Record](output, SCHEMA, "table",
                                metadata={"avro.codec": "deflate"}) as writer:
        for start in range(0, rows, BLOCK_ROWS):
            end = min(rows, start + BLOCK_ROWS)
            writer.write_block([Record(*(c[i] for c in columns)) for i in range(start, end)])
    tmp.rename(path)
    return path


def read_icefloe(path: Path) -> pa.Table:
    with open(path, "rb") as stream:
        avro = AvroFile(stream)
        batches = list(avro.iter_batches(65536, list(range(len(avro.units))), None))
    return pa.Table.from_batches(batches)


def read_pyiceberg(path: Path) -> pa.Table:
    arrow_schema = schema_to_pyarrow(SCHEMA, include_field_ids=False)
    with PyIcebergAvroFile[Record](PyArrowFileIO().new_input(str(path)), SCHEMA,
                                   {-1: Record}) as reader:
        records = list(reader)
    n = len(SCHEMA.fields)
    columns = [[r[i] for r in records] for i in range(n)]
    return pa.table([pa.array(c, type=f.type) for c, f in zip(columns, arrow_schema,
                                                                 strict=True)],
                    schema=arrow_schema)


def read_fastavro(path: Path) -> pa.Table:
    import fastavro

    arrow_schema = schema_to_pyarrow(SCHEMA, include_field_ids=False)
    with open(path, "rb") as f:
        rows = list(fastavro.reader(f))
    return pa.Table.from_pylist(rows, schema=arrow_schema)


def decode_icefloe(path: Path) -> int:
    """Decode only: every block into column lists (no Arrow arrays)."""
    from icefloe.reader.avro_codegen import DECODER

    with open(path, "rb") as stream:
        avro = AvroFile(stream)
        decode, schema = avro._decoder.block_decoder(None)
        lists: list[list[Any]] = [[] for _ in schema]
        for index, unit in enumerate(avro.units):
            decode(DECODER(avro._block_bytes(index)), unit.rows, *[v.append for v in lists])
    return len(lists[0])


def decode_pyiceberg(path: Path) -> int:
    with PyIcebergAvroFile[Record](PyArrowFileIO().new_input(str(path)), SCHEMA,
                                   {-1: Record}) as reader:
        return sum(1 for _ in reader)


def decode_fastavro(path: Path) -> int:
    import fastavro

    with open(path, "rb") as f:
        return sum(1 for _ in fastavro.reader(f))


MANIFEST_BASE = ["status", "snapshot_id", "sequence_number", "data_file.file_path",
                 "data_file.file_format", "data_file.partition", "data_file.record_count",
                 "data_file.file_size_in_bytes", "data_file.split_offsets"]
MANIFEST_STATS = ["data_file.value_counts", "data_file.null_value_counts",
                  "data_file.nan_value_counts", "data_file.lower_bounds",
                  "data_file.upper_bounds"]
STATS_IDS = (1, 2, 3, 4, 5)


def _duckdb() -> Any:
    """A DuckDB connection with the avro extension of the ``duckdb-extension-avro`` wheel."""
    import duckdb
    import duckdb_extension_avro

    ext = next(Path(duckdb_extension_avro.__file__).parent.rglob("*.duckdb_extension"))
    con = duckdb.connect(config={"allow_unsigned_extensions": True,
                                 "autoinstall_known_extensions": False})
    con.execute(f"LOAD '{ext}'")
    return con


def manifest_contenders(manifests: list[Any], contents: list[bytes], threads: int,
                        stats: bool) -> dict[str, Callable[[], int]]:
    """Each manifest decoder as ``() -> live entries decoded``, over all ``manifests``
    (whose file bytes are ``contents``) on ``threads`` Python threads (DuckDB: one query
    with ``threads`` DuckDB threads); ``stats``: the five column stats maps too."""
    from concurrent.futures import ThreadPoolExecutor

    from icefloe.enumerator.manifest_decoder import iter_live_data_files

    pool = ThreadPoolExecutor(threads)
    pairs = list(zip(manifests, contents, strict=True))
    chunks = [pairs[i::threads] for i in range(threads)]

    def on_threads(one: Callable[[Any, bytes], int]) -> Callable[[], int]:
        def run() -> int:
            return sum(pool.map(lambda chunk: sum(one(m, c) for m, c in chunk), chunks))
        return run

    keep_all = (lambda _stats: True) if stats else None
    out: dict[str, Callable[[], int]] = {
        "icefloe (pure Python)": on_threads(
            lambda m, c: sum(1 for _ in iter_live_data_files(c, m, keep_all))),
    }
    from pyiceberg.io.pyarrow import PyArrowFileIO

    io = PyArrowFileIO()
    out["PyIceberg (Cython), all fields"] = on_threads(
        lambda m, c: len(m.fetch_manifest_entry(io, discard_deleted=True)))
    try:
        from icefloe.enumerator._native_manifest import decode_manifest
    except ImportError:
        pass
    else:
        ids = STATS_IDS if stats else ()
        out["icefloe C (_native_manifest)"] = on_threads(
            lambda m, c: decode_manifest(c, manifest_seq=m.sequence_number,
                                         added_by=m.added_snapshot_id, added_only=False,
                                         stats_ids=ids).num_rows)
    if importlib.util.find_spec("pyiceberg_core") is not None:
        from pyiceberg_core import manifest as core_manifest

        out["pyiceberg-core, all fields"] = on_threads(
            lambda m, c: len(core_manifest.read_manifest_entries(c).entries()))
    if importlib.util.find_spec("polars") is not None:
        import io as _io

        import polars as pl

        out["polars read_avro"] = on_threads(
            lambda m, c: pl.read_avro(_io.BytesIO(c)).filter(pl.col("status") != 2)
            .select("status", "sequence_number",
                    pl.col("data_file").struct.field(
                        *[f.split(".")[1] for f in MANIFEST_BASE[3:]
                          + (MANIFEST_STATS if stats else [])])).height)
    if importlib.util.find_spec("duckdb_extension_avro") is not None:
        con = _duckdb()
        con.execute(f"SET threads = {threads}")
        paths = [m.manifest_path.removeprefix("file://") for m in manifests]
        columns = ", ".join(MANIFEST_BASE + (MANIFEST_STATS if stats else []))
        query = f"SELECT {columns} FROM read_avro({paths!r}) WHERE status <> 2"
        out["DuckDB read_avro (SQL -> Arrow)"] = lambda: con.sql(query).arrow().read_all().num_rows
    return out


def manifest_main(files: int, reps: int) -> None:
    """The manifest decoders on the planning benchmark's manifests
    (:func:`benchmarks.common.synthetic_table`: 2,000 entries a manifest, stats for 5
    columns, deflate): live entries per second, 1 and 2 threads, without and with the
    stats maps. Optional contenders run when importable (``pyiceberg_core``, ``polars``:
    ``uv pip install --target DIR`` and ``PYTHONPATH=DIR``)."""
    import os

    from benchmarks.common import synthetic_table

    table = synthetic_table(files, 2).static()
    manifests = table.current_snapshot().manifests(table.io)
    contents = [Path(m.manifest_path.removeprefix("file://")).read_bytes() for m in manifests]
    entries = files
    print(f"{len(manifests)} manifests, {entries:,} entries, {reps} interleaved reps "
          f"(medians; spread = (max - min) / median), load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at start")
    rows = []
    for stats in (False, True):
        for threads in (1, 2):
            results = interleaved(manifest_contenders(manifests, contents, threads, stats),
                                  reps)
            for name, runs in results.items():
                assert all(n == entries for _, n in runs), (name, runs[0][1])
                seconds = [s for s, _ in runs]
                mid = median(seconds)
                rows.append([name, "yes" if stats else "no", threads,
                             fmt_rate(entries / mid, " entries/s"),
                             f"{(max(seconds) - min(seconds)) / mid:.0%}"])
    print(md_table(["decoder", "stats", "threads", "rate", "spread"], rows))
    print(f"load average at end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--manifests", action="store_true",
                        help="compare the manifest decoders instead (issue 31)")
    parser.add_argument("--files", type=int, default=20_000,
                        help="--manifests: live entries (2,000 a manifest)")
    args = parser.parse_args()
    if args.manifests:
        manifest_main(args.files, args.reps)
        return
    path = avro_file(args.rows)
    contenders = {"icefloe": lambda: read_icefloe(path),
                  "pyiceberg": lambda: read_pyiceberg(path)}
    if importlib.util.find_spec("fastavro") is not None:
        contenders["fastavro"] = lambda: read_fastavro(path)
    results = interleaved(contenders, args.reps, warmup=False)
    arrow_schema = schema_to_pyarrow(SCHEMA, include_field_ids=False)
    expected = pa.table([pa.array(c, type=pa.int64() if f.type == pa.timestamp("us", "UTC")
                                  else f.type).cast(f.type)
                         for c, f in zip(_column_values(args.rows), arrow_schema, strict=True)],
                        schema=arrow_schema)
    icefloe_s = median([s for s, _ in results["icefloe"]])
    rows = []
    for name, runs in results.items():
        got = runs[0][1].cast(arrow_schema)
        wrong = [c for c in arrow_schema.names if not got[c].equals(expected[c])]
        seconds = median([s for s, _ in runs])
        rows.append([name, fmt_s(seconds), fmt_rate(args.rows / seconds, " rows/s"),
                     f"{icefloe_s / seconds:.2f}x",
                     "all as written" if not wrong else f"WRONG: {', '.join(wrong)}"])
    print(f"{args.rows:,} rows, 10 columns, {path.stat().st_size / 2**20:.1f} MiB, "
          f"{args.reps} interleaved reps (medians)")
    print(md_table(["decoder", "time", "rate", "speed vs icefloe", "values"], rows))
    decoders = {"icefloe": lambda: decode_icefloe(path),
                "pyiceberg": lambda: decode_pyiceberg(path)}
    if "fastavro" in contenders:
        decoders["fastavro"] = lambda: decode_fastavro(path)
    decoded = interleaved(decoders, args.reps, warmup=False)
    base = median([s for s, _ in decoded["icefloe"]])
    print("\ndecode only (records / column lists, no Arrow):")
    print(md_table(["decoder", "time", "rate", "speed vs icefloe"], [
        [name, fmt_s(median([s for s, _ in runs])),
         fmt_rate(args.rows / median([s for s, _ in runs]), " rows/s"),
         f"{base / median([s for s, _ in runs]):.2f}x"] for name, runs in decoded.items()]))


if __name__ == "__main__":
    main()
