"""SourceOptions: every parse / validation rule of icefloe/options.py."""

from __future__ import annotations

import datetime as dt
import pickle

import pytest

from icefloe.errors import InvalidOptionError
from icefloe.options import MIB, OPTION_TABLE, SourceOptions


def _rejects(raw: dict[str, object], option: str, mode: str | None = None) -> InvalidOptionError:
    with pytest.raises(InvalidOptionError) as info:
        options = SourceOptions.parse(raw)
        if mode is not None:
            options.for_mode(mode)  # type: ignore[arg-type]
    assert info.value.option == option
    assert option in str(info.value)
    return info.value


def test_defaults_follow_the_design() -> None:
    options = SourceOptions.parse({}).for_mode("bounded")
    assert (options.snapshot_id, options.as_of_timestamp_ms, options.ref) == (None, None, "main")
    assert options.batch_size == 65536
    assert options.split_size == 128 * MIB
    assert options.split_open_file_cost == 256 * 1024
    assert options.poll_interval_ms == 5000
    assert options.case_sensitive is True
    assert options.preserve_order is True
    assert options.fail_on_data_loss is True
    assert options.on_lineage_break == "fail"
    assert options.metadata_columns == ()
    assert options.given == frozenset()


def test_invalid_option_error_is_a_value_error() -> None:
    assert issubclass(InvalidOptionError, ValueError)


def test_unknown_key_is_named() -> None:
    error = _rejects({"snapshotIdd": "1"}, "snapshotIdd")
    assert "snapshotId" in str(error)  # the message lists the known options


def test_none_values_are_ignored() -> None:
    assert SourceOptions.parse({"snapshotId": None, "batchSize": None}).given == frozenset()


@pytest.mark.parametrize(
    ("alias", "canonical", "value", "field", "expected"),
    [
        ("versionAsOf", "snapshotId", "7", "snapshot_id", 7),
        ("snapshot-id", "snapshotId", "7", "snapshot_id", 7),
        ("timestampAsOf", "asOfTimestamp", "1000", "as_of_timestamp_ms", 1000),
        ("as-of-timestamp", "asOfTimestamp", "1000", "as_of_timestamp_ms", 1000),
        ("end-snapshot-id", "endSnapshotId", "9", "end_snapshot_id", 9),
        ("selected_fields", "columns", "id,kind", "columns", ("id", "kind")),
        ("row_filter", "filter", "id > 3", "filter", "id > 3"),
        ("parquetBatchSize", "batchSize", "10", "batch_size", 10),
        ("split-size", "splitSize", "100", "split_size", 100),
        ("file-open-cost", "splitOpenFileCost", "5", "split_open_file_cost", 5),
        ("case-sensitive", "caseSensitive", "false", "case_sensitive", False),
        ("streaming-skip-delete-snapshots", "skipDeletes", "true", "skip_deletes", True),
        ("streaming-skip-overwrite-snapshots", "skipOverwrites", "true", "skip_overwrites", True),
        ("monitor-interval", "pollIntervalMs", "2min", "poll_interval_ms", 120_000),
    ],
)
def test_aliases_resolve_to_the_canonical_option(
    alias: str, canonical: str, value: str, field: str, expected: object
) -> None:
    options = SourceOptions.parse({alias: value})
    assert getattr(options, field) == expected
    assert options.given == frozenset({canonical})


@pytest.mark.parametrize(
    ("first", "second", "canonical"),
    [
        ("snapshotId", "versionAsOf", "snapshotId"),
        ("versionAsOf", "snapshot-id", "snapshotId"),
        ("asOfTimestamp", "timestampAsOf", "asOfTimestamp"),
        ("branch", "tag", "ref"),
        ("ref", "branch", "ref"),
        ("columns", "selected_fields", "columns"),
        ("pollIntervalMs", "pollInterval", "pollIntervalMs"),
    ],
)
def test_alias_given_twice(first: str, second: str, canonical: str) -> None:
    value = {"ref": "main", "branch": "main", "tag": "main", "columns": "id",
             "selected_fields": "id"}
    raw = {first: value.get(first, "1"), second: value.get(second, "1")}
    error = _rejects(raw, canonical)
    assert "given twice" in str(error)


@pytest.mark.parametrize(
    "value", ["-1", "abc", str(2**64), 2**64, "1.5", 1.5, "", "+5", "1_000", "²", "٣", True]
)
@pytest.mark.parametrize("name", ["snapshotId", "startSnapshotId", "endSnapshotId"])
def test_bad_snapshot_ids(name: str, value: object) -> None:
    error = _rejects({name: value}, name)
    assert "unsigned 64-bit" in str(error)


def test_snapshot_id_bounds() -> None:
    assert SourceOptions.parse({"snapshotId": str(2**64 - 1)}).snapshot_id == 2**64 - 1
    assert SourceOptions.parse({"snapshotId": 0}).snapshot_id == 0
    assert SourceOptions.parse({"snapshotId": " 12 "}).snapshot_id == 12


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1700000000123", 1700000000123),
        (1700000000123, 1700000000123),
        ("2024-01-02T03:04:05.678+00:00", 1704164645678),
        ("2024-01-02T03:04:05.678", 1704164645678),  # naive means UTC
        ("2024-01-02T05:04:05.678+02:00", 1704164645678),
        (dt.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC), 1704164645678),
        (dt.datetime(2024, 1, 2, 3, 4, 5, 678000), 1704164645678),
    ],
)
def test_timestamps(value: object, expected: int) -> None:
    assert SourceOptions.parse({"asOfTimestamp": value}).as_of_timestamp_ms == expected
    parsed = SourceOptions.parse({"startingTimestamp": value}).starting_timestamp_ms
    assert parsed == expected


@pytest.mark.parametrize("value", ["yesterday", "2024-13-01", "12:00", "²", "", True, 1.5])
@pytest.mark.parametrize("name", ["asOfTimestamp", "startingTimestamp"])
def test_bad_timestamps(name: str, value: object) -> None:
    error = _rejects({name: value}, name)
    assert "ISO-8601" in str(error)


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ({"snapshotId": "1", "asOfTimestamp": "1000"}, "asOfTimestamp"),
        ({"snapshotId": "1", "ref": "main"}, "snapshotId"),
        ({"snapshotId": "1", "branch": "b"}, "snapshotId"),
        ({"asOfTimestamp": "1000", "tag": "t"}, "asOfTimestamp"),
        ({"snapshotId": "1", "startSnapshotId": "2"}, "startSnapshotId"),
        ({"asOfTimestamp": "1000", "endSnapshotId": "2"}, "endSnapshotId"),
        ({"startingVersion": "1", "startingTimestamp": "1000"}, "startingTimestamp"),
        ({"ignoreChanges": "true", "skipChangeCommits": "true"}, "skipChangeCommits"),
        ({"startSnapshotId": "3", "endSnapshotId": "3"}, "endSnapshotId"),
    ],
)
def test_contradictions(raw: dict[str, object], named: str) -> None:
    _rejects(raw, named)


def test_ref_kind_follows_the_alias() -> None:
    assert SourceOptions.parse({"branch": "b"}).ref_kind == "branch"
    assert SourceOptions.parse({"tag": "t"}).ref_kind == "tag"
    assert SourceOptions.parse({"ref": "r"}).ref_kind == "any"
    _rejects({"ref": "  "}, "ref")


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ({"pollIntervalMs": "10"}, "pollIntervalMs"),
        ({"monitor-interval": "10"}, "pollIntervalMs"),
        ({"initialDelayMs": "10"}, "initialDelayMs"),
        ({"startingVersion": "latest"}, "startingVersion"),
        ({"startSnapshotID": "5"}, "startingVersion"),
        ({"startingTimestamp": "1000"}, "startingTimestamp"),
        ({"onLineageBreak": "restartFromHead"}, "onLineageBreak"),
        ({"failOnDataLoss": "false"}, "failOnDataLoss"),
        ({"maxFilesPerTrigger": "3"}, "maxFilesPerTrigger"),
        ({"maxBytesPerTrigger": "3"}, "maxBytesPerTrigger"),
        ({"maxRowsPerTrigger": "3"}, "maxRowsPerTrigger"),
        ({"streaming-max-snapshots-per-micro-batch": "3"}, "maxSnapshotsPerTrigger"),
    ],
)
def test_continuous_only_options_in_a_bounded_read(raw: dict[str, object], named: str) -> None:
    error = _rejects(raw, named, mode="bounded")
    assert "stream" in str(error)


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ({"snapshotId": "1"}, "snapshotId"),
        ({"asOfTimestamp": "1000"}, "asOfTimestamp"),
        ({"startSnapshotId": "1"}, "startSnapshotId"),
        ({"endSnapshotId": "1"}, "endSnapshotId"),
    ],
)
def test_bounded_only_options_in_a_stream(raw: dict[str, object], named: str) -> None:
    error = _rejects(raw, named, mode="continuous")
    assert "bounded" in str(error)


def test_mode_dependent_alias() -> None:
    options = SourceOptions.parse({"start-snapshot-id": "5"})
    bounded = options.for_mode("bounded")
    assert bounded.start_snapshot_id == 5
    assert bounded.starting_version is None
    assert "startSnapshotId" in bounded.given
    continuous = options.for_mode("continuous")
    assert continuous.starting_version == 5
    assert continuous.start_snapshot_id is None
    _rejects({"start-snapshot-id": "5", "startSnapshotId": "6"}, "startSnapshotId", "bounded")
    _rejects({"start-snapshot-id": "5", "endSnapshotId": "5"}, "endSnapshotId", "bounded")
    _rejects({"start-snapshot-id": "x"}, "startSnapshotId", "bounded")


def test_starting_version_values() -> None:
    assert SourceOptions.parse({"startingVersion": "latest"}).starting_version == "latest"
    assert SourceOptions.parse({"startingVersion": "earliest"}).starting_version == "earliest"
    assert SourceOptions.parse({"startingVersion": "42"}).starting_version == 42
    _rejects({"startingVersion": "newest"}, "startingVersion")


def test_poll_interval_in_seconds() -> None:
    assert SourceOptions.parse({"pollInterval": "3"}).poll_interval_ms == 3000


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ({"ignoreDeletes": "maybe"}, "ignoreDeletes"),
        ({"caseSensitive": "2"}, "caseSensitive"),
        ({"batchSize": "0"}, "batchSize"),
        ({"batchSize": "-1"}, "batchSize"),
        ({"batchSize": "many"}, "batchSize"),
        ({"batchSize": 2.0}, "batchSize"),
        ({"splitSize": "0"}, "splitSize"),
        ({"splitOpenFileCost": "x"}, "splitOpenFileCost"),
        ({"pollIntervalMs": "-5"}, "pollIntervalMs"),
        ({"maxFilesPerTrigger": "0"}, "maxFilesPerTrigger"),
        ({"columns": " , "}, "columns"),
        ({"metadataColumns": "_pos,_row"}, "metadataColumns"),
        ({"onLineageBreak": "ignore"}, "onLineageBreak"),
        ({"filter": "id >>> 3"}, "filter"),
    ],
)
def test_unparseable_values(raw: dict[str, object], named: str) -> None:
    _rejects(raw, named)


def test_parsed_values() -> None:
    options = SourceOptions.parse({
        "columns": ["id", " kind "], "metadataColumns": "_file, _pos", "ignoreDeletes": "YES",
        "preserveOrder": False, "batchSize": 7, "filter": "kind = 'a'",
    })
    assert options.columns == ("id", "kind")
    assert options.metadata_columns == ("_file", "_pos")
    assert options.ignore_deletes is True
    assert options.preserve_order is False
    assert options.batch_size == 7
    assert options.filter == "kind = 'a'"


def test_catalog_properties_are_never_shown() -> None:
    options = SourceOptions.parse({
        "catalog.uri": "sqlite:///x.db", "catalog.credential": "s3cr3t-value", "snapshotId": "5",
    })
    assert options.catalog_props() == {"uri": "sqlite:///x.db", "credential": "s3cr3t-value"}
    for text in (repr(options), str(options), repr(options.for_mode("bounded"))):
        assert "s3cr3t-value" not in text
        assert "sqlite:///x.db" not in text
        assert "credential" in text  # the key is shown, its value never
    assert options.given == frozenset({"snapshotId"})


def test_options_are_frozen_and_picklable() -> None:
    options = SourceOptions.parse({"snapshotId": "5", "columns": "id"})
    with pytest.raises(AttributeError):
        options.snapshot_id = 6  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(options)) == options


def test_every_option_has_a_mode() -> None:
    for canonical, (_aliases, modes) in OPTION_TABLE.items():
        assert modes, canonical
        assert set(modes) <= {"bounded", "continuous"}


def test_every_alias_has_its_origin_in_the_readme() -> None:
    """Each alias (plain, mode-dependent, seconds- or duration-valued) is documented with
    where it comes from, in ALIAS_ORIGINS and in the README's table, row for row."""
    from pathlib import Path

    from icefloe.options import _MODE_ALIASES, _SECONDS_ALIASES, ALIAS_ORIGINS, ALIASES

    every = set(ALIASES) | set(_MODE_ALIASES) | set(_SECONDS_ALIASES)
    assert every == set(ALIAS_ORIGINS)
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    for alias, (origin, meaning) in ALIAS_ORIGINS.items():
        assert f"| {alias} | {origin} | {meaning} |" in readme
    # each origin is a project, or icefloe's own spelling, never left blank
    assert all(origin.strip() for origin, _ in ALIAS_ORIGINS.values())
