"""Findings 8 and 9 of issue 17: a policy error comes after everything before the refused
snapshot was delivered and can be committed; ``ack()`` twice is a no-op, after close an
``IcefloeError``."""

from __future__ import annotations

from pathlib import Path

import pytest

from icefloe import IcebergSource, IcefloeError, SnapshotPolicyError, StreamClosedError
from icefloe.state import open_store
from tests.helpers.tables import (
    commit_delete_files,
    live_data_files,
    make_catalog,
    make_table,
    rows,
)


@pytest.fixture
def table(tmp_path: Path):
    catalog = make_catalog(tmp_path)
    tbl = make_table(catalog)
    tbl.append(rows(10))
    tbl.append(rows(10, start=10))
    commit_delete_files(tbl, sorted(live_data_files(tbl))[:1])  # refused by default
    tbl.append(rows(10, start=20))
    return catalog, tbl


@pytest.mark.parametrize("extra", [{}, {"maxSnapshotsPerTrigger": "1"}])
def test_policy_error_after_the_appends_before_it(table, tmp_path: Path,
                                                  extra: dict[str, str]) -> None:
    catalog, tbl = table
    appends = [s for s in tbl.snapshots() if s.summary and s.summary.operation.value == "append"]
    opts = {"startingVersion": "earliest", "pollIntervalMs": "20", **extra}
    src = IcebergSource("db.events", catalog=catalog, options=opts)
    ckpt = str(tmp_path / "ckpt")
    seen: list[int] = []
    with pytest.raises(SnapshotPolicyError) as caught, \
            src.stream(checkpoint=ckpt, checkpoint_interval_s=0) as stream:
        for item in stream:
            seen.extend(item.batch.column("id").to_pylist())
            item.ack()
    assert caught.value.operation == "delete"
    assert sorted(seen) == list(range(20))  # both appends before the delete
    stored = open_store(ckpt).read()
    assert stored is not None
    assert stored.position.last_complete_snapshot_id == appends[1].snapshot_id


def test_ack_twice_is_a_no_op_and_ack_after_close_is_typed(table) -> None:
    catalog, _ = table
    src = IcebergSource("db.events", catalog=catalog,
                        options={"pollIntervalMs": "20", "ignoreDeletes": "true"})
    stream = src.stream(available_now=True)
    with stream:
        item = next(iter(stream))
        item.ack()
        item.ack()  # once more: nothing happens (was a KeyError)
        pending = next(iter(stream))
    with pytest.raises(StreamClosedError) as caught:
        pending.ack()
    assert isinstance(caught.value, IcefloeError) and pending.split_id in str(caught.value)


def test_unknown_split_error_is_an_icefloe_error() -> None:
    from icefloe.state import UnknownSplitError

    assert issubclass(UnknownSplitError, IcefloeError)
    assert issubclass(UnknownSplitError, KeyError)
