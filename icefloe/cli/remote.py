"""Paths of ``icefloe read|stream --engine spark --remote sc://...``: which host opens them.

Runs in the user's process, a Spark Connect client with no JVM. Everything a Connect
query writes is written by the server's hosts: ``--to`` and a ``parquet:DIR`` sink by
its executors (the file sink's log by its driver), ``--checkpoint`` (Spark's
``checkpointLocation``) by its driver. So:

- a relative local path is made absolute here, as this machine's working directory
  means it (the server's working directory is somewhere else);
- ``--to`` and a ``parquet:DIR`` sink must be a directory the server's hosts write and
  this machine sees (the same machine, or a filesystem shared at the same path):
  :func:`probe_shared` writes one row there through the server's executors and fails
  with an :class:`~icefloe.errors.OutputError` naming the path and the fix when the
  server cannot write it or this machine does not see what it wrote;
- ``--checkpoint`` needs only the server's driver: a path on the driver host's own disk
  is fine (it survives a restart of the server's processes); a location the server
  cannot create fails with a :class:`~icefloe.errors.CheckpointError`
  (:func:`checkpoint_failure`).
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

from icefloe import errors
from icefloe.errors import CheckpointError, OutputError

SHARE_FIX = ("give a directory that the server's hosts write and this machine sees: the "
             "same machine, or a filesystem mounted at the same path on this machine and "
             "on every host of the Spark cluster")


def absolute(location: str) -> str:
    """``location`` as the server must get it: a local path made absolute against this
    machine's working directory; a URI (``scheme://...``) unchanged."""
    if "://" in location:
        return location
    return str(Path(location).absolute())


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def probe_shared(spark: Any, option: str, path: Path, remote: str) -> None:
    """Check that the Connect server's executors write ``path`` where this machine sees it
    (``option``: how the user named it, ``--to`` or ``--sink parquet:``).

    One row is written through the server (``spark.range(1)``, one executor task) to
    ``path/_icefloe_probe-<random>``; this machine then looks for it and removes it.

    Raises:
        OutputError: the server could not write there (its first error line quoted), or
            it wrote on disks this machine does not see (the probe then stays on the
            server's host; the message names it).
    """
    where = f"{option}{path}" if option.endswith(":") else f"{option} {path}"
    probe = path / f"_icefloe_probe-{uuid.uuid4().hex[:8]}"
    try:
        spark.range(1).write.mode("error").parquet(str(probe))
    except Exception as exc:  # Spark's own error, in the server's words
        raise OutputError(f"{where}: the Spark Connect server {remote} cannot write "
                          f"there ({_first_line(exc)}); {SHARE_FIX}") from exc
    visible = probe.is_dir() and any(probe.glob("*.parquet"))
    shutil.rmtree(probe, ignore_errors=True)
    if not visible:
        raise OutputError(f"{where}: the Spark Connect server {remote} wrote there on "
                          f"its own hosts' disks, which this machine does not see (remove "
                          f"{probe} on those hosts); {SHARE_FIX}")


def checkpoint_failure(exc: BaseException, checkpoint: str, remote: str) -> CheckpointError | None:
    """A :class:`CheckpointError` for a query that failed because the server could not
    create or write ``checkpoint``; None when ``exc`` is about something else (an icefloe
    error the server wrapped keeps its own type: :mod:`icefloe.cli.failures`)."""
    text = str(exc)
    if any(name in text for name in errors.__all__):
        return None
    if checkpoint not in text and "checkpoint" not in text.lower():
        return None
    if not any(word in text for word in ("mkdir", "Mkdirs", "ermission", "not a directory",
                                         "Not a directory", "FileAlreadyExists",
                                         "ParentNotDirectory", "Read-only")):
        return None
    return CheckpointError(f"--checkpoint {checkpoint}: the Spark Connect server {remote} "
                           f"cannot create or write it ({_first_line(exc)}); give a directory "
                           "the server's driver host can write (its own disk is enough: only "
                           "the server's driver opens the checkpoint)")
