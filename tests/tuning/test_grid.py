"""The knobs' grid from a table's shape, and a caller's sweep values, checked as options."""

from __future__ import annotations

import pytest

from icefloe.errors import InvalidOptionError
from icefloe.options import SourceOptions
from icefloe.tuning.grid import (
    KNOBS,
    baseline,
    check_value,
    grid,
    label,
    option_texts,
    parse_sweep,
)
from icefloe.tuning.sample import TableShape

MIB = 1024 * 1024


def shape(**changes: object) -> TableShape:
    values: dict[str, object] = dict(files=100, bytes=100 * MIB, rows=10_000_000,
                                     median_file_bytes=MIB, max_file_bytes=2 * MIB,
                                     row_groups=1, remote=False)
    values.update(changes)
    return TableShape(**values)  # type: ignore[arg-type]


BASE = baseline(SourceOptions.parse({}), "local", 2)


def test_baseline_is_icefloes_defaults_and_the_options_given() -> None:
    # no splitSize given: the engine's adaptive split size ("auto", not an option value)
    assert BASE == {"parallelism": 2, "splitSize": "auto", "ioConcurrency": "auto",
                    "batchSize": 65536}
    assert option_texts(BASE, "local") == {"ioConcurrency": "auto", "batchSize": "65536"}
    given = baseline(SourceOptions.parse({"parquetBatchSize": "100", "ioConcurrency": "3",
                                          "minPartitions": "7", "splitSize": "1048576"}),
                     "spark", 4)
    assert given == {"parallelism": 7, "splitSize": MIB, "ioConcurrency": 3,
                     "batchSize": 100}
    assert check_value("splitSize", "auto") == "auto"
    with pytest.raises(InvalidOptionError, match=r"'abc' is not a size in bytes.*or auto"):
        check_value("splitSize", "abc")
    assert check_value("splitSize", str(64 * MIB)) == 64 * MIB


def test_local_disk_small_files_sweep_threads_and_batches_only() -> None:
    knobs = grid(shape(), "local", BASE, cpus=2)
    assert list(knobs) == ["parallelism", "batchSize"]
    assert knobs["parallelism"] == [1, 2, 4]
    assert 65536 in knobs["batchSize"]


def test_an_object_store_adds_io_concurrency_and_more_threads() -> None:
    knobs = grid(shape(remote=True), "local", BASE, cpus=2)
    assert knobs["ioConcurrency"] == [0, 4, "auto", 64]
    assert 16 in knobs["parallelism"]


def test_big_files_of_many_row_groups_add_split_sizes_that_cut_them() -> None:
    knobs = grid(shape(median_file_bytes=512 * MIB, max_file_bytes=600 * MIB, row_groups=16),
                 "local", BASE, cpus=2)
    sizes = knobs["splitSize"]
    assert sizes[0] == "auto"  # the default cut, then explicit sizes
    sizes = sizes[1:]
    assert 128 * MIB in sizes and 256 * MIB in sizes  # the old default, half a file
    assert min(sizes) < 32 * MIB  # about one row group per split
    assert all(s < 512 * MIB for s in sizes)


def test_tiny_files_leave_batch_size_out() -> None:
    assert "batchSize" not in grid(shape(rows=100 * 1000), "local", BASE, cpus=2)


def test_spark_and_ray_sweep_tasks_around_their_default() -> None:
    base = dict(BASE, parallelism=4)
    assert grid(shape(), "spark", base, cpus=4)["parallelism"] == [2, 4, 8, 16]


def test_a_sweep_is_parsed_like_the_options() -> None:
    assert parse_sweep({"batchSize": "16, 65536", "ioConcurrency": ["auto", 0]}) == {
        "ioConcurrency": ["auto", 0], "batchSize": [16, 65536]}
    assert parse_sweep({"parallelism": [1, "1", 3]}) == {"parallelism": [1, 3]}


@pytest.mark.parametrize(("sweep", "needle"), [
    ({"batchsize": "1"}, "batchsize"),  # a knob is spelled as its option
    ({"threads": "1"}, "threads"),
    ({"batchSize": "0"}, "batchSize"),
    ({"ioConcurrency": "many"}, "ioConcurrency"),
    ({"parallelism": ""}, "parallelism"),
])
def test_a_bad_sweep_is_a_typed_error_naming_it(sweep: dict[str, str], needle: str) -> None:
    with pytest.raises(InvalidOptionError, match=needle):
        parse_sweep(sweep)


def test_options_of_a_setting_are_valid_source_options() -> None:
    setting = dict(BASE, batchSize=1024, ioConcurrency=0, parallelism=3)
    for engine in ("local", "spark", "ray"):
        parsed = SourceOptions.parse(option_texts(setting, engine))
        assert parsed.batch_size == 1024 and parsed.io_concurrency == 0
    assert SourceOptions.parse(option_texts(setting, "spark")).min_partitions == 3
    assert label(setting, BASE) == "parallelism=3, ioConcurrency=0, batchSize=1024"
    assert label(BASE, BASE) == "baseline"
    assert list(KNOBS) == ["parallelism", "splitSize", "ioConcurrency", "batchSize"]


def test_threads_beyond_the_splits_the_read_can_have_are_left_out() -> None:
    one = shape(files=1, median_file_bytes=1000 * MIB, max_file_bytes=1000 * MIB,
                remote=True, most_splits=1)  # one file of one row group
    assert grid(one, "local", BASE, cpus=2)["parallelism"] == [1, 2]  # the baseline's kept
    sixteen = shape(files=1, row_groups=16, most_splits=16, remote=True)
    assert grid(sixteen, "local", BASE, cpus=2)["parallelism"] == [1, 2, 4, 8, 16]
    assert grid(shape(remote=True), "local", BASE, cpus=2)["parallelism"] == [1, 2, 4, 8, 16]
