"""Stage 1 of the read pipeline: open a data file (Parquet, ORC, Avro). Runs on a worker.

The pipeline (:mod:`icefloe.reader.file_reader` composes it for one split):

1. **open the file** (this module): a split's data file -> an open file, from a stream
   opened now (:class:`~icefloe.reader.files.FileOpener`) or fetched ahead by a
   :class:`~icefloe.reader.prefetch.PrefetchWindow` (small files of a run on an object
   store); a large split on an object store reads its column chunks from ranges fetched
   ahead (:mod:`icefloe.reader.ranged`);
2. plan its columns against the read schema (:mod:`icefloe.reader.plan`);
3. read the split's range: row groups, stripes or blocks (:mod:`icefloe.reader.ranges`);
4. apply deletes (:mod:`icefloe.reader.deletes`) and the residual filter
   (:mod:`icefloe.reader.row_filter`);
5. project and cast to the output schema (:mod:`icefloe.reader.projection`,
   :mod:`icefloe.reader.casts`);
6. add metadata columns (:mod:`icefloe.reader.metadata`);
7. batch: slices of ``batch_size`` rows (:mod:`icefloe.reader.batches`), runs of small
   files combined (:mod:`icefloe.reader.groups`, :mod:`icefloe.reader.runs`).

Parquet opens with PyArrow's low-level reader (``ParquetReader``, without
``pq.ParquetFile``'s per-file Python set-up); ORC through PyArrow
(:mod:`icefloe.reader.orc`); Avro through icefloe's block decoder
(:mod:`icefloe.reader.avro`). Every failure is a :class:`DataFileError` naming the file.
An open file belongs to the thread that opened it.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyarrow._parquet import ParquetReader
from pyarrow.fs import LocalFileSystem

from icefloe.errors import DataFileError
from icefloe.reader.files import FileOpener
from icefloe.reader.units import FormatFile
from icefloe.splits.split import FileSplit

if TYPE_CHECKING:
    from icefloe.reader.prefetch import PrefetchWindow

FORMATS = ("PARQUET", "ORC", "AVRO")
"""Data file formats icefloe reads (Iceberg's three)."""

BINARY_TYPE = pa.large_binary()
"""What Parquet's reader decodes a BYTE_ARRAY column (string or binary) as, in a file
without a stored Arrow schema (Java Iceberg's, Spark's, Flink's, Trino's files): the
64-bit-offset types icefloe's output has (PyIceberg's ``schema_to_pyarrow``:
``large_string``, ``large_binary``), so those columns need no cast after the decode
(:func:`icefloe.reader.casts.widen_offsets`: a buffer and a copy of the offsets per string
column per batch, about 10 % of the CPU of a two-thread read of the matrix's 1 MB files;
session 20). A file with a stored Arrow schema (PyArrow's writers, PyIceberg's) decodes
to the types it records, whatever this says (Arrow's rule)."""

LIST_TYPE = pa.LargeListType
"""What Parquet's reader decodes a list column as, in a file without a stored Arrow schema:
``large_list``, the output's (PyIceberg's ``schema_to_pyarrow``), as :data:`BINARY_TYPE`."""


@dataclass(frozen=True, slots=True)
class ParquetFile:
    """An open Parquet data file: the low-level reader and the stream under it (one
    thread's; :meth:`close` both when done). ``remote``: the stream reads an object
    store (each read a round trip), so the reader pre-buffers."""

    reader: ParquetReader
    stream: Any
    remote: bool = False

    def close(self) -> None:
        self.reader.close()
        self.stream.close()


def read_failed(split: FileSplit, exc: Exception) -> DataFileError:
    """The typed error for an I/O or Arrow error ``exc`` while decoding ``split``'s file."""
    return DataFileError(
        f"failed reading data file {split.file_path} of snapshot {split.snapshot_id}: "
        f"{type(exc).__name__}: {exc}")


def _footer(files: FileOpener, split: FileSplit) -> tuple[Future[tuple[Any, bool]], Any] | None:
    """For a file on an object store: its opening (Arrow's HEAD) started on the I/O pool
    and, meanwhile, its footer read on this thread by a fragment told the file's size
    (one GET, no HEAD): ``(the opening's future, the footer's metadata or None when that
    read failed: the reader then reads the footer itself and names the error)``. None for
    a local file or a FileIO icefloe does not open itself."""
    where = files.locate(split.file_path)
    if where is None or isinstance(where[0], LocalFileSystem) or split.file_size <= 0:
        return None
    from icefloe.reader.prefetch import io_pool

    opening = io_pool().submit(files.open_for_parquet, split.file_path)
    try:
        import pyarrow.dataset as ds

        fragment = ds.ParquetFileFormat().make_fragment(where[1], where[0],
                                                        file_size=split.file_size)
        return opening, fragment.metadata
    except Exception:
        return opening, None


def open_parquet(files: FileOpener, split: FileSplit, window: PrefetchWindow | None = None,
                 index: int = 0, footer_beside_head: bool = False) -> ParquetFile:
    """Open ``split``'s Parquet file: from ``window`` (``window.splits[index]`` is
    ``split``, fetched ahead) or directly through ``files`` (pre-buffered unless local).

    ``footer_beside_head``: on an object store, read the footer while Arrow's S3 client
    asks for the object's size (its HEAD before the first read of a file opened by path):
    one round trip less before a large split's data. The footer is read at the end of
    ``split.file_size`` bytes (Iceberg's record of the file's size); if that read fails,
    the reader reads the footer itself as without it.

    Raises:
        DataFileError: the file is not Parquet, missing, unreadable or corrupt.
    """
    if split.file_format != "PARQUET":
        raise DataFileError(
            f"data file {split.file_path} (snapshot {split.snapshot_id}) is "
            f"{split.file_format}, not PARQUET (ORC and Avro splits are opened by "
            "icefloe.reader.open_file.open_format_file)"
        )
    metadata = None
    try:
        beside = _footer(files, split) if footer_beside_head and window is None else None
        if beside is not None:
            opening, metadata = beside
            stream, pre_buffer = opening.result()
        else:
            stream, pre_buffer = files.open_for_parquet(split.file_path) \
                if window is None else window.take(index)
    except Exception as exc:
        raise DataFileError(
            f"cannot read data file {split.file_path} of snapshot {split.snapshot_id} "
            f"({type(exc).__name__}: {exc}); the file is missing or corrupt"
        ) from exc
    try:
        # the reader under pq.ParquetFile, without its per-file Python set-up (nested
        # column paths, path resolution): with thousands of small files it shows
        reader = ParquetReader()
        reader.open(stream, pre_buffer=pre_buffer, arrow_extensions_enabled=True,
                    metadata=metadata, binary_type=BINARY_TYPE,
                    list_type=LIST_TYPE)
    except Exception as exc:
        stream.close()
        raise DataFileError(
            f"cannot read data file {split.file_path} of snapshot {split.snapshot_id} "
            f"({type(exc).__name__}: {exc}); the file is missing or corrupt"
        ) from exc
    return ParquetFile(reader, stream, pre_buffer)


def open_format_file(files: FileOpener, path: str, file_format: str, what: str) -> FormatFile:
    """Open the ORC or Avro file at ``path``; ``what`` names it in errors.

    Raises:
        DataFileError: an unknown format, or the file is missing or not readable as it.
    """
    if file_format not in ("ORC", "AVRO"):
        raise DataFileError(
            f"{what} is {file_format}; icefloe reads {', '.join(FORMATS)} data files")
    try:
        stream, _ = files.open_for_parquet(path)
    except Exception as exc:
        raise DataFileError(f"cannot read {what} ({type(exc).__name__}: {exc}); the file is "
                            "missing or corrupt") from exc
    try:
        if file_format == "ORC":
            from icefloe.reader.orc import OrcFile

            return OrcFile(stream)
        from icefloe.reader.avro import AvroFile

        return AvroFile(stream)
    except Exception as exc:
        stream.close()
        raise DataFileError(f"cannot read {what} as {file_format} ({type(exc).__name__}: "
                            f"{exc}); the file is corrupt or not {file_format}") from exc


def read_table(files: FileOpener, path: str, file_format: str, what: str) -> pa.Table:
    """Every record of an ORC or Avro file (delete files).

    Raises:
        DataFileError: as :func:`open_format_file`, or the file fails to decode.
    """
    opened = open_format_file(files, path, file_format, what)
    try:
        return opened.read_all()
    except DataFileError:
        raise
    except Exception as exc:
        raise DataFileError(f"failed reading {what}: {type(exc).__name__}: {exc}") from exc
    finally:
        opened.close()
