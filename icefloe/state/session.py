"""CheckpointSession: the checkpoint side of one continuous read, shared by its engines.

Runs where the enumerator runs (the local stream's process, the Ray enumerator actor)
and owns the checkpoint store of the read:

- :meth:`CheckpointSession.restore`: read the store's checkpoint and check that it may
  resume this read (:func:`~icefloe.state.validate_for`: same table, incarnation, ref
  and planning options), else resolve the starting position with the enumerator. A
  table re-created since the checkpoint fails unless ``onLineageBreak`` allows a fresh
  start.
- :meth:`CheckpointSession.write`: when acks arrived since the last write
  (:meth:`CheckpointSession.mark_dirty`), build a :class:`~icefloe.state.Checkpoint` from
  one consistent cut of an :class:`~icefloe.state.AckTracker` and write it to the store.

It holds no lock: the caller serializes ``mark_dirty`` / ``write`` with its acks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from icefloe.errors import TableReplacedError
from icefloe.retry import RetryPolicy
from icefloe.state.acks import AckTracker
from icefloe.state.checkpoint import Checkpoint, plan_fingerprint, validate_for
from icefloe.state.position import Position
from icefloe.state.store import CheckpointStore, open_store

if TYPE_CHECKING:
    from icefloe.catalog.handle import TableHandle
    from icefloe.options import SourceOptions

log = logging.getLogger(__name__)

NessieHashes = Callable[[Position], tuple[tuple[int, str], ...]]
"""Given the committed position, the ``(snapshot id, commit hash)`` pairs to keep."""


_STORE_PREFIXES = ("s3.", "client.")


def store_properties(handle: TableHandle, options: SourceOptions) -> dict[str, str]:
    """FileIO properties for the checkpoint store: the catalog's ``s3.*`` / ``client.*``
    properties (then the table FileIO's, which a REST catalog may extend), overridden by
    the ``checkpoint.<prop>`` options. They may hold credentials: never log them."""
    merged: dict[str, str] = {}
    for props in (getattr(handle.catalog, "properties", None) or {},
                  getattr(handle.io, "properties", None) or {}):
        merged.update({k: str(v) for k, v in props.items() if k.startswith(_STORE_PREFIXES)})
    merged.update(options.checkpoint_props())
    return merged


class StartResolver(Protocol):
    """What :meth:`CheckpointSession.restore` needs of the continuous enumerator."""

    identity: str

    def initial_position(self) -> Position: ...


@dataclass(frozen=True, slots=True)
class Start:
    """Where a continuous read starts.

    Attributes:
        position: the committed position (exclusive) to enumerate from.
        acked_beyond: restored ids of fully acknowledged splits after ``position``.
        offsets: restored ``(split id, acknowledged records)`` after ``position``.
        restored: True if a checkpoint was restored; False if ``position`` was resolved
            now (nothing durable yet: write a checkpoint so a restart does not resolve
            ``latest`` or a timestamp anew).
        found: True if the store held a checkpoint, restored or not (a table re-created
            since the checkpoint, with ``onLineageBreak`` allowing a fresh start).
        schema: the restored stream schema ``(schema id, since)`` (None: fresh, or a
            checkpoint written before icefloe tracked schemas).
        watermark_ms: the restored event-time watermark (None: fresh, none yet, or a
            checkpoint written before icefloe had watermarks).
    """

    position: Position
    acked_beyond: tuple[str, ...] = ()
    offsets: tuple[tuple[str, int], ...] = ()
    restored: bool = False
    found: bool = False
    schema: tuple[int, int] | None = None
    watermark_ms: int | None = None

    def tracker(self) -> AckTracker:
        """A new :class:`AckTracker` starting here."""
        return AckTracker(self.position, self.acked_beyond, self.offsets)


class CheckpointSession:
    """Restore-or-start and checkpoint writes of one continuous read (module docstring).

    Args:
        handle: the table read (its identifier and current identity).
        options: the continuous-mode options (ref, planning options, ``onLineageBreak``).
        location: checkpoint directory or URI (``s3://`` uses :func:`store_properties`);
            None keeps progress in memory
            (``store`` is None, :meth:`restore` resolves the start, :meth:`write` is a no-op).

    Attributes:
        store: the checkpoint store (None without a location). Setting it to None
            stops further writes.
        fingerprint: :func:`~icefloe.state.plan_fingerprint` of the planning options.
        last_write: ``time.monotonic()`` of the last write (0.0: none yet).
        last_bytes: size of the last checkpoint written (0: none yet, or a store that
            does not report sizes).
    """

    def __init__(self, handle: TableHandle, options: SourceOptions,
                 location: str | None) -> None:
        self.handle = handle
        self.options = options
        order = None if options.watermark_column is None \
            else (options.watermark_column, options.watermark_missing_stats)
        self.fingerprint = plan_fingerprint(options.filter, options.case_sensitive,
                                            options.split_size, order)
        self.store: CheckpointStore | None = open_store(
            location, store_properties(handle, options), RetryPolicy.from_options(options),
        ) if location else None
        self.last_write = 0.0
        self.last_bytes = 0
        self._dirty = False

    def restore(self, enumerator: StartResolver) -> Start:
        """The start of the read: the checkpoint's state, or ``enumerator``'s initial position.

        A restored checkpoint also sets ``enumerator.identity`` to the incarnation it
        was written for (so a re-created table is detected by the enumerator). When the
        store holds no checkpoint the session is marked dirty: write a checkpoint of the
        new tracker at once, so that a restart does not resolve ``latest`` (or a
        timestamp) anew and skip what was committed in between.

        Raises:
            CheckpointError: an unreadable checkpoint (and no good previous one).
            CheckpointMismatchError: a checkpoint of another table, ref or plan.
            TableReplacedError: the table was re-created and ``onLineageBreak`` is
                ``fail``.
        """
        handle, opts = self.handle, self.options
        ckpt = self.store.read() if self.store is not None else None
        if ckpt is not None:
            try:
                validate_for(ckpt, handle.identifier, handle.identity, opts.ref,
                             self.fingerprint)
            except TableReplacedError:
                if opts.on_lineage_break == "fail":
                    raise
                log.warning("table %s was re-created since the checkpoint; "
                            "onLineageBreak=%s: starting afresh", handle.identifier,
                            opts.on_lineage_break)
            else:
                enumerator.identity = ckpt.table_identity
                log.info("restored checkpoint at %s (%d acked beyond, %d partial)",
                         ckpt.position.describe(), len(ckpt.acked_beyond), len(ckpt.offsets))
                schema = None if ckpt.schema_id is None or ckpt.schema_since is None \
                    else (ckpt.schema_id, ckpt.schema_since)
                return Start(ckpt.position, ckpt.acked_beyond, ckpt.offsets, restored=True,
                             found=True, schema=schema, watermark_ms=ckpt.watermark_ms)
        position = enumerator.initial_position()
        log.info("starting %s at %s", handle.identifier, position.describe())
        if ckpt is None:
            self._dirty = True  # the resolved start must become durable (next write)
        return Start(position, found=ckpt is not None)

    # -- writing ---------------------------------------------------------------------

    @property
    def dirty(self) -> bool:
        """True when state changed since the last write."""
        return self._dirty

    def mark_dirty(self) -> None:
        """Record that the tracker's state changed (an ack, a reset, a fresh start)."""
        self._dirty = True

    def due(self, interval_s: float) -> bool:
        """True when at least ``interval_s`` seconds passed since the last write."""
        return time.monotonic() - self.last_write >= interval_s

    def build(self, tracker: AckTracker, identity: str,
              nessie_hashes: NessieHashes | None = None,
              schema: tuple[int, int] | None = None,
              watermark_ms: int | None = None) -> Checkpoint:
        """The checkpoint of ``tracker``'s acknowledged state (one consistent cut).

        Args:
            tracker: the read's ack tracker.
            identity: the table incarnation the position belongs to.
            nessie_hashes: the Nessie hashes to keep for the committed position.
            schema: the stream schema ``(schema id, since)`` at the committed position.
            watermark_ms: the stream's event-time watermark (``watermarkColumn``).
        """
        position, acked_beyond, offsets = tracker.checkpoint_state()
        return Checkpoint(
            table=self.handle.identifier,
            table_identity=identity,
            ref=self.options.ref,
            plan_fingerprint=self.fingerprint,
            position=position,
            acked_beyond=tuple(acked_beyond),
            offsets=tuple(offsets),
            nessie_hashes=nessie_hashes(position) if nessie_hashes is not None else (),
            created_ms=int(time.time() * 1000),
            writer="icefloe",
            schema_id=None if schema is None else schema[0],
            schema_since=None if schema is None else schema[1],
            watermark_ms=watermark_ms,
        )

    def write(self, tracker: AckTracker, identity: str,
              nessie_hashes: NessieHashes | None = None,
              before_write: Callable[[], None] | None = None,
              schema: tuple[int, int] | None = None,
              watermark_ms: int | None = None) -> bool:
        """Write the checkpoint of ``tracker`` now if the state is dirty; True if written.

        A no-op (False) without a store or without changes since the last write. The
        caller holds the lock its acks take. ``before_write`` runs between building the
        checkpoint and writing it (a test's crash point); ``schema`` and
        ``watermark_ms`` as in :meth:`build`.
        """
        if self.store is None or not self._dirty:
            return False
        ckpt = self.build(tracker, identity, nessie_hashes, schema, watermark_ms)
        if before_write is not None:
            before_write()
        self.store.write(ckpt)
        self._dirty = False
        self.last_write = time.monotonic()
        self.last_bytes = int(getattr(self.store, "last_size", 0))
        return True
