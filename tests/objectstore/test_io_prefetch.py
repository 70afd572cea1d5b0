"""Reads from S3 (SeaweedFS, through the latency proxy) fetch small files ahead, correctly.

The oracle is PyIceberg's own scan of the same table through the same proxy; the plain
read (``ioConcurrency=0``) is the reference for item-by-item identity (same batches,
same resumable offsets). Prefetching is observed through the readers' counters and the
proxy's connection count.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow import fs as pafs
from pyiceberg.catalog import Catalog, load_catalog

from icefloe import IcebergSource
from icefloe.errors import DataFileError, InvalidOptionError
from icefloe.local.engine import SplitBatch, read_splits
from icefloe.options import SourceOptions
from icefloe.reader.context import ReadContext
from icefloe.reader.prefetch import AUTO_IO_CONCURRENCY
from icefloe.reader.ranged import MIN_SPLIT_BYTES
from icefloe.reader.split_reader import SplitReader
from icefloe.splits.split import FileSplit
from tests.helpers.latency_proxy import LatencyProxy
from tests.helpers.seaweed import ACCESS_KEY, REGION, SECRET_KEY, SeaweedFS
from tests.helpers.tables import make_catalog

FILES = 48
ROWS = 300
_names = itertools.count()


def _rows(i: int) -> pa.Table:
    ids = pa.array(range(i * ROWS, (i + 1) * ROWS), pa.int64())
    return pa.table({"id": ids, "name": pa.array([f"file-{i}-{n}" for n in range(ROWS)])})


def _s3(endpoint: str) -> pafs.S3FileSystem:
    return pafs.S3FileSystem(endpoint_override=endpoint, access_key=ACCESS_KEY,
                             secret_key=SECRET_KEY, region=REGION, scheme="http")


class CountingProxy(LatencyProxy):
    """The latency proxy, counting the connections it accepted."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pipes = 0

    def _pipe(self, src: Any, dst: Any) -> None:
        self.pipes += 1  # two per connection (one per direction)
        super()._pipe(src, dst)

    @property
    def connections(self) -> int:
        return self.pipes // 2


@pytest.fixture(scope="module")
def small_files(seaweed: SeaweedFS) -> str:
    """A REST-catalogued table of FILES small Parquet files in S3, ids ascending in order."""
    catalog = load_catalog("sw", **seaweed.rest_properties())
    catalog.create_namespace_if_not_exists("io")
    identifier = f"io.small_{next(_names)}"
    table = catalog.create_table(identifier, schema=_rows(0).schema)
    s3 = _s3(seaweed.s3_endpoint)
    where = table.metadata.location.removeprefix("s3://")
    paths = []
    for i in range(FILES):
        path = f"{where}/data/part-{i:04d}.parquet"
        pq.write_table(_rows(i), path, filesystem=s3)
        paths.append(f"s3://{path}")
    table.add_files(paths)
    return identifier


@pytest.fixture
def proxy(seaweed: SeaweedFS) -> Iterator[CountingProxy]:
    with CountingProxy(("127.0.0.1", seaweed.s3_port), 0.005) as p:
        yield p


def _proxied(seaweed: SeaweedFS, proxy: LatencyProxy) -> Catalog:
    return load_catalog("swp", **seaweed.rest_properties(endpoint=proxy.endpoint))


def _read(source: IcebergSource, parallelism: int = 2
          ) -> tuple[list[SplitBatch], list[SplitReader]]:
    """Every item of a local read, and the readers that read them."""
    plan = source.bounded_plan()
    readers: list[SplitReader] = []

    def factory(context: ReadContext) -> SplitReader:
        reader = SplitReader(context)
        readers.append(reader)
        return reader

    items = list(read_splits(plan.splits(), plan.context, parallelism,
                             plan.options.preserve_order, reader_factory=factory))
    return items, readers


def test_prefetching_read_equals_pyiceberg_in_order(seaweed: SeaweedFS, small_files: str,
                                                     proxy: CountingProxy) -> None:
    catalog = _proxied(seaweed, proxy)
    expected = catalog.load_table(small_files).scan().to_arrow()
    items, readers = _read(IcebergSource(small_files, catalog=catalog,
                                         options={"preserveOrder": "true"}))
    got = pa.Table.from_batches([i.batch for i in items if i.batch.num_rows])
    assert got.column_names == expected.column_names
    for name in expected.column_names:  # same rows, same order (PyIceberg's is plan order)
        assert got.column(name).to_pylist() == expected.column(name).to_pylist()
    # the files really were fetched ahead, concurrently (the engine reads a run of fewer
    # than MIN_RUN splits, e.g. the first while planning goes on, split by split)
    assert sum(r.prefetch.stats.files for r in readers) > FILES // 2
    assert max(r.prefetch.stats.max_in_flight for r in readers) >= 2


def test_same_items_and_offsets_as_the_plain_read(seaweed: SeaweedFS, small_files: str,
                                                  proxy: CountingProxy) -> None:
    catalog = _proxied(seaweed, proxy)

    def items(options: dict[str, str]) -> list[tuple[str, int, bool, list[Any]]]:
        got, readers = _read(IcebergSource(small_files, catalog=catalog, options=options))
        fetched = sum(r.prefetch.stats.files for r in readers)
        assert (fetched > 0) == (options.get("ioConcurrency") != "0")
        return [(i.split.split_id, i.consumed, i.last, i.batch.column("id").to_pylist())
                for i in got]

    assert items({"ioConcurrency": "4"}) == items({"ioConcurrency": "0"})


def test_spark_and_ray_path_prefetches_too(seaweed: SeaweedFS, small_files: str,
                                           proxy: CountingProxy) -> None:
    """``SplitReader.read_many`` (what Spark and Ray read tasks call) fetches ahead."""
    catalog = _proxied(seaweed, proxy)
    plan = IcebergSource(small_files, catalog=catalog).bounded_plan()
    reader = SplitReader(plan.context)
    got = pa.Table.from_batches(list(reader.read_many(plan.splits())))
    expected = catalog.load_table(small_files).scan().to_arrow()
    assert got.column("id").to_pylist() == expected.column("id").to_pylist()
    assert reader.prefetch.stats.files == FILES


def test_in_flight_and_bytes_bounded(seaweed: SeaweedFS, small_files: str,
                                     proxy: CountingProxy) -> None:
    catalog = load_catalog("swp", **seaweed.rest_properties(endpoint=proxy.endpoint))
    plan = IcebergSource(small_files, catalog=catalog,
                         options={"ioConcurrency": "3"}).bounded_plan()
    splits = list(plan.splits())
    reader = SplitReader(plan.context)
    size = max(s.file_size for s in splits)
    reader.prefetch.max_bytes = 2 * size  # at most two files held ahead
    before = proxy.connections
    rows = sum(b.num_rows for b in reader.read_many(splits))
    assert rows == FILES * ROWS
    stats = reader.prefetch.stats
    assert stats.files == FILES
    assert stats.max_in_flight == 2  # the byte cap binds before the count does
    assert stats.max_held_bytes <= 2 * size
    assert stats.in_flight == 0 and stats.held_bytes == 0
    assert proxy.connections - before <= 3  # S3 connections opened: <= requests in flight

    reader = SplitReader(plan.context)  # same FileIO (connection pool); count cap only
    rows = sum(b.num_rows for b in reader.read_many(splits))
    assert rows == FILES * ROWS
    assert 2 <= reader.prefetch.stats.max_in_flight <= 3


def test_wider_concurrency_opens_more_connections(seaweed: SeaweedFS, small_files: str,
                                                  proxy: CountingProxy) -> None:
    """The proxy sees the in-flight limit: auto (16 per reader) opens more connections."""
    catalog = _proxied(seaweed, proxy)
    plan = IcebergSource(small_files, catalog=catalog).bounded_plan()
    reader = SplitReader(plan.context)
    assert sum(b.num_rows for b in reader.read_many(plan.splits())) == FILES * ROWS
    assert 3 < reader.prefetch.stats.max_in_flight <= AUTO_IO_CONCURRENCY
    assert proxy.connections > 3


def test_missing_prefetched_file_fails_its_own_split(seaweed: SeaweedFS,
                                                     proxy: CountingProxy) -> None:
    """A file fetched ahead that is gone raises DataFileError for that split, after every
    row of the splits before it (preserveOrder), never for another split."""
    catalog = load_catalog("sw", **seaweed.rest_properties())
    catalog.create_namespace_if_not_exists("io")
    identifier = f"io.broken_{next(_names)}"
    table = catalog.create_table(identifier, schema=_rows(0).schema)
    s3 = _s3(seaweed.s3_endpoint)
    where = table.metadata.location.removeprefix("s3://")
    paths = []
    for i in range(24):
        pq.write_table(_rows(i), f"{where}/data/part-{i:04d}.parquet", filesystem=s3)
        paths.append(f"s3://{where}/data/part-{i:04d}.parquet")
    table.add_files(paths)
    source = IcebergSource(identifier, catalog=_proxied(seaweed, proxy))
    splits = list(source.bounded_plan().splits())
    bad = 13
    s3.delete_file(splits[bad].file_path.removeprefix("s3://"))
    plan = source.bounded_plan()
    delivered: list[SplitBatch] = []
    with pytest.raises(DataFileError) as info:
        for item in read_splits(plan.splits(), plan.context, 2, True):
            delivered.append(item)
    assert splits[bad].file_path in str(info.value)
    others = [s.file_path for i, s in enumerate(splits) if i != bad]
    assert not any(f"{path} " in str(info.value) for path in others)
    done = [i.split.split_id for i in delivered if i.last]
    assert done == [s.split_id for s in splits[:bad]]
    ids = [v for i in delivered for v in i.batch.column("id").to_pylist()]
    assert ids == list(range(bad * ROWS))

    # the run itself (files fetched ahead on the I/O pool) names the same file
    plan = IcebergSource(identifier, catalog=_proxied(seaweed, proxy),
                         options={"batchSize": str(2 * ROWS)}).bounded_plan()
    reader = SplitReader(plan.context)
    seen = []
    with pytest.raises(DataFileError) as info:
        for index, _, _ in reader.read_run(splits):
            seen.append(index)
    assert splits[bad].file_path in str(info.value)
    assert bad - 2 <= max(seen) < bad
    # the bad file itself came through the I/O pool (files behind it too when the pool ran
    # ahead; under load it may not have got past the bad one before the reader reached it)
    assert reader.prefetch.stats.files >= bad + 1
    catalog.purge_table(identifier)


def test_local_files_are_never_prefetched(tmp_path: Any) -> None:
    catalog = make_catalog(tmp_path)
    catalog.create_namespace_if_not_exists("io")
    table = catalog.create_table("io.local", schema=_rows(0).schema)
    for i in range(8):
        table.append(_rows(i))
    items, readers = _read(IcebergSource("io.local", catalog=catalog,
                                         options={"ioConcurrency": "16"}))
    assert sum(i.batch.num_rows for i in items) == 8 * ROWS
    assert sum(r.prefetch.stats.files for r in readers) == 0


def test_large_local_files_are_not_read_in_ranges(tmp_path: Any) -> None:
    import numpy as np

    catalog = make_catalog(tmp_path)
    catalog.create_namespace_if_not_exists("io")
    data = pa.table({"v": np.random.default_rng(5).standard_normal(LARGE_ROWS)})
    table = catalog.create_table("io.local_large", schema=data.schema)
    table.append(data)
    assert table.scan().plan_files()[0].file.file_size_in_bytes >= MIN_SPLIT_BYTES
    items, readers = _read(IcebergSource("io.local_large", catalog=catalog))
    assert sum(i.batch.num_rows for i in items) == LARGE_ROWS
    assert sum(r.prefetch.stats.ranged_requests for r in readers) == 0


@pytest.mark.parametrize("value,expected", [("auto", None), ("AUTO", None), ("0", 0),
                                            ("8", 8), (32, 32), ("256", 256)])
def test_io_concurrency_parses(value: Any, expected: int | None) -> None:
    assert SourceOptions.parse({"ioConcurrency": value}).io_concurrency == expected


@pytest.mark.parametrize("value", ["-1", "257", "many", "1.5", True, 2.0, ""])
def test_io_concurrency_rejects(value: Any) -> None:
    with pytest.raises(InvalidOptionError, match="ioConcurrency") as info:
        SourceOptions.parse({"ioConcurrency": value})
    assert "auto" in str(info.value)


@pytest.mark.parametrize("options", [{}, {"ioConcurrency": "0"}])
def test_a_small_file_read_alone_is_fetched_whole(seaweed: SeaweedFS, small_files: str,
                                                  options: dict[str, str]) -> None:
    """A small whole file read split by split (not in a run: a resumed split here, or a
    reader's last split) is fetched whole on S3: Arrow's HEAD, then one GET, two round
    trips where open, footer and column chunks took three; ``ioConcurrency=0`` keeps that
    plain path. It resumes at its offset either way."""
    with RequestLog(("127.0.0.1", seaweed.s3_port), 0.0) as log:
        plan = IcebergSource(small_files, catalog=_proxied(seaweed, log),
                             options=options).bounded_plan()
        split: FileSplit = next(iter(plan.splits()))
        reader = SplitReader(plan.context)
        log.requests.clear()
        got = [v for b in reader.read(split.with_position(100))
               for v in b.column("id").to_pylist()]
        methods = sorted(method for _, method, _ in log.requests)
    assert got == list(range(100, ROWS))
    if options:
        assert reader.prefetch.stats.files == 0
        assert methods == ["GET", "GET", "HEAD"]  # open, footer, column chunks
    else:
        assert reader.prefetch.stats.files == 1
        assert methods == ["GET", "HEAD"]


def test_transient_fetch_fault_is_retried_for_its_split(
        seaweed: SeaweedFS, small_files: str, proxy: CountingProxy,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A connection reset while fetching a file ahead (by its reader's window or before
    its claim) stops the run at that file's split, which the engine reads again on its
    own: every row arrives once, in order."""
    from icefloe.reader.files import FileOpener

    catalog = _proxied(seaweed, proxy)
    plan = IcebergSource(small_files, catalog=catalog).bounded_plan()
    splits = list(plan.splits())
    victim = splits[FILES // 2].file_path
    failed: list[str] = []
    real = FileOpener.read_whole

    def flaky(self: FileOpener, location: str) -> Any:
        if location == victim and not failed:
            failed.append(location)
            raise ConnectionResetError(f"connection reset reading {location}")
        return real(self, location)

    monkeypatch.setattr(FileOpener, "read_whole", flaky)
    items = list(read_splits(splits, plan.context, 2, True))
    assert failed == [victim]
    expected = catalog.load_table(small_files).scan().to_arrow()
    got = [v for i in items for v in i.batch.column("id").to_pylist()]
    assert got == expected.column("id").to_pylist()
    assert [i.split.split_id for i in items if i.last] == [s.split_id for s in splits]


def test_the_next_claims_small_files_are_fetched_before_the_claim(
        seaweed: SeaweedFS, small_files: str) -> None:
    """Once a reader's window has its own fetches done, the engine fetches the small files
    fed next, and the reader that claims them takes those fetches: its run does not start
    with each file's round trips.
    Every file is fetched once (a HEAD and a GET each, besides planning's manifest list
    and manifest), the rows are PyIceberg's in order, and the bytes held ahead stay
    within their bound."""
    import icefloe.local.engine as engine
    from icefloe.reader.prefetch import PREFETCH_MAX_BYTES, FetchedAhead

    made: list[FetchedAhead] = []

    class Recorded(FetchedAhead):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    with RequestLog(("127.0.0.1", seaweed.s3_port), 0.0) as log, \
            pytest.MonkeyPatch.context() as mp:
        mp.setattr(engine, "FetchedAhead", Recorded)
        catalog = _proxied(seaweed, log)
        expected = catalog.load_table(small_files).scan().to_arrow()
        log.requests.clear()
        items, readers = _read(IcebergSource(small_files, catalog=catalog,
                                             options={"preserveOrder": "true"}))
        methods = [method for _, method, _ in log.requests]
    got = pa.Table.from_batches([i.batch for i in items if i.batch.num_rows])
    assert got.column("id").to_pylist() == expected.column("id").to_pylist()
    (ahead,) = made
    taken = sum(r.prefetch.stats.taken_ahead for r in readers)
    assert 0 < taken <= ahead.fetched
    assert methods.count("GET") == methods.count("HEAD") == FILES + 2
    assert 0 < ahead.max_held_bytes <= PREFETCH_MAX_BYTES


LARGE_ROWS = 1_200_000


def _doubles_table(seaweed: SeaweedFS, name: str, rows: int, seed: int,
                   **write: Any) -> str:
    """A table of one Parquet file of ``rows`` ids and random doubles (little
    compression), written with ``write`` (``pq.write_table``'s options)."""
    import numpy as np

    catalog = load_catalog("sw", **seaweed.rest_properties())
    catalog.create_namespace_if_not_exists("io")
    identifier = f"io.{name}_{next(_names)}"
    rng = np.random.default_rng(seed)
    data = pa.table({"id": pa.array(np.arange(rows)),
                     "value": pa.array(rng.standard_normal(rows))})
    table = catalog.create_table(identifier, schema=data.schema)
    path = f"{table.metadata.location.removeprefix('s3://')}/data/{name}.parquet"
    pq.write_table(data, path, filesystem=_s3(seaweed.s3_endpoint), **write)
    table.add_files([f"s3://{path}"])
    return identifier


@pytest.fixture(scope="module")
def large_file(seaweed: SeaweedFS) -> str:
    """A table of one ~12 MB Parquet file of four row groups (random doubles: little
    compression), past :data:`icefloe.reader.ranged.MIN_SPLIT_BYTES`."""
    return _doubles_table(seaweed, "large", LARGE_ROWS, 3, row_group_size=LARGE_ROWS // 4)


@pytest.mark.parametrize("options", [{}, {"columns": "value"}, {"splitSize": "4194304"}])
def test_large_file_column_chunks_fetched_ahead_equal_pyiceberg(
        seaweed: SeaweedFS, large_file: str, proxy: CountingProxy,
        options: dict[str, str]) -> None:
    catalog = _proxied(seaweed, proxy)
    scan = catalog.load_table(large_file).scan(
        selected_fields=tuple(options["columns"].split(",")) if "columns" in options else ("*",))
    expected = scan.to_arrow()
    items, readers = _read(IcebergSource(large_file, catalog=catalog,
                                         options={**options, "preserveOrder": "true"}))
    got = pa.Table.from_batches([i.batch for i in items if i.batch.num_rows])
    assert got.column_names == expected.column_names
    for name in expected.column_names:
        assert got.column(name).to_pylist() == expected.column(name).to_pylist()
    ranged = sum(r.prefetch.stats.ranged_requests for r in readers)
    if "splitSize" in options:  # splits of one ~3 MB row group: below the ranged reads' size
        assert ranged == 0
    else:  # the file's (selected) column chunks, in pieces of at most 8 MiB
        assert ranged >= 2


def test_a_large_split_is_fetched_in_fewer_larger_requests_over_s3(
        seaweed: SeaweedFS, large_file: str, proxy: CountingProxy,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A split's requests grow with it (``request_bytes``): scaled down to pieces of
    1 MiB, the ~12 MB file is fetched in 1 MiB requests when a split may be cut into as
    many as it takes, and in a few of about half of it when it must be cut into at least
    2; both reads equal PyIceberg's scan."""
    import icefloe.reader.ranged as ranged

    monkeypatch.setattr(ranged, "PIECE_BYTES", 1 << 20)
    catalog = _proxied(seaweed, proxy)
    expected = catalog.load_table(large_file).scan().to_arrow()
    counts = {}
    for split_requests in (1 << 30, 2):
        monkeypatch.setattr(ranged, "SPLIT_REQUESTS", split_requests)
        items, readers = _read(IcebergSource(large_file, catalog=catalog,
                                             options={"preserveOrder": "true"}))
        got = pa.Table.from_batches([i.batch for i in items if i.batch.num_rows])
        for name in expected.column_names:
            assert got.column(name).to_pylist() == expected.column(name).to_pylist()
        counts[split_requests] = sum(r.prefetch.stats.ranged_requests for r in readers)
    assert counts[1 << 30] >= 10  # ~12 MB in pieces of 1 MiB
    assert 2 <= counts[2] <= 4  # blocks of up to half the split


def test_large_file_same_items_and_offsets_without_ranged_reads(
        seaweed: SeaweedFS, large_file: str, proxy: CountingProxy) -> None:
    catalog = _proxied(seaweed, proxy)

    def items(options: dict[str, str]) -> list[tuple[str, int, bool, list[Any]]]:
        got, readers = _read(IcebergSource(large_file, catalog=catalog, options=options))
        ranged = sum(r.prefetch.stats.ranged_requests for r in readers)
        assert (ranged > 0) == (options.get("ioConcurrency") != "0")
        return [(i.split.split_id, i.consumed, i.last, i.batch.column("id").to_pylist())
                for i in got]

    assert items({"ioConcurrency": "4"}) == items({"ioConcurrency": "0"})


class RequestLog(LatencyProxy):
    """The latency proxy, logging ``(time, method)`` of each request the client sends
    and the time each connection's answer first reaches the client."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.requests: list[tuple[float, str, int]] = []  # (sent, method, connection)
        self.answered: dict[int, list[float]] = {}  # connection -> first bytes' times
        self._pipes = 0

    def _pipe(self, src: Any, dst: Any, on_read: Any = None, on_sent: Any = None) -> None:
        import time

        self._pipes += 1  # _accept pipes client -> upstream first, then the answer's way
        upward, conn = self._pipes % 2 == 1, (self._pipes + 1) // 2

        def read(data: bytes) -> None:
            if upward and data[:5] in (b"HEAD ", b"GET /"):
                self.requests.append((time.monotonic(), data.split(b" ", 1)[0].decode(), conn))

        def sent(data: bytes) -> None:
            if not upward and data:
                self.answered.setdefault(conn, []).append(time.monotonic())

        super()._pipe(src, dst, read if upward else None, None if upward else sent)


def test_a_large_split_reads_its_footer_while_arrow_sends_its_head(
        seaweed: SeaweedFS, large_file: str) -> None:
    """Arrow's S3 client sends a HEAD before the first read of a file opened by path; a
    large split's footer is read beside it (a fragment told Iceberg's file size: one
    GET), not after it: one round trip less before the data. With a wrong size the
    reader reads the footer itself, as before."""
    import dataclasses

    from icefloe.reader.files import FileOpener
    from icefloe.reader.open_file import open_parquet

    with RequestLog(("127.0.0.1", seaweed.s3_port), 0.1) as log:
        plan = IcebergSource(large_file, catalog=_proxied(seaweed, log)).bounded_plan()
        split = next(iter(plan.splits()))
        assert split.length >= MIN_SPLIT_BYTES
        files = FileOpener(plan.context.io)
        expected = pq.read_metadata(f"{split.file_path.removeprefix('s3://')}",
                                    filesystem=_s3(seaweed.s3_endpoint))
        for file_size, beside in [(split.file_size, True), (split.file_size, False),
                                  (split.file_size + 7, True)]:
            log.requests.clear()
            opened = open_parquet(files, dataclasses.replace(split, file_size=file_size),
                                  footer_beside_head=beside)
            assert opened.reader.metadata.equals(expected)
            opened.close()
            if file_size != split.file_size:  # the fragment's read failed: read again
                assert sum(method == "GET" for _, method, _ in log.requests) == 2
                continue
            (head_sent, _, head_conn), = [r for r in log.requests if r[1] == "HEAD"]
            (footer_sent, _, _), = [r for r in log.requests if r[1] == "GET"]
            head_answered = min(t for t in log.answered[head_conn] if t > head_sent)
            # the footer's GET went out before the HEAD's answer came back (a round trip
            # is 0.2 s here) when read beside it, after it otherwise
            assert (footer_sent < head_answered) == beside


ONE_GROUP_ROWS = 600_000


@pytest.fixture(scope="module")
def one_row_group(seaweed: SeaweedFS) -> str:
    """A table of one ~9.6 MB Parquet file of ONE row group (two columns of random
    doubles, ~4.8 MB each), past :data:`icefloe.reader.ranged.MIN_SPLIT_BYTES`."""
    return _doubles_table(seaweed, "one", ONE_GROUP_ROWS, 5, row_group_size=ONE_GROUP_ROWS,
                          compression="none")


def _read_as_pyiceberg(seaweed: SeaweedFS, proxy: CountingProxy, table: str
                       ) -> list[Any]:
    """Read ``table`` in order through the proxy, check every column against PyIceberg's
    scan of it, and return each reader's prefetch stats."""
    catalog = _proxied(seaweed, proxy)
    expected = catalog.load_table(table).scan().to_arrow()
    items, readers = _read(IcebergSource(table, catalog=catalog,
                                         options={"preserveOrder": "true"}))
    got = pa.Table.from_batches([i.batch for i in items if i.batch.num_rows])
    for name in expected.column_names:
        assert got.column(name).to_pylist() == expected.column(name).to_pylist()
    return [r.prefetch.stats for r in readers]


@pytest.mark.parametrize("streamed", [True, False])
def test_a_large_row_group_is_streamed_within_the_bytes_ahead(
        seaweed: SeaweedFS, one_row_group: str, proxy: CountingProxy,
        monkeypatch: pytest.MonkeyPatch, streamed: bool) -> None:
    """A row group larger than the bytes a reader may hold ahead is read through Parquet's
    buffered column streams from pieces fetched as the decode needs them: the bytes held
    stay within the limit (plus the piece each column's next read needs). Read whole (a
    row group below the streaming size), each column chunk is fetched and held whole, as
    every large row group was before: here a whole ~4.8 MB column chunk against 2 MiB.
    (Scaled down: pieces of 512 KiB, 2 MiB ahead; the defaults are 8 and 64 MiB.)"""
    import icefloe.reader.ranged as ranged

    piece, ahead = 512 * 1024, 2 * 1024 * 1024
    monkeypatch.setattr(ranged, "PIECE_BYTES", piece)
    monkeypatch.setattr(ranged, "AHEAD_BYTES", ahead)
    monkeypatch.setattr(ranged, "STREAM_ROW_GROUP_BYTES", ahead // 2 if streamed else 1 << 40)
    stats = _read_as_pyiceberg(seaweed, proxy, one_row_group)
    held = max(s.ranged_max_held_bytes for s in stats)
    chunk = ONE_GROUP_ROWS * 8  # a column of doubles, uncompressed
    assert sum(s.streamed_splits for s in stats) == (1 if streamed else 0)
    if streamed:  # the row group in pieces: many requests, few bytes held at once
        assert sum(s.ranged_requests for s in stats) >= 2 * chunk // piece
        assert 0 < held <= ahead + 2 * piece
    else:  # each column chunk fetched and held whole
        assert held >= chunk > ahead


def test_a_row_group_within_the_bytes_ahead_is_read_whole_in_larger_requests(
        seaweed: SeaweedFS, one_row_group: str, proxy: CountingProxy,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A row group of more than half the bytes a reader may hold ahead, and no more than
    them (the matrix's 256 MB x 4 and 1 GB x 16 row groups: 61 and 60 MiB against 64 MiB),
    is read whole, fetched in the split's requests (an eighth of it here) rather than
    streamed in pieces: fewer requests, every one of them within the bytes ahead, and the
    rows PyIceberg's scan reads. (Scaled down: pieces of 512 KiB, 12 MiB ahead, the
    streaming size in the module's own proportion to the bytes ahead.)"""
    import icefloe.reader.ranged as ranged

    piece, ahead = 512 * 1024, 12 * 1024 * 1024
    stream_at = ranged.STREAM_ROW_GROUP_BYTES * ahead // ranged.AHEAD_BYTES
    chunk = ONE_GROUP_ROWS * 8  # a column of doubles, uncompressed
    assert ahead / 2 < 2 * chunk <= ahead  # the row group: the shape asked about
    monkeypatch.setattr(ranged, "PIECE_BYTES", piece)
    monkeypatch.setattr(ranged, "AHEAD_BYTES", ahead)
    monkeypatch.setattr(ranged, "STREAM_ROW_GROUP_BYTES", stream_at)
    stats = _read_as_pyiceberg(seaweed, proxy, one_row_group)
    assert sum(s.streamed_splits for s in stats) == 0
    requests = sum(s.ranged_requests for s in stats)
    assert 0 < requests <= ranged.SPLIT_REQUESTS + 2  # an eighth each (cut at the chunks)
    assert requests < 2 * chunk // piece  # streamed, it would take a request per piece
    assert max(s.ranged_max_held_bytes for s in stats) <= ahead


def _waves(requests: list[tuple[float, str, int]], gap: float) -> list[list[str]]:
    """The methods of ``requests`` grouped into round trips in series: a request sent more
    than ``gap`` after the one before it starts a new wave (with the proxy's one-way delay
    as ``gap``, a request that waited for an answer is at least twice that later)."""
    waves: list[list[str]] = []
    last = None
    for sent, method, _ in sorted(requests):
        if last is None or sent - last > gap:
            waves.append([])
        waves[-1].append(method)
        last = sent
    return waves


def test_a_large_file_read_pays_the_round_trips_any_arrow_reader_must(
        seaweed: SeaweedFS, large_file: str) -> None:
    """The critical path of a read of a large file from its table's name, counted in
    round trips in series through the proxy: the manifest list's HEAD and GET, the
    manifest's HEAD and GET (Arrow's S3 client sends a HEAD before every object's first
    read), the footer beside the data file's HEAD, then every column chunk's ranged GET
    at once: 6 before the data's first bytes, the least any reader through Arrow's S3
    client can pay (``benchmarks.bench_matrix.s3_bound``'s proposed terms, RESULTS.md
    "Session 16 (issue 30): 32 MB files on S3"). PyIceberg's read of the same table pays
    one more (its footer after the HEAD). Rows checked against PyIceberg's scan."""
    delay = 0.1
    log = RequestLog(("127.0.0.1", seaweed.s3_port), delay)
    with log:
        catalog = _proxied(seaweed, log)
        log.requests.clear()
        got = pa.Table.from_batches(list(IcebergSource(
            large_file, catalog=catalog, options={"preserveOrder": "true"}).read()))
        ours = _waves(log.requests, delay)
        log.requests.clear()
        expected = catalog.load_table(large_file).scan().to_arrow()
        theirs = _waves(log.requests, delay)
    assert got.column("id").to_pylist() == expected.column("id").to_pylist()
    assert got.column("value").to_pylist() == expected.column("value").to_pylist()
    # manifest list, manifest (each a HEAD, then a GET), the file's HEAD beside its
    # footer, then the column chunks' GETs all at once
    assert [sorted(w) for w in ours[:5]] == [["HEAD"], ["GET"], ["HEAD"], ["GET"],
                                              ["GET", "HEAD"]], ours
    assert len(ours) == 6 and set(ours[5]) == {"GET"} and len(ours[5]) >= 2, ours
    assert len(theirs) == len(ours) + 1, (ours, theirs)
