"""State: the committed position, checkpoints (versioned, checksummed), stores, ack tracking.

- :mod:`~icefloe.state.position`: the :class:`Position` value.
- :mod:`~icefloe.state.checkpoint`: :class:`Checkpoint`, its durable format
  (:func:`encode` / :func:`decode`), :func:`plan_fingerprint` and :func:`validate_for`.
- :mod:`~icefloe.state.store`: :class:`CheckpointStore` and its local / fsspec stores;
  :mod:`~icefloe.state.object_store`: the S3 store (numbered immutable objects).
- :mod:`~icefloe.state.acks`: :class:`AckTracker`, sink acks -> committed position.
"""

from __future__ import annotations

from icefloe.state.acks import AckTracker, UnknownSplitError
from icefloe.state.checkpoint import (
    Checkpoint,
    decode,
    encode,
    plan_fingerprint,
    validate_for,
)
from icefloe.state.object_store import ObjectCheckpointStore
from icefloe.state.position import Phase, Position
from icefloe.state.store import (
    CheckpointStore,
    FsspecCheckpointStore,
    LocalCheckpointStore,
    open_store,
)

__all__ = [
    "AckTracker",
    "Checkpoint",
    "CheckpointStore",
    "FsspecCheckpointStore",
    "LocalCheckpointStore",
    "ObjectCheckpointStore",
    "Phase",
    "Position",
    "UnknownSplitError",
    "decode",
    "encode",
    "open_store",
    "plan_fingerprint",
    "validate_for",
]
