"""Bounded reads of Java-written tables: icefloe's local engine against Spark's Iceberg reads.

One test per case of the writer: head, every snapshot (on any ref), ``asOfTimestamp`` at each
commit, branches and tags, append ranges, a filter, a column selection and metadata columns.
Where Spark's reader refused the read, icefloe must refuse it too, with a typed error.
"""

from __future__ import annotations

from typing import Any

import pytest

from icefloe import IcebergSource
from icefloe.errors import IcefloeError
from tests.interop.conftest import assert_rows, identifier, oracle, params, where

pytestmark = pytest.mark.interop

KINDS = ("head", "snapshot", "timestamp", "ref", "range", "filter", "columns", "metadata")


@pytest.mark.parametrize("case", params(KINDS))
def test_bounded_read_matches_spark(case: dict[str, Any] | None, catalog: Any) -> None:
    assert case is not None
    options = dict(case["options"])
    if case["kind"] == "range":
        # Spark's start-snapshot-id read is an incremental *append* scan: it reads the files of
        # the append snapshots in the range and passes over deletes and overwrites; icefloe's
        # range fails on them unless told to skip them, which is skipChangeCommits
        options["skipChangeCommits"] = "true"
    src = IcebergSource(identifier(case), catalog=catalog, options=options)
    if "error" in case:
        with pytest.raises(IcefloeError):
            src.to_arrow()
        return
    try:
        actual = src.to_arrow()
    except IcefloeError as exc:
        pytest.fail(f"{where(case)}: icefloe raised {type(exc).__name__}: {exc}; "
                    f"Spark read {case['rows']} rows", pytrace=False)
    assert_rows(case, actual, oracle(case))
