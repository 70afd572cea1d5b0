"""Shared benchmark machinery: timing, medians, memory, cached test tables, markdown.

The machine is shared and noisy, so every benchmark measures icefloe and its peers
in the same run, interleaved (round-robin, rotating who goes first), and reports
medians and ratios. Tables are built once and cached under ``benchmarks/data/``
(git-ignored); delete that directory to rebuild.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from icefloe.tuning.measure import interleaved as interleaved
from icefloe.tuning.measure import median as median
from icefloe.tuning.measure import timed as timed

ROOT = Path(__file__).resolve().parent
DATA_DIR = Path(os.environ.get("ICEFLOE_BENCH_DATA", ROOT / "data"))
SCALES = ("quick", "full")
MIB = 1024 * 1024
CACHE_VERSION = "v1"


def pick(scale: str, quick: Any, full: Any) -> Any:
    """The quick- or full-scale value of a parameter."""
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; use one of {SCALES}")
    return quick if scale == "quick" else full


# --------------------------------------------------------------------------- timing
# timed, interleaved and median live in the library (``icefloe tune`` uses them too)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100, linear interpolation)."""
    return float(np.percentile(np.asarray(values, dtype=float), q))


def fmt_s(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def fmt_rate(per_s: float, unit: str = "") -> str:
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if per_s >= div:
            return f"{per_s / div:.2f} {suffix}{unit}"
    return f"{per_s:.1f} {unit}"


# --------------------------------------------------------------------------- memory


def rss_mb() -> float:
    """Current resident set size of this process, MiB (Linux /proc)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / MIB


def peak_rss_mb() -> float:
    """Peak resident set size of this process, MiB: ``VmHWM`` of ``/proc/self/status``.

    Not ``ru_maxrss``: Linux carries ``ru_maxrss`` across fork+exec, so a child started by a
    big parent reports the parent's size as its own peak (that invented a 373 MB
    "regression" in the planning benchmark). ``VmHWM`` belongs to the process's own memory
    map, which exec replaces, and :func:`reset_peak_rss` can reset it.
    """
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # not Linux


def reset_peak_rss() -> bool:
    """Reset this process's ``VmHWM`` to its current RSS (``echo 5 > /proc/self/clear_refs``,
    Linux >= 4.0), so the next :func:`peak_rss_mb` is the peak of what runs after this call.
    Returns False where the kernel does not allow it (the peak then includes start-up)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def process_cpu_s() -> float:
    """This process's CPU time so far (user + system, every thread), seconds."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def tree_processes(pid: int) -> list[tuple[int, str, float, float]]:
    """Process ``pid`` and all its descendants (Linux /proc): (pid, name, CPU s, RSS MiB) each.

    The name is the kernel's ``comm`` (15 characters: a Ray worker's is its title, such as
    ``ray::Enumerator``). CPU is user + system time plus the time of the children the
    process has reaped (``cutime`` + ``cstime``), so a Spark Python worker or a Ray worker
    that exited and was waited for still counts; RSS is the resident set (pages shared
    between processes count in each). A process that exits during the listing is skipped.
    """
    children: dict[int, list[int]] = {}
    stats: dict[int, tuple[str, list[str]]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                text = f.read()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text.rsplit(")", 1)[1].split()
        stats[int(entry)] = (name, fields)
        children.setdefault(int(fields[1]), []).append(int(entry))
    tick = os.sysconf("SC_CLK_TCK")
    page = os.sysconf("SC_PAGE_SIZE")
    out = []
    todo = [pid]
    while todo:
        p = todo.pop()
        if p not in stats:
            continue
        name, fields = stats[p]
        # after the name: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14)
        # ... rss(21) in pages (proc(5)'s field numbers minus 3)
        cpu = sum(int(fields[i]) for i in (11, 12, 13, 14)) / tick
        out.append((p, name, cpu, int(fields[21]) * page / MIB))
        todo.extend(children.get(p, []))
    return out


def tree_usage(pid: int) -> tuple[float, float]:
    """CPU seconds and RSS (MiB) of process ``pid`` and its descendants, summed
    (:func:`tree_processes`). Run by the process measuring itself (a benchmark's stream
    child), so the tree is that engine's only."""
    procs = tree_processes(pid)
    return sum(p[2] for p in procs), sum(p[3] for p in procs)


def run_child(module: str, *args: str, timeout: float = 1800) -> dict[str, Any]:
    """Run ``python -m module --child args...`` in a fresh process; parse its last stdout
    line as JSON (the child measures its own time and peak RSS, see :func:`peak_rss_mb`)."""
    proc = subprocess.run(
        [sys.executable, "-m", module, "--child", *args], cwd=ROOT.parent,
        capture_output=True, text=True, timeout=timeout, check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"child {module} {args} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def serve_stream_reports(stream: Any, on_item: Callable[[Any], None],
                         report: Callable[[], dict[str, Any]]) -> None:
    """The body of a benchmark's stream child: consume ``stream`` on a thread (``on_item``
    for every item, then its ack) and answer every line on stdin with ``report()`` as one
    JSON line, until ``stop`` (see :class:`StreamChild`)."""
    import threading

    def consume() -> None:
        for item in stream:
            on_item(item)
            item.ack()

    with stream:
        threading.Thread(target=consume, daemon=True).start()
        for line in sys.stdin:
            if line.strip() == "stop":
                break
            print(json.dumps(report()), flush=True)


class StreamChild:
    """A stream child process (``python -m module --child ARGS``) answering reports."""

    def __init__(self, module: str, *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", module, "--child", *args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     cwd=ROOT.parent)

    def report(self) -> dict[str, Any]:
        """The child's report now."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("report\n")
        self.proc.stdin.flush()
        return dict(json.loads(self.proc.stdout.readline()))

    def stop(self, timeout_s: float = 120) -> None:
        """Stop the child's stream (its final checkpoint) and wait for the process."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("stop\n")
        self.proc.stdin.flush()
        self.proc.wait(timeout=timeout_s)


def child_report(**values: Any) -> None:
    """Print the child's result line (read by :func:`run_child`)."""
    print(json.dumps(values), flush=True)


# --------------------------------------------------------------------------- machine


def machine() -> dict[str, str]:
    import pyiceberg

    mem = "?"
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
        mem = f"{kb / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f
                        if ln.startswith("model name")), "?")
    except OSError:
        pass
    return {
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "memory": mem,
        "os": platform.platform(),
        "python": platform.python_version(),
        "pyarrow": pa.__version__,
        "pyiceberg": pyiceberg.__version__,
        "numpy": np.__version__,
    }


# --------------------------------------------------------------------------- markdown


def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def ratio_rows(results: dict[str, list[tuple[float, Any]]], rows: int,
               peer: str) -> tuple[dict[str, float], list[list[str]]]:
    """The median seconds of each contender of :func:`interleaved`'s ``results`` and its
    markdown rows: name, median, rows/s, throughput ratio against ``peer``, every run."""
    medians = {name: median([s for s, _ in timed]) for name, timed in results.items()}
    base = medians[peer]
    return medians, [[name, fmt_s(medians[name]), fmt_rate(rows / medians[name], " rows/s"),
                      f"{base / medians[name]:.2f}x",
                      ", ".join(fmt_s(s) for s, _ in results[name])] for name in results]


def verdict(ok: bool) -> str:
    return "**met**" if ok else "**missed**"


# --------------------------------------------------------------------------- real tables


@dataclass(frozen=True)
class BenchTable:
    """A cached table in a SQLite catalog under ``benchmarks/data/<name>``."""

    root: Path
    identifier: str

    def catalog(self) -> Any:
        from pyiceberg.catalog.sql import SqlCatalog

        return SqlCatalog("bench", uri=f"sqlite:///{self.root}/catalog.db",
                          warehouse=(self.root / "warehouse").as_uri())

    def table(self) -> Any:
        return self.catalog().load_table(self.identifier)

    def data_paths(self) -> list[str]:
        """Local paths of the live data files of the current snapshot (scan order)."""
        tasks = self.table().scan().plan_files()
        return [t.file.file_path.removeprefix("file://") for t in tasks]


def _cached(name: str, build: Callable[[Path], None]) -> Path:
    root = DATA_DIR / f"{name}-{CACHE_VERSION}"
    done = root / ".complete"
    if done.exists():
        return root
    if root.exists():
        shutil.rmtree(root)
    (root / "warehouse").mkdir(parents=True)
    start = time.perf_counter()
    build(root)
    done.write_text(f"built in {time.perf_counter() - start:.1f}s\n")
    print(f"[bench] built {root.name} in {time.perf_counter() - start:.1f}s", file=sys.stderr)
    return root


_KINDS = pa.array(["click", "view", "buy", "search", "login", "logout", "share", "like"])


def event_rows(n: int, start: int = 0, seed: int = 0) -> pa.Table:
    """``n`` synthetic event rows: id, ts, kind, value, payload (~40 B/row in Parquet)."""
    rng = np.random.default_rng(seed + start)
    ids = pa.array(np.arange(start, start + n, dtype=np.int64))
    ts = pa.array((1_700_000_000_000_000 + np.arange(start, start + n) * 1000).astype(
        "datetime64[us]"))
    kind = _KINDS.take(pa.array(rng.integers(0, len(_KINDS), n)))
    value = pa.array(rng.standard_normal(n))
    user = pc.cast(pa.array(rng.integers(0, 1_000_000, n)), pa.string())
    payload = pc.binary_join_element_wise("user-", user, "/session", "")
    return pa.table({"id": ids, "ts": ts, "kind": kind, "value": value, "payload": payload})


def _new_table(catalog: Any, identifier: str, schema: pa.Schema,
               props: dict[str, str] | None = None) -> Any:
    ns = identifier.rsplit(".", 1)[0]
    catalog.create_namespace_if_not_exists(ns)
    return catalog.create_table(identifier, schema,
                                properties={"format-version": "2", **(props or {})})


def events_table_of(rows: int, files: int, cache: str | None = None) -> BenchTable:
    """``rows`` event rows in ``files`` appends (row groups of 128k rows, so splitSize can
    cut files), built once and cached under ``cache`` (default ``events-<rows>-<files>``)."""
    ident = "bench.events"

    def build(root: Path) -> None:
        bt = BenchTable(root, ident)
        per = rows // files
        table = _new_table(bt.catalog(), ident, event_rows(1).schema,
                           {"write.parquet.row-group-limit": "131072",
                            "write.target-file-size-bytes": str(1024 * MIB)})
        for i in range(files):
            table.append(event_rows(per, start=i * per))

    return BenchTable(_cached(cache or f"events-{rows}-{files}", build), ident)


def events_table(scale: str) -> BenchTable:
    """The big backfill table: quick 2M rows in 4 files, full 20M rows in 20 files."""
    rows, files = pick(scale, (2_000_000, 4), (20_000_000, 20))
    return events_table_of(rows, files, cache=f"events-{scale}")


def small_files_table(scale: str) -> BenchTable:
    """Many small files: quick 1,000, full 10,000 files of 500 rows (added with add_files)."""
    files = pick(scale, 1_000, 10_000)
    per = 500
    ident = "bench.small"

    def build(root: Path) -> None:
        bt = BenchTable(root, ident)
        table = _new_table(bt.catalog(), ident, event_rows(1).schema)
        data_dir = root / "warehouse" / "small-files"
        data_dir.mkdir(parents=True)
        paths = []
        for i in range(files):
            path = data_dir / f"part-{i:06d}.parquet"
            pq.write_table(event_rows(per, start=i * per), path)
            paths.append(f"file://{path}")
        for lo in range(0, files, 2_000):
            table.add_files(paths[lo:lo + 2_000])

    return BenchTable(_cached(f"small-{scale}", build), ident)


# --------------------------------------------------------------------------- synthetic metadata


@dataclass(frozen=True)
class SyntheticTable:
    """Table metadata written directly (data files need not exist).

    ``base_id`` added all but ``new_files`` files; ``prev_id`` is the parent of ``new_id``,
    which added ``new_files`` files in one manifest.
    """

    metadata_path: str
    n_files: int
    n_snapshots: int
    base_id: int
    prev_id: int
    new_id: int

    def static(self) -> Any:
        from pyiceberg.table import StaticTable

        return StaticTable.from_metadata(self.metadata_path)


def _synthetic_schema() -> Any:
    from pyiceberg.schema import Schema
    from pyiceberg.types import DoubleType, LongType, NestedField, StringType, TimestampType

    return Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "ts", TimestampType(), required=False),
        NestedField(3, "kind", StringType(), required=False),
        NestedField(4, "value", DoubleType(), required=False),
        NestedField(5, "payload", StringType(), required=False),
    )


def _write_data_manifest(path: Path, snapshot_id: int, first: int, count: int,
                         location: str) -> Any:
    """One DATA manifest of ``count`` ADDED entries with column stats for all 5 columns."""
    from pyiceberg.conversions import to_bytes
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.manifest import (
        DataFile,
        DataFileContent,
        FileFormat,
        ManifestEntry,
        ManifestEntryStatus,
        write_manifest,
    )
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.typedef import Record
    from pyiceberg.types import DoubleType, LongType, StringType, TimestampType

    schema = _synthetic_schema()
    io = PyArrowFileIO()
    types = {1: LongType(), 2: TimestampType(), 3: StringType(), 4: DoubleType(),
             5: StringType()}
    with write_manifest(2, UNPARTITIONED_PARTITION_SPEC, schema, io.new_output(str(path)),
                        snapshot_id, "deflate") as writer:
        for i in range(first, first + count):
            rows = 100_000
            lo = {1: i * rows, 2: 1_700_000_000_000_000 + i * rows, 3: "buy", 4: -4.5,
                  5: "user-0/session"}
            hi = {1: i * rows + rows - 1, 2: 1_700_000_000_000_000 + i * rows + rows,
                  3: "view", 4: 4.5, 5: "user-999999/session"}
            df = DataFile.from_args(
                content=DataFileContent.DATA,
                file_path=f"{location}/data/{i // 1000:05d}/part-{i:08d}-0.parquet",
                file_format=FileFormat.PARQUET,
                partition=Record(),
                record_count=rows,
                file_size_in_bytes=4_000_000 + i % 1000,
                column_sizes={c: 800_000 for c in types},
                value_counts={c: rows for c in types},
                null_value_counts={c: 0 for c in types},
                nan_value_counts={4: 0},
                lower_bounds={c: to_bytes(t, lo[c]) for c, t in types.items()},
                upper_bounds={c: to_bytes(t, hi[c]) for c, t in types.items()},
                split_offsets=[4],
                sort_order_id=0,
            )
            df.spec_id = 0
            writer.add(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED,
                                               snapshot_id=snapshot_id, data_file=df))
    return writer.to_manifest_file()


def _write_list(path: Path, snapshot_id: int, parent: int | None, seq: int,
                manifests: list[Any]) -> None:
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.manifest import write_manifest_list

    with write_manifest_list(2, PyArrowFileIO().new_output(str(path)), snapshot_id, parent,
                             seq, "deflate") as writer:
        writer.add_manifests(manifests)


FILES_PER_MANIFEST = 2_000


def synthetic_table(n_files: int, n_snapshots: int, new_files: int = 10) -> SyntheticTable:
    """A table of ``n_files`` live data files and ``n_snapshots`` snapshots, written directly.

    The base snapshot adds ``n_files - new_files`` files in manifests of
    ``FILES_PER_MANIFEST`` entries (with column stats: manifests are decoded for real).
    Snapshots 2..n-1 are history (appends whose manifest list equals the base's, as with
    manifest merging, so the manifest list stays bounded); the last snapshot adds
    ``new_files`` files in one new manifest. The base manifests are shared by every
    snapshot count of one ``n_files``.
    """
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.serializers import ToOutputFile
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.table.refs import SnapshotRef, SnapshotRefType
    from pyiceberg.table.snapshots import Operation, Snapshot, Summary
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

    if n_snapshots < 2:
        raise ValueError("need at least 2 snapshots (base and new)")
    base_files = n_files - new_files
    base_id, new_id = 1_000_000, 1_000_000 + n_snapshots - 1
    prev_id = new_id - 1

    def build_base(root: Path) -> None:
        loc = f"file://{root}/warehouse/t"
        (root / "warehouse/t/metadata").mkdir(parents=True)
        manifests = []
        for k, lo in enumerate(range(0, base_files, FILES_PER_MANIFEST)):
            manifests.append(_write_data_manifest(
                root / f"warehouse/t/metadata/base-{k:05d}-m0.avro", base_id, lo,
                min(FILES_PER_MANIFEST, base_files - lo), loc))
        _write_list(root / "warehouse/t/metadata/snap-base.avro", base_id, None, 1, manifests)
        # each snapshot count writes its own new manifest and list (see build below)
        import pickle

        (root / "manifests.pkl").write_bytes(pickle.dumps((manifests, None)))

    base_root = _cached(f"synth-{n_files}", build_base)

    def build(root: Path) -> None:
        import pickle

        manifests, _ = pickle.loads((base_root / "manifests.pkl").read_bytes())
        meta_dir = base_root / "warehouse/t/metadata"
        new = _write_data_manifest(root / "new-m0.avro", new_id, base_files, new_files,
                                   f"file://{base_root}/warehouse/t")
        new_list = root / "snap-new.avro"
        _write_list(new_list, new_id, prev_id, n_snapshots, [new, *manifests])
        loc = f"file://{base_root}/warehouse/t"
        md = new_table_metadata(_synthetic_schema(), UNPARTITIONED_PARTITION_SPEC,
                                UNSORTED_SORT_ORDER, loc, {"format-version": "2"})
        t0 = 1_700_000_000_000
        snapshots = []
        for k in range(n_snapshots):
            sid = base_id + k
            last = k == n_snapshots - 1
            snapshots.append(Snapshot(
                snapshot_id=sid, parent_snapshot_id=sid - 1 if k else None,
                sequence_number=k + 1, timestamp_ms=t0 + k * 1000,
                manifest_list=(new_list.as_uri() if last
                               else (meta_dir / "snap-base.avro").as_uri()),
                summary=Summary(Operation.APPEND, **{
                    "added-data-files": str(new_files if last else (base_files if k == 0
                                                                    else 0)),
                }),
                schema_id=0,
            ))
        from pyiceberg.table.metadata import SnapshotLogEntry

        md = md.model_copy(update={
            "snapshots": snapshots,
            "current_snapshot_id": new_id,
            "last_sequence_number": n_snapshots,
            "refs": {"main": SnapshotRef(snapshot_id=new_id,
                                         snapshot_ref_type=SnapshotRefType.BRANCH)},
            "snapshot_log": [SnapshotLogEntry(snapshot_id=s.snapshot_id,
                                              timestamp_ms=s.timestamp_ms) for s in snapshots],
        })
        ToOutputFile.table_metadata(md, PyArrowFileIO().new_output(
            str(root / "v1.metadata.json")))

    root = _cached(f"synth-{n_files}-{n_snapshots}", build)
    return SyntheticTable(str(root / "v1.metadata.json"), n_files, n_snapshots, base_id,
                          prev_id, new_id)
