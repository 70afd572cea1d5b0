"""Profile of reads from an object store: the requests a reader makes, their sizes and how
many are in flight, seen by the latency proxy (issue 30). Not a benchmark (no
``run(scale)``): a tool for the before/after profiles in RESULTS.md ("Defaults matrix").

    uv run python -m benchmarks.profile_io --bounds FILE.jsonl  # the table of a --json file
    uv run python -m benchmarks.profile_io [--files 5] [--rows 1000000] [--row-groups 1]
        [--cells 32:1,256:16] [--delay 0.010[,0.030]] [--reps 3] [--reads 1]
        [--readers icefloe,pyarrow,pyiceberg,icefloe-plan,decode,icefloe-local,
        'icefloe:ioConcurrency=4;batchSize=65536',icefloe-before --before DIR]
        [--json FILE.jsonl] [--wrap 'perf record -g -o /tmp/perf-READER.data']

Starts SeaweedFS (temp dir) and a counting latency proxy in a child process, writes one
table of ``files`` Parquet files of event rows, then reads it, each reader in turn in a
fresh process: icefloe at its defaults, PyArrow's dataset reader, PyIceberg. For each it
prints the median time (the reader's own clock: after imports and the catalog's
creation) and, from the proxy's log of the last run: requests (HEAD, GET),
the bytes of the GETs (from their ``Range`` headers), the connections used and the most
requests in flight at once (a request is in flight from its first byte sent by the client
until the last byte of the answer forwarded before the connection's next request).
``--reads N``: N reads per process, the first (a fresh process's) and the later ones
("warm", as the matrix's 2nd and 3rd) reported apart; the proxy's figures are the last
read's. Each read also reports the CPU seconds the proxy, SeaweedFS and the whole machine
spent meanwhile (``/proc``), and its own user and system CPU, minor page faults and peak
resident memory so far (``getrusage``). Reader ``icefloe:key=value;...``: icefloe with
those options (several settings interleaved in one run; ``env.NAME=value``: an
environment variable of its process; ``parallelism=N``: ``read(N)``'s reader threads);
``icefloe-local``: icefloe reading the cell's cached files from the local disk (a SQLite
catalog; ``--cells`` only). ``--cells``: the matrix's cached files of those cells
instead of a written table; several ``--delay`` values: one proxy each in front of the
same SeaweedFS, interleaved; ``--json``: every read's figures, for ``--bounds``
(icefloe's lower bound on this machine against each target's need: :func:`bounds`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tests.helpers.latency_proxy import LatencyProxy

_REQUEST = re.compile(rb"^(GET|HEAD|PUT|POST) (\S+)")
_RANGE = re.compile(rb"[Rr]ange: bytes=(\d+)-(\d+)")


class LoggingProxy(LatencyProxy):
    """The latency proxy, logging every HTTP request: ``[start, end, connection, method,
    bytes]`` (``bytes``: of the Range, or -1)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.log: list[list[Any]] = []
        self._last: dict[int, list[Any]] = {}
        self._pipes = 0
        self._log_lock = threading.Lock()
        self.t0 = time.monotonic()

    def _pipe(self, src: socket.socket, dst: socket.socket,
              on_read: Any = None, on_sent: Any = None) -> None:
        with self._log_lock:
            self._pipes += 1
            upward = self._pipes % 2 == 1  # _accept pipes client -> upstream first
            conn = (self._pipes + 1) // 2

        def read(data: bytes) -> None:  # a request's first chunk starts its entry
            m = _REQUEST.match(data) if upward and data else None
            if m:
                now = time.monotonic() - self.t0
                r = _RANGE.search(data)
                size = int(r.group(2)) - int(r.group(1)) + 1 if r else -1
                entry = [now, now, conn, m.group(1).decode(), size]
                with self._log_lock:
                    self.log.append(entry)
                    self._last[conn] = entry

        def sent(data: bytes) -> None:  # the answer's chunks move its end
            entry = self._last.get(conn)
            if not upward and data and entry is not None:
                entry[1] = time.monotonic() - self.t0

        super()._pipe(src, dst, read, sent)


def _proxy_child(port: int, delay_s: float) -> None:
    """The proxy process: print the port; on each stdin line print the log and clear it."""
    proxy = LoggingProxy(("127.0.0.1", port), delay_s)
    with proxy:
        print(proxy.port, flush=True)
        for _ in sys.stdin:
            with proxy._log_lock:
                log, proxy.log = proxy.log, []
            print(json.dumps(log), flush=True)


def summarize(log: list[list[Any]]) -> dict[str, Any]:
    """Requests, GET bytes, connections and the most requests in flight of one read."""
    gets = [e for e in log if e[3] == "GET" and e[4] >= 0]
    events = sorted([(e[0], 1) for e in log] + [(e[1], -1) for e in log])
    flight = peak = 0
    for _, d in events:
        flight += d
        peak = max(peak, flight)
    sizes = sorted(e[4] for e in gets)
    span = (max(e[1] for e in log) - min(e[0] for e in log)) if log else 0.0
    return {"requests": len(log), "heads": sum(e[3] == "HEAD" for e in log),
            "gets": len(gets), "get_mb": round(sum(sizes) / 1e6, 1),
            "largest_get_mb": round(sizes[-1] / 1e6, 2) if sizes else 0,
            "median_get_kb": round(sizes[len(sizes) // 2] / 1e3, 1) if sizes else 0,
            "connections": len({e[2] for e in log}), "max_in_flight": peak,
            "span_s": round(span, 3)}


READERS = ("icefloe", "pyarrow", "pyiceberg")
"""The readers; also ``icefloe:key=value;...`` (icefloe with options), ``icefloe-local``
(the cell's files on the local disk), ``icefloe-plan`` (icefloe's planning alone),
``decode`` (Arrow's decode of the data files from memory, a floor under any reader's CPU)
and ``icefloe-before``."""


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system, all threads, and its waited-for children) of a live
    process, from ``/proc/<pid>/stat`` (Linux; resolution one clock tick, 10 ms)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / _TICK  # utime stime cutime cstime


def machine_busy() -> float:
    """CPU seconds the whole machine spent not idle (all cores, every process), from
    ``/proc/stat``."""
    cpu = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    ticks = [int(x) for x in cpu]
    return (sum(ticks[:8]) - ticks[3] - ticks[4]) / _TICK  # less idle and iowait


def _others() -> dict[str, float]:
    """CPU seconds so far of the processes named in ``PROFILE_IO_PIDS`` (JSON ``{name:
    pid}``: the proxy, SeaweedFS) and the machine's busy seconds."""
    pids = json.loads(os.environ.get("PROFILE_IO_PIDS", "{}"))
    return {**{name: process_cpu(pid) for name, pid in pids.items()},
            "machine": machine_busy()}


def reader_options(reader: str, options: str) -> tuple[str, dict[str, str]]:
    """``(reader, icefloe's options)`` of a reader name: ``icefloe:key=value;key=value`` is
    icefloe with those options over ``options`` (JSON), so settings can be compared in
    one interleaved run; any other name has ``options`` as given. A key ``env.NAME`` sets
    the environment variable ``NAME`` in the reader's process instead (before its reads;
    for settings read when used, such as an experiment's switch)."""
    opts = dict(json.loads(options))
    if not reader.startswith("icefloe:"):
        return reader, opts
    for pair in reader.split(":", 1)[1].split(";"):
        key, eq, value = pair.partition("=")
        if key.startswith("env.") and eq:
            os.environ[key[4:]] = value
            continue
        if not eq or not key:
            raise ValueError(f"reader {reader!r}: {pair!r} is not key=value "
                             "(icefloe:ioConcurrency=4;batchSize=65536)")
        opts[key] = value
    return "icefloe", opts


def _reader_child(reader: str, props: str, identifier: str, options: str,
                  reads: str = "1") -> None:
    """``reads`` reads in a fresh process; prints each one's seconds, CPU seconds and rows
    as a JSON line, with the CPU seconds the proxy, SeaweedFS (``PROFILE_IO_PIDS``) and the
    whole machine spent meanwhile (``<name>_cpu``). Reader ``decode``: ``pq.read_table``
    of each data file from memory (fetched before the clock), Arrow's decode alone."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq
    from pyarrow import fs as pafs
    from pyiceberg.catalog import load_catalog

    from icefloe import IcebergSource

    catalog = load_catalog("profile", **json.loads(props))
    local_root: Path | None = None
    if reader == "icefloe-local":  # the cell's cached files on the local disk, a SQLite
        # catalog (set up before the clock): the same read without S3
        import tempfile

        from benchmarks.common import event_rows

        local_root = Path(tempfile.mkdtemp(prefix="icefloe-profile-local-"))
        catalog = load_catalog("local", type="sql",
                               uri=f"sqlite:///{local_root}/catalog.db",
                               warehouse=local_root.as_uri())
        catalog.create_namespace_if_not_exists(identifier.split(".")[0])
        catalog.create_table(identifier, schema=event_rows(1).schema).add_files(
            [Path(f).as_uri() for f in json.loads(os.environ["PROFILE_IO_FILES"])])
        reader = "icefloe"
    paths: list[str] = []
    blobs: list[Any] = []
    if reader in ("pyarrow", "decode"):  # as bench_objectstore: the listing of the files
        # is not the reader's (before its clock)
        p = json.loads(props)
        s3 = pafs.S3FileSystem(endpoint_override=p["s3.endpoint"],
                               access_key=p["s3.access-key-id"],
                               secret_key=p["s3.secret-access-key"], region=p["s3.region"],
                               scheme="http")
        paths = [t.file.file_path.removeprefix("s3://")
                 for t in catalog.load_table(identifier).scan().plan_files()]
        if reader == "decode":  # the same files on the local disk where given (a
            # process that read large objects through Arrow's S3 client aborted at exit)
            local = json.loads(os.environ.get("PROFILE_IO_FILES", "[]"))
            for path in local or paths:
                if local:
                    blobs.append(Path(path).read_bytes())
                    continue
                with s3.open_input_stream(path) as f:
                    blobs.append(f.read())
    reader, opts = reader_options(reader, options)
    threads = opts.pop("parallelism", None)  # read()'s argument, not an option
    for _ in range(int(reads)):
        others = _others()
        start, cpu = time.perf_counter(), time.process_time()
        ru = resource.getrusage(resource.RUSAGE_SELF)
        if reader == "icefloe":
            rows = sum(b.num_rows for b in IcebergSource(
                identifier, catalog=catalog, options=opts).read(
                    None if threads is None else int(threads)))
        elif reader == "icefloe-plan":  # planning alone: the table's load and its splits
            rows = sum(s.record_count for s in IcebergSource(
                identifier, catalog=catalog, options=json.loads(options)).plan())
        elif reader == "pyiceberg":
            rows = sum(b.num_rows for b in catalog.load_table(identifier).scan()
                       .to_arrow_batch_reader())
        elif reader == "decode":
            rows = sum(pq.read_table(pa.BufferReader(b)).num_rows for b in blobs)
        else:
            rows = sum(b.num_rows for b in ds.dataset(paths, format="parquet",
                                                      filesystem=s3).to_batches())
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        after = _others()
        ru2 = resource.getrusage(resource.RUSAGE_SELF)
        print(json.dumps({"s": seconds, "rows": rows, "cpu": cpu,
                          "user": ru2.ru_utime - ru.ru_utime, "sys": ru2.ru_stime - ru.ru_stime,
                          "faults": ru2.ru_minflt - ru.ru_minflt,
                          "maxrss_mb": ru2.ru_maxrss / 1024,
                          **{f"{k}_cpu": after[k] - v for k, v in others.items()}}),
              flush=True)
    if local_root is not None:  # the catalog and metadata (the data files are the cache's)
        import shutil

        shutil.rmtree(local_root, ignore_errors=True)
    sys.stderr.flush()
    os._exit(0)  # every figure is out; Arrow's S3 client's teardown at exit sometimes
    # aborts ("terminate called without an active exception")


def _upload_cell(store: Any, identifier: str, cell: str) -> list[str]:
    """The matrix's cached Parquet files of ``cell`` (``SIZE_MB:ROW_GROUPS``,
    :func:`benchmarks.bench_matrix.cached_files`), copied to S3 and added to a new table;
    returns their local paths."""
    from pyarrow import fs as pafs

    from benchmarks.bench_matrix import MB, cached_files
    from benchmarks.common import event_rows

    size_mb, groups = (int(x) for x in cell.split(":"))
    catalog = store.catalog("direct")
    catalog.create_namespace_if_not_exists(identifier.split(".")[0])
    table = catalog.create_table(identifier, schema=event_rows(1).schema,
                                 properties={"format-version": "2"})
    where = table.metadata.location.removeprefix("s3://")
    paths = []
    local = cached_files(size_mb * MB, groups)
    for path in local:
        target = f"{where}/data/{path.name}"
        pafs.copy_files(str(path), target, source_filesystem=pafs.LocalFileSystem(),
                        destination_filesystem=store.s3("direct"))
        paths.append(f"s3://{target}")
    table.add_files(paths)
    return [str(p) for p in local]


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=5)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--row-groups", type=int, default=1)
    parser.add_argument("--cells", default=None,
                        help="SIZE_MB:ROW_GROUPS,...: the matrix's cached files instead")
    parser.add_argument("--delay", default="0.010",
                        help="seconds each way; several, comma-separated: one proxy each")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--reads", type=int, default=1, help="reads per process")
    parser.add_argument("--options", default="{}", help="icefloe's options, JSON")
    parser.add_argument("--readers", default=",".join(READERS))
    parser.add_argument("--verbose", action="store_true", help="print the last run's log")
    parser.add_argument("--json", default=None, help="append every read's figures here")
    parser.add_argument("--wrap", default=None,
                        help="a command run before each child of the last round, READER "
                             "replaced by the reader's name (perf record -g -o "
                             "/tmp/perf-READER.data)")
    parser.add_argument("--before", default=None,
                        help="a checkout of earlier code: reader icefloe-before runs it")
    args = parser.parse_args()
    if args.before:
        from benchmarks.ab_matrix import prepare_tree

        why = prepare_tree(Path(args.before))
        if why:
            parser.error(f"--before {args.before}: {why}")

    import shutil
    import tempfile

    from benchmarks.bench_objectstore import Store
    from icefloe.seaweed import SeaweedFS

    root = Path(tempfile.mkdtemp(prefix="icefloe-profile-io-"))
    seaweed = SeaweedFS(root).start()
    delays = [float(d) for d in args.delay.split(",")]
    proxies = [subprocess.Popen([sys.executable, "-m", "benchmarks.profile_io", "--proxy",
                                 str(seaweed.s3_port), str(d)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
               for d in delays]
    try:
        endpoints = []
        for proxy in proxies:
            assert proxy.stdout is not None
            endpoints.append(f"http://127.0.0.1:{int(proxy.stdout.readline())}")
        store = Store(seaweed, endpoints[0])
        tables = []
        if args.cells:
            for cell in args.cells.split(","):
                identifier = "profile.t_{}mb_{}rg".format(*cell.split(":"))
                files = _upload_cell(store, identifier, cell)
                tables.append((cell, identifier, files))
        else:
            rows_per_group = max(1, -(-args.rows // args.row_groups))
            store.write_table("profile.t", args.files, args.rows, rows_per_group)
            tables.append((f"{args.files}x{args.rows}:{args.row_groups}", "profile.t", []))
        assert seaweed.proc is not None

        def stats(proxy: subprocess.Popen[str]) -> tuple[dict[str, Any], list[list[Any]]]:
            assert proxy.stdin is not None and proxy.stdout is not None
            proxy.stdin.write("\n")
            proxy.stdin.flush()
            log = json.loads(proxy.stdout.readline())
            return summarize(log), log

        names = args.readers.split(",")
        for cell, identifier, files in tables:
            # per (reader, delay, first/warm): every read's figures
            runs: dict[tuple[str, float, str], list[dict[str, float]]] = {}
            last: dict[tuple[str, float], dict[str, Any]] = {}
            for rep in range(args.reps + 1):
                for delay, endpoint, proxy in zip(delays, endpoints, proxies, strict=True):
                    props = json.dumps(seaweed.rest_properties(endpoint=endpoint))
                    for reader in names:
                        if reader in ("decode", "icefloe-local") and delay != delays[0]:
                            continue  # from memory or the local disk: no link
                        stats(proxy)
                        before = reader == "icefloe-before"  # the code of --before DIR,
                        # read by this file's child (PYTHONPATH: its icefloe)
                        cmd = [sys.executable,
                               str(Path(__file__).resolve()) if before else "-m",
                               *([] if before else ["benchmarks.profile_io"]), "--child",
                               "icefloe" if before else reader, props, identifier,
                               args.options, str(args.reads)]
                        env = {**os.environ, "PROFILE_IO_PIDS": json.dumps(
                            {"proxy": proxy.pid, "weed": seaweed.proc.pid}),
                            "PROFILE_IO_FILES": json.dumps(files)}
                        if before:
                            env["PYTHONPATH"] = str(Path(args.before).resolve())
                        if args.wrap and rep == args.reps:  # the last round, profiled
                            name = re.sub(r"[^\w.=-]", "_", reader)
                            cmd = [*args.wrap.replace("READER", name).split(), *cmd]
                        out = subprocess.run(cmd, cwd=args.before if before else None,
                                             env=env, capture_output=True, text=True,
                                             check=False)
                        if out.returncode:
                            raise RuntimeError(f"{reader}: {out.stderr[-2000:]}")
                        results = [json.loads(line) for line in
                                   out.stdout.strip().splitlines() if line.startswith("{")]
                        last[reader, delay], log = stats(proxy)
                        if rep == args.reps and args.verbose:
                            print(reader, "\n".join(
                                f"{e[0]:.3f}-{e[1]:.3f} conn {e[2]} {e[3]} {e[4]}"
                                for e in log), file=sys.stderr)
                        if rep:  # the first round warms the page cache and the server
                            for i, result in enumerate(results):
                                runs.setdefault((reader, delay, "first" if i == 0
                                                 else "warm"), []).append(result)
            load = os.getloadavg()[0]
            print(f"cell {cell} ({identifier}), load {load:.1f}")
            for (reader, delay, which), rs in runs.items():
                label = reader if args.reads == 1 else f"{reader} ({which})"
                ts = sorted(r["s"] for r in rs)
                others = "  ".join(f"{k} {_median([r[k] for r in rs]):.3f}" for k in
                                   ("user", "sys", "faults", "maxrss_mb", "proxy_cpu", "weed_cpu",
                                    "machine_cpu") if k in rs[0])
                print(f"  {delay * 1000:.0f} ms {label:20s} median {_median(ts):.3f} s "
                      f"(CPU {_median([r['cpu'] for r in rs]):.3f} s; {others})  runs "
                      f"{', '.join(f'{t:.3f}' for t in ts)}  {last[reader, delay]}",
                      flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    for (reader, delay, which), rs in runs.items():
                        f.write(json.dumps({"cell": cell, "delay": delay, "reader": reader,
                                            "which": which, "load": load,
                                            "reads": rs}) + "\n")
    finally:
        for proxy in proxies:
            if proxy.stdin is not None:
                proxy.stdin.close()
            proxy.wait(timeout=10)
        seaweed.stop()
        shutil.rmtree(root, ignore_errors=True)


def bounds(path: str) -> None:
    """The table of RESULTS.md's "the ceilings on S3" from a ``--json`` file: per cell and
    link, each reader's median seconds and CPU seconds (its own, the proxy's, SeaweedFS's)
    per read over all its reads (the matrix's medians are of a fresh process's 3 reads),
    planning's median, and icefloe's lower bound on this machine:

    ``bound = 2 round trips (manifest list, then manifest: 4 x delay) + max(1 round trip,
    (floor + server) / 2)``

    assuming (1) the data files are known only after the manifest, read only after the
    manifest list (a GET each, no HEAD needed: 2 round trips in series before any data
    request), (2) no read gets more than the machine's 2 cores, (3) a reader's CPU is at
    least the least of Arrow's decode of the files from memory (``decode``: no I/O, no
    Iceberg) and the three readers' own CPU (on 1 GB files icefloe's streaming read took
    less than ``pq.read_table``'s whole table), and
    (4) the proxy's and SeaweedFS's CPU per read is at least the least any reader made
    them spend (``server``: the smallest median of proxy + weed over the readers). Needs:
    PyArrow's median (1.0x) and PyIceberg's / 1.5. Prints Markdown rows."""
    rows: dict[tuple[str, float], dict[str, list[dict[str, float]]]] = {}
    loads: dict[tuple[str, float], list[float]] = {}
    for line in Path(path).read_text().splitlines():
        e = json.loads(line)
        key = (e["cell"], e["delay"])
        rows.setdefault(key, {}).setdefault(e["reader"], []).extend(e["reads"])
        loads.setdefault(key, []).append(e["load"])
    decode = {cell: rs["decode"] for (cell, _), rs in rows.items() if "decode" in rs}
    print("| cell (S3) | icefloe / PyArrow / PyIceberg s | CPU s per read: reader "
          "(icefloe / PyArrow / PyIceberg) | proxy + weed (icefloe / PyArrow / PyIceberg) "
          "| decode CPU (floor) | planning s | bound s (as built: planning measured) | PyArrow "
          "needs | 1.5x PyIceberg needs | verdict (this run) | machine during icefloe's "
          "reads: busy cores (the read's share) | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (cell, delay), rs in sorted(rows.items()):
        if "icefloe" not in rs:
            continue
        med = {r: {k: _median([x[k] for x in xs]) for k in xs[0]} for r, xs in rs.items()}
        server = {r: _median([x["proxy_cpu"] + x["weed_cpu"] for x in rs[r]])
                  for r in ("icefloe", "pyarrow", "pyiceberg")}
        floor = min(_median([x["cpu"] for x in decode[cell]]),
                    *(med[r]["cpu"] for r in ("icefloe", "pyarrow", "pyiceberg")))
        data = max(2 * delay, (floor + min(server.values())) / 2)
        bound, built = 4 * delay + data, med["icefloe-plan"]["s"] + data
        size, groups = cell.split(":")
        needs = {"PyArrow": med["pyarrow"]["s"], "PyIceberg": med["pyiceberg"]["s"] / 1.5}
        ours = med["icefloe"]["s"]
        busy = _median([x["machine_cpu"] / x["s"] for x in rs["icefloe"]])
        share = _median([(x["cpu"] + x["proxy_cpu"] + x["weed_cpu"]) / x["machine_cpu"]
                         for x in rs["icefloe"]])
        verdicts = [f"{peer}: " + ("met" if ours <= need else
                                   f"ceiling (bound {bound / need:.2f}x the need)"
                                   if bound > need else
                                   f"missed by {ours - need:.3f} s, bound "
                                   f"{need - bound:.3f} s under the need")
                    for peer, need in needs.items()]
        print(f"| {size} MB x {groups}, {delay * 1000:.0f} ms | "
              + " / ".join(f"{med[r]['s']:.3f}" for r in ("icefloe", "pyarrow", "pyiceberg"))
              + " | " + " / ".join(f"{med[r]['cpu']:.2f}" for r in
                                   ("icefloe", "pyarrow", "pyiceberg"))
              + " | " + " / ".join(f"{med[r]['proxy_cpu']:.2f} + {med[r]['weed_cpu']:.2f}"
                                   for r in ("icefloe", "pyarrow", "pyiceberg"))
              + f" | {_median([x['cpu'] for x in decode[cell]]):.2f} "
              f"({floor:.2f}) | {med['icefloe-plan']['s']:.3f} | {bound:.3f} "
              f"({built:.3f}) | <= {med['pyarrow']['s']:.3f} | "
              f"<= {med['pyiceberg']['s'] / 1.5:.3f} | {'; '.join(verdicts)} | "
              f"{busy:.2f} ({share:.0%}) | "
              f"{min(loads[cell, delay]):.1f}-{max(loads[cell, delay]):.1f} |")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--proxy"]:
        _proxy_child(int(sys.argv[2]), float(sys.argv[3]))
    elif sys.argv[1:2] == ["--bounds"]:
        bounds(sys.argv[2])
    elif sys.argv[1:2] == ["--child"]:
        _reader_child(*sys.argv[2:7])
    else:
        main()
