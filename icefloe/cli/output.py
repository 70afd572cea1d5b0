"""``read --to``: write into a temporary sibling, move into place only on success.

Runs in the user's process (the driver for Spark and Ray, whose workers write into the
temporary directory). A failed or interrupted command leaves the target as it was:
``--mode error`` (default) refuses an existing target, ``overwrite`` replaces it, ``append``
adds this run's files to an existing directory. The same rules hold on every engine.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from icefloe.errors import OutputError

MODES = ("error", "overwrite", "append")


@dataclass
class Staged:
    """Where this run writes (``path``) and whether the target is a single file."""

    path: Path
    target: Path
    single_file: bool
    files: int = 0
    rows: int = 0


def is_file_target(to: str, engine: str) -> bool:
    """The local engine writes one file to ``*.parquet``; anything else is a directory."""
    return engine == "local" and to.endswith(".parquet") and not Path(to).is_dir()


def check_target(to: str, mode: str, single_file: bool) -> Path:
    """Check ``to`` against ``mode`` before anything runs; returns it absolute.

    Raises:
        OutputError: the target exists under ``--mode error``, appending to a file, or the
            parent directory is missing / not writable.
    """
    if "://" in to:
        raise OutputError(f"--to {to}: icefloe writes local paths only; give a directory or "
                          "a .parquet file on this machine")
    target = Path(to).absolute()
    parent = target.parent
    if not parent.is_dir():
        raise OutputError(f"--to {to}: directory {parent} does not exist; create it first")
    if not os.access(parent, os.W_OK):
        raise OutputError(f"--to {to}: directory {parent} is not writable")
    if single_file and mode == "append":
        raise OutputError(f"--to {to}: --mode append applies to directories; give a "
                          "directory or --mode overwrite")
    if target.exists():
        if mode == "error":
            raise OutputError(f"--to {to} already exists; pass --mode overwrite to replace "
                              "it or --mode append (directories) to add to it")
        if single_file != target.is_file():
            kind = "a file" if target.is_file() else "a directory"
            raise OutputError(f"--to {to} is {kind}; give another path or remove it")
    return target


@contextmanager
def staged(to: str, mode: str, single_file: bool) -> Iterator[Staged]:
    """Yield a temporary path next to ``to`` (not created: the writer creates it); on
    success move it into place per ``mode``.

    On an exception (including Ctrl-C) the temporary path is removed and ``to`` is left
    untouched.
    """
    target = check_target(to, mode, single_file)
    temp = target.parent / f".{target.name}.icefloe-{uuid.uuid4().hex[:8]}.tmp"
    stage = Staged(path=temp, target=target, single_file=single_file)
    try:
        yield stage
        _commit(temp, target, mode, single_file)
    except BaseException:
        if temp.is_dir():
            shutil.rmtree(temp, ignore_errors=True)
        else:
            temp.unlink(missing_ok=True)
        raise


def _commit(temp: Path, target: Path, mode: str, single_file: bool) -> None:
    if single_file or not target.exists():
        os.replace(temp, target) if single_file else _replace_dir(temp, target)
        return
    if mode == "overwrite":
        _replace_dir(temp, target)
        return
    for item in sorted(temp.iterdir()):  # append: this run's files join the directory
        if item.name.startswith(("_", ".")):
            continue
        dest = target / item.name
        if dest.exists():
            dest = target / f"{item.stem}-{uuid.uuid4().hex[:8]}{item.suffix}"
        os.replace(item, dest)
    shutil.rmtree(temp, ignore_errors=True)


def _replace_dir(temp: Path, target: Path) -> None:
    old = None
    if target.exists():
        old = target.parent / f".{target.name}.icefloe-old-{uuid.uuid4().hex[:8]}"
        os.replace(target, old)
    os.replace(temp, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def parquet_counts(directory: Path) -> tuple[int, int]:
    """(rows, files) of the Parquet files directly under ``directory`` (footers only)."""
    import pyarrow.parquet as pq

    files = sorted(p for p in directory.rglob("*.parquet") if not p.name.startswith((".", "_")))
    return sum(pq.ParquetFile(f).metadata.num_rows for f in files), len(files)
