"""Reading ORC and Avro data files with the guarantees of the Parquet path. Runs on a worker.

:meth:`icefloe.reader.split_reader.SplitReader.read_progress` hands every non-Parquet
split to :func:`read_progress` here. A format module opens the file as a
:class:`~icefloe.reader.units.FormatFile` (its own Arrow schema with field ids, its
read units, raw batches of the selected top-level columns); from the raw batches on,
everything is the Parquet path's: the projection plan by Iceberg field id (renames,
added and promoted columns; name mapping for files without ids), identity-partition
values, position deletes, deletion vectors and equality deletes, the residual filter
and the metadata columns (:meth:`SplitReader._process`). A split owns the units
(ORC stripes, Avro blocks) whose first byte lies in its range, and resumes at a record
offset by skipping whole units without decoding them.

Libraries: ORC through PyArrow (:mod:`icefloe.reader.orc`); Avro through icefloe's
own block decoder (:mod:`icefloe.reader.avro`), chosen over PyIceberg's Avro reader and
fastavro by measured throughput (see that module).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from icefloe.errors import DataFileError
from icefloe.reader.files import FileOpener
from icefloe.reader.units import FormatFile, select_units
from icefloe.splits.split import FileSplit

if TYPE_CHECKING:
    from icefloe.reader.split_reader import SplitReader

FORMATS = ("PARQUET", "ORC", "AVRO")
"""Data file formats icefloe reads (Iceberg's three)."""


def open_file(files: FileOpener, path: str, file_format: str, what: str) -> FormatFile:
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
        DataFileError: as :func:`open_file`, or the file fails to decode.
    """
    opened = open_file(files, path, file_format, what)
    try:
        return opened.read_all()
    except DataFileError:
        raise
    except Exception as exc:
        raise DataFileError(f"failed reading {what}: {type(exc).__name__}: {exc}") from exc
    finally:
        opened.close()


def read_progress(reader: SplitReader, split: FileSplit
                  ) -> Iterator[tuple[pa.RecordBatch, int]]:
    """``(batch, consumed)`` of an ORC or Avro split, with the contract of
    :meth:`SplitReader.read_progress`.

    Raises:
        DataFileError: the file is missing, unreadable, of an unknown format, or fails to
            decode (naming the file and snapshot).
    """
    opened = open_file(reader.files, split.file_path, split.file_format,
                       f"data file {split.file_path} (snapshot {split.snapshot_id})")
    try:
        yield from _read_open(reader, split, opened)
    except DataFileError:
        raise
    except Exception as exc:
        from icefloe.reader.split_reader import read_failed

        raise read_failed(split, exc) from exc
    finally:
        opened.close()


def _read_open(reader: SplitReader, split: FileSplit, opened: FormatFile
               ) -> Iterator[tuple[pa.RecordBatch, int]]:
    selection = select_units(opened.units, split)
    if not selection.units:
        return
    yield from reader.project_file(
        split, opened.schema_arrow,
        lambda plan: opened.iter_batches(reader.context.batch_size, selection.units,
                                         None if plan.all_columns else plan.columns),
        selection.first_position, selection.skip)
