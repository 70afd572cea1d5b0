"""Checkpoint stores: where checkpoints live, written so a crash never loses the last good one.

S3 locations use numbered immutable objects instead of renames
(:mod:`icefloe.state.object_store`). Other stores are a directory (local, or any fsspec
filesystem) holding
``checkpoint.bin`` (the newest) and ``checkpoint.prev.bin`` (the one before it).
There is ONE writer per location (the enumerator); readers may be anywhere.

Write sequence (the crash-safety argument, for :meth:`write` on both stores):

1. encode, and decode the bytes back (never install bytes that do not read back);
2. write them to a temp file in the same directory, flush + fsync it, read it back
   and decode it again;
3. only if the current ``checkpoint.bin`` decodes: rename it to ``checkpoint.prev.bin``
   (a corrupt current one is NOT rotated, so a good prev survives); fsync the directory;
4. rename the temp file to ``checkpoint.bin``; fsync the directory.

At every instant at least one good checkpoint is on disk: before 3 the old current
(or the prev, if the current was corrupt); between 3 and 4 the prev (current is
missing, :meth:`read` falls back to it with a warning); after 4 the new current.
A crash before 4 loses only the write in progress; the temp file is ignored and
cleaned up by the next writer.

Newer-version checkpoints: :meth:`read` raises :class:`CheckpointVersionError` when
the newest file was written by a newer icefloe instead of falling back to prev, and
:meth:`write` refuses to replace such a file. Falling back would silently re-read
data the newer icefloe had already committed and, on the next write, rotate its
checkpoint away for good.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable
from urllib.parse import unquote, urlparse

import fsspec

from icefloe.errors import CheckpointCorruptError, CheckpointError, CheckpointVersionError
from icefloe.retry import NO_RETRY, RetryPolicy
from icefloe.state.checkpoint import Checkpoint, decode, encode

log = logging.getLogger(__name__)

CURRENT_NAME = "checkpoint.bin"
PREV_NAME = "checkpoint.prev.bin"
_TEMP_PREFIX = ".checkpoint."
_TEMP_SUFFIX = ".tmp"


@runtime_checkable
class CheckpointStore(Protocol):
    """Reads and writes the checkpoints of one read (one table, one ref)."""

    def read(self) -> Checkpoint | None:
        """The newest good checkpoint, or None if none was ever written.

        Raises:
            CheckpointCorruptError: checkpoints exist but none decodes.
            CheckpointVersionError: the newest was written by a newer icefloe.
        """
        ...

    def write(self, ckpt: Checkpoint) -> None:
        """Install ``ckpt`` as the newest checkpoint, keeping the previous good one."""
        ...

    def describe(self) -> str:
        """Where the checkpoints live, for messages."""
        ...


class _RotatingStore:
    """The read / write algorithm of the module docstring over four file primitives.

    Attributes:
        last_size: bytes of the last checkpoint :meth:`write` encoded (0: none yet).
    """

    last_size = 0

    def _load(self, name: str) -> bytes | None:
        """Bytes of file ``name`` in the store, None if it does not exist."""
        raise NotImplementedError

    def _stage(self, data: bytes) -> str:
        """Durably write ``data`` to a new temp file; return its name."""
        raise NotImplementedError

    def _rename(self, src: str, dst: str) -> None:
        """Rename ``src`` over ``dst`` (atomically where the filesystem can), durably."""
        raise NotImplementedError

    def _discard(self, name: str) -> None:
        """Remove ``name`` if it exists (best effort)."""
        raise NotImplementedError

    def _path(self, name: str) -> str:
        """Printable location of ``name``."""
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    # -- shared algorithm ----------------------------------------------------------------

    def read(self) -> Checkpoint | None:
        """See :meth:`CheckpointStore.read`; falls back to prev (WARNING) if the newest is bad."""
        current = self._load(CURRENT_NAME)
        problem: str
        if current is not None:
            try:
                return decode(current)
            except CheckpointVersionError as exc:
                raise CheckpointVersionError(f"{self._path(CURRENT_NAME)}: {exc}") from exc
            except CheckpointCorruptError as exc:
                problem = f"{self._path(CURRENT_NAME)} is unreadable ({exc})"
        else:
            problem = f"{self._path(CURRENT_NAME)} is missing (a write was interrupted)"
        prev = self._load(PREV_NAME)
        if prev is None:
            if current is None:
                return None
            raise CheckpointCorruptError(
                f"no usable checkpoint: {problem}, and there is no previous checkpoint "
                f"{self._path(PREV_NAME)}; delete {self.describe()} to start over")
        try:
            ckpt = decode(prev)
        except CheckpointVersionError as exc:
            raise CheckpointVersionError(f"{self._path(PREV_NAME)}: {exc}") from exc
        except CheckpointCorruptError as exc:
            raise CheckpointCorruptError(
                f"no usable checkpoint: {problem}, and {self._path(PREV_NAME)} is unreadable "
                f"too ({exc}); delete {self.describe()} to start over") from exc
        log.warning("%s; using the previous checkpoint %s (at %s)", problem,
                    self._path(PREV_NAME), ckpt.position.describe())
        return ckpt

    def _current_state(self) -> str:
        """``missing``, ``good`` or ``corrupt``; raises for a newer-version checkpoint."""
        data = self._load(CURRENT_NAME)
        if data is None:
            return "missing"
        try:
            decode(data)
        except CheckpointVersionError as exc:
            raise CheckpointVersionError(
                f"refusing to overwrite {self._path(CURRENT_NAME)}: {exc}") from exc
        except CheckpointCorruptError:
            return "corrupt"
        return "good"

    def write(self, ckpt: Checkpoint) -> None:
        """See :meth:`CheckpointStore.write` and the module docstring for the sequence.

        Raises:
            CheckpointError: the bytes would not read back as ``ckpt`` (nothing installed).
            CheckpointVersionError: the current checkpoint is of a newer format version.
            OSError: the filesystem failed (the previous good checkpoint is still there).
        """
        data = encode(ckpt)
        self.last_size = len(data)
        if decode(data) != ckpt:
            raise CheckpointError(
                f"refusing to write a checkpoint that does not read back as written: {ckpt!r}")
        state = self._current_state()
        temp = self._stage(data)
        try:
            staged = self._load(temp)
            if staged != data:
                raise CheckpointCorruptError(
                    f"temp checkpoint {self._path(temp)} does not read back as written; "
                    "the previous checkpoint is kept")
            if state == "good":
                self._rename(CURRENT_NAME, PREV_NAME)
            elif state == "corrupt":
                log.warning("replacing unreadable %s; keeping %s as the previous checkpoint",
                            self._path(CURRENT_NAME), self._path(PREV_NAME))
            self._rename(temp, CURRENT_NAME)
        except BaseException:
            self._discard(temp)
            raise
        log.debug("wrote checkpoint %s at %s", self._path(CURRENT_NAME),
                  ckpt.position.describe())


class LocalCheckpointStore(_RotatingStore):
    """Checkpoints in a local directory (created on the first write).

    Uses ``os.replace`` for both renames and fsyncs the file and the directory.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(os.path.expanduser(os.fspath(directory))).absolute()
        self._swept = False

    def describe(self) -> str:
        return f"local checkpoint directory {self.directory}"

    def _path(self, name: str) -> str:
        return str(self.directory / name)

    def _load(self, name: str) -> bytes | None:
        try:
            return (self.directory / name).read_bytes()
        except FileNotFoundError:
            return None

    def _fsync_directory(self) -> None:
        try:
            fd = os.open(self.directory, os.O_RDONLY)
        except OSError:  # pragma: no cover - platforms without directory fds
            return
        try:
            os.fsync(fd)
        except OSError:  # pragma: no cover
            pass
        finally:
            os.close(fd)

    def _sweep_temps(self) -> None:
        """Remove temp files left by a crashed writer (once per store; one writer per dir)."""
        if self._swept:
            return
        self._swept = True
        for stale in self.directory.glob(f"{_TEMP_PREFIX}*{_TEMP_SUFFIX}"):
            with contextlib.suppress(OSError):
                stale.unlink()

    def _stage(self, data: bytes) -> str:
        name = f"{_TEMP_PREFIX}{os.getpid()}.{uuid.uuid4().hex[:12]}{_TEMP_SUFFIX}"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._sweep_temps()
            fd = os.open(self.directory / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except OSError as exc:
            if exc.errno in _NOT_WRITABLE:  # a user's mistake, not a transient fault
                raise CheckpointError(
                    f"checkpoint directory {self.directory} is not writable "
                    f"({exc.strerror}); give a directory this process can write") from exc
            raise
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        except BaseException:
            self._discard(name)
            raise
        return name

    def _rename(self, src: str, dst: str) -> None:
        os.replace(self.directory / src, self.directory / dst)
        self._fsync_directory()

    def _discard(self, name: str) -> None:
        with contextlib.suppress(OSError):
            (self.directory / name).unlink()


_NOT_WRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.EEXIST)


class FsspecCheckpointStore(_RotatingStore):
    """Checkpoints under a URI of any fsspec filesystem (``s3://``, ``gs://``, ``memory://``...).

    Writes the temp object then ``fs.mv`` s it into place. On object stores a move is
    copy + delete, so each step still leaves a complete object under one of the two
    names; the order of the module docstring keeps a good checkpoint at every instant.

    Args:
        uri: the checkpoint "directory" URI.
        storage_options: passed to ``fsspec.core.url_to_fs``.
    """

    def __init__(self, uri: str, **storage_options: Any) -> None:
        self.uri = uri.rstrip("/")
        self.fs, root = fsspec.core.url_to_fs(uri, **storage_options)
        self.root = root.rstrip("/")

    def describe(self) -> str:
        return f"checkpoint location {self.uri}"

    def _full(self, name: str) -> str:
        return f"{self.root}/{name}"

    def _path(self, name: str) -> str:
        return f"{self.uri}/{name}"

    def _load(self, name: str) -> bytes | None:
        self.fs.invalidate_cache(self.root)
        try:
            return bytes(self.fs.cat_file(self._full(name)))
        except FileNotFoundError:
            return None

    def _stage(self, data: bytes) -> str:
        self.fs.makedirs(self.root, exist_ok=True)
        name = f"{_TEMP_PREFIX}{uuid.uuid4().hex[:12]}{_TEMP_SUFFIX}"
        self.fs.pipe_file(self._full(name), data)
        return name

    def _rename(self, src: str, dst: str) -> None:
        self.fs.mv(self._full(src), self._full(dst))

    def _discard(self, name: str) -> None:
        with contextlib.suppress(OSError):
            self.fs.rm_file(self._full(name))


def open_store(location: str | os.PathLike[str],
               properties: Mapping[str, str] | None = None,
               retry: RetryPolicy = NO_RETRY) -> CheckpointStore:
    """The store for ``location``.

    - a plain path or ``file://`` URI: a :class:`LocalCheckpointStore` (rename-based);
    - ``s3://`` (``s3a://``, ``s3n://``): an
      :class:`~icefloe.state.object_store.ObjectCheckpointStore` on PyArrow's own
      ``S3FileSystem`` (nothing to install), configured from ``properties``;
    - any other URI: an :class:`FsspecCheckpointStore` (needs that fsspec backend).

    Args:
        location: checkpoint directory or URI.
        properties: FileIO properties in PyIceberg's names (``s3.endpoint``,
            ``s3.access-key-id``, ``s3.secret-access-key``, ``s3.region``...): the
            catalog's, overridden by ``checkpoint.<prop>`` options. Never logged.
        retry: retries of transient object-store faults.

    Raises:
        CheckpointError: a location that names no bucket or a remote ``file://`` host,
            or S3 properties PyArrow rejects.
    """
    text = os.fspath(location)
    if "://" not in text:
        return LocalCheckpointStore(text)
    parsed = urlparse(text)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise CheckpointError(f"file URI {text!r} names a remote host; use a local path")
        return LocalCheckpointStore(unquote(parsed.path))
    from icefloe.state.object_store import open_object_store

    store = open_object_store(text, parsed.scheme, properties or {}, retry)
    if store is not None:
        return store
    return FsspecCheckpointStore(text)
