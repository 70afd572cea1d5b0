"""``benchmarks.ab_matrix``'s report and its refusal of a wrong tree (no measuring: it
runs with ``python -m benchmarks.ab_matrix``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.ab_matrix import SIDES, main, report


def test_the_report_pairs_each_side_with_pyarrow_by_round_without_the_first() -> None:
    rows = 2_560_000
    out = {SIDES[0]: [(9.0, rows, 1.0), (0.20, rows, 0.4), (0.30, rows, 0.5), (0.25, rows, 0.5)],
           SIDES[1]: [(0.1, rows, 1.0), (0.25, rows, 0.5), (0.30, rows, 0.6), (0.20, rows, 0.5)],
           SIDES[2]: [(0.1, rows, 1.0), (0.40, rows, 0.7), (0.60, rows, 0.8), (0.50, rows, 0.9)]}
    after, before = report("1:1", out)[1:]
    # rounds 2-4: pyarrow / after = 0.8, 1.0, 1.25 -> 1.00; / before = 0.5 each
    assert "icefloe after" in after and "vs pyarrow 1.00x" in after
    assert "250.0 ms" in after and "CPU 0.500 s" in after and "min  200.0" in after
    assert "vs pyarrow 0.50x" in before and "500.0 ms" in before


def test_a_before_tree_without_icefloe_is_refused(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--before", str(tmp_path), "--cells", "1:1"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert str(tmp_path) in err and "git worktree add" in err


def test_the_bare_reader_reads_every_row_of_every_file_once(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from benchmarks.bench_matrix import bare_read

    paths = []
    for i in range(5):  # files of 1-5 row groups
        path = tmp_path / f"f{i}.parquet"
        pq.write_table(pa.table({"id": list(range(i * 1000, i * 1000 + 700 + i))}), path,
                       row_group_size=150 + 50 * i)
        paths.append(str(path))
    assert bare_read(paths) == sum(pq.read_metadata(p).num_rows for p in paths) == 3510
    assert bare_read(paths[:1], threads=3) == 700


def test_copies_without_the_arrow_schema_keep_row_groups_and_values(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from benchmarks.ab_matrix import without_arrow_schema

    (tmp_path / "cell").mkdir()
    src = tmp_path / "cell" / "part-0.parquet"
    rows = pa.table({"id": list(range(1000)), "s": [f"v{i}" for i in range(1000)]})
    pq.write_table(rows, src, row_group_size=300)
    assert b"ARROW:schema" in pq.read_metadata(src).metadata
    (copy,) = without_arrow_schema([src])
    assert copy.parent.name == "cell-no-arrow-schema"
    meta = pq.read_metadata(copy)
    assert b"ARROW:schema" not in (meta.metadata or {})
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == \
        [300, 300, 300, 100]
    assert pq.read_table(copy).equals(rows)
    assert without_arrow_schema([src]) == [copy]  # cached
