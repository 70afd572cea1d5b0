"""Split ids: ``make_split_id`` and planning's ``split_id_maker`` give the same bytes.

Checkpoints hold split ids (acknowledged and in-flight splits), so an id must never
change between versions: the literal ids below were made by ``make_split_id`` before the
planner reused the digest's prefix, and the formula is recomputed here with hashlib.
"""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from icefloe.splits.split import make_split_id, split_id_maker

GOLDEN = [
    ((6512078345112847, "s3://bucket/wh/db/t/data/x=1/00000-0-abc.parquet", 0, 1234),
     "6512078345112847-99d8be91c8cf7d02552a"),
    ((1, "/tmp/wh/données/ü.parquet", 4, 134217728), "1-c243598be471d25fc6ba"),
]


def _formula(snapshot_id: int, path: str, start: int, length: int) -> str:
    digest = hashlib.blake2b(f"{snapshot_id}|{path}|{start}|{length}".encode(),
                             digest_size=10).hexdigest()
    return f"{snapshot_id}-{digest}"


def test_golden_ids_unchanged() -> None:
    for args, expected in GOLDEN:
        assert make_split_id(*args) == expected
        assert split_id_maker(args[0])(*args[1:]) == expected
        assert _formula(*args) == expected


@given(snapshot_id=st.integers(min_value=-(2**63), max_value=2**63 - 1),
       paths=st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=80),
                      min_size=1, max_size=5),
       start=st.integers(min_value=0, max_value=2**40),
       length=st.integers(min_value=0, max_value=2**40))
def test_maker_equals_make_split_id(snapshot_id: int, paths: list[str], start: int,
                                    length: int) -> None:
    maker = split_id_maker(snapshot_id)
    for path in paths:  # one maker, many ids: its prefix state is never consumed
        expected = _formula(snapshot_id, path, start, length)
        assert make_split_id(snapshot_id, path, start, length) == expected
        assert maker(path, start, length) == expected


def test_maker_is_per_snapshot() -> None:
    a, b = split_id_maker(1), split_id_maker(2)
    assert a("/f.parquet", 0, 10) != b("/f.parquet", 0, 10)
    assert a("/f.parquet", 0, 10).startswith("1-")
