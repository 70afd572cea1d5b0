"""The defaults matrix (issue 30, item 2): file size x row groups per file x latency.

Each cell is a table of files of one size (quick: 1 MB and 32 MB; full: 1 MB, 32 MB,
256 MB and 1 GB) with one number of row groups per file (quick: 1 and 4; full: 1, 4 and
16; 1 GB: 1 and 16, :data:`BIGGEST_ROW_GROUPS`), read over one link: the local disk, or
S3 on SeaweedFS behind the loopback latency proxy (a child process) at 10 ms and 30 ms
each way. A cell holds :data:`CELL_BYTES` of
Parquet (64 MB: 64 files of 1 MB, 2 of 32 MB), or one file where a file is larger (256 MB,
1 GB). The Parquet files are generated once and cached under ``benchmarks/data/matrix-*``
(the local-disk tables add the cached files; the S3 tables a copy uploaded per run).

Contenders, each in a fresh process per cell (started before the cell's runs, its
imports and catalog load untimed), run round-robin with the first one rotated each
round, ``reps`` timed reads each (default 5: ratios are paired by round, :func:`paired`;
no warm-up read: the first read of a process pays for
its thread pools and connections, as a user's would), every batch iterated:

- icefloe at its defaults: ``IcebergSource(...).read()``, planning included;
- icefloe with the setting ``icefloe tune`` finds for that cell, run in every cell with a
  budget sized to its files (:data:`TUNE_BUDGETS`; its candidate when it recommends
  nothing), planning included; where its ``reps`` reads leave the 0.9x target undecided
  (the ratio within the two's spread of 0.9), more reads of the tuned pair alone,
  interleaved, up to :data:`TUNED_REPS`, decide the "defaults / tuned" figure; where that
  setting is the same read as the defaults (:func:`same_read`: threads, options,
  splits), the target is met by construction;
- PyArrow's dataset reader: ``ds.dataset(paths, filesystem=...).to_batches()`` over the
  same files (the paths listed before the clock starts);
- PyIceberg: ``load_table(...).scan().to_arrow_batch_reader()``, table load included;
- not a contender, Arrow decoding the cell's files from bytes fetched before the clock
  (:data:`DECODE`): its CPU per read is the floor of :func:`cpu_ceiling`;
- not a contender, on S3 only, Arrow's S3 client fetching the cell's bytes without
  decoding them (:data:`FETCH`); and around every read of every process on S3, the CPU of
  SeaweedFS and the link's proxy (``server_cpu``): the terms of :func:`s3_bound`, the
  least time any reader of an S3 cell can take, by which :func:`s3_ceiling` shows
  PyIceberg's (and, from planning's round trips, PyArrow's) target out of reach.

Targets of every cell: defaults >= 1.0x PyArrow's dataset reader, >= 1.5x PyIceberg,
>= 0.9x the tuned setting. The figures of a run are kept in
``benchmarks/data/matrix-results-<scale>.json`` (``--results PATH``: another file) and
drawn into ``benchmarks/matrix.png`` (matplotlib).

    uv run python -m benchmarks.bench_matrix quick     # or full; --cells 32:4:s3-10-ms,...
    uv run python -m benchmarks.bench_matrix full --planning   # then icefloe's planning alone
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from benchmarks.common import (
    DATA_DIR,
    ROOT,
    SCALES,
    event_rows,
    fmt_s,
    md_table,
    median,
    pick,
    verdict,
)
from icefloe.tuning.measure import beats, noise

MB = 1_000_000
BYTES_PER_ROW = 25
"""Parquet bytes per event row (``event_rows``: 25.7 MB per 1M rows in one row group)."""
CELL_BYTES = 64 * MB
"""Bytes of one cell's table, or one file where a file is larger."""
LINKS = ("local disk", "s3 10 ms", "s3 30 ms")
DELAYS = {"s3 10 ms": 0.010, "s3 30 ms": 0.030}
DECODE = "decode in memory"
"""Not a contender: Arrow's C++ Parquet reader (``pq.read_table``, threaded) decoding the
cell's files from bytes fetched before the clock, the work every reader of the files must
do; its CPU is a floor for :func:`cpu_ceiling`."""
FETCH = "fetch (no decode)"
"""Not a contender, on S3 cells only: Arrow's S3 client (``S3FileSystem``, the client every
contender reads through) fetching the cell's files whole, in :data:`FETCH_PIECE` ranges,
:data:`FETCH_THREADS` at a time, each range read into a buffer its thread reuses (no decode,
no fresh pages, the files' handles kept open across reads, so no HEAD after the first
read): the client's transfer CPU per byte at its least, a term of :func:`s3_ceiling`."""
FETCH_PIECE = 8 * 2**20
FETCH_THREADS = 8
PLANNING_ROUND_TRIPS = 4
"""Requests through the proxy, each waiting for the one before, before any data file of a
table is known, for a reader through PyArrow's S3 filesystem: the manifest list (its path
is in the table's metadata, which the REST catalog answers directly, not through the
proxy), then the manifest (its path is in the manifest list), each a HEAD and then a GET
(Arrow's S3 client sends a HEAD before the first read of every object opened by path,
``open_input_file`` and ``open_input_stream`` alike; PyArrow's one HEAD-less read, a
Parquet fragment told the file's size, reads Parquet only, and manifests are Avro); the
data files' paths are in the manifest. Session 16 (mid16, RESULTS.md "32 MB files on
S3"): every read's request log shows them, icefloe's and PyIceberg's; before, the bound
counted the two GETs alone."""
DATA_ROUND_TRIPS = 2
"""Round trips in series from the manifest's answer to a data file's first bytes, for a
reader through PyArrow's S3 filesystem: the file's HEAD (or a sized fragment's footer GET,
before any column chunk; the matrix's smallest file, 1 MB, is past Arrow's 64 KiB footer
read), then the GET of its data. ``tests/objectstore/test_io_prefetch.py::
test_a_large_file_read_pays_the_round_trips_any_arrow_reader_must`` pins icefloe's 4 + 2."""
PLANNING = "icefloe planning"
"""Not a contender, measured in a pass of its own (``--planning``, :func:`measure_planning`)
after a cell's reads: what icefloe's timed read does before its first split reaches a
reader, timed alone in a fresh process per cell: ``IcebergSource(...)`` on the catalog
and every split of ``plan()`` listed (the table's load, the manifest list and the
manifests; ``read()`` plans through the same call). PyArrow's dataset reader gets its
file list before its clock (:func:`_child`), so this is work in icefloe's time that is not
in PyArrow's: :func:`planning_ceiling`."""
PYICEBERG_PLANNING = "pyiceberg planning"
"""Not a contender, measured with :data:`PLANNING`: what PyIceberg's timed read does
before its data (the table's load and ``scan().plan_files()``), timed alone; its CPU is
taken off PyIceberg's own CPU per read for the data's (:func:`s3_bound`)."""
CONTENDERS = ("icefloe (defaults)", "icefloe (tuned)", "pyarrow dataset", "pyiceberg", DECODE,
              FETCH)
TARGETS = {"pyarrow dataset": 1.0, "pyiceberg": 1.5, "icefloe (tuned)": 0.9}
"""Least ratio (the contender's median time / icefloe's at its defaults) of every cell."""
INTERVAL_CONFIDENCE = 0.9
"""The least coverage of :func:`paired_interval`'s interval of a cell's ratio."""
TUNE_BUDGETS = {32 * MB: "30s", 256 * MB: "90s", 1_000 * MB: "150s"}
"""``icefloe tune``'s budget per cell, by the largest file size it covers: a read of a
256 MB file takes 1-4 s on the loaded machine, of a 1 GB file 4-15 s; the tuner samples
a run of row groups of a file of many (:func:`icefloe.tuning.sample.sample_parts`), but a
file of one row group is read whole (the 1 GB x 1 cells: knobs left unswept when the
budget runs out are listed in the tune column)."""
TUNED_REPS = 7
"""Reads of the defaults and the tuned setting where the cell's ``reps`` leave the 0.9x
target undecided (session 19's run, ``--reps 5``, took none: it was 5 then)."""
BIGGEST_ROW_GROUPS = (1, 16)
"""Row groups per file of the 1 GB cells at full scale (a cell there takes 2-3 minutes)."""
CACHE = "matrix-v2"
"""The cells' files since session 21: written without a stored Arrow schema, as Java
Iceberg, Spark, Flink and Trino write Parquet (``ARROW_CACHE``: PyArrow's default, the
matrix's files through session 20)."""
ARROW_CACHE = "matrix-v1"
FIGURE = ROOT / "matrix.png"


# --------------------------------------------------------------------------- the tables


def cell_files(size: int, row_groups: int) -> tuple[int, int]:
    """``(files, rows per file)`` of a cell's table."""
    rows = max(row_groups, size // BYTES_PER_ROW)
    return max(1, CELL_BYTES // size), rows


def cached_files(size: int, row_groups: int, arrow_schema: bool = False) -> list[Path]:
    """The cell's Parquet files, generated once under ``benchmarks/data/matrix-v2``:
    without the stored Arrow schema (``ARROW:schema``), as Java Iceberg, Spark, Flink and
    Trino write them, so string columns decode as whatever type the reader asks for
    (icefloe: the output's ``large_string``; PyArrow's dataset reader: ``string``). With
    ``arrow_schema``, PyArrow's default files (``matrix-v1``): the same row groups and
    values, their stored schema recording ``string``, which icefloe then casts."""
    files, rows = cell_files(size, row_groups)
    root = DATA_DIR / (ARROW_CACHE if arrow_schema else CACHE) / \
        f"{size // MB}mb-{row_groups}rg"
    paths = [root / f"part-{i:05d}.parquet" for i in range(files)]
    if (root / ".complete").exists():
        return paths
    import pyarrow.parquet as pq

    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    started = time.perf_counter()
    per_group = -(-rows // row_groups)
    for i, path in enumerate(paths):
        schema = event_rows(1).schema
        with pq.ParquetWriter(path, schema, store_schema=arrow_schema) as writer:
            for first in range(0, rows, per_group):  # one row group per write
                n = min(per_group, rows - first)
                writer.write_table(event_rows(n, start=i * rows + first), row_group_size=n)
    (root / ".complete").write_text(f"built in {time.perf_counter() - started:.1f} s\n")
    print(f"[bench] matrix: built {root.parent.name}/{root.name} ({files} x {rows:,} rows) "
          f"in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return paths


class Links:
    """Where the cells' tables live: the local disk (a SQLite catalog over the cached
    files) and SeaweedFS's S3 + REST catalog, reached directly or through one latency
    proxy per delay."""

    def __init__(self, root: Path, seaweed: Any, endpoints: dict[str, str]) -> None:
        self.root = root
        self.seaweed = seaweed
        self.endpoints = endpoints

    def catalog_properties(self, link: str) -> dict[str, str]:
        if link == "local disk":
            return {"type": "sql", "uri": f"sqlite:///{self.root}/catalog.db",
                    "warehouse": (self.root / "warehouse").as_uri()}
        return dict(self.seaweed.rest_properties(endpoint=self.endpoints[link]))

    def catalog(self, link: str) -> Any:
        from pyiceberg.catalog import load_catalog

        return load_catalog("matrix", **self.catalog_properties(link))  # as the children

    def s3_options(self, link: str) -> dict[str, str] | None:
        """``S3FileSystem``'s arguments (but ``scheme``) for ``link``, as a contender's
        spec carries them; None for the local disk."""
        if link == "local disk":
            return None
        from icefloe.seaweed import ACCESS_KEY, REGION, SECRET_KEY

        return {"endpoint_override": self.endpoints[link], "access_key": ACCESS_KEY,
                "secret_key": SECRET_KEY, "region": REGION}

    def s3(self, link: str = "direct") -> Any:
        from pyarrow import fs as pafs

        return pafs.S3FileSystem(**self.s3_options(link) or {}, scheme="http")

    def server_pids(self, link: str) -> list[int]:
        """The processes of this machine that serve a read over ``link``: SeaweedFS (the
        ``weed mini`` process and its descendants) and the latency proxy of the link's
        delay (this process's child running ``benchmarks.bench_objectstore --proxy PORT
        DELAY``); none for the local disk."""
        if link == "local disk":
            return []
        parents: dict[int, int] = {}
        cmdlines: dict[int, list[str]] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                cmdlines[int(entry.name)] = (entry / "cmdline").read_text().split("\0")
            except OSError:  # exited meanwhile
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        weed = [self.seaweed.proc.pid]
        for pid in weed:  # grows as it goes: every descendant
            weed.extend(p for p, parent in parents.items() if parent == pid)
        proxies = [p for p, parent in parents.items() if parent == os.getpid()
                   and "--proxy" in cmdlines[p]
                   and float(cmdlines[p][cmdlines[p].index("--proxy") + 2]) == DELAYS[link]]
        return weed + proxies

    def add(self, identifier: str, files: list[Path]) -> None:
        """The cell's table on both storages: the cached files themselves (local disk), a
        copy in S3 (the proxied links read the same S3 table)."""
        from pyarrow import fs as pafs

        from benchmarks.common import event_rows as rows_of

        schema = rows_of(1).schema
        for link in ("local disk", "direct"):
            catalog = self.catalog(link)
            catalog.create_namespace_if_not_exists("matrix")
            table = catalog.create_table(identifier, schema=schema,
                                         properties={"format-version": "2"})
            if link == "local disk":
                table.add_files([p.as_uri() for p in files])
                continue
            where = table.metadata.location.removeprefix("s3://")
            s3 = self.s3()
            for p in files:
                pafs.copy_files(str(p), f"{where}/data/{p.name}",
                                source_filesystem=pafs.LocalFileSystem(),
                                destination_filesystem=s3)
            table.add_files([f"s3://{where}/data/{p.name}" for p in files])


@contextmanager
def local_catalog(prefix: str) -> Iterator[tuple[dict[str, str], Any]]:
    """A SQLite catalog in a temp dir (removed after) with the namespace ``matrix``, as the
    local-disk cells' (``Links.catalog_properties``): its properties (a contender's spec
    carries them) and the catalog, loaded under the name the contenders use."""
    from pyiceberg.catalog import load_catalog

    root = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        (root / "warehouse").mkdir()
        props = {"type": "sql", "uri": f"sqlite:///{root}/catalog.db",
                 "warehouse": (root / "warehouse").as_uri()}
        catalog = load_catalog("matrix", **props)
        catalog.create_namespace("matrix")
        yield props, catalog
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def links() -> Iterator[Links]:
    """A temp dir (local catalog, SeaweedFS) and the latency proxies; all stopped."""
    from benchmarks.bench_objectstore import latency_proxy
    from icefloe.seaweed import SeaweedFS

    root = Path(tempfile.mkdtemp(prefix="icefloe-bench-matrix-"))
    (root / "warehouse").mkdir()
    seaweed = SeaweedFS(root / "s3").start()
    try:
        with ExitStack() as stack:
            endpoints = {"direct": seaweed.s3_endpoint, **{
                link: stack.enter_context(latency_proxy(seaweed.s3_port, delay))
                for link, delay in DELAYS.items()}}
            yield Links(root, seaweed, endpoints)
    finally:
        seaweed.stop()
        shutil.rmtree(root, ignore_errors=True)


# --------------------------------------------------------------------------- contenders


class Contender:
    """One contender's fresh process for one cell: ``python -m benchmarks.bench_matrix
    --child SPEC`` (or ``argv``, run in ``cwd``: another command starting :func:`_child`,
    :mod:`benchmarks.ab_matrix`'s other tree; ``env``: variables added to this process's
    environment for it); each :meth:`read` times one read in it."""

    def __init__(self, spec: dict[str, Any], argv: list[str] | None = None,
                 cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            argv or [sys.executable, "-m", "benchmarks.bench_matrix", "--child",
                     json.dumps(spec)],
            cwd=cwd or ROOT.parent, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env=None if env is None else {**os.environ, **env})

    def _line(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"contender process exited with {self.proc.wait()}")
        return dict(json.loads(line))

    def ready(self) -> None:
        self._line()

    def read(self) -> tuple[float, int, float]:
        """``(seconds, rows, CPU seconds of the process)`` of one read."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("read\n")
        self.proc.stdin.flush()
        out = self._line()
        return float(out["s"]), int(out["rows"]), float(out["cpu"])

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _child(spec: dict[str, Any]) -> None:
    """A contender's process: set up (untimed), print a line, then time one read per line
    of stdin."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq
    from pyarrow import fs as pafs
    from pyiceberg.catalog import load_catalog

    from icefloe import IcebergSource

    kind, identifier = spec["kind"], spec["identifier"]
    catalog = load_catalog("matrix", **spec["catalog"])
    fs = None
    if spec.get("s3"):
        fs = pafs.S3FileSystem(**spec["s3"], scheme="http")
    paths = [t.file.file_path.split("://", 1)[1]
             for t in catalog.load_table(identifier).scan().plan_files()]
    blobs = [] if kind != "decode in memory" else [
        (fs or pafs.LocalFileSystem()).open_input_file(p).read_buffer() for p in paths]
    if kind == FETCH:
        fetch = _fetcher(fs, paths)

    def read() -> int:
        if kind == PLANNING:  # the planning alone (profile_io's icefloe-plan): the rows
            return sum(s.record_count for s in  # the splits hold
                       IcebergSource(identifier, catalog=catalog, options={}).plan())
        if kind.startswith("icefloe"):
            source = IcebergSource(identifier, catalog=catalog, options=spec["options"])
            return sum(b.num_rows for b in source.read(spec.get("threads")))
        if kind == PYICEBERG_PLANNING:  # the rows its tasks hold
            return sum(t.file.record_count
                       for t in catalog.load_table(identifier).scan().plan_files())
        if kind == "pyiceberg":
            return sum(b.num_rows for b in catalog.load_table(identifier).scan()
                       .to_arrow_batch_reader())
        if kind == "decode":  # the files' decode alone (benchmarks.profile_decode)
            return sum(pq.read_table(p, filesystem=fs).num_rows for p in paths)
        if kind == BARE:  # Arrow's Parquet reader file by file on two threads, nothing else
            return bare_read(paths, fs)
        if kind == "decode in memory":  # the decode alone, of bytes fetched before
            return sum(pq.read_table(pa.BufferReader(b)).num_rows for b in blobs)
        if kind == FETCH:  # the transfer alone
            return fetch()
        return sum(b.num_rows for b in ds.dataset(paths, format="parquet",
                                                  filesystem=fs).to_batches())

    print("{}", flush=True)
    for _ in sys.stdin:
        start, cpu = time.perf_counter(), time.process_time()
        rows = read()
        print(json.dumps({"s": time.perf_counter() - start, "rows": rows,
                          "cpu": time.process_time() - cpu}), flush=True)


BARE = "arrow reader, 2 threads"
"""Not a contender of the matrix (:mod:`benchmarks.ab_matrix`'s ``--bare``): the least a
reader built as icefloe's reader threads are can do, :func:`bare_read`."""


def bare_read(paths: list[str], fs: Any = None, threads: int = 2) -> int:
    """Rows of ``paths`` read as icefloe's reader threads read files, with nothing else:
    ``threads`` Python threads, each taking the next file, opening it with Arrow's
    ``ParquetReader`` (no pre-buffering on the local disk) and iterating its batches
    decoded on the thread itself (as a run's files are); no planning, projection, cast,
    hand-off or order."""
    import threading

    from pyarrow import fs as pafs
    from pyarrow._parquet import ParquetReader

    fs = fs or pafs.LocalFileSystem()
    todo, rows, lock = list(reversed(paths)), [0], threading.Lock()

    def work() -> None:
        while True:
            with lock:
                if not todo:
                    return
                path = todo.pop()
            reader = ParquetReader()
            reader.open(fs.open_input_file(path), pre_buffer=False)
            groups = list(range(reader.metadata.num_row_groups))
            n = sum(b.num_rows for b in reader.iter_batches(
                196608, groups, list(range(reader.metadata.num_columns)), use_threads=False))
            with lock:
                rows[0] += n

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return rows[0]


def _fetcher(fs: Any, paths: list[str]) -> Callable[[], int]:
    """:data:`FETCH`'s read, set up before the clock: a function fetching every byte of
    ``paths`` (on ``fs``, Arrow's S3 filesystem) in :data:`FETCH_PIECE` ranges,
    :data:`FETCH_THREADS` at a time, each into its thread's reused buffer; returns the
    files' rows (from their footers, read here) as the contenders' reads do."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import pyarrow.parquet as pq

    rows = sum(pq.read_metadata(p, filesystem=fs).num_rows for p in paths)
    sizes = {p: fs.get_file_info(p).size for p in paths}
    pieces = [(p, at, min(FETCH_PIECE, size - at))
              for p, size in sizes.items() for at in range(0, size, FETCH_PIECE)]
    pool = ThreadPoolExecutor(FETCH_THREADS, thread_name_prefix="fetch")
    local = threading.local()

    def piece(p: str, at: int, n: int) -> int:
        if not hasattr(local, "buffer"):  # once per thread: kept across reads
            local.buffer, local.files = memoryview(bytearray(FETCH_PIECE)), {}
        f = local.files.get(p) or local.files.setdefault(p, fs.open_input_file(p))
        f.seek(at)
        got = int(f.readinto(local.buffer[:n]))
        assert got == n, f"{p}: {got} bytes at {at}, not {n}"
        return got

    def fetch() -> int:
        got = sum(pool.map(lambda x: piece(*x), pieces))
        assert got == sum(sizes.values())
        return rows

    return fetch


Runs = dict[str, list[tuple[float, int, float]]]


def servers_cpu(pids: list[int]) -> float:
    """CPU seconds so far (user + system, with waited-for children) of the processes
    ``pids``, from ``/proc/<pid>/stat`` (one clock tick, 10 ms, resolution each)."""
    from benchmarks.profile_io import process_cpu

    return sum(process_cpu(pid) for pid in pids)


def steal_s() -> float:
    """CPU seconds so far that this virtual machine's hypervisor gave its vCPUs to others
    (``steal`` of ``/proc/stat``'s ``cpu`` line, all cores; 0.0 where not reported)."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


IDLE_S = 1.0
"""Seconds the servers' CPU is sampled with no read running, before a cell's reads: their
own background (SeaweedFS's heartbeats), recorded as ``server_idle_cpu_s`` per second."""


def measure(where: Links, link: str, identifier: str, tuned: dict[str, str], threads: int,
            reps: int) -> tuple[Runs, Runs | None, dict[str, Any]]:
    """``reps`` reads of every contender, round-robin with the first rotated; then, where
    those leave the tuned target undecided (:func:`undecided`), more reads of the
    defaults and the tuned setting alone in the same processes, interleaved, until each
    has :data:`TUNED_REPS` (returned second, the first ``reps`` included; else None).
    Third: on S3 (:data:`FETCH` runs there too), the CPU seconds of the processes serving
    the link (:meth:`Links.server_pids`) during each of the ``reps`` reads of every
    contender (``server_cpu``: by name, in order; read in this process right before the
    read's request and after its answer) and their CPU per second with no read running
    (``server_idle_cpu_s``), on the local disk neither; and on every link the machine's
    stolen CPU seconds (:func:`steal_s`) during each of those reads (``steal``)."""
    s3 = where.s3_options(link)
    base: dict[str, Any] = {"identifier": identifier,
                            "catalog": where.catalog_properties(link), "s3": s3}
    specs: dict[str, dict[str, Any]] = {
        "icefloe (defaults)": {"kind": "icefloe", "options": {}},  # read()'s own default
        "icefloe (tuned)": {"kind": "icefloe", "options": tuned, "threads": threads},
        "pyarrow dataset": {"kind": "pyarrow"},
        "pyiceberg": {"kind": "pyiceberg"},
        DECODE: {"kind": DECODE},
    }
    if s3 is not None:
        specs[FETCH] = {"kind": FETCH}
    procs = {name: Contender({**base, **spec}) for name, spec in specs.items()}
    pids = where.server_pids(link)
    try:
        for proc in procs.values():
            proc.ready()
        servers: dict[str, Any] = {}
        if pids:
            before, at = servers_cpu(pids), time.perf_counter()
            time.sleep(IDLE_S)  # a sample's length, not a synchronization
            servers["server_idle_cpu_s"] = round(
                (servers_cpu(pids) - before) / (time.perf_counter() - at), 4)
            servers["server_cpu"] = {n: [] for n in procs}
        names = list(procs)
        out: dict[str, list[tuple[float, int, float]]] = {n: [] for n in names}
        servers["steal"] = {n: [] for n in names}
        for r in range(reps):
            for name in names[r % len(names):] + names[:r % len(names)]:
                before, stolen = servers_cpu(pids), steal_s()
                out[name].append(procs[name].read())
                servers["steal"][name].append(round(steal_s() - stolen, 2))
                if pids:
                    servers["server_cpu"][name].append(round(servers_cpu(pids) - before, 2))
        pair = ["icefloe (defaults)", "icefloe (tuned)"]
        if not undecided([s for s, _, _ in out[pair[0]]], [s for s, _, _ in out[pair[1]]]):
            return out, None, servers
        more: Runs = {n: list(out[n]) for n in pair}
        for r in range(reps, TUNED_REPS):
            for name in pair[r % 2:] + pair[:r % 2]:
                more[name].append(procs[name].read())
        return out, more, servers
    finally:
        for proc in procs.values():
            proc.close()


# --------------------------------------------------------------------------- the run


def cells(scale: str) -> list[tuple[int, int, str]]:
    sizes = pick(scale, [1 * MB, 32 * MB], [1 * MB, 32 * MB, 256 * MB, 1_000 * MB])
    groups = pick(scale, [1, 4], [1, 4, 16])
    return [(s, g, link) for s, g in itertools.product(sizes, groups) for link in LINKS
            if s < 1_000 * MB or g in BIGGEST_ROW_GROUPS]


def _key(size: int, row_groups: int, link: str) -> str:
    return f"{size // MB}:{row_groups}:{link.replace(' ', '-')}"


def keys(scale: str) -> set[str]:
    """The keys of the cells of ``scale`` (``--cells``, the results files' keys)."""
    return {_key(*c) for c in cells(scale)}


def load_avg() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def memory_setting(thp: Path = THP) -> str:
    """Arrow's memory pool as every contender's process gets it (``ARROW_DEFAULT_MEMORY_POOL``
    is inherited: the backend of this process's default pool) and the kernel's transparent
    huge pages mode (the bracketed word of ``thp``; "unknown" where unreadable), e.g.
    "mimalloc, huge pages madvise": they decide how a read's fresh memory is faulted in,
    which moved PyIceberg's S3 reads by up to 1.5x (RESULTS.md, "Session 23"), so a run
    records them with its cells."""
    import pyarrow as pa

    try:
        text = thp.read_text()
        mode = text[text.index("[") + 1:text.index("]")]
    except (OSError, ValueError):
        mode = "unknown"
    return f"{pa.default_memory_pool().backend_name}, huge pages {mode}"


def undecided(defaults: list[float], tuned: list[float]) -> bool:
    """Whether the ratio of the tuned setting's time to the defaults' (:func:`paired`) is
    within the runs' noise (:func:`icefloe.tuning.measure.noise`) of the 0.9x target."""
    ratio = paired(defaults, tuned)
    return abs(ratio - TARGETS["icefloe (tuned)"]) <= noise(defaults, tuned)


def same_read(catalog: Any, identifier: str, tuned: dict[str, str], threads: int) -> bool:
    """Whether icefloe at the tuned setting (``tuned`` options on ``threads`` reader
    threads) reads ``identifier`` exactly as at its defaults: the same reader threads, the
    same options but ``splitSize``, and the same splits in the same order (the local
    engine's cut, :func:`icefloe.source.retrying_splits`). Then the two contenders run
    the same code on the same splits, and their ratio is the noise of identical reads
    (256 MB x 4 local: ``splitSize=57877504`` cuts one split per row group, as the
    adaptive cut does; benchmarks/RESULTS.md, "Session 18 ... (loc18)"). Plans only
    (manifests read, no data file)."""
    import dataclasses

    from icefloe import IcebergSource
    from icefloe.local.engine import target_splits
    from icefloe.source import default_parallelism

    def planned(options: dict[str, str], n: int | None) -> tuple[Any, ...]:
        plan = IcebergSource(identifier, catalog=catalog, options=options).bounded_plan()
        n = default_parallelism(plan) if n is None else n
        splits = [(s.file_path, s.start, s.length, s.resume_rows)
                  for s in plan.splits(target_splits(n), local_only=True)]
        opts = dataclasses.replace(plan.options, split_size=0, given=frozenset())
        return n, opts, splits

    return planned({}, None) == planned(tuned, threads)


def results_path(scale: str) -> Path:
    """The default results file of ``scale``."""
    return DATA_DIR / f"matrix-results-{scale}.json"


def measure_cells(scale: str, only: set[str] | None = None, path: Path | None = None,
                  reps: int = 5) -> dict[str, dict[str, Any]]:
    """Measure the cells of ``scale`` (``only``: their keys, ``1:4:s3-10-ms``); merges
    them into the results file ``path`` (default :func:`results_path`) and returns every
    recorded cell."""
    path = path or results_path(scale)
    recorded: dict[str, dict[str, Any]] = json.loads(path.read_text()) if path.exists() else {}
    todo = [c for c in cells(scale) if only is None or _key(*c) in only]
    from icefloe import tune
    from icefloe.tuning.grid import label, option_texts

    with links() as where:
        for size, row_groups in dict.fromkeys((s, g) for s, g, _ in todo):
            files = cached_files(size, row_groups)
            identifier = f"matrix.t_{size // MB}mb_{row_groups}rg"
            where.add(identifier, files)
            for link in [lk for s, g, lk in todo if (s, g) == (size, row_groups)]:
                load_before = load_avg()
                started = time.perf_counter()
                budget = next(b for s, b in sorted(TUNE_BUDGETS.items()) if size <= s)
                result = tune(identifier, catalog=where.catalog(link), budget=budget)
                tuned = option_texts(result.candidate, "local")  # "auto": not an option
                threads = int(result.candidate["parallelism"])
                tune_text = f"{result.verdict}: {label(result.candidate, result.baseline)} " \
                            f"({result.ratio:.2f}x, noise {result.noise * 100:.0f} %; " \
                            f"{budget} budget, {result.elapsed_s:.0f} s" \
                            + ("" if result.sample_groups is None else
                               f"; sample {result.sample_groups[0]} of "
                               f"{result.sample_groups[1]} row groups") \
                            + ("" if not result.skipped else
                               f"; not swept: {', '.join(result.skipped)}") + ")"
                tuning_s = time.perf_counter() - started
                same = same_read(where.catalog(link), identifier, tuned, threads)
                runs, pair, servers = measure(where, link, identifier, tuned, threads, reps)
                counts = {r for rs in runs.values() for _, r, _ in rs}
                assert len(counts) == 1, f"contenders read different rows: {runs}"
                n_files, rows = cell_files(size, row_groups)
                recorded[_key(size, row_groups, link)] = {
                    "size": size, "row_groups": row_groups, "link": link, "files": n_files,
                    "rows": rows, "bytes": sum(p.stat().st_size for p in files),
                    "seconds": {n: [s for s, _, _ in rs] for n, rs in runs.items()},
                    "cpu": {n: [c for _, _, c in rs] for n, rs in runs.items()},
                    "tune": tune_text, "tune_s": round(tuning_s, 1),
                    "tune_result": result.to_json(),
                    "tuned": {**tuned, "parallelism": threads}, "same_read": same,
                    **({} if pair is None else {"tuned_pair": {
                        n: [s for s, _, _ in rs] for n, rs in pair.items()}}),
                    **servers,
                    "load": [load_before, load_avg()], "cores": os.cpu_count(),
                    "memory": memory_setting(),
                    "at": time.strftime("%H:%M", time.gmtime()),
                    "elapsed_s": round(time.perf_counter() - started, 1)}
                path.write_text(json.dumps(recorded, indent=1))
                print(f"[bench] matrix {_key(size, row_groups, link)}: "
                      f"{_row(recorded[_key(size, row_groups, link)])}", file=sys.stderr,
                      flush=True)
    return recorded


def measure_planning(scale: str, only: set[str] | None = None, path: Path | None = None,
                     reps: int = 5) -> dict[str, dict[str, Any]]:
    """Time :data:`PLANNING` and :data:`PYICEBERG_PLANNING` ``reps`` times each, in one
    fresh process each per recorded cell of ``scale`` (``only``: their keys), interleaved,
    and record them with the cell (``planning``: icefloe's seconds and CPU seconds, the
    load before and after, when; under ``pyiceberg``, PyIceberg's seconds and CPU), in the
    results file ``path``; the cell's reads are kept. Returns every recorded cell."""
    path = path or results_path(scale)
    recorded: dict[str, dict[str, Any]] = json.loads(path.read_text())
    todo = [c for c in cells(scale) if _key(*c) in recorded
            and (only is None or _key(*c) in only)]
    with links() as where:
        for size, row_groups in dict.fromkeys((s, g) for s, g, _ in todo):
            identifier = f"matrix.t_{size // MB}mb_{row_groups}rg"
            where.add(identifier, cached_files(size, row_groups))
            for link in [lk for s, g, lk in todo if (s, g) == (size, row_groups)]:
                cell = recorded[_key(size, row_groups, link)]
                load_before = load_avg()
                procs = [Contender({"identifier": identifier, "kind": kind,
                                    "s3": where.s3_options(link),
                                    "catalog": where.catalog_properties(link)})
                         for kind in (PLANNING, PYICEBERG_PLANNING)]
                try:
                    for proc in procs:
                        proc.ready()
                    both = [[proc.read() for proc in procs] for _ in range(reps)]
                finally:
                    for proc in procs:
                        proc.close()
                runs, theirs = [b[0] for b in both], [b[1] for b in both]
                # each the same every time (icefloe's splits' records, pro-rated where a
                # file is cut, and PyIceberg's tasks' records)
                assert len({r for _, r, _ in runs}) == len({r for _, r, _ in theirs}) == 1, \
                    (runs, theirs)
                cell["planning"] = {"seconds": [s for s, _, _ in runs], "rows": runs[0][1],
                                    "cpu": [c for _, _, c in runs],
                                    "pyiceberg": {"seconds": [s for s, _, _ in theirs],
                                                  "cpu": [c for _, _, c in theirs]},
                                    "load": [load_before, load_avg()],
                                    "at": time.strftime("%H:%M", time.gmtime())}
                path.write_text(json.dumps(recorded, indent=1))
                print(f"[bench] matrix planning {_key(size, row_groups, link)}: "
                      f"{median(cell['planning']['seconds']):.3f} s", file=sys.stderr,
                      flush=True)
    return recorded


def pool(runs: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """The cells recorded in every one of ``runs`` (the results of independent whole runs
    of the matrix, on the same read code: every cell of each, so no cell's figures are
    chosen), each as one cell of all their reads, for one verdict on all their rounds.

    Round i of run r stays one round (its contenders' reads keep their order), so
    :func:`paired` pairs within a run's rounds only. Per contender the reads, CPU and
    stolen time are the runs' in turn; the servers' CPU per read is net of its own run's
    background (``server_idle_cpu_s`` then 0); the tuned pair is each run's
    (:func:`tuned_pair`: each run's own tuned setting against its defaults); ``same_read``
    holds where it held in every run; planning's reads are the runs' in turn. ``runs``
    (their number), ``loads``, ``ats`` and ``memories`` (each run's, :func:`memory_setting`)
    mark a pooled cell for the report.
    Contenders missing from a run are left out of the pooled cell."""
    common = [k for k in runs[0] if all(k in r for r in runs[1:])]
    out: dict[str, dict[str, Any]] = {}
    for key in common:
        cells_ = [r[key] for r in runs]
        first = cells_[0]
        for field in ("size", "row_groups", "link", "files", "rows", "bytes"):
            if any(c[field] != first[field] for c in cells_):
                raise ValueError(f"cell {key}: the runs' {field} differ "
                                 f"({[c[field] for c in cells_]}): not the same table")
        names = [n for n in first["seconds"] if all(n in c["seconds"] for c in cells_)]
        cell: dict[str, Any] = {f: first[f] for f in (
            "size", "row_groups", "link", "files", "rows", "bytes")}
        cell["seconds"] = {n: [s for c in cells_ for s in c["seconds"][n]] for n in names}
        for field in ("cpu", "steal"):
            if all(field in c for c in cells_):
                cell[field] = {n: [v for c in cells_ for v in c[field][n]] for n in names
                               if all(n in c[field] for c in cells_)}
        if all("server_cpu" in c for c in cells_):
            cell["server_cpu"] = {n: [
                max(0.0, cpu - float(c.get("server_idle_cpu_s") or 0.0) * t)
                for c in cells_
                for cpu, t in zip(c["server_cpu"][n], c["seconds"][n], strict=False)]
                for n in names if all(c["server_cpu"].get(n) for c in cells_)}
            cell["server_idle_cpu_s"] = 0.0
        pairs = [tuned_pair(c) for c in cells_]
        cell["tuned_pair"] = {"icefloe (defaults)": [s for d, _ in pairs for s in d],
                              "icefloe (tuned)": [s for _, t in pairs for s in t]}
        cell["same_read"] = all(c.get("same_read") for c in cells_)
        cell["tune"] = " / ".join(
            f"run {i + 1}: {c['tune']}"
            + ("; the same read as the defaults" if c.get("same_read") else "")
            for i, c in enumerate(cells_))
        cell["tuned"] = first["tuned"]
        if all("planning" in c for c in cells_):
            plans = [c["planning"] for c in cells_]
            cell["planning"] = {"seconds": [s for p in plans for s in p["seconds"]],
                                "rows": first["planning"]["rows"]}
            if all("cpu" in p and "pyiceberg" in p for p in plans):
                cell["planning"]["cpu"] = [v for p in plans for v in p["cpu"]]
                cell["planning"]["pyiceberg"] = {
                    f: [v for p in plans for v in p["pyiceberg"][f]] for f in ("seconds", "cpu")}
        cell["cores"] = first.get("cores")
        cell["memories"] = [c.get("memory") or "not recorded" for c in cells_]
        cell["load"] = [cells_[0]["load"][0], cells_[-1]["load"][1]]
        cell["loads"] = [c["load"] for c in cells_]
        cell["ats"] = [c.get("at", "?") for c in cells_]
        cell["runs"] = len(cells_)
        out[key] = cell
    return out


def paired(base: list[float], peer: list[float]) -> float:
    """The median over rounds of ``peer``'s time / ``base``'s in the same round (the
    reads are round-robin, so the i-th read of every contender is in round i, seconds
    apart). This machine's slow spells last longer than a round and slow every process
    alike (session 18: every contender's reads bimodal, Arrow's decode from memory too,
    and the modes in runs of rounds), so a round's ratio keeps what a ratio of the
    contenders' medians loses when their middle reads fall in different spells."""
    n = min(len(base), len(peer))
    return median([p / b for b, p in zip(base[:n], peer[:n], strict=True)])


def paired_interval(base: list[float], peer: list[float],
                    confidence: float = INTERVAL_CONFIDENCE) -> tuple[float, float]:
    """A distribution-free interval for :func:`paired`'s median of the rounds' ratios: the
    k-th smallest and k-th largest ratio, k the largest whose interval covers the median
    of the ratios' distribution with at least ``confidence`` (the sign test's order
    statistics: P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2; 5 rounds: their least
    and most, 94 %; 10 rounds: the 2nd least and most, 98 %). It assumes the rounds'
    ratios independent, as :func:`paired` argues they nearly are (a slow spell slows
    every contender of a round alike)."""
    n = min(len(base), len(peer))
    out = sorted(p / b for b, p in zip(base[:n], peer[:n], strict=True))
    k = 1  # grows while P(Binomial(n, 1/2) <= k) is within the tail
    while k < (n + 1) // 2 and \
            sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n <= (1 - confidence) / 2:
        k += 1
    return out[k - 1], out[n - k]


def ratios(cell: dict[str, Any]) -> dict[str, float]:
    """Each peer's time / icefloe's at its defaults, paired by round (:func:`paired`;
    above 1: the defaults faster); the tuned setting's from the tuned pair's reads where
    there are more of them."""
    base = cell["seconds"]["icefloe (defaults)"]
    out = {name: paired(base, cell["seconds"][name]) for name in TARGETS}
    out["icefloe (tuned)"] = paired(*tuned_pair(cell))
    return out


def intervals(cell: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """:func:`paired_interval` of each of :func:`ratios`' ratios, from the same reads."""
    base = cell["seconds"]["icefloe (defaults)"]
    out = {name: paired_interval(base, cell["seconds"][name]) for name in TARGETS}
    out["icefloe (tuned)"] = paired_interval(*tuned_pair(cell))
    return out


def tuned_pair(cell: dict[str, Any]) -> tuple[list[float], list[float]]:
    """The seconds of the defaults' and the tuned setting's reads the tuned target is
    judged on: the tuned pair's :data:`TUNED_REPS` where measured, else the cell's."""
    seconds = cell.get("tuned_pair") or cell["seconds"]
    return seconds["icefloe (defaults)"], seconds["icefloe (tuned)"]


CEILINGS: dict[tuple[str, str], str] = {
    ("32:1:s3-10-ms", "pyarrow dataset"):
        "planning's 4 round trips (0.117 s) are in icefloe's time, not PyArrow's: "
        "without them 1.09x",
    ("32:1:s3-30-ms", "pyarrow dataset"):
        "planning's 4 round trips (0.282 s) are in icefloe's time, not PyArrow's: "
        "without them 1.02x",
    # session 15 (mrg15's profile_io run, RESULTS "the power-of-two decode"); rtt15 showed
    # the round trips unavoidable with PyArrow's S3 API (a HEAD before every object's
    # first read; RESULTS "the round trips on the critical path")
    ("32:4:s3-10-ms", "pyarrow dataset"):
        "planning's round trips (0.094 s) are in icefloe's time, not PyArrow's: "
        "without them 1.10x",
    ("32:16:s3-10-ms", "pyarrow dataset"):
        "planning's round trips (0.096 s) are in icefloe's time, not PyArrow's: "
        "without them 1.14x",
    # session 16 (mid16's profile_io run and request timelines, RESULTS "32 MB files on
    # S3"): the same shape at 30 ms, icefloe's planning alone 0.260 / 0.258 s
    ("32:4:s3-30-ms", "pyarrow dataset"):
        "planning's round trips (0.260 s) are in icefloe's time, not PyArrow's: "
        "without them 1.56x",
    ("32:16:s3-30-ms", "pyarrow dataset"):
        "planning's round trips (0.258 s) are in icefloe's time, not PyArrow's: "
        "without them 1.27x",
}
"""Targets a profile showed out of reach, by ``(cell key, peer)`` (a peer of
:data:`TARGETS`): the reason and its figure, as RESULTS.md ("Defaults matrix") records the
profile (``benchmarks.profile_io``: planning's time). A cell that misses such a target is
reported "ceiling: <reason>" for it, not "missed"; one that meets it is reported as met."""

PROFILED_CPU_CEILINGS: dict[tuple[str, str], str] = {
    (f"{cell}:local-disk", "pyiceberg"):
    f"CPU: decoding the files alone takes {floor} s per read; 1.5x PyIceberg "
    f"({theirs} s) needs <= {need} s" for cell, floor, theirs, need in (
        ("1:1", "0.32", "0.38", "0.25"), ("32:1", "0.27", "0.32", "0.21"),
        ("32:16", "0.34", "0.32", "0.21"), ("256:16", "1.07", "1.08", "0.72"))}
"""Session 11's ceilings from ``benchmarks.profile_decode`` (the decode's CPU against
PyIceberg's CPU, argued under load: a read's wall time follows its CPU when the cores are
shared), for cells recorded before the matrix measured the decode itself; a cell with a
:data:`DECODE` figure is judged by :func:`cpu_ceiling` instead, sound at any load."""


def cpu_ceiling(cell: dict[str, Any], peer: str) -> str | None:
    """Why the ``peer`` target of ``cell`` is out of reach on this machine's CPU, from the
    cell's own figures, or None when it is not shown to be.

    The floor: the least CPU per read any process of the cell's run spent reading its
    files (medians per process: icefloe's, the peers', and :data:`DECODE`, Arrow decoding
    the bytes alone). A read takes at least its CPU over the machine's cores (``cores``,
    recorded with the cell; every core the reader's alone), so icefloe's read takes at
    least floor / cores seconds whatever its settings; where that is longer than the
    target allows (the peer's median time / the target ratio) no change to icefloe below
    the decode reaches the target. Sound at any load (a loaded machine only lengthens
    every read). Applies to PyIceberg's 1.5x: PyArrow's 1.0x is never out of reach by
    this rule (PyArrow's reader does the decode too), nor is the tuned setting's."""
    if peer != "pyiceberg" or "cpu" not in cell or DECODE not in cell["cpu"]:
        return None
    floors = {n: median(c) for n, c in cell["cpu"].items() if c and n != FETCH}
    who = min(floors, key=lambda n: floors[n])
    cores = int(cell.get("cores") or 2)
    least = floors[who] / cores
    need = median(cell["seconds"][peer]) / TARGETS[peer]
    if least <= need:
        return None
    return (f"CPU: the least CPU a read of these files took in this run ({who}'s "
            f"{floors[who]:.2f} s) over {cores} cores is {least:.2f} s; 1.5x PyIceberg "
            f"({median(cell['seconds'][peer]):.2f} s) needs <= {need:.2f} s")


def _servers(cell: dict[str, Any], name: str) -> float:
    """The median CPU seconds the servers (SeaweedFS, the proxy) spent on a read of
    ``name``, less their own background over the read's time (``server_idle_cpu_s``)."""
    idle = float(cell.get("server_idle_cpu_s") or 0.0)
    return median([max(0.0, c - idle * t) for c, t in zip(
        cell["server_cpu"][name], cell["seconds"][name], strict=False)])


def s3_bound(cell: dict[str, Any]) -> dict[str, Any] | None:
    """The least wall time any reader of an S3 cell's table can take on this machine,
    from the cell's own figures, with its terms; None for a local cell, or one recorded
    without :data:`FETCH`'s and the servers' figures (``cpu``, ``server_cpu``).

    Who is bounded: a reader through Arrow's S3 client (the client every contender
    uses), from the table's name: it learns the data files from the manifest, which it
    learns from the manifest list, on the cell's link (the latency proxy, ``delay`` each
    way: a request's answer comes at least ``2 x delay`` after it was sent), on the cell's
    machine (``cores``, every one the read's alone: other load only lengthens a read).

    The premise, as :func:`cpu_ceiling`'s: no reader does a piece of work with less CPU
    than the least any process of the cell was measured doing it with (medians per
    process). The pieces, per read:
    - ``decode``: :data:`DECODE`'s CPU, Arrow decoding the files from memory;
    - ``fetch``: :data:`FETCH`'s CPU, Arrow's S3 client moving the files' bytes into
      reused buffers (the kernel's TCP receive, the client's copy; no decode);
    - ``servers``: the CPU SeaweedFS and the proxy spent on :data:`FETCH`'s read (the
      data alone), less their background (:func:`_servers`);
    - ``whole``: the least of (decode + fetch) and each S3 reader's own CPU, plus the least
      servers' CPU of any S3 reader, the fetch's included: the whole read's work.

    Three bounds, each sound under the premise; the bound is their largest:
    1. ``planning + DATA_ROUND_TRIPS x 2 x delay``: :data:`PLANNING_ROUND_TRIPS` requests
       in series through the proxy (``planning`` = 4 x 2 x delay) before any data file is
       known, then :data:`DATA_ROUND_TRIPS` more for the data's first bytes (the file's
       HEAD or footer, then its GET). The REST catalog's answer is not proxied and is
       counted as 0.
    2. ``whole / cores``: the whole read's work fits in its wall time on the cores.
    3. ``planning + 3 x delay + (decode + fetch + servers) / cores``: that work is the
       data's, and none of it can start before the data's GET reaches the server: the
       manifest names the data files at least ``planning`` after the start, the file's
       HEAD (or footer) takes a round trip, and the GET a ``delay`` on its way (planning's
       own CPU overlapping it is not counted), so the data's time adds to those round
       trips rather than overlapping them.
       The data's client CPU is the least of decode + fetch and every S3 reader's own
       CPU less its planning's (:func:`data_cpu`, where the cell's planning pass timed
       icefloe's and PyIceberg's planning's CPU); without those figures the term is used
       only where decode + fetch <= every S3 reader's own CPU (the premise as far as the
       cell shows; a reader's own figures include its planning's CPU, tens of ms, so this
       check is up to that much). The servers' part: the fetch's where it is <= every
       reader's, else 0.
    Left out, so the bound stays below any reader's time: the catalog's round trip, Arrow's
    HEAD before each GET, the footer's round trip before ranged reads, a column chunk's
    decode being serial, the first read's set-up (the medians mostly skip it)."""
    delay = DELAYS.get(cell.get("link", ""))
    cpu, server = cell.get("cpu") or {}, cell.get("server_cpu") or {}
    if delay is None or DECODE not in cpu or FETCH not in cpu or FETCH not in server:
        return None
    readers = [n for n in cpu if n not in (DECODE, FETCH) and cpu[n]]
    decode, fetch = median(cpu[DECODE]), median(cpu[FETCH])
    own = {n: median(cpu[n]) for n in readers}
    servers = {FETCH: _servers(cell, FETCH),
               **{n: _servers(cell, n) for n in readers if server.get(n)}}
    cores = int(cell.get("cores") or 2)
    planning = PLANNING_ROUND_TRIPS * 2 * delay
    client_who = min(own, key=lambda n: own[n]) if own else None
    client = min([decode + fetch, *own.values()])
    server_who = min(servers, key=lambda n: servers[n])
    whole = (client + servers[server_who]) / cores
    bounds = {"round trips": planning + DATA_ROUND_TRIPS * 2 * delay, "whole": whole}
    data_server = servers[FETCH] if server_who == FETCH else 0.0
    data = {"decode + fetch": decode + fetch, **(data_cpu(cell, own) or {})}
    data_who = min(data, key=lambda n: data[n])
    if len(data) > 1 or decode + fetch <= client:
        bounds["data after planning"] = planning + data_wait(delay) \
            + (data[data_who] + data_server) / cores
    which = max(bounds, key=lambda n: bounds[n])
    return {"bound": bounds[which], "which": which, "bounds": bounds, "planning": planning,
            "delay": delay, "decode": decode, "fetch": fetch, "servers": servers,
            "data_server": data_server, "client": client, "cores": cores,
            "client_who": "decode + fetch" if decode + fetch <= client else client_who,
            "server_who": server_who, "data": data[data_who], "data_who": data_who}


def data_cpu(cell: dict[str, Any], own: dict[str, float]) -> dict[str, float] | None:
    """Each S3 reader's CPU per read for the data alone: its own (``own``: medians per
    process) less its planning's CPU timed alone (medians of :func:`measure_planning`'s
    ``planning``: :data:`PLANNING` for icefloe's contenders, :data:`PYICEBERG_PLANNING`
    for PyIceberg's); PyArrow's dataset reader's own as it is (its files are listed
    before its clock). None for a cell recorded without the planning's CPU: then
    :func:`s3_bound` uses the data's term only where Arrow's decode and fetch are the
    least (its premise)."""
    plan = cell.get("planning") or {}
    if "cpu" not in plan or "pyiceberg" not in plan:
        return None
    ours, theirs = median(plan["cpu"]), median(plan["pyiceberg"]["cpu"])
    less = {"icefloe (defaults)": ours, "icefloe (tuned)": ours, "pyiceberg": theirs,
            "pyarrow dataset": 0.0}
    return {n: max(0.0, c - less[n]) for n, c in own.items() if n in less}


def data_wait(delay: float) -> float:
    """From the manifest's answer until a data file's GET reaches the server: its HEAD
    (or footer) round trip, then the GET's way out (:data:`DATA_ROUND_TRIPS`)."""
    return (DATA_ROUND_TRIPS - 1) * 2 * delay + delay


def round_floors(cell: dict[str, Any], peer: str) -> list[tuple[float, float]]:
    """Per round of an S3 cell: ``(need, floor)``, the time ``peer``'s target needs of
    icefloe in that round (the peer's read / its target) and :func:`s3_bound` of that
    round's own reads alone (its decode, fetch, readers' CPU and servers'; planning's CPU
    as the cell's medians); [] for a local cell or one without the bound's figures.

    The cell's ceiling (:func:`s3_ceiling`) compares medians over all its rounds, each
    from other rounds where the machine was busier or quieter; this pairs the need and
    the floor within a round, as :func:`paired` pairs the ratios, for a decided miss's
    note (:func:`cell_verdict`: in how many rounds the floor was above the need)."""
    if peer not in ("pyiceberg", "pyarrow dataset") or s3_bound(cell) is None:
        return []
    out = []
    for r, theirs in enumerate(cell["seconds"][peer]):
        one = {**cell}
        for field in ("seconds", "cpu", "server_cpu"):
            one[field] = {n: [v[r]] for n, v in cell[field].items() if len(v) > r}
        found = s3_bound(one)
        if found is not None:
            out.append((theirs / TARGETS[peer], found["bound"]))
    return out


def s3_ceiling(cell: dict[str, Any], peer: str) -> str | None:
    """Why the ``peer`` target of an S3 cell is out of reach by :func:`s3_bound`, or None
    (a local cell, a cell without the bound's figures, a bound within the need).

    PyIceberg's 1.5x: out of reach where the bound is longer than PyIceberg's median time
    / 1.5. PyArrow's 1.0x: only where the bound is longer than PyArrow's median time and
    the same bound without planning's round trips is not, so the ceiling is work PyArrow's
    timing leaves out (its files are listed before its clock), as :data:`CEILINGS`'
    planning entries; the tuned target never."""
    found = s3_bound(cell) if peer in ("pyiceberg", "pyarrow dataset") else None
    if found is None:
        return None
    theirs = median(cell["seconds"][peer])
    need = theirs / TARGETS[peer]
    bound, delay = found["bound"], found["delay"]
    if bound <= need:
        return None
    if peer == "pyarrow dataset":
        without = max(DATA_ROUND_TRIPS * 2 * delay, found["bounds"]["whole"],
                      found["bounds"].get("data after planning", 0.0) - found["planning"])
        if without > need:
            return None
    terms = {
        "round trips": f"planning's {PLANNING_ROUND_TRIPS} round trips in series, then "
                       f"{DATA_ROUND_TRIPS} for the data: "
                       f"{PLANNING_ROUND_TRIPS + DATA_ROUND_TRIPS} x {2 * delay:.2f} s",
        "whole": f"the least CPU of a read ({found['client_who']}'s {found['client']:.2f} s "
                 f"+ the servers' {found['servers'][found['server_who']]:.2f} s) over "
                 f"{found['cores']} cores",
        "data after planning": f"planning's {PLANNING_ROUND_TRIPS} round trips "
                               f"({found['planning']:.2f} s) and the data's GET's way "
                               f"after its file's HEAD ({data_wait(delay):.2f} s), then "
                               f"the data's CPU ("
                               + (f"decode {found['decode']:.2f} s + Arrow's S3 client "
                                  f"{found['fetch']:.2f} s" if found["data_who"] ==
                                  "decode + fetch" else
                                  f"{found['data_who']}'s, its planning's taken off, "
                                  f"{found['data']:.2f} s")
                               + (f" + SeaweedFS and proxy {found['data_server']:.2f} s"
                                  if found["server_who"] == FETCH else
                                  f"; the servers' CPU left out: {found['server_who']}'s "
                                  f"reads cost them less than the bare fetch")
                               + f") over {found['cores']} cores"}
    name = "1.5x PyIceberg" if peer == "pyiceberg" else \
        "1.0x PyArrow (its listing before its clock)"
    return (f"S3 floor: {terms[found['which']]} is {bound:.3f} s; {name} "
            f"({theirs:.3f} s) needs <= {need:.3f} s")


def planning_ceiling(cell: dict[str, Any], peer: str) -> str | None:
    """PyArrow's 1.0x out of reach by planning, from the cell's own :data:`PLANNING`
    figure, or None: where icefloe's reads less that planning's median (per round, as
    :func:`paired`) would meet the target, the miss is work PyArrow's timing leaves out
    (its files are listed before its clock), as :data:`CEILINGS`' entries for the 32 MB
    S3 cells argued from profiles. Not for PyIceberg (its time includes its own
    planning) nor the tuned target."""
    if peer != "pyarrow dataset" or "planning" not in cell:
        return None
    plan = median(cell["planning"]["seconds"])
    base = [s - plan for s in cell["seconds"]["icefloe (defaults)"]]
    if min(base) <= 0:
        return None
    without = paired(base, cell["seconds"][peer])
    if without < TARGETS[peer]:
        return None
    return (f"planning ({plan:.3f} s: the table's load and its manifests, timed alone) is in "
            f"icefloe's time, not PyArrow's (its files are listed before its clock): "
            f"without it {without:.2f}x")


def ceiling(key: str, cell: dict[str, Any], peer: str) -> str | None:
    """The reason the ``peer`` target of ``cell`` is shown out of reach: a profile's
    (:data:`CEILINGS`), the S3 cell's floor (:func:`s3_ceiling`) or the cell's own CPU
    floor (:func:`cpu_ceiling`), or planning measured with the cell
    (:func:`planning_ceiling`, before the profiles' entries); else None."""
    if DECODE in cell.get("cpu", {}):
        return planning_ceiling(cell, peer) or CEILINGS.get((key, peer)) \
            or s3_ceiling(cell, peer) or cpu_ceiling(cell, peer)
    return CEILINGS.get((key, peer)) or PROFILED_CPU_CEILINGS.get((key, peer))


def _short(peer: str) -> str:
    return "tuned" if peer == "icefloe (tuned)" else peer.split()[0]


def within_noise(cell: dict[str, Any], peer: str) -> bool:
    """Whether the cell's reads leave its missed ``peer`` target undecided: for the tuned
    target, the tuned pair's reads (:func:`tuned_pair`) do not show the tuned setting
    faster than the defaults by more than their spread
    (:func:`icefloe.tuning.measure.beats`); for a peer's, the interval of the rounds'
    ratio (:func:`paired_interval`) reaches the target."""
    if peer == "icefloe (tuned)":
        return not beats(*tuned_pair(cell))
    return paired_interval(cell["seconds"]["icefloe (defaults)"],
                           cell["seconds"][peer])[1] >= TARGETS[peer]


def _missed(cell: dict[str, Any]) -> list[str]:
    """The targets of :data:`TARGETS` the cell's ratios miss (a same read's tuned one
    never: :func:`_same`)."""
    r = ratios(cell)
    return [n for n, t in TARGETS.items() if r[n] < t and not _same(cell, n)]


def only_noise(key: str, cell: dict[str, Any]) -> bool:
    """Whether the cell misses a target with no ceiling shown, and every such target only
    within noise (:func:`within_noise`): counted apart in the report's summary."""
    open_ = [n for n in _missed(cell) if ceiling(key, cell, n) is None]
    return bool(open_) and all(within_noise(cell, n) for n in open_)


def cell_verdict(key: str, cell: dict[str, Any]) -> str:
    """``**met**``; ``ceiling: ...`` when every missed target of the cell has a
    :data:`CEILINGS` entry; else ``**missed** (peers)`` (and the ceilings of the others).
    A missed target without a ceiling is marked "within noise" where the cell's reads do
    not decide it (:func:`within_noise`); the tuned target is met where the tuned setting
    is the same read as the defaults (``same_read``: :func:`same_read`), whose ratio is
    only the noise of identical reads."""
    missed = _missed(cell)
    if not missed:
        return verdict(True)
    why = {n: ceiling(key, cell, n) for n in missed}
    shown = [f"ceiling ({_short(n)}): {why[n]}" for n in missed if why[n]]
    open_ = [_short(n) + (" within noise" if within_noise(cell, n) else _above(cell, n))
             for n in missed if not why[n]]
    if not open_:
        return "; ".join(shown)
    return f"{verdict(False)} ({', '.join(open_)})" + "".join(f"; {c}" for c in shown)


def _above(cell: dict[str, Any], peer: str) -> str:
    """", the round's own floor above the need in k of n rounds" for a decided miss of an
    S3 cell (:func:`round_floors`); "" where none is or there are no such figures."""
    rounds = round_floors(cell, peer)
    above = sum(floor > need for need, floor in rounds)
    return f"; its round's floor above the need in {above} of {len(rounds)} rounds" \
        if above else ""


def _row(cell: dict[str, Any]) -> list[str]:
    r, within = ratios(cell), intervals(cell)
    key = _key(cell["size"], cell["row_groups"], cell["link"])
    spread = {n: (max(s) - min(s)) / median(s) for n, s in cell["seconds"].items()}
    loads = cell.get("loads") or [cell["load"]]
    return [f"{cell['size'] // MB:,} MB", str(cell["row_groups"]), cell["link"],
            f"{cell['files']} x {cell['rows']:,}",
            f"{fmt_s(median(cell['seconds']['icefloe (defaults)']))} "
            f"(±{spread['icefloe (defaults)'] * 50:.0f} %)",
            *(f"{r[n]:.2f}x ({within[n][0]:.2f}-{within[n][1]:.2f})" for n in TARGETS),
            cell_verdict(key, cell),
            cell["tune"] + ("; the same read as the defaults"
                            if cell.get("same_read") and "runs" not in cell else ""),
            ", ".join(f"{b.split()[0]}-{a.split()[0]}" for b, a in loads)
            + _steal_text(cell),
            " / ".join(f"{median(cell['cpu'][n]):.2f}" for n in (
                "icefloe (defaults)", "pyarrow dataset", "pyiceberg")) if "cpu" in cell else "-",
            _floor_text(cell)]


def _steal_text(cell: dict[str, Any]) -> str:
    """"; steal N %": the share of the cores' time during the cell's round-robin reads
    that the hypervisor gave to other machines (``steal``); "" where not recorded."""
    if "steal" not in cell:
        return ""
    stolen = sum(sum(v) for v in cell["steal"].values())
    wall = sum(sum(cell["seconds"][n][:len(v)]) for n, v in cell["steal"].items())
    return f"; steal {100 * stolen / (wall * int(cell.get('cores') or 2)):.0f} %"


def _floor_text(cell: dict[str, Any]) -> str:
    """The S3 cell's bound (:func:`s3_bound`) and its terms, for the report; "-" without."""
    found = s3_bound(cell)
    if found is None:
        return "-"
    servers = found["servers"]
    return (f"{found['bound']:.3f} ({found['which']}); servers "
            + " / ".join(f"{servers[n]:.2f}" if n in servers else "-" for n in (
                "icefloe (defaults)", "pyarrow dataset", "pyiceberg"))
            + f"; decode {found['decode']:.2f} + fetch {found['fetch']:.2f} + "
            f"{servers[FETCH]:.2f}")


def _same(cell: dict[str, Any] | None, peer: str) -> bool:
    """The tuned setting of ``cell`` is the defaults' read (``same_read``): its target
    met whatever the ratio (:func:`cell_verdict`)."""
    return peer == "icefloe (tuned)" and bool(cell and cell.get("same_read"))


def shade(cell: dict[str, Any] | None, key: str, peer: str) -> int:
    """The figure's colour of ``peer``'s target in ``cell`` (None: not run), as
    :func:`cell_verdict` judges it: 0 missed, 1 not run, 2 missed with its ceiling shown,
    3 met, 4 missed within noise (:func:`within_noise`)."""
    if cell is None:
        return 1
    if ratios(cell)[peer] >= TARGETS[peer] or _same(cell, peer):
        return 3
    if ceiling(key, cell, peer) is not None:
        return 2
    return 4 if within_noise(cell, peer) else 0


def draw(recorded: dict[str, dict[str, Any]], path: Path) -> None:
    """Heat maps (matplotlib, PNG written atomically): one row per target (the ratio of
    the defaults against it), one column per link; cells are file size x row groups,
    labelled with the ratio, green where the target is met (a tuned setting that is the
    defaults' read, ``same_read``, meets its target whatever its ratio, as in
    :func:`cell_verdict`), amber where missed with its ceiling shown (:data:`CEILINGS`),
    pale red where missed within noise (:func:`within_noise`), red where missed, grey
    where not measured (:func:`shade`)."""
    from matplotlib.colors import ListedColormap
    from matplotlib.figure import Figure

    cells_ = list(recorded.values())
    sizes = sorted({c["size"] for c in cells_})
    groups = sorted({c["row_groups"] for c in cells_})
    names = {"pyarrow dataset": "vs PyArrow dataset (>= 1.0x)",
             "pyiceberg": "vs PyIceberg (>= 1.5x)",
             "icefloe (tuned)": "defaults / tuned (>= 0.9x)"}
    fig = Figure(figsize=(3.2 * len(LINKS) + 0.6, 2.3 * len(TARGETS) + 0.6),
                 layout="constrained")
    axes = fig.subplots(len(TARGETS), len(LINKS), squeeze=False)
    # missed, not run, ceiling shown by a profile, met, missed within noise
    cmap = ListedColormap(["#f4a6a6", "#dddddd", "#f6d58e", "#b7e4b0", "#f8dcd6"])
    for row, peer in enumerate(TARGETS):
        for col, link in enumerate(LINKS):
            ax = axes[row][col]
            grid: list[list[float]] = []
            for g in groups:
                line = []
                for s in sizes:
                    cell = recorded.get(_key(s, g, link))
                    line.append(float("nan") if cell is None else ratios(cell)[peer])
                grid.append(line)
            shades = [[shade(recorded.get(_key(s, g, link)), _key(s, g, link), peer)
                       for s in sizes] for g in groups]
            ax.imshow(shades, cmap=cmap, vmin=0, vmax=4, aspect="auto")
            for r, line in enumerate(grid):
                for c, v in enumerate(line):
                    cell = recorded.get(_key(sizes[c], groups[r], link))
                    text = "-" if v != v else f"{v:.2f}x" + (
                        "\nsame read" if _same(cell, peer) else
                        "\nwithin noise" if shades[r][c] == 4 else "")
                    ax.text(c, r, text, ha="center", va="center", fontsize=9)
            ax.set_xticks(range(len(sizes)), [f"{s // MB} MB" for s in sizes])
            ax.set_yticks(range(len(groups)), [str(g) for g in groups])
            if row == 0:
                ax.set_title(link)
            if col == 0:
                ax.set_ylabel(f"{names[peer]}\nrow groups")
            if row == len(TARGETS) - 1:
                ax.set_xlabel("file size")
    fig.suptitle("icefloe defaults: ratio per cell\n(green: target met, amber: missed, "
                 "its ceiling shown by a profile,\npale red: missed within noise, red: "
                 "missed, grey: not run)")
    temp = path.with_name(f".{path.name}.tmp")
    fig.savefig(temp, format="png", dpi=100)
    temp.replace(path)


def report(scale: str, recorded: dict[str, dict[str, Any]], took: float | None) -> str:
    order = {_key(*c): i for i, c in enumerate(cells(scale))}
    rows = [_row(c) for k, c in sorted(recorded.items(), key=lambda kv: order.get(kv[0], 0))]
    met = sum(r[8].startswith("**met") for r in rows)
    ceiling = sum(r[8].startswith("ceiling") for r in rows)
    noisy = sum(only_noise(k, c) for k, c in recorded.items())
    runs = max(int(c.get("runs") or 1) for c in recorded.values())
    reps = max(len(c["seconds"]["pyiceberg"]) for c in recorded.values()) // runs
    memory = sorted({m for c in recorded.values() for m in c.get("memories")
                     or [c.get("memory") or "not recorded"]})
    return (f"{scale} scale{'' if took is None else f', {took:.0f} s'}; a cell holds "
            f"{CELL_BYTES // MB} MB of Parquet (one file where a file is larger); "
            f"Arrow's memory pool and the kernel's transparent huge pages: "
            f"{' / '.join(memory)}; "
            + (f"**{runs} independent whole runs of the matrix pooled** (`bench_matrix "
               "--pool`: every cell's reads of every run, their rounds kept; tune's "
               "setting and its pair per run; load and tune per run in their columns); "
               if runs > 1 else "")
            + f"each contender in a fresh process per cell, {reps} timed reads each"
            + (" per run" if runs > 1 else "") + ", "
            "interleaved, medians (± half the runs' range over the median); on the shared "
            "2-core machine (load average before-after each cell in the load column, and "
            "where recorded the share of the cores' time during its reads the hypervisor "
            "gave to other machines, steal). CPU: the reading process's CPU seconds per read, "
            "medians. S3 floor: the least time any reader can take by `s3_bound` (its "
            "largest term named), the servers' (SeaweedFS + proxy) CPU s per read of "
            "icefloe / pyarrow / pyiceberg, and the data-only figures: Arrow's decode "
            "from memory + Arrow's S3 client fetching the bytes + the servers' CPU for "
            "that fetch. Ratios: the median over rounds of the peer's time / "
            "icefloe's at its defaults in the same round (`paired`; above 1: the defaults "
            f"faster), in brackets its interval (`paired_interval`: >= "
            f"{INTERVAL_CONFIDENCE:.0%} of the median's distribution, from the rounds' "
            "ratios); targets: >= 1.0x "
            "PyArrow's dataset reader, >= 1.5x PyIceberg, >= 0.9x the setting `icefloe tune` "
            f"found for the cell; a missed target is \"within noise\" where its interval "
            "reaches it (the tuned one: where the tuned pair's spread is larger than its "
            f"gain). **{met} of {len(rows)} cells meet every target"
            + (f"; {ceiling} more miss only targets a profile shows out of reach "
               "(\"ceiling\")" if ceiling else "")
            + (f"; {noisy} more miss only within noise" if noisy else "") + ".**\n\n"
            "![the matrix](matrix.png)\n\n"
            + md_table(["file size", "row groups", "link", "files x rows", "icefloe defaults",
                        "vs pyarrow", "vs pyiceberg", "defaults / tuned", "verdict",
                        "icefloe tune", "load", "CPU s: icefloe / pyarrow / pyiceberg",
                        "S3 floor s; servers' CPU s: icefloe / pyarrow / pyiceberg; "
                        "decode + fetch + its servers' CPU s"],
                       rows))


def figure_path(scale: str, recorded: dict[str, dict[str, Any]], given: Path | None,
                results: Path | None) -> Path:
    """Where a report's figure is drawn: ``given`` (``--figure``); else :data:`FIGURE`
    when ``recorded`` holds every cell of ``scale`` (a whole run, or whole runs pooled);
    else beside its results file, ``<results>.png``: a run of a few cells into a file of
    their own must not replace the whole matrix's figure (session 25's did)."""
    if given is not None:
        return given
    if keys(scale) <= set(recorded):
        return FIGURE
    return (results or results_path(scale)).with_suffix(".png")


def run(scale: str, only: set[str] | None = None, path: Path | None = None,
        reps: int = 5, figure: Path | None = None) -> str:
    started = time.perf_counter()
    recorded = measure_cells(scale, only, path, reps)
    took = time.perf_counter() - started if only is None else None
    try:
        draw(recorded, figure_path(scale, recorded, figure, path))
    except ImportError:
        print("(no plot: matplotlib is not installed)", file=sys.stderr)
    return report(scale, recorded, took)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _child(json.loads(sys.argv[2]))
        sys.exit(0)
    parser = argparse.ArgumentParser()
    parser.add_argument("scale", nargs="?", default="quick")
    parser.add_argument("--cells", default=None,
                        help="comma-separated keys SIZE_MB:ROW_GROUPS:LINK (s3-10-ms)")
    parser.add_argument("--report", action="store_true",
                        help="print the recorded results and redraw the figure only")
    parser.add_argument("--results", type=Path, default=None,
                        help="the results file to merge the cells into and report from "
                        "(default: benchmarks/data/matrix-results-<scale>.json)")
    parser.add_argument("--planning", action="store_true",
                        help="time icefloe's planning alone in every recorded cell (or "
                        "--cells) and record it with the cell's reads, then report")
    parser.add_argument("--reps", type=int, default=5,
                        help="timed reads of every contender per cell (default 5)")
    parser.add_argument("--pool", type=Path, nargs="+", default=None, metavar="RESULTS",
                        help="report the cells of these results files (whole runs on the "
                        "same read code) pooled into one verdict per cell, and redraw")
    parser.add_argument("--figure", type=Path, default=None,
                        help=f"where the figure is drawn (default {FIGURE} when the "
                        "results hold every cell of the scale, else <results>.png)")
    args = parser.parse_args()
    scale = args.scale.removeprefix("--")
    if scale not in SCALES:
        parser.error(f"no such scale: {args.scale!r} (one of {', '.join(SCALES)})")
    if args.cells is not None:
        known = keys(scale)
        unknown = sorted(set(args.cells.split(",")) - known)
        if unknown:
            parser.error(f"--cells: no such cell at {scale} scale: {', '.join(unknown)} "
                         f"(keys SIZE_MB:ROW_GROUPS:LINK, e.g. {min(known)})")
    if args.pool:
        if len(args.pool) < 2:
            parser.error("--pool needs two or more results files")
        try:
            data = pool([json.loads(p.read_text()) for p in args.pool])
        except OSError as exc:
            kept = sorted(p.name for p in (ROOT / "runs").glob("matrix-session*.json"))
            parser.error(f"--pool: cannot read {exc.filename}: {exc.strerror} (a results "
                         f"file of a whole run: {results_path(scale)}, or one kept in "
                         f"{ROOT / 'runs'}: {', '.join(kept) or 'none'})")
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            parser.error(f"--pool: not results files of the matrix's runs: {exc!r}")
        if not data:
            parser.error("--pool: the files share no cell")
        draw(data, figure_path(scale, data, args.figure, None))
        print(report(scale, data, None))
    elif args.report or args.planning:
        data = measure_planning(
            scale, None if args.cells is None else set(args.cells.split(",")),
            args.results, args.reps) if args.planning \
            else json.loads((args.results or results_path(scale)).read_text())
        draw(data, figure_path(scale, data, args.figure, args.results))
        print(report(scale, data, None))
    else:
        print(run(scale, None if args.cells is None else set(args.cells.split(",")),
                  args.results, args.reps, args.figure))
