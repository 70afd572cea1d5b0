"""Source options: one frozen value parsed and validated at construction.

Options arrive as strings (Spark, CLI) or Python values (Python API). Every key is
resolved to its canonical name through the alias table, parsed, and checked for
contradictions before any I/O happens. Mode-specific checks (an option that only
makes sense for a bounded read given to a stream) run in :meth:`SourceOptions.for_mode`,
which the source calls before planning, again before any I/O.

The value parsers are in :mod:`icefloe.option_values`. This module stays at about 450 lines
because what is left is read together whenever an option is added: the option table (name,
aliases, modes), where each alias comes from, and :class:`SourceOptions` (its fields with
their contracts, ``parse`` and ``for_mode``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from icefloe.errors import InvalidOptionError
from icefloe.option_values import (
    check_filter,
    parse_bool,
    parse_duration_ms,
    parse_int,
    parse_io_concurrency,
    parse_names,
    parse_snapshot_id,
    parse_starting_version,
    parse_timestamp_ms,
)

Mode = Literal["bounded", "continuous"]

KIB = 1024
MIB = 1024 * KIB
METADATA_COLUMNS = ("_snapshot_id", "_sequence_number", "_file", "_pos", "_row_id",
                    "_last_updated_sequence_number")
LINEAGE_STRATEGIES = ("fail", "restartFromStart", "restartFromHead")
SCHEMA_CHANGE_MODES = ("fail", "evolve", "keep")
WATERMARK_MISSING_STATS = ("fail", "first", "last")
# java.util.concurrent.TimeUnit names, as Iceberg Flink's watermarkTimeUnit takes them
TIME_UNITS = ("NANOSECONDS", "MICROSECONDS", "MILLISECONDS", "SECONDS", "MINUTES", "HOURS",
              "DAYS")

# canonical name -> (aliases, modes it belongs to)
_BOTH: tuple[Mode, ...] = ("bounded", "continuous")
_BOUNDED: tuple[Mode, ...] = ("bounded",)
_CONTINUOUS: tuple[Mode, ...] = ("continuous",)
OPTION_TABLE: dict[str, tuple[tuple[str, ...], tuple[Mode, ...]]] = {
    "snapshotId": (("versionAsOf", "snapshot-id"), _BOUNDED),
    "asOfTimestamp": (("timestampAsOf", "as-of-timestamp"), _BOUNDED),
    "ref": (("branch", "tag"), _BOTH),
    "startSnapshotId": ((), _BOUNDED),
    "endSnapshotId": (("end-snapshot-id",), _BOUNDED),
    "startingVersion": (("startSnapshotID",), _CONTINUOUS),
    "startingTimestamp": (("stream-from-timestamp",), _CONTINUOUS),
    "pollIntervalMs": (("updateCheckIntervalMillis", "monitor-interval"), _CONTINUOUS),
    "initialDelayMs": (("updateCheckDelayMillis",), _CONTINUOUS),
    "ignoreDeletes": ((), _BOTH),
    "ignoreChanges": ((), _BOTH),
    "skipChangeCommits": ((), _BOTH),
    "skipDeletes": (("streaming-skip-delete-snapshots",), _BOTH),
    "skipOverwrites": (("streaming-skip-overwrite-snapshots",), _BOTH),
    "onLineageBreak": ((), _CONTINUOUS),
    "onSchemaChange": ((), _CONTINUOUS),
    "allowColumnRename": (("allowSourceColumnRename",), _CONTINUOUS),
    "allowColumnDrop": (("allowSourceColumnDrop",), _CONTINUOUS),
    "failOnDataLoss": ((), _CONTINUOUS),
    "followRenames": ((), _CONTINUOUS),
    "maxFilesPerTrigger": (("streaming-max-files-per-micro-batch",), _CONTINUOUS),
    "maxBytesPerTrigger": (("streaming-max-bytes-per-micro-batch",), _CONTINUOUS),
    "maxRowsPerTrigger": (("streaming-max-rows-per-micro-batch",), _CONTINUOUS),
    "maxSnapshotsPerTrigger": (("streaming-max-snapshots-per-micro-batch",), _CONTINUOUS),
    "columns": (("selected_fields",), _BOTH),
    "filter": (("row_filter",), _BOTH),
    "caseSensitive": (("case-sensitive",), _BOTH),
    "batchSize": (("parquetBatchSize",), _BOTH),
    "splitSize": (("split-size",), _BOTH),
    "splitOpenFileCost": (("file-open-cost",), _BOTH),
    "minPartitions": ((), _BOTH),
    "metadataColumns": ((), _BOTH),
    "preserveOrder": ((), _BOTH),
    "catalog": ((), _BOTH),
    "maxAttempts": ((), _BOTH),
    "retryBackoffMs": ((), _BOTH),
    "ioConcurrency": ((), _BOTH),
    "changelog": (("readChangeFeed",), _BOTH),
    "identifierColumns": ((), _BOTH),
    "computeUpdates": ((), _BOTH),
    "netChanges": ((), _BOUNDED),
    "watermarkColumn": (("watermark-column",), _BOTH),
    "watermarkTimeUnit": (("watermark-time-unit",), _BOTH),
    "watermarkMissingStats": ((), _BOTH),
}
# `start-snapshot-id` means startSnapshotId (exclusive) in a bounded read, as Iceberg
# Spark's incremental read, and startingVersion (inclusive) in a stream, as Iceberg Flink's
# INCREMENTAL_FROM_SNAPSHOT_ID: it is resolved when the mode is known. Both those sources
# read append snapshots only and pass over every other one silently, so the alias also
# sets ``appends_only`` (see ALIAS_ORIGINS).
_MODE_ALIASES: dict[str, dict[Mode, str]] = {
    "start-snapshot-id": {"bounded": "startSnapshotId", "continuous": "startingVersion"},
}
# seconds-valued alias of the Nessie incremental design
_SECONDS_ALIASES = {"pollInterval": "pollIntervalMs"}
# aliases that also set ``appends_only`` (the source they come from reads appends only)
_APPENDS_ONLY_ALIASES = frozenset({"start-snapshot-id", "end-snapshot-id"})

ALIASES: dict[str, str] = {
    alias: canonical for canonical, (aliases, _) in OPTION_TABLE.items() for alias in aliases
}

ALIAS_ORIGINS: dict[str, tuple[str, str]] = {
    "versionAsOf": ("Delta; Iceberg Spark", "the snapshot (Delta: table version) to read; "
                    "a snapshot id only (Iceberg Spark also takes a branch or tag name: "
                    "use ref)"),
    "snapshot-id": ("Iceberg Spark and Flink", "the snapshot to read"),
    "timestampAsOf": ("Delta; Iceberg Spark", "the newest snapshot at or before this time"),
    "as-of-timestamp": ("Iceberg Spark and Flink", "the newest snapshot at or before this "
                        "time, ms"),
    "branch": ("Iceberg Spark and Flink", "the branch to read"),
    "tag": ("Iceberg Spark and Flink", "the tag to read"),
    "start-snapshot-id": ("Iceberg Spark (bounded); Iceberg Flink (stream)",
                          "bounded: startSnapshotId, exclusive; stream: startingVersion, "
                          "inclusive; both: appends only"),
    "end-snapshot-id": ("Iceberg Spark and Flink", "endSnapshotId, inclusive; appends only"),
    "startSnapshotID": ("icefloe (Nessie incremental design)", "startingVersion"),
    "stream-from-timestamp": ("Iceberg Spark", "the changes of the first snapshot at or "
                              "after this time"),
    "updateCheckIntervalMillis": ("Delta Flink connector", "poll interval, ms"),
    "monitor-interval": ("Iceberg Flink", "poll interval, a Flink duration"),
    "pollInterval": ("icefloe (Nessie incremental design)", "poll interval, seconds"),
    "updateCheckDelayMillis": ("Delta Flink connector", "delay before the first poll, ms"),
    "streaming-skip-delete-snapshots": ("Iceberg Spark", "skipDeletes: skip delete "
                                        "snapshots; an overwrite still fails"),
    "streaming-skip-overwrite-snapshots": ("Iceberg Spark", "skipOverwrites: skip overwrite "
                                           "snapshots; a delete still fails"),
    "streaming-max-files-per-micro-batch": ("Iceberg Spark", "maxFilesPerTrigger"),
    "streaming-max-rows-per-micro-batch": ("Iceberg Spark", "maxRowsPerTrigger"),
    "streaming-max-bytes-per-micro-batch": ("icefloe (Iceberg Spark's spelling)",
                                            "maxBytesPerTrigger"),
    "streaming-max-snapshots-per-micro-batch": ("icefloe (Iceberg Spark's spelling)",
                                                "maxSnapshotsPerTrigger"),
    "selected_fields": ("PyIceberg scan", "columns, in the table's order"),
    "row_filter": ("PyIceberg scan", "filter"),
    "case-sensitive": ("Iceberg Flink", "caseSensitive"),
    "parquetBatchSize": ("Delta Flink connector", "rows per batch"),
    "split-size": ("Iceberg Spark and Flink", "target split size, bytes"),
    "file-open-cost": ("Iceberg Spark", "minimum weight of a file when packing, bytes"),
    "allowSourceColumnRename": ("Delta", "allowColumnRename: go on through a column "
                                "rename"),
    "allowSourceColumnDrop": ("Delta", "allowColumnDrop: go on through a column drop"),
    "readChangeFeed": ("Delta", "changelog: every snapshot's changes as rows with "
                       "_change_type (Delta's own columns are _change_type, _commit_version "
                       "and _commit_timestamp)"),
    "watermark-column": ("Iceberg Flink", "watermarkColumn: splits in order of the "
                         "column's lower bound, a watermark from those bounds"),
    "watermark-time-unit": ("Iceberg Flink", "watermarkTimeUnit: the unit of a long "
                            "watermarkColumn"),
}
"""Where each alias comes from and what it means there (and so here): the README's table."""

NOT_ALIASES: dict[str, str] = {
    "withEventTimeOrder": "is Delta's switch that takes its event-time column from the "
    "query's withWatermark, which a data source cannot see (and orders the initial "
    "snapshot only); name the column instead: watermarkColumn=<the withWatermark column>",
}
"""Options of the anchors icefloe knows but does not take, with the reason and the fix (an
alias must mean what it means at home)."""


def _canonical_of(spelling: str) -> str:
    if spelling in _SECONDS_ALIASES:
        return _SECONDS_ALIASES[spelling]
    return ALIASES.get(spelling, spelling)


def _case_index() -> tuple[dict[str, str], dict[str, dict[Mode, str]]]:
    """The case rule: a key matches a name or alias exactly, else ignoring case.

    Returns the lower-cased key -> spelling map of unambiguous names, and the lower-cased
    keys whose spellings name different options (``startSnapshotId`` of a bounded read and
    the stream alias ``startSnapshotID``), resolved by mode like ``start-snapshot-id``.
    """
    spellings: dict[str, list[str]] = {}
    for name in [*OPTION_TABLE, *ALIASES, *_SECONDS_ALIASES]:
        spellings.setdefault(name.lower(), []).append(name)
    unique: dict[str, str] = {}
    by_mode: dict[str, dict[Mode, str]] = {
        alias.lower(): choices for alias, choices in _MODE_ALIASES.items()}
    for lower, names in spellings.items():
        targets = {_canonical_of(n) for n in names}
        if len(targets) == 1:
            unique[lower] = names[0]
            continue
        choices: dict[Mode, str] = {}
        for target in sorted(targets):
            for mode in OPTION_TABLE[target][1]:
                choices.setdefault(mode, target)
        by_mode[lower] = choices
    return unique, by_mode


_CASE_UNIQUE, _CASE_BY_MODE = _case_index()


def _suggest(key: str) -> str:
    """``; did you mean 'x'?`` for a near miss of a known name, else the known names."""
    import difflib

    known = {name.lower(): name for name in [*OPTION_TABLE, *ALIASES, *_MODE_ALIASES]}
    near = difflib.get_close_matches(key.lower(), list(known), n=1, cutoff=0.75)
    if near:
        return f"unknown option; did you mean {known[near[0]]!r}?"
    return f"unknown option; known options are {', '.join(sorted(OPTION_TABLE))}"


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """The validated options of one source. Construct with :meth:`parse`.

    All fields are plain picklable values (the object is shipped to Spark / Ray workers).
    Snapshot ids are ints; timestamps are milliseconds since the epoch.
    """

    snapshot_id: int | None = None
    as_of_timestamp_ms: int | None = None
    ref: str = "main"
    ref_kind: Literal["any", "branch", "tag"] = "any"
    start_snapshot_id: int | None = None
    end_snapshot_id: int | None = None
    starting_version: int | Literal["latest", "earliest"] | None = None
    starting_timestamp_ms: int | None = None
    poll_interval_ms: int = 5000
    initial_delay_ms: int = 0
    ignore_deletes: bool = False
    ignore_changes: bool = False
    skip_change_commits: bool = False
    skip_deletes: bool = False
    skip_overwrites: bool = False
    appends_only: bool = False
    """Read append snapshots only and pass over every other one silently, as Iceberg
    Spark's incremental read and Iceberg Flink's incremental stream do: set by the
    ``start-snapshot-id`` / ``end-snapshot-id`` aliases (never by a canonical option)."""
    on_lineage_break: str = "fail"
    fail_on_data_loss: bool = True
    on_schema_change: Literal["fail", "evolve", "keep"] | None = None
    """``fail``, ``evolve`` or ``keep`` (:mod:`icefloe.enumerator.schema_track`); None: the
    engine's default (:meth:`schema_mode`)."""
    allow_column_rename: bool = False
    allow_column_drop: bool = False
    follow_renames: bool = False
    max_files_per_trigger: int | None = None
    max_bytes_per_trigger: int | None = None
    max_rows_per_trigger: int | None = None
    max_snapshots_per_trigger: int | None = None
    columns: tuple[str, ...] | None = None
    columns_in_table_order: bool = False
    """``columns`` came as PyIceberg's ``selected_fields``: the table's column order, as a
    PyIceberg scan returns them (``columns`` itself keeps the order asked, as Spark's select)."""
    filter: str | None = None
    case_sensitive: bool = True
    batch_size: int = 65536
    split_size: int = 128 * MIB
    split_open_file_cost: int = 256 * KIB
    """Not Spark's 4 MiB ``openCostInBytes``: a Spark or Ray read task in Python costs
    ~40 ms of set-up, a small local file ~0.3 ms to open; 10,000 small files pack into 20
    tasks instead of 313 (3.8x faster on Spark, 1.9x on Ray; benchmarks/RESULTS.md)."""
    min_partitions: int | None = None
    metadata_columns: tuple[str, ...] = ()
    preserve_order: bool = True
    catalog_name: str | None = None
    max_attempts: int = 4
    retry_backoff_ms: int = 200
    changelog: bool = False
    """Read every snapshot's changes as rows (``_change_type`` INSERT / DELETE /
    UPDATE_BEFORE / UPDATE_AFTER, ...) instead of the rows its data files added: see
    :mod:`icefloe.enumerator.changelog`. The snapshot-kind policies do not apply."""
    identifier_columns: tuple[str, ...] | None = None
    """Key columns of ``computeUpdates`` / ``netChanges`` (None: the table's identifier
    fields)."""
    compute_updates: bool = False
    """Pair a DELETE and an INSERT of the same key in one snapshot into UPDATE_BEFORE /
    UPDATE_AFTER rows."""
    net_changes: bool = False
    """Collapse a bounded range's changes to their net effect (a row inserted and deleted
    inside the range gives nothing)."""
    watermark_column: str | None = None
    """Event time (Iceberg Flink's ``watermarkColumn``): a timestamp, timestamptz (also
    ``_ns``) or long column; splits are handed out in order of its lower bound in the data
    files' statistics and stream items carry a watermark
    (:mod:`icefloe.enumerator.event_time`). Checked against the schema before any manifest
    is read."""
    watermark_time_unit: str = "MICROSECONDS"
    """The unit of a long ``watermarkColumn`` (a ``java.util.concurrent.TimeUnit`` name, as
    Iceberg Flink's ``watermarkTimeUnit``; default microseconds, Flink's default too)."""
    watermark_missing_stats: Literal["fail", "first", "last"] = "fail"
    """A data file without a lower bound for ``watermarkColumn`` (metrics mode ``none`` or
    ``counts``, Iceberg's default past 100 columns): ``fail`` with
    :class:`~icefloe.errors.MissingStatsError` naming the file and the column, or read such
    files ``first`` / ``last`` (they do not hold the watermark back)."""
    io_concurrency: int | None = None
    """Whole small files fetched ahead per reader thread from an object store, and ranged
    requests in flight of a large split's column chunks (``None``: ``auto``, see
    :mod:`icefloe.reader.prefetch` and :mod:`icefloe.reader.ranged`; ``0``: off)."""
    catalog_properties: tuple[tuple[str, str], ...] = ()
    checkpoint_properties: tuple[tuple[str, str], ...] = ()
    """``checkpoint.<prop>`` options (prefix removed): FileIO properties of the checkpoint
    store (``s3.endpoint``, ``s3.access-key-id``...) over the catalog's own."""
    given: frozenset[str] = field(default_factory=frozenset)
    """Canonical names of the options the user set (defaults are not in it)."""
    pending_mode_aliases: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None = None) -> SourceOptions:
        """Resolve aliases, parse every value and reject contradictions.

        Raises:
            InvalidOptionError: naming the option, for an unknown key, an unparseable
                value, or two options that cannot be used together.
        """
        values: dict[str, Any] = {}
        catalog_props: dict[str, str] = {}
        checkpoint_props: dict[str, str] = {}
        pending: list[tuple[str, str]] = []
        given: dict[str, str] = {}
        ref_kind = "any"
        for key, value in (raw or {}).items():
            if value is None:
                continue
            if key.lower().startswith("catalog."):
                catalog_props[key[len("catalog.") :]] = str(value)
                continue
            if key.lower().startswith("checkpoint."):
                checkpoint_props[key[len("checkpoint.") :]] = str(value)
                continue
            spelling = key
            if key not in OPTION_TABLE and key not in ALIASES and key not in _SECONDS_ALIASES:
                if key in _MODE_ALIASES or key.lower() in _CASE_BY_MODE:
                    pending.append((key, str(value)))
                    continue
                spelling = _CASE_UNIQUE.get(key.lower(), key)
            if spelling in _SECONDS_ALIASES:
                canonical = _SECONDS_ALIASES[spelling]
                text = str(value).strip()
                value = parse_int(key, value, minimum=0) * 1000 if text.isdigit() \
                    else parse_duration_ms(key, value)
            else:
                canonical = ALIASES.get(spelling, spelling)
            if canonical not in OPTION_TABLE:
                home = {n.lower(): n for n in NOT_ALIASES}.get(key.lower())
                if home is not None:
                    raise InvalidOptionError(key, NOT_ALIASES[home])
                raise InvalidOptionError(key, _suggest(key))
            if canonical in given:
                raise InvalidOptionError(
                    canonical, f"given twice (as {given[canonical]!r} and {key!r}); give it once"
                )
            given[canonical] = key
            if spelling in ("branch", "tag"):
                ref_kind = spelling
            values[canonical] = value
        parsed = cls._convert(values)
        parsed["ref_kind"] = ref_kind
        if "end-snapshot-id" in raw_keys(raw):
            parsed["appends_only"] = True
        if "selected_fields" in raw_keys(raw):
            parsed["columns_in_table_order"] = True
        options = cls(
            **parsed,
            catalog_properties=tuple(sorted(catalog_props.items())),
            checkpoint_properties=tuple(sorted(checkpoint_props.items())),
            given=frozenset(given),
            pending_mode_aliases=tuple(pending),
        )
        options._check_combinations()
        return options

    @staticmethod
    def _convert(values: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, value in values.items():
            if name in ("snapshotId", "startSnapshotId", "endSnapshotId"):
                out[_field_name(name)] = parse_snapshot_id(name, value)
            elif name == "asOfTimestamp":
                out["as_of_timestamp_ms"] = parse_timestamp_ms(name, value)
            elif name == "startingTimestamp":
                out["starting_timestamp_ms"] = parse_timestamp_ms(name, value)
            elif name == "startingVersion":
                out["starting_version"] = parse_starting_version(name, value)
            elif name in ("ignoreDeletes", "ignoreChanges", "skipChangeCommits",
                          "skipDeletes", "skipOverwrites", "failOnDataLoss", "caseSensitive",
                          "preserveOrder", "followRenames", "changelog", "computeUpdates",
                          "netChanges", "allowColumnRename", "allowColumnDrop"):
                out[_field_name(name)] = parse_bool(name, value)
            elif name in ("pollIntervalMs", "initialDelayMs", "retryBackoffMs"):
                out[_field_name(name)] = parse_duration_ms(name, value)
            elif name in ("batchSize", "splitSize", "splitOpenFileCost", "minPartitions") \
                    or name.startswith("max"):
                out[_field_name(name)] = parse_int(name, value, minimum=1)
            elif name == "columns":
                out["columns"] = parse_names(name, value)
            elif name == "identifierColumns":
                out["identifier_columns"] = parse_names(name, value)
            elif name == "metadataColumns":
                out["metadata_columns"] = parse_names(name, value, METADATA_COLUMNS)
            elif name == "onLineageBreak":
                if str(value) not in LINEAGE_STRATEGIES:
                    raise InvalidOptionError(
                        name, f"{value!r} is not one of {', '.join(LINEAGE_STRATEGIES)}"
                    )
                out["on_lineage_break"] = str(value)
            elif name == "onSchemaChange":
                if str(value) not in SCHEMA_CHANGE_MODES:
                    raise InvalidOptionError(
                        name, f"{value!r} is not one of {', '.join(SCHEMA_CHANGE_MODES)}"
                    )
                out["on_schema_change"] = str(value)
            elif name == "filter":
                out["filter"] = check_filter(str(value))
            elif name == "ref":
                text = str(value).strip()
                if not text:
                    raise InvalidOptionError(name, "is empty; give a branch or tag name")
                out["ref"] = text
            elif name == "catalog":
                out["catalog_name"] = str(value)
            elif name == "watermarkColumn":
                text = str(value).strip()
                if not text:
                    raise InvalidOptionError(name, "is empty; give a timestamp or long column")
                out["watermark_column"] = text
            elif name == "watermarkTimeUnit":
                unit = str(value).strip().upper()
                if unit not in TIME_UNITS:
                    raise InvalidOptionError(
                        name, f"{value!r} is not one of {', '.join(TIME_UNITS)}")
                out["watermark_time_unit"] = unit
            elif name == "watermarkMissingStats":
                if str(value) not in WATERMARK_MISSING_STATS:
                    raise InvalidOptionError(name, f"{value!r} is not one of "
                                             f"{', '.join(WATERMARK_MISSING_STATS)}")
                out["watermark_missing_stats"] = str(value)
            elif name == "ioConcurrency":
                out["io_concurrency"] = parse_io_concurrency(name, value)
        return out

    def _check_combinations(self) -> None:
        exclusive = [n for n in ("snapshotId", "asOfTimestamp") if n in self.given]
        ranged = [n for n in ("startSnapshotId", "endSnapshotId") if n in self.given]
        if len(exclusive) > 1 or (exclusive and ranged):
            a, b = (exclusive + ranged)[:2]
            raise InvalidOptionError(
                b, f"cannot be combined with {a}: choose one snapshot (snapshotId / asOfTimestamp) "
                "or one range (startSnapshotId / endSnapshotId)"
            )
        if exclusive and "ref" in self.given:
            raise InvalidOptionError(
                exclusive[0], f"cannot be combined with {self.ref_kind_name}: a snapshot id or "
                "timestamp already pins the snapshot"
            )
        if "startingVersion" in self.given and "startingTimestamp" in self.given:
            raise InvalidOptionError(
                "startingTimestamp", "cannot be combined with startingVersion; choose one"
            )
        for skipper in ("skipChangeCommits", "skipOverwrites"):
            if self.ignore_changes and skipper in self.given:
                raise InvalidOptionError(
                    skipper,
                    "cannot be combined with ignoreChanges (one emits the added files of "
                    "overwrites, the other skips them); choose one",
                )
        self._check_changelog()
        for name in ("watermarkTimeUnit", "watermarkMissingStats"):
            if name in self.given and self.watermark_column is None:
                raise InvalidOptionError(name, "applies only with watermarkColumn; set "
                                         "watermarkColumn=<a timestamp or long column> or "
                                         "remove it")
        if self.watermark_column is not None and self.changelog:
            raise InvalidOptionError("watermarkColumn", "cannot be combined with changelog "
                                     "(change splits are ordered by commit); remove one")
        if (self.start_snapshot_id is not None and self.end_snapshot_id is not None
                and self.start_snapshot_id == self.end_snapshot_id):
            raise InvalidOptionError(
                "endSnapshotId", f"equals startSnapshotId {self.start_snapshot_id}: the range "
                "(start exclusive, end inclusive) is empty; pick an earlier start"
            )

    def _check_changelog(self) -> None:
        """``changelog`` reads every kind of snapshot as changes: the options that choose
        which snapshots to pass over, and a single pinned snapshot, do not fit it."""
        for name in ("identifierColumns", "computeUpdates", "netChanges"):
            if name in self.given and not self.changelog:
                raise InvalidOptionError(name, "applies only to a changelog read; set "
                                         "changelog=true or remove it")
        if not self.changelog:
            return
        for name in ("ignoreDeletes", "ignoreChanges", "skipChangeCommits", "skipDeletes",
                     "skipOverwrites", "snapshotId", "asOfTimestamp"):
            if name in self.given:
                what = "pins one snapshot; a changelog reads a range (startSnapshotId " \
                    "exclusive, endSnapshotId inclusive)" if name in ("snapshotId",
                                                                      "asOfTimestamp") \
                    else "chooses snapshots to pass over; a changelog reads every " \
                    "delete and overwrite as DELETE / INSERT rows"
                raise InvalidOptionError(name, f"cannot be combined with changelog: it {what}; "
                                         "remove it")
        lineage = [n for n in self.metadata_columns
                   if n in ("_row_id", "_last_updated_sequence_number")]
        if lineage:
            raise InvalidOptionError(
                "metadataColumns", f"{lineage[0]} cannot be read in a changelog yet; remove it")
        if self.appends_only:
            raise InvalidOptionError(
                "changelog", "cannot be combined with the start-snapshot-id / end-snapshot-id "
                "aliases (they read appends only); use startSnapshotId / endSnapshotId")

    @property
    def ref_kind_name(self) -> str:
        return {"any": "ref", "branch": "branch", "tag": "tag"}[self.ref_kind]

    def for_mode(self, mode: Mode) -> SourceOptions:
        """Return these options checked for ``mode``, with mode-dependent aliases resolved.

        Raises:
            InvalidOptionError: an option given that belongs only to the other mode.
        """
        resolved = self
        for alias, text in self.pending_mode_aliases:
            choices = _MODE_ALIASES.get(alias) or _CASE_BY_MODE[alias.lower()]
            canonical = choices[mode]
            if canonical in resolved.given:
                raise InvalidOptionError(canonical,
                                         f"given twice (also as {alias!r}); give it once")
            converted = self._convert({canonical: text})
            resolved = dataclasses.replace(
                resolved, **converted, given=resolved.given | {canonical}, pending_mode_aliases=(),
                appends_only=resolved.appends_only or alias in _APPENDS_ONLY_ALIASES,
            )
        resolved._check_combinations()
        for name in sorted(resolved.given):
            modes = OPTION_TABLE[name][1]
            if mode not in modes:
                other = "a bounded read (plan / read / to_arrow)" if mode == "continuous" \
                    else "a stream (stream / readStream)"
                raise InvalidOptionError(
                    name, f"applies only to {other}, not to a {mode} read; remove it"
                )
        return resolved

    def schema_mode(self, engine: str) -> Literal["fail", "evolve", "keep"]:
        """``onSchemaChange``, or the engine's default: ``fail`` on Spark (a streaming
        query's schema is fixed when it starts), ``evolve`` on the local engine and Ray.

        Raises:
            InvalidOptionError: ``evolve`` on Spark.
        """
        if engine == "spark":
            if self.on_schema_change == "evolve":
                raise InvalidOptionError(
                    "onSchemaChange", "evolve is not possible on Spark: a streaming query's "
                    "schema is fixed when it starts. Use fail (the default: the query stops "
                    "at the change and a restart reads on in the new schema) or keep")
            return self.on_schema_change or "fail"
        return self.on_schema_change or "evolve"

    def catalog_props(self) -> dict[str, str]:
        """The ``catalog.<prop>`` options, without the prefix."""
        return dict(self.catalog_properties)

    def checkpoint_props(self) -> dict[str, str]:
        """The ``checkpoint.<prop>`` options, without the prefix."""
        return dict(self.checkpoint_properties)

    def __repr__(self) -> str:
        # catalog and checkpoint properties may hold credentials: show only their keys
        set_fields = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ("catalog_properties", "checkpoint_properties", "given",
                              "pending_mode_aliases")
            and getattr(self, f.name) != f.default
        }
        keys = [k for k, _ in self.catalog_properties]
        checkpoint_keys = [k for k, _ in self.checkpoint_properties]
        return (f"SourceOptions({set_fields}, catalog_properties={keys}, "
                f"checkpoint_properties={checkpoint_keys})")


def raw_keys(raw: Mapping[str, Any] | None) -> set[str]:
    """The keys of ``raw`` whose value is set (not None)."""
    return {k for k, v in (raw or {}).items() if v is not None}



def _field_name(canonical: str) -> str:
    out = []
    for ch in canonical:
        if ch.isupper():
            out.append("_" + ch.lower())
        else:
            out.append(ch)
    return "".join(out)
