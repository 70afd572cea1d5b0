"""``benchmarks.ab_matrix``'s report and its refusal of a wrong tree, and the files of the
matrix's cells (no measuring: it runs with ``python -m benchmarks.ab_matrix``)."""

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


def test_the_matrix_files_store_no_arrow_schema_unless_asked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The matrix's files (session 21 on) are written as Java Iceberg writes Parquet, with
    no stored Arrow schema; ``arrow_schema=True`` gives PyArrow's default files: the same
    row groups and values, the schema stored (strings recorded as ``string``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from benchmarks import bench_matrix

    monkeypatch.setattr(bench_matrix, "DATA_DIR", tmp_path)
    monkeypatch.setattr(bench_matrix, "cell_files", lambda size, groups: (2, 1000))
    plain = bench_matrix.cached_files(bench_matrix.MB, 4)
    stored = bench_matrix.cached_files(bench_matrix.MB, 4, arrow_schema=True)
    assert [p.parent.parent.name for p in plain + stored] == ["matrix-v2"] * 2 + ["matrix-v1"] * 2
    for a, b in zip(plain, stored, strict=True):
        meta_a, meta_b = pq.read_metadata(a), pq.read_metadata(b)
        assert b"ARROW:schema" not in (meta_a.metadata or {})
        assert b"ARROW:schema" in meta_b.metadata
        assert [meta_a.row_group(i).num_rows for i in range(meta_a.num_row_groups)] == \
            [meta_b.row_group(i).num_rows for i in range(meta_b.num_row_groups)] == [250] * 4
        ta, tb = pq.read_table(a), pq.read_table(b)
        assert ta.num_rows == 1000
        assert ta.cast(tb.schema).equals(tb)
        strings = [f.name for f in tb.schema if f.type == pa.string()]
        assert strings  # the stored schema says string; ask for large and get it unstored
        asked = pq.ParquetFile(a, binary_type=pa.large_binary()).read()
        assert all(asked.schema.field(n).type == pa.large_string() for n in strings)
    assert bench_matrix.cached_files(bench_matrix.MB, 4) == plain  # cached, not rebuilt


def test_the_other_tree_gets_this_trees_compiled_decoder_or_a_reason(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``git worktree`` has no compiled manifest decoder (built at install into this tree
    only), so its planning would run the pure-Python one: an A/A run of the same code read
    5-9 % slower on its side (session 21). Where its C source is this tree's, the module is
    copied there; where it differs, the reason names the tree and how to build it."""
    from benchmarks import ab_matrix

    here, other = tmp_path / "here", tmp_path / "other"
    for tree in (here, other):
        (tree / ab_matrix.NATIVE).mkdir(parents=True)
        (tree / ab_matrix.NATIVE / "_core.c").write_text("int decode(void);\n")
    monkeypatch.setattr(ab_matrix, "ROOT", here / "benchmarks")
    assert ab_matrix.same_native(other) is None  # nothing compiled here: both pure Python
    assert not list((other / ab_matrix.NATIVE).glob("*.so"))
    built = here / ab_matrix.NATIVE / "_core.cpython-311-x86_64-linux-gnu.so"
    built.write_bytes(b"\x7fELF compiled")
    assert ab_matrix.same_native(other) is None
    assert (other / ab_matrix.NATIVE / built.name).read_bytes() == b"\x7fELF compiled"
    (other / ab_matrix.NATIVE / built.name).unlink()
    (other / ab_matrix.NATIVE / "_core.c").write_text("int decode(int);\n")
    why = ab_matrix.same_native(other)
    assert why is not None and str(other / ab_matrix.NATIVE) in why and "build" in why
    assert not list((other / ab_matrix.NATIVE).glob("*.so"))


def test_the_other_trees_bytecode_is_compiled_before_it_is_measured(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``PYTHONDONTWRITEBYTECODE`` set, an uninstalled tree compiles its modules in
    every process, some of them inside a timed read: they are compiled first."""
    from benchmarks import ab_matrix

    here, other = tmp_path / "here", tmp_path / "other"
    (here / ab_matrix.NATIVE).mkdir(parents=True)
    (other / "icefloe" / "reader").mkdir(parents=True)
    (other / "icefloe" / "reader" / "ranged.py").write_text("PIECE = 8\n")
    monkeypatch.setattr(ab_matrix, "ROOT", here / "benchmarks")
    assert ab_matrix.prepare_tree(other) is None
    assert list((other / "icefloe" / "reader" / "__pycache__").glob("ranged.*.pyc"))
    (other / "icefloe" / "broken.py").write_text("def (:\n")
    why = ab_matrix.prepare_tree(other)
    assert why is not None and "do not compile" in why
