"""The defaults matrix (issue 30, item 2): file size x row groups per file x latency.

Each cell is a table of files of one size (quick: 1 MB and 32 MB; full: 1 MB, 32 MB,
256 MB and 1 GB) with one number of row groups per file (quick: 1 and 4; full: 1, 4 and
16), read over one link (quick and full: the local disk, and S3 on SeaweedFS behind the
loopback latency proxy at 10 ms and 30 ms each way). Contenders, interleaved round-robin,
medians of ``reps`` runs, every batch iterated: icefloe at its defaults
(``IcebergSource(...).read()``), icefloe with the options ``icefloe tune`` recommends for
that cell (its candidate when it recommends nothing; a small budget per cell), PyArrow's
dataset reader over the same files and PyIceberg's ``to_arrow_batch_reader()``.

The targets of every cell (defaults >= 1.0x PyArrow, >= 1.5x PyIceberg, >= 0.9x of the
tuned setting) are shown as ratios only: no verdict is recorded until the defaults are
tuned, after the reader restructure (issue 29).

    uv run python -m benchmarks.bench_matrix quick     # or: --quick
"""

from __future__ import annotations

import itertools
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pyarrow.parquet as pq

from benchmarks.bench_objectstore import Store, latency_proxy
from benchmarks.common import event_rows, fmt_s, interleaved, md_table, median, pick
from icefloe import IcebergSource, tune

MB = 1_000_000
BYTES_PER_ROW = 22
"""Parquet bytes per event row (``event_rows``, measured: 11.07 MB per 500,000 rows)."""
CELL_BYTES = {"quick": 64 * MB, "full": 2_000 * MB}
"""Most bytes of one cell's table (at least one file)."""
LINKS = ("local disk", "s3 10 ms", "s3 30 ms")
DELAYS = {"s3 10 ms": 0.010, "s3 30 ms": 0.030}


class Links:
    """Where the cells' tables live: the local disk (an embedded SQLite catalog) and
    SeaweedFS's S3 + REST catalog behind one latency proxy per delay."""

    def __init__(self, root: Path, store: Store) -> None:
        self.root = root
        self.store = store

    def catalog(self, link: str) -> Any:
        if link == "local disk":
            from pyiceberg.catalog.sql import SqlCatalog

            return SqlCatalog("matrix", uri=f"sqlite:///{self.root}/catalog.db",
                              warehouse=(self.root / "warehouse").as_uri())
        return self.store.catalog(link)

    def filesystem(self, link: str) -> Any:
        return None if link == "local disk" else self.store.s3(link)

    def write(self, identifier: str, files: int, rows: int, row_groups: int) -> None:
        """The cell's table, once per storage (the proxied links share S3's)."""
        for link in ("local disk", "direct"):
            catalog = self.catalog(link)
            catalog.create_namespace_if_not_exists("matrix")
            table = catalog.create_table(identifier, schema=event_rows(1).schema,
                                         properties={"format-version": "2"})
            location = table.metadata.location
            fs = self.filesystem(link)
            paths = []
            for i in range(files):
                path = f"{location.split('://', 1)[1]}/data/part-{i:05d}.parquet"
                if fs is None:
                    Path(path).parent.mkdir(parents=True, exist_ok=True)
                pq.write_table(event_rows(rows, start=i * rows), path, filesystem=fs,
                               row_group_size=max(1, -(-rows // row_groups)))
                paths.append(f"{location.split('://', 1)[0]}://{path}")
            table.add_files(paths)


@contextmanager
def links() -> Iterator[Links]:
    """A temp dir (local catalog + SeaweedFS) and the latency proxies; all stopped."""
    from tests.helpers.seaweed import SeaweedFS

    root = Path(tempfile.mkdtemp(prefix="icefloe-bench-matrix-"))
    (root / "warehouse").mkdir()
    seaweed = SeaweedFS(root / "s3").start()
    try:
        with ExitStack() as stack:
            store = Store(seaweed, "")
            store.endpoints = {"direct": seaweed.s3_endpoint, **{
                link: stack.enter_context(latency_proxy(seaweed.s3_port, delay))
                for link, delay in DELAYS.items()}}
            yield Links(root, store)
    finally:
        seaweed.stop()
        shutil.rmtree(root, ignore_errors=True)


def _drain(batches: Any) -> int:
    return sum(b.num_rows for b in batches)


def contenders(where: Links, link: str, identifier: str, tuned: dict[str, str],
               threads: int) -> dict[str, Callable[[], int]]:
    """The four readers of a cell; ``tuned`` and ``threads``: the tune candidate's options
    and reader threads."""
    catalog = where.catalog(link)
    fs = where.filesystem(link)
    paths = [t.file.file_path.split("://", 1)[1]
             for t in catalog.load_table(identifier).scan().plan_files()]
    return {
        "icefloe (defaults)": lambda: _drain(IcebergSource(identifier, catalog=catalog).read()),
        "icefloe (tuned)": lambda: _drain(IcebergSource(identifier, catalog=catalog,
                                                        options=tuned).read(threads)),
        "pyarrow dataset": lambda: _drain(ds.dataset(paths, format="parquet",
                                                     filesystem=fs).to_batches()),
        "pyiceberg": lambda: _drain(catalog.load_table(identifier).scan()
                                    .to_arrow_batch_reader()),
    }


def run(scale: str) -> str:
    sizes = pick(scale, [1 * MB, 32 * MB], [1 * MB, 32 * MB, 256 * MB, 1_000 * MB])
    groups = pick(scale, [1, 4], [1, 4, 16])
    reps = pick(scale, 3, 5)
    budget = pick(scale, "20s", "2min")
    rows_out: list[list[str]] = []
    started = time.perf_counter()
    with links() as where:
        for size, row_groups in itertools.product(sizes, groups):
            rows = max(row_groups, size // BYTES_PER_ROW)
            files = max(1, min(64, CELL_BYTES[scale] // size))
            identifier = f"matrix.t_{size // MB}mb_{row_groups}rg"
            where.write(identifier, files, rows, row_groups)
            for link in LINKS:
                catalog = where.catalog(link)
                result = tune(identifier, catalog=catalog, budget=budget)
                tuned = {k: str(v) for k, v in result.candidate.items()
                         if k in ("splitSize", "ioConcurrency", "batchSize")}
                threads = int(result.candidate["parallelism"])
                runs = interleaved(contenders(where, link, identifier, tuned, threads), reps)
                counts = {n: r[0][1] for n, r in runs.items()}
                assert len(set(counts.values())) == 1, counts
                med = {n: median([s for s, _ in r]) for n, r in runs.items()}
                base = med["icefloe (defaults)"]
                rows_out.append([
                    f"{size // MB} MB", str(row_groups), link, f"{files} x {rows:,}",
                    fmt_s(base), f"{med['pyarrow dataset'] / base:.2f}x",
                    f"{med['pyiceberg'] / base:.2f}x", f"{med['icefloe (tuned)'] / base:.2f}x",
                    f"{result.verdict}: {tune_label(result)}"])
                print(f"[bench] matrix {rows_out[-1]}", file=sys.stderr, flush=True)
    return (f"{scale} scale, {time.perf_counter() - started:.0f} s; medians of {reps} "
            "interleaved runs per contender, every batch iterated; on the shared 2-core "
            "machine with other jobs running (figures move with the load). Ratios: the "
            "peer's median time / icefloe's at its defaults (above 1: icefloe faster); "
            "tuned: icefloe's defaults / icefloe with the tune candidate (below 0.9: the "
            "defaults miss the tuned setting by more than 10 %). **No verdict recorded**: "
            "the defaults are tuned after the reader restructure (issue 29).\n\n"
            + md_table(["file size", "row groups", "link", "files x rows", "icefloe defaults",
                        "vs pyarrow", "vs pyiceberg", "defaults / tuned", "icefloe tune"],
                       rows_out))


def tune_label(result: Any) -> str:
    from icefloe.tuning.grid import label

    return f"{label(result.candidate, result.baseline)} ({result.ratio:.2f}x)"


if __name__ == "__main__":
    arg = sys.argv[1] if len(sys.argv) > 1 else "quick"
    print(run(arg.removeprefix("--")))
