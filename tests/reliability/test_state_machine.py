"""Stateful test (Hypothesis): appends, compactions, deletes, reads, acks, checkpoints,
crashes and restores against a model.

Invariants:
- nothing durably acknowledged (acked, then checkpointed) is delivered again, by any
  later stream; only the unacknowledged / un-checkpointed tail may repeat;
- no stream delivers a row twice;
- nothing appended is skipped: after a final restore and drain, every appended row was
  delivered (``ignoreDeletes=true``; compactions are skipped by default).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from icefloe import IcebergSource
from tests.helpers.tables import (
    commit_delete_files,
    commit_replace,
    live_data_files,
    make_catalog,
    make_table,
    rows,
)

OPTIONS = {"ignoreDeletes": "true", "startingVersion": "earliest", "batchSize": "16"}


class StreamMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="icefloe-sm-"))
        self.catalog = make_catalog(self.root)
        make_table(self.catalog)
        self.source_options = dict(OPTIONS)
        self.next_id = 0
        self.appended: set[int] = set()
        self.durable: set[int] = set()
        self.acked_since_checkpoint: set[int] = set()
        self.delivered: set[int] = set()
        self.stream: Any = None
        self.iterator: Any = None
        self.this_stream: set[int] = set()
        self.received: list[Any] = []

    # -- helpers ---------------------------------------------------------------------
    def _table(self) -> Any:
        return self.catalog.load_table("db.events")

    def _open(self) -> None:
        source = IcebergSource("db.events", catalog=self.catalog, options=self.source_options)
        self.stream = source.stream(checkpoint=str(self.root / "ck"), available_now=True,
                                    checkpoint_interval_s=3600)
        self.stream.start()
        self.iterator = iter(self.stream)
        self.this_stream = set()
        self.received = []

    def _take(self) -> bool:
        try:
            item = next(self.iterator)
        except StopIteration:
            return False
        ids = set(item.batch.column("id").to_pylist())
        assert not ids & self.durable, f"re-delivered durably acked rows {ids & self.durable}"
        assert not ids & self.this_stream, "a stream delivered a row twice"
        self.this_stream |= ids
        self.delivered |= ids
        self.received.append((item, ids))
        return True

    # -- rules -----------------------------------------------------------------------
    @rule(n=st.integers(1, 40))
    def append(self, n: int) -> None:
        self._table().append(rows(n, start=self.next_id))
        self.appended |= set(range(self.next_id, self.next_id + n))
        self.next_id += n

    @rule()
    def compact(self) -> None:
        table = self._table()
        if len(live_data_files(table)) >= 2:
            commit_replace(table)

    @rule(pick=st.integers(0, 10))
    def delete(self, pick: int) -> None:
        table = self._table()
        files = sorted(live_data_files(table))
        if len(files) >= 2:
            commit_delete_files(table, [files[pick % len(files)]])

    @rule(k=st.integers(1, 4))
    def read(self, k: int) -> None:
        if self.stream is None:
            self._open()
        for _ in range(k):
            if not self._take():
                break

    @rule()
    def ack(self) -> None:
        if self.received:
            item, ids = self.received.pop(0)
            item.ack()
            self.acked_since_checkpoint |= ids

    @rule()
    def checkpoint(self) -> None:
        if self.stream is not None:
            self.stream.write_checkpoint()
            self.durable |= self.acked_since_checkpoint
            self.acked_since_checkpoint = set()

    @rule()
    def crash(self) -> None:
        """Drop the stream without its final checkpoint (acks since the last one are lost)."""
        if self.stream is not None:
            self.stream.store = None  # close() then writes nothing
            self.stream.close()
            self.stream = None
            self.acked_since_checkpoint = set()
            self.received = []  # a closed stream's items cannot be acked (StreamClosedError)

    @rule()
    def restore(self) -> None:
        """Close cleanly (final checkpoint of what was acked), then start again."""
        if self.stream is not None:
            self.stream.close()
            self.durable |= self.acked_since_checkpoint
            self.acked_since_checkpoint = set()
        self._open()

    @invariant()
    def delivered_only_appended(self) -> None:
        assert self.delivered <= self.appended

    def teardown(self) -> None:
        try:
            self.restore()
            while self._take():
                self.ack()
            while self.received:
                self.ack()
            missing = self.appended - self.delivered
            assert not missing, f"appended rows never delivered: {sorted(missing)[:10]}"
        finally:
            if self.stream is not None:
                self.stream.close()
            self.catalog.engine.dispose()
            shutil.rmtree(self.root, ignore_errors=True)


_quick = settings(max_examples=12, stateful_step_count=20, deadline=None,
                  suppress_health_check=list(HealthCheck))
TestStreamMachine = StreamMachine.TestCase
TestStreamMachine.settings = _quick


@pytest.mark.slow
def test_stream_machine_long() -> None:
    from hypothesis.stateful import run_state_machine_as_test

    run_state_machine_as_test(StreamMachine, settings=settings(
        max_examples=200, stateful_step_count=40, deadline=None,
        suppress_health_check=list(HealthCheck)))
