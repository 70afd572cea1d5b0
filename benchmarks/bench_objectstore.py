"""Object storage: reads from S3 (SeaweedFS) directly and behind 10 ms of latency each way.

Starts its own SeaweedFS (S3 gateway + Iceberg REST catalog, loopback, temp dir) and a
latency proxy in a child process (so the proxy's threads do not share this process's
GIL with the readers), writes two tables through the REST catalog and reads each:

- small files: quick 400, full 1,000 files of 500 rows (added with ``add_files``);
- large files: quick 3 files of 1M rows, full 4 files of 1.25M rows (row groups of 128k rows);
- a stream's catch-up: quick 60, full 150 snapshots of 4 small files each, read from the
  earliest by ``stream(available_now=True)`` at 2, 4 and 8 reader threads, every item acked,
  beside the bounded ``read()`` of the same rows (the table holds appends only).

Contenders, interleaved round-robin, medians of ``reps`` runs, all batches iterated:
icefloe at its defaults (``IcebergSource(...).read()``: 4 reader threads on an object
store, ``ioConcurrency=auto``) and at its best setting (:data:`BEST`), PyIceberg
``table.scan().to_arrow_batch_reader()``, and PyArrow
``pyarrow.dataset.dataset(paths, filesystem=S3FileSystem(...)).to_batches()`` over the
same files. Planning: ``list(IcebergSource.plan())`` beside PyIceberg's
``list(table.scan().plan_files())``.

Targets at 10 ms each way, default settings: small files >= 2x PyIceberg and >= 1.2x
PyArrow's dataset reader; large files >= 0.9x PyArrow.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyarrow import fs as pafs

from benchmarks.common import (
    event_rows,
    fmt_rate,
    fmt_s,
    interleaved,
    md_table,
    median,
    pick,
    verdict,
)
from icefloe import IcebergSource

DELAY_S = 0.010
BEST = {"ioConcurrency": "32"}
"""icefloe's best setting on this machine (a sweep of ioConcurrency 0-64, see RESULTS.md)."""
TARGETS = {"small": (("pyiceberg", 2.0), ("pyarrow", 1.2)), "large": (("pyarrow", 0.9),)}


# --------------------------------------------------------------------------- set-up


def _proxy_child(port: int, delay_s: float) -> None:
    """Run in the child process: a latency proxy to 127.0.0.1:``port``; print its port,
    serve until stdin closes."""
    from tests.helpers.latency_proxy import LatencyProxy

    with LatencyProxy(("127.0.0.1", port), delay_s) as proxy:
        print(proxy.port, flush=True)
        sys.stdin.read()


@contextmanager
def latency_proxy(port: int, delay_s: float) -> Iterator[str]:
    """A latency proxy in a child process in front of 127.0.0.1:``port``; its endpoint."""
    root = Path(__file__).resolve().parent.parent
    child = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.bench_objectstore", "--proxy", str(port),
         str(delay_s)], cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        yield f"http://127.0.0.1:{int(child.stdout.readline())}"
    finally:
        if child.stdin is not None:
            child.stdin.close()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


class Store:
    """A running SeaweedFS and a proxy in front of its S3 port."""

    def __init__(self, seaweed: Any, proxied: str) -> None:
        self.seaweed = seaweed
        self.endpoints = {"direct": seaweed.s3_endpoint, "10 ms each way": proxied}

    def catalog(self, link: str) -> Any:
        from pyiceberg.catalog import load_catalog

        return load_catalog(f"bench-{link}",
                            **self.seaweed.rest_properties(endpoint=self.endpoints[link]))

    def s3(self, link: str) -> pafs.S3FileSystem:
        from tests.helpers.seaweed import ACCESS_KEY, REGION, SECRET_KEY

        return pafs.S3FileSystem(endpoint_override=self.endpoints[link], access_key=ACCESS_KEY,
                                 secret_key=SECRET_KEY, region=REGION, scheme="http")

    def write_table(self, identifier: str, files: int, rows_per_file: int,
                    row_group_size: int = 131072, commits: int = 1) -> None:
        """``files`` Parquet files of event rows (row groups of ``row_group_size`` rows),
        written to S3 and added to a new table in ``commits`` snapshots (``files`` is a
        multiple of ``commits``; each adds the next ``files // commits`` files)."""
        catalog = self.catalog("direct")
        catalog.create_namespace_if_not_exists(identifier.split(".")[0])
        table = catalog.create_table(identifier, schema=event_rows(1).schema,
                                     properties={"format-version": "2"})
        s3 = self.s3("direct")
        where = table.metadata.location.removeprefix("s3://")
        paths = []
        for i in range(files):
            path = f"{where}/data/part-{i:05d}.parquet"
            pq.write_table(event_rows(rows_per_file, start=i * rows_per_file), path,
                           filesystem=s3, row_group_size=row_group_size)
            paths.append(f"s3://{path}")
        per = files // commits
        for c in range(commits):
            table.add_files(paths[c * per:(c + 1) * per])


@contextmanager
def object_store() -> Iterator[Store]:
    """SeaweedFS in a temp dir and the latency proxy; both stopped at the end."""
    from tests.helpers.seaweed import SeaweedFS

    root = Path(tempfile.mkdtemp(prefix="icefloe-bench-s3-"))
    seaweed = SeaweedFS(root).start()
    try:
        with latency_proxy(seaweed.s3_port, DELAY_S) as proxied:
            yield Store(seaweed, proxied)
    finally:
        seaweed.stop()
        shutil.rmtree(root, ignore_errors=True)


# --------------------------------------------------------------------------- contenders


def _drain(batches: Any) -> int:
    return sum(b.num_rows for b in batches)


def contenders(store: Store, link: str, identifier: str,
               best: dict[str, str] | None = None) -> dict[str, Callable[[], int]]:
    catalog = store.catalog(link)
    s3 = store.s3(link)
    paths = [t.file.file_path.removeprefix("s3://")
             for t in catalog.load_table(identifier).scan().plan_files()]

    def icefloe() -> int:
        return _drain(IcebergSource(identifier, catalog=catalog).read())

    def icefloe_best() -> int:
        return _drain(IcebergSource(identifier, catalog=catalog, options=best or BEST).read())

    def pyiceberg() -> int:
        return _drain(catalog.load_table(identifier).scan().to_arrow_batch_reader())

    def pyarrow() -> int:
        return _drain(ds.dataset(paths, format="parquet", filesystem=s3).to_batches())

    return {"icefloe (defaults)": icefloe, "icefloe (best)": icefloe_best,
            "pyiceberg": pyiceberg, "pyarrow dataset": pyarrow}


STREAM_THREADS = (2, 4, 8)
"""The reader threads the stream's catch-up is measured at."""


def stream_contenders(store: Store, link: str, identifier: str
                      ) -> dict[str, Callable[[], int]]:
    """The catch-up of a stream from the earliest snapshot to the head at its start
    (``available_now``), every item acked, at each of :data:`STREAM_THREADS`; beside it
    the bounded read of the same rows at its defaults."""
    catalog = store.catalog(link)

    def stream(threads: int) -> Callable[[], int]:
        def run() -> int:
            source = IcebergSource(identifier, catalog=catalog,
                                   options={"startingVersion": "earliest"})
            rows = 0
            with source.stream(parallelism=threads, available_now=True) as items:
                for item in items:
                    rows += item.batch.num_rows
                    item.ack()
            return rows
        return run

    out = {f"stream, parallelism={n}": stream(n) for n in STREAM_THREADS}
    out["read() (defaults)"] = lambda: _drain(IcebergSource(identifier, catalog=catalog).read())
    return out


def planning(store: Store, link: str, identifier: str) -> dict[str, Callable[[], int]]:
    catalog = store.catalog(link)

    def icefloe() -> int:
        return sum(1 for _ in IcebergSource(identifier, catalog=catalog).plan())

    def pyiceberg() -> int:
        return sum(1 for _ in catalog.load_table(identifier).scan().plan_files())

    return {"icefloe plan()": icefloe, "pyiceberg plan_files()": pyiceberg}


def _table(results: dict[str, list[tuple[float, Any]]], rows: int | None
           ) -> tuple[dict[str, float], str]:
    """Medians and a markdown table: speed against PyIceberg and PyArrow, every run."""
    medians = {name: median([s for s, _ in runs]) for name, runs in results.items()}
    for name, runs in results.items():
        counts = {r for _, r in runs}
        assert len(counts) == 1, f"{name}: result changed between runs: {counts}"
    peers = [p for p in ("pyiceberg", "pyarrow dataset", "pyiceberg plan_files()",
                         "stream, parallelism=2") if p in medians]
    out = []
    for name, runs in results.items():
        row = [name, fmt_s(medians[name])]
        if rows is not None:
            row.append(fmt_rate(rows / medians[name], " rows/s"))
        row += [f"{medians[p] / medians[name]:.2f}x" for p in peers]
        row.append(", ".join(fmt_s(s) for s, _ in runs))
        out.append(row)
    headers = ["reader", "median"] + (["rows/s"] if rows is not None else []) \
        + [f"vs {p}" for p in peers] + ["runs"]
    return medians, md_table(headers, out)


def run(scale: str) -> str:
    small_files, small_rows = pick(scale, (400, 500), (1000, 500))
    large_files, large_rows = pick(scale, (3, 1_000_000), (4, 1_250_000))
    commits = pick(scale, 60, 150)
    reps = pick(scale, 3, 5)
    sections: list[str] = []
    summary: list[str] = []
    with object_store() as store:
        start = time.perf_counter()
        store.write_table("bench.small", small_files, small_rows)
        store.write_table("bench.large", large_files, large_rows)
        store.write_table("bench.stream", 4 * commits, 2000, commits=commits)
        print(f"[bench] objectstore tables written in {time.perf_counter() - start:.0f} s",
              file=sys.stderr, flush=True)
        for kind, identifier, files, per in (("small", "bench.small", small_files, small_rows),
                                             ("large", "bench.large", large_files, large_rows)):
            rows = files * per
            for link in store.endpoints:
                results = interleaved(contenders(store, link, identifier), reps)
                for name, runs in results.items():
                    assert runs[0][1] == rows, f"{name} read {runs[0][1]} of {rows} rows"
                medians, table = _table(results, rows)
                sections.append(f"**{kind} files, {link}** ({files:,} files, {rows:,} rows; "
                                f"median of {reps}, interleaved)\n\n{table}")
                if link == "direct":
                    continue
                for peer, target in TARGETS[kind]:
                    key = "pyarrow dataset" if peer == "pyarrow" else peer
                    ratio = medians[key] / medians["icefloe (defaults)"]
                    summary.append(f"- {kind} files at 10 ms each way, defaults: icefloe = "
                                   f"**{ratio:.2f}x** {key} (target >= {target}x: "
                                   f"{verdict(ratio >= target)}); at its best setting "
                                   f"{medians[key] / medians['icefloe (best)']:.2f}x")
        for link in store.endpoints:
            results = interleaved(stream_contenders(store, link, "bench.stream"), reps)
            rows = 4 * commits * 2000
            for name, runs in results.items():
                assert runs[0][1] == rows, f"{name} read {runs[0][1]} of {rows} rows"
            _, table = _table(results, rows)
            sections.append(f"**a stream's catch-up, {link}** ({commits} snapshots of 4 files "
                            f"of 2,000 rows; median of {reps}, interleaved)\n\n{table}")
        for link in store.endpoints:
            results = interleaved(planning(store, link, "bench.small"), reps)
            _, table = _table(results, None)
            sections.append(f"**planning, {link}** (the small-files table, {small_files:,} "
                            f"files; median of {reps}, interleaved)\n\n{table}")
    return ("SeaweedFS (`weed mini`, S3 + Iceberg REST catalog) on loopback; the "
            f"latency proxy adds {DELAY_S * 1e3:.0f} ms each way (a {2 * DELAY_S * 1e3:.0f} ms "
            "round trip per request). icefloe (defaults): `IcebergSource(...).read()` (4 "
            f"reader threads on an object store, `ioConcurrency=auto`); icefloe (best): "
            f"options {BEST}; "
            "pyiceberg: `table.scan().to_arrow_batch_reader()`; pyarrow dataset: "
            "`pyarrow.dataset.dataset(paths, filesystem=S3FileSystem(...)).to_batches()` "
            "over the same files (dataset discovery included); a stream's catch-up: "
            "`stream(parallelism=N, available_now=True)` from the earliest snapshot, every "
            "item acked. All batches iterated, nothing kept. Ratios: the peer's median "
            "time / this row's (higher: faster).\n\n"
            + "\n".join(summary) + "\n\n" + "\n\n".join(sections))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--proxy":
        _proxy_child(int(sys.argv[2]), float(sys.argv[3]))
    else:
        print(run(sys.argv[1] if len(sys.argv) > 1 else "quick"))
