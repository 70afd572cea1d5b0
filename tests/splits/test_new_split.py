"""``new_split``: the planner's fast FileSplit constructor builds the same immutable value."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from icefloe.splits.serde import deserialize_split, serialize_split
from icefloe.splits.split import DeleteFileRef, FileSplit, make_split_id, new_split

ARGS = (
    make_split_id(7, "s3://b/f.parquet", 4, 100), "s3://b/f.parquet", "PARQUET", 4, 100, 10,
    1_000, 90, 2, ("a", 19_723, None), 7, 3, 11,
    (DeleteFileRef("s3://b/d.parquet", 1, "PARQUET", 4, 2, 50),),
)


def test_new_split_equals_the_dataclass_constructor() -> None:
    fast, slow = new_split(*ARGS), FileSplit(*ARGS)

    assert type(fast) is FileSplit
    assert fast == slow and hash(fast) == hash(slow)
    assert dataclasses.astuple(fast) == dataclasses.astuple(slow)
    assert fast.resume_rows == 0
    assert new_split(*ARGS[:-1]) == FileSplit(*ARGS[:-1])  # delete_files defaults to ()


def test_new_split_is_immutable_and_round_trips() -> None:
    split = new_split(*ARGS)

    with pytest.raises(dataclasses.FrozenInstanceError):
        split.start = 0  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(split)) == split
    assert deserialize_split(serialize_split(split)) == split
    assert split.with_position(5) == dataclasses.replace(FileSplit(*ARGS), resume_rows=5)
