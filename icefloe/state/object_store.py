"""Checkpoints on an object store (S3 and compatible), where there is no rename.

A local checkpoint directory is replaced by rename (:mod:`icefloe.state.store`). An
object store has no rename (a "move" is copy + delete, two requests), but it has two
guarantees icefloe builds on instead: a PUT is atomic (readers see the whole new object
or nothing) and, on every current store (AWS S3 since 2020, GCS, Azure, MinIO,
SeaweedFS), reads and listings are strongly consistent after a write.

Layout under the checkpoint prefix: immutable, numbered generations ::

    s3://bucket/ckpt/checkpoint.00000000000000000041.bin
    s3://bucket/ckpt/checkpoint.00000000000000000042.bin   <- newest

Write (one writer per location, the enumerator):

1. encode ``ckpt`` and decode it back (never install bytes that do not read back);
2. PUT it as generation ``newest + 1`` (a new name: nothing existing is touched);
3. GET it back and check it is byte-identical (else delete it; the previous stays);
4. delete the generations older than the previous good one (best effort; the ones this
   writer listed at its start or wrote since, so a write costs no listing).

Read: list the prefix, then try the generations newest first and return the first one
that decodes (its CRC32 checks); a skipped newer one is logged as a WARNING. As on a
local disk, a newest checkpoint of a newer format version is raised, never skipped.

At every instant the newest good checkpoint is on the store: before step 2 completes
the previous generation is the newest, after it the new one; step 4 removes only
generations older than the one before the new one, so the previous good checkpoint
always survives a write. A crash mid-write leaves at most a generation that does not
decode (skipped by reads, deleted by the next write's clean-up). There is no pointer
object: the listing is the pointer, so there is no second write to get out of step.

Credentials (``s3.access-key-id`` ...) configure the filesystem only: they are never
in a checkpoint, a message, a log line or a ``repr``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Callable, Mapping
from typing import TypeVar

from pyarrow import fs as pafs

from icefloe.errors import CheckpointCorruptError, CheckpointError, CheckpointVersionError
from icefloe.retry import NO_RETRY, RetryPolicy, call_with_retry, is_permanent_os_error
from icefloe.state.checkpoint import Checkpoint, decode, encode

log = logging.getLogger(__name__)
T = TypeVar("T")

_GENERATION = re.compile(r"^checkpoint\.(\d{20})\.bin$")
_S3_SCHEMES = ("s3", "s3a", "s3n")


def generation_name(generation: int) -> str:
    """The object name of ``generation`` (zero-padded: names sort as numbers do)."""
    return f"checkpoint.{generation:020d}.bin"


def s3_filesystem(properties: Mapping[str, str]) -> pafs.S3FileSystem:
    """A PyArrow ``S3FileSystem`` configured from PyIceberg's FileIO property names.

    ``s3.endpoint``, ``s3.access-key-id``, ``s3.secret-access-key``, ``s3.session-token``,
    ``s3.region``, ``s3.force-virtual-addressing``, ``s3.connect-timeout``,
    ``s3.request-timeout`` (seconds), ``s3.proxy-uri``, ``s3.role-arn``,
    ``s3.role-session-name``, ``s3.anonymous`` (``client.*`` names as fallbacks, as in
    PyIceberg). Whatever is not given comes from the AWS defaults (``AWS_*`` environment
    variables, ``~/.aws``, instance metadata), as for PyIceberg's own FileIO; without
    ``s3.endpoint``, ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL`` names the endpoint.
    """
    kwargs: dict[str, object] = {}
    endpoint = (properties.get("s3.endpoint") or os.environ.get("AWS_ENDPOINT_URL_S3")
                or os.environ.get("AWS_ENDPOINT_URL"))
    if endpoint:
        scheme, sep, rest = endpoint.partition("://")
        if sep:
            kwargs["scheme"] = scheme
            endpoint = rest
        kwargs["endpoint_override"] = endpoint.rstrip("/")
    for prop, arg in (("s3.access-key-id", "access_key"),
                      ("s3.secret-access-key", "secret_key"),
                      ("s3.session-token", "session_token"),
                      ("s3.region", "region"),
                      ("s3.proxy-uri", "proxy_options"),
                      ("s3.role-arn", "role_arn"),
                      ("s3.role-session-name", "session_name")):
        # PyIceberg's unified ``client.*`` names are the fallback, as in its FileIO
        value = properties.get(prop) or properties.get(prop.replace("s3.", "client.", 1))
        if value:
            kwargs[arg] = value
    for prop, arg in (("s3.connect-timeout", "connect_timeout"),
                      ("s3.request-timeout", "request_timeout")):
        if properties.get(prop):
            kwargs[arg] = float(properties[prop])
    for prop, arg in (("s3.force-virtual-addressing", "force_virtual_addressing"),
                      ("s3.anonymous", "anonymous")):
        if properties.get(prop):
            kwargs[arg] = properties[prop].strip().lower() in ("true", "1", "yes")
    return pafs.S3FileSystem(**kwargs)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


class ObjectCheckpointStore:
    """Checkpoints as numbered immutable objects under a prefix (module docstring).

    Args:
        uri: the checkpoint location, e.g. ``s3://bucket/path/ckpt`` (used in messages).
        filesystem: a PyArrow filesystem that reaches it.
        path: ``bucket/path/ckpt``, the location on ``filesystem``.
        retry: how transient store errors (network, throttling) are retried; permanent
            ones (access denied, no such bucket) are raised at once.

    Raises (every method): :class:`CheckpointError` naming the location, one line, when
    the store refuses or fails after the retries (the cause is chained).
    """

    def __init__(self, uri: str, filesystem: pafs.FileSystem, path: str,
                 retry: RetryPolicy = NO_RETRY) -> None:
        self.uri = uri.rstrip("/")
        self.fs = filesystem
        self.root = path.strip("/")
        self.retry = retry
        self._newest: int | None = None  # newest generation this writer knows
        self._good: int | None = None  # newest generation known to decode
        self._checked = False
        self._present: set[int] = set()  # generations listed or written, not yet deleted

    def __repr__(self) -> str:
        return f"ObjectCheckpointStore({self.uri!r})"

    def describe(self) -> str:
        return f"checkpoint location {self.uri}"

    def _where(self, name: str) -> str:
        return f"{self.uri}/{name}"

    # -- primitives (retried, translated) ------------------------------------------------

    def _call(self, fn: Callable[[], T], doing: str) -> T:
        try:
            return call_with_retry(fn, self.retry, f"{doing} ({self.describe()})")
        except OSError as exc:
            hint = ("check the checkpoint location and its credentials (checkpoint.s3.* "
                    "options or the catalog's s3.* properties)"
                    if is_permanent_os_error(exc) else
                    f"the store did not answer after {self.retry.max_attempts} attempt(s); "
                    "check that it is reachable, or raise maxAttempts / retryBackoffMs")
            raise CheckpointError(
                f"cannot {doing}: {type(exc).__name__}: {_one_line(exc)}; {hint}") from exc

    def _generations(self) -> list[int]:
        """The generations under the prefix, ascending."""
        def listing() -> list[int]:
            selector = pafs.FileSelector(self.root, allow_not_found=True, recursive=False)
            found = []
            for info in self.fs.get_file_info(selector):
                match = _GENERATION.match(info.base_name)
                if match and info.type == pafs.FileType.File:
                    found.append(int(match.group(1)))
            return sorted(found)

        found = self._call(listing, f"list {self.uri}")
        if not found:
            self._require_bucket()
        return found

    def _require_bucket(self) -> None:
        """Raise :class:`CheckpointError` when the bucket does not exist (an empty
        listing cannot tell a new location from a missing bucket)."""
        bucket = self.root.split("/", 1)[0]
        info = self._call(lambda: self.fs.get_file_info(bucket), f"look up bucket {bucket}")
        if info.type == pafs.FileType.NotFound:
            raise CheckpointError(
                f"cannot use {self.describe()}: no such bucket {bucket!r}; create it or "
                "choose another checkpoint location")

    def _get(self, generation: int) -> bytes | None:
        name = generation_name(generation)

        def get() -> bytes | None:
            try:
                with self.fs.open_input_stream(f"{self.root}/{name}") as stream:
                    return bytes(stream.read())
            except FileNotFoundError:
                return None

        return self._call(get, f"read {self._where(name)}")

    def _put(self, generation: int, data: bytes) -> None:
        name = generation_name(generation)

        def put() -> None:
            with self.fs.open_output_stream(f"{self.root}/{name}") as out:
                out.write(data)

        self._call(put, f"write {self._where(name)}")

    def _delete(self, generation: int) -> None:
        """Remove a generation (best effort: a failure leaves an extra old object)."""
        with contextlib.suppress(OSError, CheckpointError):
            self.fs.delete_file(f"{self.root}/{generation_name(generation)}")

    # -- the algorithm -------------------------------------------------------------------

    def read(self) -> Checkpoint | None:
        """The newest generation that decodes; None if there is none at all.

        Raises:
            CheckpointVersionError: the newest generation was written by a newer icefloe.
            CheckpointCorruptError: generations exist but none decodes.
            CheckpointError: the store refused or failed (names the location).
        """
        generations = self._generations()
        self._newest = generations[-1] if generations else 0
        self._checked = True
        self._present = set(generations)
        problems: list[str] = []
        for generation in reversed(generations):
            data = self._get(generation)
            where = self._where(generation_name(generation))
            if data is None:
                problems.append(f"{where} vanished")
                continue
            try:
                ckpt = decode(data)
            except CheckpointVersionError as exc:
                if not problems:
                    raise CheckpointVersionError(f"{where}: {exc}") from exc
                problems.append(f"{where} is of a newer version")
                continue
            except CheckpointCorruptError as exc:
                problems.append(f"{where} is unreadable ({exc})")
                continue
            if problems:
                log.warning("%s; using the previous checkpoint %s (at %s)",
                            "; ".join(problems), where, ckpt.position.describe())
            self._good = generation
            return ckpt
        if not generations:
            return None
        raise CheckpointCorruptError(
            f"no usable checkpoint: {'; '.join(problems)}; delete {self.describe()} to "
            "start over")

    def write(self, ckpt: Checkpoint) -> None:
        """Install ``ckpt`` as a new generation, keeping the previous good one.

        Raises:
            CheckpointError: the bytes would not read back as ``ckpt``, or the store
                refused or failed (the previous good checkpoint is still there).
            CheckpointVersionError: the newest checkpoint is of a newer format version.
        """
        data = encode(ckpt)
        if decode(data) != ckpt:
            raise CheckpointError(
                f"refusing to write a checkpoint that does not read back as written: {ckpt!r}")
        if not self._checked:
            self._check_newest()
        generation = (self._newest or 0) + 1
        self._put(generation, data)
        self._newest = generation
        self._present.add(generation)
        if self._get(generation) != data:
            self._delete(generation)
            raise CheckpointCorruptError(
                f"checkpoint {self._where(generation_name(generation))} does not read back "
                "as written; the previous checkpoint is kept")
        previous, self._good = self._good, generation
        if previous is not None:  # no listing: one writer knows what it listed and wrote
            for old in sorted(g for g in self._present if g < previous):
                self._delete(old)
                self._present.discard(old)
        log.debug("wrote checkpoint %s at %s", self._where(generation_name(generation)),
                  ckpt.position.describe())

    def _check_newest(self) -> None:
        """Learn the newest generation before the first write; refuse a newer version."""
        generations = self._generations()
        self._newest = generations[-1] if generations else 0
        self._checked = True
        self._present = set(generations)
        for generation in reversed(generations):
            data = self._get(generation)
            if data is None:
                continue
            try:
                decode(data)
            except CheckpointVersionError as exc:
                raise CheckpointVersionError(
                    f"refusing to write over {self._where(generation_name(generation))}: "
                    f"{exc}") from exc
            except CheckpointCorruptError:
                continue
            self._good = generation
            return


def open_object_store(uri: str, scheme: str, properties: Mapping[str, str],
                      retry: RetryPolicy) -> ObjectCheckpointStore | None:
    """An :class:`ObjectCheckpointStore` for an ``s3://`` (``s3a``, ``s3n``) URI, else None."""
    if scheme not in _S3_SCHEMES:
        return None
    path = uri.split("://", 1)[1].strip("/")
    if not path:
        raise CheckpointError(f"checkpoint location {uri!r} names no bucket; give "
                              "s3://bucket/path")
    try:
        filesystem = s3_filesystem(properties)
    except (ValueError, TypeError, OSError) as exc:
        raise CheckpointError(
            f"cannot configure S3 for checkpoint location {uri}: {type(exc).__name__}: "
            f"{_one_line(exc)}; check the checkpoint.s3.* options") from exc
    return ObjectCheckpointStore(uri, filesystem, path, retry)
