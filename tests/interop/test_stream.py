"""icefloe's local stream from ``earliest`` against Iceberg's own Spark Structured Streaming
source (``Trigger.AvailableNow`` into a Parquet sink) on the same Java-written table.

Each policy uses Iceberg Spark's own option names (icefloe accepts them as aliases):
none, ``streaming-skip-delete-snapshots``, ``streaming-skip-overwrite-snapshots``, both.
Where Iceberg's source failed (a delete or overwrite snapshot it may not skip), icefloe must
fail too, with a typed error; otherwise both emit the same multiset of rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from icefloe import IcebergSource
from icefloe.errors import IcefloeError
from tests.interop.conftest import assert_rows, identifier, oracle, params, where

pytestmark = pytest.mark.interop


def drain(src: IcebergSource, ckpt: Path) -> pa.Table:
    batches: list[pa.RecordBatch] = []
    with src.stream(checkpoint=str(ckpt), available_now=True, checkpoint_interval_s=0) as stream:
        for item in stream:
            batches.append(item.batch)
            item.ack()
    return pa.Table.from_batches(batches) if batches else pa.table({})


@pytest.mark.parametrize("case", params(("stream",)))
def test_stream_from_earliest_matches_iceberg_spark_stream(
        case: dict[str, Any] | None, catalog: Any, tmp_path: Path) -> None:
    assert case is not None
    options = {"startingVersion": "earliest", "pollIntervalMs": "100", **case["options"]}
    if "error" in case:
        with pytest.raises(IcefloeError):
            src = IcebergSource(identifier(case), catalog=catalog, options=options)
            drain(src, tmp_path / "ckpt")
        return
    src = IcebergSource(identifier(case), catalog=catalog, options=options)
    try:
        actual = drain(src, tmp_path / "ckpt")
    except IcefloeError as exc:
        pytest.fail(f"{where(case)}: icefloe stream raised {type(exc).__name__}: {exc}; "
                    f"Iceberg's Spark stream emitted {case['rows']} rows", pytrace=False)
    expected = oracle(case)
    if actual.num_columns == 0:
        actual = expected.schema.empty_table()
    assert_rows(case, actual, expected, what="icefloe stream")
