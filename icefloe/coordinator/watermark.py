"""WatermarkTracker: a stream's event-time watermark from its splits' lower bounds.

Runs where the coordinator runs (the local stream's process, the Ray enumerator actor),
so on Ray it is one watermark across every reader actor. With ``watermarkColumn`` each
split carries ``watermark_ms``, its file's lower bound of the column
(:mod:`icefloe.enumerator.event_time`). The watermark is:

- the smallest ``watermark_ms`` of the splits handed to readers and not yet fully
  acknowledged, when there are some;
- otherwise the largest ``watermark_ms`` acknowledged so far (the splits not yet
  enumerated of a unit come after it in event-time order);
- never smaller than a value it already reported, nor than the watermark restored from
  the checkpoint (a restart re-plans from the committed position: the splits it hands out
  again were outstanding when that watermark was computed, so their bounds are not
  smaller).

A later snapshot may add files older than the watermark (late data): they are read and
delivered, and the watermark does not go back, as with Flink's per-split watermarks.
Splits without a bound (``watermarkMissingStats=first`` / ``last``) do not hold it.
Thread-safe (one lock).
"""

from __future__ import annotations

import heapq
import threading

from icefloe.splits.split import FileSplit


class WatermarkTracker:
    """The watermark of one stream (module docstring).

    Args:
        restored_ms: the watermark of the checkpoint the stream restarts from (None: none).
    """

    def __init__(self, restored_ms: int | None = None) -> None:
        self._lock = threading.Lock()
        self._outstanding: dict[str, int] = {}
        self._heap: list[tuple[int, str]] = []
        self._acked_high: int | None = None
        self._reported: int | None = restored_ms

    def register(self, split: FileSplit) -> None:
        """``split`` is about to be handed out (enumeration order)."""
        bound = split.watermark_ms
        if bound is None:
            return
        with self._lock:
            if split.split_id not in self._outstanding:
                self._outstanding[split.split_id] = bound
                heapq.heappush(self._heap, (bound, split.split_id))

    def acked(self, split_id: str) -> None:
        """``split_id`` is fully acknowledged (a partial ack does not release it)."""
        with self._lock:
            bound = self._outstanding.pop(split_id, None)
            if bound is not None and (self._acked_high is None or bound > self._acked_high):
                self._acked_high = bound

    def reset(self) -> None:
        """A lineage reset: forget the outstanding splits (they are enumerated again, or
        never), keep the watermark reported."""
        with self._lock:
            self._outstanding.clear()
            self._heap.clear()

    def current(self) -> int | None:
        """The watermark now, milliseconds since the epoch (None: nothing known yet)."""
        with self._lock:
            heap, outstanding = self._heap, self._outstanding
            while heap and outstanding.get(heap[0][1]) != heap[0][0]:
                heapq.heappop(heap)  # acknowledged since it was pushed
            candidate = heap[0][0] if heap else self._acked_high
            if candidate is not None and (self._reported is None
                                          or candidate > self._reported):
                self._reported = candidate
            return self._reported
