"""The defaults matrix's tuned target where `icefloe tune`'s setting is the same read as the
defaults (``bench_matrix.same_read``): the same threads, options and splits are met by
construction, not judged on the noise of identical reads."""

from __future__ import annotations

import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog

from benchmarks.bench_matrix import MB, report, same_read
from icefloe import IcebergSource
from tests.benchmarks.test_matrix_report import _cell
from tests.helpers.tables import make_table, rows


def _table(catalog: SqlCatalog) -> int:
    """db.events: one data file of 3 row groups; returns the file's size."""
    table = make_table(catalog)
    table.transaction().set_properties(**{"write.parquet.row-group-limit": "1000"}) \
        .commit_transaction()
    table.append(rows(3000))
    (split,) = list(IcebergSource("db.events", catalog=catalog).bounded_plan().splits())
    assert pq.read_metadata(split.file_path.removeprefix("file://")).num_row_groups == 3
    return split.file_size


def test_same_read_compares_threads_options_and_splits(catalog: SqlCatalog) -> None:
    size = _table(catalog)
    # tune's texts for the defaults' own values: the same read
    assert same_read(catalog, "db.events", {"splitSize": "134217728", "ioConcurrency": "auto",
                                            "batchSize": "65536"}, 2)
    assert same_read(catalog, "db.events", {"splitSize": str(size)}, 2)  # still one split
    # a splitSize that cuts the file at its row groups: other splits
    cut = {"splitSize": str(size // 3)}
    assert len(list(IcebergSource("db.events", catalog=catalog, options=cut)
                    .bounded_plan().splits())) > 1
    assert not same_read(catalog, "db.events", cut, 2)
    assert not same_read(catalog, "db.events", {"splitSize": "134217728"}, 4)  # threads
    assert not same_read(catalog, "db.events", {"batchSize": "8192"}, 2)  # another option


def test_the_same_read_meets_the_tuned_target() -> None:
    cell = _cell(256 * MB, 4, "local disk", 1.0, 1.2, 1.6, 0.7)
    cell["tuned_pair"] = {"icefloe (defaults)": [1.0, 1.01, 0.99, 1.0, 1.02],
                          "icefloe (tuned)": [0.7, 0.71, 0.69, 0.7, 0.72]}
    missed = report("quick", {"256:4:local-disk": cell}, None)
    assert "**missed** (tuned) |" in missed  # clearly faster by its reads: a miss
    cell["same_read"] = True
    text = report("quick", {"256:4:local-disk": cell}, None)
    row = next(ln for ln in text.splitlines() if ln.startswith("| 256 MB"))
    assert "| **met** |" in row and "the same read as the defaults" in row
    assert "| 0.70x (0.70-0.71) |" in row  # the ratio still shown as measured


def test_planning_alone_in_a_contenders_process(catalog: SqlCatalog) -> None:
    """The matrix's planning pass (``--planning``): a fresh process times icefloe's
    planning alone and answers with the rows its splits hold, PyIceberg's count; another
    times PyIceberg's (``plan_files()``) and answers with its tasks' rows."""
    from pyiceberg.catalog import load_catalog

    from benchmarks.bench_matrix import PLANNING, PYICEBERG_PLANNING, Contender

    properties = {"type": "sql", **catalog.properties}
    named = load_catalog("matrix", **properties)  # the name the contenders load it by
    assert isinstance(named, SqlCatalog)
    _table(named)
    proc = Contender({"identifier": "db.events", "kind": PLANNING, "s3": None,
                      "catalog": properties})
    try:
        proc.ready()
        (seconds, rows, cpu), _ = proc.read(), proc.read()
    finally:
        proc.close()
    assert rows == named.load_table("db.events").scan().count() == 3000
    assert 0 < seconds < 30 and cpu > 0
    theirs = Contender({"identifier": "db.events", "kind": PYICEBERG_PLANNING, "s3": None,
                        "catalog": properties})
    try:
        theirs.ready()
        seconds, rows, cpu = theirs.read()
    finally:
        theirs.close()
    assert rows == 3000 and 0 < seconds < 30 and cpu > 0
