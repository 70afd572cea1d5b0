"""Prefetching whole small files from an object store ahead of a reader. Runs on a worker.

On an object store every request is a round trip (10-100 ms). Read the plain way, a small
Parquet file costs a reader thread three of them in turn: open (HEAD), footer, column
chunks; with two reader threads and ~20 ms per request, 400 small files take 12 s of
waiting. A :class:`Prefetcher` makes I/O concurrency independent of decode parallelism:
while the reader decodes one file of a run, the next files of the run are fetched whole
(open + one read of the object: two requests, the footer and column chunks then come from
memory) on a process-wide pool of I/O threads, with at most ``concurrency`` files of one
reader in flight or waiting and at most :data:`PREFETCH_MAX_BYTES` bytes of them held.
A run's window fetches only its own run; the local engine's :class:`FetchedAhead`
fetches the files of the runs to be claimed next (at most as many files and bytes more),
so a reader's next run does not start with its files' round trips.

Only whole files of at most :data:`PREFETCH_MAX_FILE_BYTES` that are not on a local disk
are fetched ahead (local files keep the plain path: opening one costs microseconds).
Files are taken in order; an error of a fetch (missing file, access denied, a reset
connection) is raised when its file is taken, never earlier, so it is attributed to
its own split exactly as an error of a plain open is.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from icefloe.reader.files import FileOpener
from icefloe.splits.split import FileSplit

AUTO_IO_CONCURRENCY = 16
"""Files in flight per reader thread with ``ioConcurrency=auto`` on an object store
(benchmarks/RESULTS.md, "Object storage")."""

PREFETCH_MAX_BYTES = 64 * 1024 * 1024
"""Most bytes one reader holds in files fetched ahead (in flight or waiting)."""

PREFETCH_MAX_FILE_BYTES = 8 * 1024 * 1024
"""Largest file fetched whole; bigger ones are read with Parquet pre-buffering."""

IO_POOL_THREADS = 64
"""Threads of the process-wide I/O pool (shared by every reader; each keeps to its own
``concurrency``)."""

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def io_pool() -> ThreadPoolExecutor:
    """The process-wide pool of I/O threads (created on first use)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(IO_POOL_THREADS, thread_name_prefix="icefloe-io")
        return _pool


def resolve_concurrency(setting: int | None) -> int:
    """Files in flight per reader on an object store for ``ioConcurrency`` (None: auto)."""
    return AUTO_IO_CONCURRENCY if setting is None else setting


@dataclass
class PrefetchStats:
    """What a :class:`Prefetcher` did (updated under its lock; read for tests and logs).

    Attributes:
        files: whole-file fetches made (failed ones included).
        in_flight: fetches running now.
        max_in_flight: most fetches running at once.
        held_bytes: bytes of files submitted and not yet taken.
        max_held_bytes: most such bytes at once.
        ranged_requests: ranged requests of large files' column chunks fetched ahead
            (:mod:`icefloe.reader.ranged`), counted when their split is read.
        taken_ahead: of ``files``, those fetched before this reader claimed them (the
            local engine's :class:`FetchedAhead`).
        streamed_splits: large splits read through buffered column streams
            (:func:`icefloe.reader.ranged.ranged_reader`).
        ranged_max_held_bytes: most bytes one large split's ranged reads held fetched
            ahead and not yet read at once.
    """

    files: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    held_bytes: int = 0
    max_held_bytes: int = 0
    ranged_requests: int = 0
    taken_ahead: int = 0
    streamed_splits: int = 0
    ranged_max_held_bytes: int = 0


class Prefetcher:
    """Fetches the files of one reader's runs ahead (one per reader thread).

    Args:
        opener: the reader's file opener (its :meth:`FileOpener.read_whole` runs on the
            I/O threads).
        concurrency: most files in flight or waiting to be taken (0: never prefetch).
        max_bytes: most bytes held in them (one file is always allowed).
    """

    def __init__(self, opener: FileOpener, concurrency: int,
                 max_bytes: int = PREFETCH_MAX_BYTES) -> None:
        self.opener = opener
        self.concurrency = concurrency
        self.max_bytes = max_bytes
        self.stats = PrefetchStats()
        self.ahead: FetchedAhead | None = None
        """The engine's files fetched before their claim, taken before fetching one
        (None: every fetch is this reader's own)."""
        self._lock = threading.Lock()

    def window(self, splits: Sequence[FileSplit]) -> PrefetchWindow | None:
        """A window over ``splits`` (taken in order), or None when none of them is
        fetched ahead (prefetching off, or the first file is local)."""
        if self.concurrency < 1 or not splits \
                or self.opener.is_local(splits[0].file_path):
            return None
        return PrefetchWindow(self, splits)

    def fetch(self, location: str) -> pa.Buffer:
        """The whole file at ``location``, counted in :attr:`stats`. Runs on an I/O thread.

        Raises:
            FileNotFoundError, PermissionError, OSError: as :meth:`FileOpener.read_whole`.
        """
        stats = self.stats
        with self._lock:
            stats.in_flight += 1
            stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        try:
            return self.opener.read_whole(location)
        finally:
            with self._lock:
                stats.in_flight -= 1
                stats.files += 1

    def fetch_ahead(self, split: FileSplit) -> Future[pa.Buffer]:
        """The whole-file fetch of ``split`` (:func:`eligible`): the engine's, when it
        fetched it before this reader claimed it, else a new one on the I/O pool."""
        future = self.ahead.take(split) if self.ahead is not None else None
        if future is None:
            return io_pool().submit(self.fetch, split.file_path)
        with self._lock:
            self.stats.files += 1
            self.stats.taken_ahead += 1
        return future

    def hold(self, nbytes: int) -> None:
        """Count ``nbytes`` more fetched ahead and not yet released (any thread)."""
        with self._lock:
            self.stats.held_bytes += nbytes
            self.stats.max_held_bytes = max(self.stats.max_held_bytes, self.stats.held_bytes)

    def release(self, nbytes: int) -> None:
        """Count ``nbytes`` of fetched files released (any thread)."""
        with self._lock:
            self.stats.held_bytes -= nbytes


def eligible(split: FileSplit) -> bool:
    """Whether ``split``'s file is fetched whole: a whole file of at most
    :data:`PREFETCH_MAX_FILE_BYTES`."""
    return split.is_whole_file and 0 < split.file_size <= PREFETCH_MAX_FILE_BYTES


class PrefetchWindow:
    """The files of one run, fetched ahead; :meth:`take` them in order, then :meth:`close`.

    Reader thread only (the fetches run on the I/O pool).
    """

    def __init__(self, prefetcher: Prefetcher, splits: Sequence[FileSplit]) -> None:
        self.prefetcher = prefetcher
        self.splits = splits
        self._next = 0  # next split to submit
        self._ahead: deque[tuple[int, Future[pa.Buffer] | None, int]] = deque()
        self._bytes = 0  # of ``_ahead``
        self._refilled = False

    def _fill(self) -> None:
        p = self.prefetcher
        while self._next < len(self.splits) and len(self._ahead) < p.concurrency:
            split = self.splits[self._next]
            size = split.file_size if eligible(split) else 0
            if self._ahead and self._bytes + size > p.max_bytes:
                return
            future = p.fetch_ahead(split) if size else None
            if size:
                p.hold(size)
            self._ahead.append((self._next, future, size))
            self._bytes += size
            self._next += 1

    def take(self, index: int) -> tuple[Any, bool]:
        """The open file of ``splits[index]`` and whether to pre-buffer it, as
        :meth:`FileOpener.open_for_parquet` returns them (a fetched file: an in-memory
        reader, no pre-buffering). ``index`` must be past every index taken before.

        Raises:
            FileNotFoundError, PermissionError, OSError: as
                :meth:`FileOpener.open_for_parquet` (this file's own error).
        """
        while self._ahead and self._ahead[0][0] < index:  # skipped: drop their fetches
            self._release(self._ahead.popleft())
        if not self._ahead:
            self._next = max(self._next, index)
        self._fill()
        item = self._ahead.popleft() if self._ahead and self._ahead[0][0] == index else None
        opener = self.prefetcher.opener
        if item is None:
            return opener.open_for_parquet(self.splits[index].file_path)
        future = item[1]
        try:
            data = None if future is None else future.result()
        finally:
            self._release(item, cancel=False)
        self._fill()  # keep the window full while this file decodes
        self._refill_ahead()
        if data is None:
            return opener.open_for_parquet(self.splits[index].file_path)
        return pa.BufferReader(data), False

    def _refill_ahead(self) -> None:
        """Once this window's splits are all submitted and their fetches done, let the
        engine fetch the next claims' files (:meth:`FetchedAhead.refill`; once per
        window)."""
        ahead = self.prefetcher.ahead
        if ahead is None or self._refilled or self._next < len(self.splits) \
                or not all(f is None or f.done() for _, f, _ in self._ahead):
            return
        self._refilled = True
        ahead.refill()

    def _release(self, item: tuple[int, Future[pa.Buffer] | None, int],
                 cancel: bool = True) -> None:
        _, future, size = item
        self._bytes -= size
        if size:
            self.prefetcher.release(size)
        if cancel and future is not None:
            future.cancel()

    def close(self) -> None:
        """Cancel the fetches not taken (running ones finish and are dropped)."""
        while self._ahead:
            self._release(self._ahead.popleft())


class FetchedAhead:
    """Whole small files fetched before a reader claims them: once a reader's window has
    all its fetches done (its reader decoding what they brought), :meth:`refill` fetches
    the splits the next claims will take (:attr:`next_splits`, the local engine's), and
    a reader's window takes a file's fetch (:meth:`take`) instead of starting its own.
    So a reader's next run of small files does not start with a round trip to open each
    file and one to fetch it, and fetches ahead never compete with a run's own.
    Thread-safe.

    At most ``max_files`` fetches and :data:`PREFETCH_MAX_BYTES` bytes (``max_bytes``)
    are held, taken or not; what no reader took is dropped by :meth:`close`. Only
    :func:`eligible` Parquet files not on a local disk are fetched (local files: never,
    decided at the first one). An error of a fetch is raised by the reader that takes it,
    for its own split, as an error of its own fetch would be.

    Args:
        opener: opens the files (:meth:`FileOpener.read_whole` runs on the I/O threads).
        max_files: most fetches held (0: none).
        max_bytes: most bytes held (one file is always allowed).
    """

    def __init__(self, opener: FileOpener, max_files: int,
                 max_bytes: int = PREFETCH_MAX_BYTES) -> None:
        self.opener = opener
        self.max_files = max_files
        self.max_bytes = max_bytes
        self.fetched = 0
        """Fetches started (for tests and profiles)."""
        self.max_held_bytes = 0
        """Most bytes held at once."""
        self.next_splits: Callable[[int], Sequence[FileSplit]] | None = None
        """The splits the next claims will take, at most as many as asked (the local
        engine's run assigner sets it; None: :meth:`refill` does nothing)."""
        self._held: dict[str, tuple[Future[pa.Buffer], int]] = {}
        self._bytes = 0
        self._local: bool | None = None  # decided at the first file offered
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        """Whether :meth:`offer` may fetch anything (not off, not a table on local disk)."""
        return self.max_files > 0 and self._local is not True

    def offer(self, splits: Sequence[FileSplit]) -> None:
        """Fetch the files of ``splits`` (the next to be claimed, in order) not fetched
        yet, while the limits allow; the first that does not fit ends the offer."""
        with self._lock:
            for split in splits:
                if split.file_format != "PARQUET" or split.changes or not eligible(split) \
                        or split.file_path in self._held:
                    continue
                if self._local is None:
                    self._local = self.opener.is_local(split.file_path)
                if self._local:
                    return
                size = split.file_size
                if len(self._held) >= self.max_files or (
                        self._held and self._bytes + size > self.max_bytes):
                    return
                future = io_pool().submit(self.opener.read_whole, split.file_path)
                self._held[split.file_path] = (future, size)
                self._bytes += size
                self.max_held_bytes = max(self.max_held_bytes, self._bytes)
                self.fetched += 1

    def refill(self) -> None:
        """:meth:`offer` the splits the next claims will take (any thread)."""
        if self.active and self.next_splits is not None:
            self.offer(self.next_splits(self.max_files))

    def take(self, split: FileSplit) -> Future[pa.Buffer] | None:
        """The fetch of ``split``'s file, now the caller's (None: not fetched ahead)."""
        with self._lock:
            item = self._held.pop(split.file_path, None)
            if item is None:
                return None
            self._bytes -= item[1]
            return item[0]

    def close(self) -> None:
        """Drop what no reader took (running fetches finish and are dropped)."""
        with self._lock:
            for future, _ in self._held.values():
                future.cancel()
            self._held.clear()
            self._bytes = 0
