"""Opening data files for reading: a location -> an Arrow filesystem and path. Runs on a worker.

PyIceberg's ``PyArrowFileIO.new_input(location).open()`` parses the location
(``urlparse``) and builds an input-file object per call; with thousands of small files
that is a visible share of a reader thread's time under the GIL. :class:`FileOpener`
resolves the directory of a location once (with PyIceberg's own
``parse_location`` / ``fs_by_scheme``, so paths and filesystems are the ones PyIceberg
would use) and opens files of the same directory with the cached filesystem,
translating "missing" and "access denied" errors as PyIceberg does. Other FileIO
implementations go through ``new_input(...).open()`` unchanged.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
from pyarrow.fs import FileSystem, LocalFileSystem
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import PyArrowFileIO

_CACHED_DIRS = 256
# characters urlparse treats specially in a path's last segment: such locations are
# parsed whole every time
_SPECIAL = frozenset(";?#")


class FileOpener:
    """Opens data files of one FileIO (one per reader thread; :meth:`read_whole` may run on
    the reader's I/O threads).

    Args:
        io: the table's FileIO.
    """

    def __init__(self, io: FileIO) -> None:
        self.io = io
        self._dirs: dict[str, tuple[FileSystem, str]] = {}

    def locate(self, location: str) -> tuple[FileSystem, str] | None:
        """The Arrow filesystem and path PyIceberg's PyArrowFileIO reads ``location``
        with, or None when the FileIO is not a PyArrowFileIO."""
        io = self.io
        if not isinstance(io, PyArrowFileIO):
            return None
        directory, slash, name = location.rpartition("/")
        if not slash or not directory or not name or name in (".", "..") \
                or not _SPECIAL.isdisjoint(location):
            scheme, netloc, path = io.parse_location(location, io.properties)
            return io.fs_by_scheme(scheme, netloc), path
        cached = self._dirs.get(directory)
        if cached is None:
            scheme, netloc, path = io.parse_location(directory, io.properties)
            cached = (io.fs_by_scheme(scheme, netloc), path)
            if len(self._dirs) >= _CACHED_DIRS:
                self._dirs.clear()
            self._dirs[directory] = cached
        fs, dir_path = cached
        return fs, f"{dir_path}/{name}"

    def is_local(self, location: str) -> bool:
        """Whether ``location`` is on a local filesystem (where a read is not a round trip)."""
        where = self.locate(location)
        if where is None:
            return urlparse(location).scheme in ("", "file")
        return isinstance(where[0], LocalFileSystem)

    def read_whole(self, location: str) -> pa.Buffer:
        """The whole file's bytes: :meth:`open_for_parquet` (one HEAD on an object store),
        then one read of everything. Safe on any thread (the directory cache's dict
        operations are atomic).

        Raises:
            FileNotFoundError, PermissionError, OSError: as :meth:`open_for_parquet`.
        """
        stream, _ = self.open_for_parquet(location)
        with stream:
            if hasattr(stream, "read_buffer"):  # an Arrow file: no copy into bytes
                return stream.read_buffer()
            return pa.py_buffer(stream.read())

    def open_for_parquet(self, location: str) -> tuple[Any, bool]:
        """A seekable Arrow input file for ``location`` and whether a Parquet reader
        should pre-buffer it.

        Pre-buffering (coalesced, read-ahead column-chunk reads on Arrow's I/O threads)
        pays off where a read is a round trip (object stores); on a local filesystem
        it costs about 150 us per file and saves nothing, which with thousands of
        small files is a third of the read. So: True unless the file is local.

        Raises:
            FileNotFoundError: the file does not exist.
            PermissionError: access denied.
            OSError: any other failure of the filesystem.
        """
        where = self.locate(location)
        if where is None:
            return self.io.new_input(location).open(seekable=True), True
        fs, path = where
        try:
            return fs.open_input_file(path), not isinstance(fs, LocalFileSystem)
        except (FileNotFoundError, PermissionError):
            raise
        except OSError as exc:  # as PyArrowFile.open translates them
            if exc.errno == 2 or "Path does not exist" in str(exc):
                raise FileNotFoundError(
                    f"Cannot open file, does not exist: {location}") from exc
            if exc.errno == 13 or "AWS Error [code 15]" in str(exc):
                raise PermissionError(f"Cannot open file, access denied: {location}") from exc
            raise
