"""A test hook: SIGKILL this process at a named point of a continuous read.

Armed only by the environment (``ICEFLOE_CRASH_POINT=name:N``, N defaults to 1): the
reliability campaign (``tests/reliability/``) kills stream processes at the points
where a crash is hardest to survive. Unarmed, :func:`crash_point` is one dict lookup.
"""

from __future__ import annotations

import os
import signal

CRASH_ENV = "ICEFLOE_CRASH_POINT"
_crash_counts: dict[str, int] = {}


def crash_point(name: str) -> None:
    """SIGKILL this process at the N-th pass of ``name`` when armed (module docstring).

    Named points: ``after_emit`` (item handed to the sink, not acked), ``after_ack``
    (acked, checkpoint not written), ``during_checkpoint_write``, ``during_restore``.
    """
    spec = os.environ.get(CRASH_ENV)
    if not spec:
        return
    point, _, count = spec.partition(":")
    if point != name:
        return
    _crash_counts[name] = _crash_counts.get(name, 0) + 1
    if _crash_counts[name] >= int(count or 1):
        os.kill(os.getpid(), signal.SIGKILL)
