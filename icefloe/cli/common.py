"""What every ``icefloe`` subcommand shares: table and option arguments, human-readable
values, quiet engines, the progress line and the stream status line.

Runs in the user's process.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from icefloe.errors import InvalidOptionError

if TYPE_CHECKING:
    from icefloe.source import IcebergSource


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (checked before anything is created)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer; give 1 or more") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is below 1; give 1 or more")
    return value


def table_id(text: str) -> str:
    """argparse type: ``namespace.table`` (a name without a namespace is refused)."""
    parts = text.split(".")
    if len(parts) < 2 or not all(p.strip() for p in parts):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not namespace.table; give the namespace too, e.g. demo.events")
    return text


def parse_kv(items: Sequence[str] | None) -> dict[str, str]:
    """``-o key=value`` arguments as a dict (a later key wins)."""
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidOptionError(item, "give options as key=value, e.g. -o snapshotId=12")
        out[key.strip()] = value
    return out


def add_table_args(p: argparse.ArgumentParser) -> None:
    """The table, ``--catalog`` and ``-o`` arguments of plan / read / stream / snapshots."""
    p.add_argument("table", type=table_id, help="namespace.table")
    p.add_argument("--catalog", help="PyIceberg catalog name (default: the embedded one "
                   "under $ICEFLOE_HOME, else ./icefloe-warehouse)")
    p.add_argument("-o", "--option", action="append", metavar="KEY=VALUE",
                   help="source option (repeatable), e.g. snapshotId=123, catalog.uri=...")


def add_changelog_arg(p: argparse.ArgumentParser) -> None:
    """``--changelog`` of read / stream: the same as ``-o changelog=true``."""
    p.add_argument("--changelog", action="store_true",
                   help="read changes as rows with _change_type (INSERT, DELETE, "
                   "UPDATE_BEFORE, UPDATE_AFTER); same as -o changelog=true")


def add_remote_arg(p: argparse.ArgumentParser) -> None:
    """``--remote sc://host:port`` of read / stream: run on a Spark Connect server."""
    p.add_argument("--remote", metavar="sc://HOST:PORT",
                   help="Spark Connect server to run on (with --engine spark; instead of "
                   "--master)")


def check_remote(args: argparse.Namespace) -> None:
    """Refuse ``--remote`` without ``--engine spark`` or together with ``--master``.

    Raises:
        InvalidOptionError: naming ``--remote`` and the fix.
    """
    remote = getattr(args, "remote", None)
    if remote is None:
        return
    if args.engine != "spark":
        raise InvalidOptionError("--remote", f"{remote!r} is a Spark Connect server; add "
                                 "--engine spark")
    if getattr(args, "master", None):
        raise InvalidOptionError("--remote", "give either --master (a classic Spark driver "
                                 "here) or --remote (a Spark Connect server), not both")
    if not remote.startswith("sc://"):
        raise InvalidOptionError("--remote", f"{remote!r} is not a Spark Connect URL; give "
                                 "sc://HOST:PORT")


def table_options(args: argparse.Namespace) -> dict[str, str]:
    """The ``-o`` options, with ``--changelog`` where the command has it."""
    options = parse_kv(args.option)
    if getattr(args, "changelog", False):
        options.setdefault("changelog", "true")
    return options


def source(args: argparse.Namespace) -> IcebergSource:
    """The source named by the table arguments."""
    from icefloe.source import IcebergSource

    return IcebergSource(args.table, catalog=args.catalog, options=table_options(args))


def iso_ms(ms: int | None) -> str:
    """Milliseconds since the epoch as an ISO-8601 UTC time (``-`` for None)."""
    if ms is None:
        return "-"
    moment = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def partition_text(split: Any, spec_fields: Sequence[Any] | None = None) -> str:
    """A split's partition as ``name=value`` pairs with dates and times in ISO form.

    ``spec_fields`` are the partition spec's fields (name and transform); without them
    the raw values are shown.
    """
    values = list(split.partition)
    if not values:
        return "-"
    parts = []
    for i, value in enumerate(values):
        field = spec_fields[i] if spec_fields and i < len(spec_fields) else None
        name = field.name if field is not None else f"p{i}"
        parts.append(f"{name}={_human(value, field)}")
    return ",".join(parts)


def _human(value: Any, field: Any) -> str:
    if value is None:
        return "null"
    transform = str(getattr(field, "transform", "")).lower() if field is not None else ""
    result_type = getattr(field, "result_type", None)
    kind = str(result_type).lower() if result_type is not None else ""
    if isinstance(value, int) and not isinstance(value, bool):
        epoch = dt.datetime(1970, 1, 1)
        if transform == "day" or kind == "date":
            return (epoch + dt.timedelta(days=value)).date().isoformat()
        if transform == "hour":
            return (epoch + dt.timedelta(hours=value)).isoformat(timespec="hours")
        if transform == "month":
            return f"{1970 + value // 12:04d}-{value % 12 + 1:02d}"
        if transform == "year":
            return f"{1970 + value:04d}"
        if kind.startswith("timestamp"):
            return (epoch + dt.timedelta(microseconds=value)).isoformat()
    return str(value)


def spec_fields_of(plan: Any, spec_id: int) -> list[Any]:
    """Partition fields of ``spec_id`` with their result types (for :func:`partition_text`)."""
    metadata = plan.handle.metadata
    spec = metadata.specs().get(spec_id)
    if spec is None:
        return []
    schema = metadata.schema()
    out = []
    for f in spec.fields:
        try:
            source_type = schema.find_field(f.source_id).field_type
            result = f.transform.result_type(source_type)
        except Exception:  # a dropped source column: show raw values
            result = None
        out.append(_Field(f.name, str(f.transform), result))
    return out


class _Field:
    __slots__ = ("name", "result_type", "transform")

    def __init__(self, name: str, transform: str, result_type: Any) -> None:
        self.name = name
        self.transform = transform
        self.result_type = result_type


def quiet_engines(verbose: int) -> None:
    """Keep Ray's and Spark's chatter off the terminal unless ``-v`` was given."""
    if verbose:
        return
    os.environ.setdefault("RAY_LOG_TO_STDERR", "0")
    os.environ.setdefault("RAY_DATA_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("RAY_verbose_spill_logs", "0")
    os.environ.setdefault("ICEFLOE_QUIET_ENGINES", "1")
    for name in ("ray", "ray.data", "py4j", "pyspark"):
        logging.getLogger(name).setLevel(logging.ERROR)


class Progress:
    """A one-line progress display on stderr: splits done / total as a bar, rows, bytes
    and rows/s, drawn by ``rich`` (a dependency of PyIceberg's, so no new one).

    Drawn only when stderr is a terminal (no frames in logs or pipes); ``rich`` is
    imported only then, so it costs the start-up of no command (benchmarks/RESULTS.md,
    "Start-up").
    """

    def __init__(self, total_splits: int | None, enabled: bool) -> None:
        self.total = total_splits
        self.enabled = enabled and sys.stderr.isatty()
        self.rows = 0
        self.bytes = 0
        self.splits = 0
        self.start = time.monotonic()
        self._bar: Any = None
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn
            from rich.progress import Progress as Bar

            self._bar = Bar(TextColumn("splits"), BarColumn(bar_width=20),
                            MofNCompleteColumn(), TextColumn("{task.fields[detail]}"),
                            console=Console(stderr=True), refresh_per_second=5)
            self._task = self._bar.add_task("read", total=total_splits, detail="")
            self._bar.start()

    def update(self, rows: int = 0, nbytes: int = 0, splits: int = 0, force: bool = False) -> None:
        self.rows += rows
        self.bytes += nbytes
        self.splits += splits
        if self._bar is None:
            return
        elapsed = max(time.monotonic() - self.start, 1e-9)
        self._bar.update(self._task, completed=self.splits, refresh=force,
                         detail=f"rows {self.rows:,}  {self.bytes / 1e6:,.1f} MB  "
                         f"{self.rows / elapsed:,.0f} rows/s")

    def close(self) -> None:
        if self._bar is not None:
            self.update(force=True)
            self._bar.stop()


def status_line(info: dict[str, Any]) -> str:
    """One status line of a running stream, from its ``describe()`` (local or Ray)."""
    parts = [f"committed: {info.get('committed', '-')}"]
    if "snapshots_behind" in info:
        parts.append(f"lag: {info['snapshots_behind']} snapshots, "
                     f"{info.get('records_behind', 0):,} records, "
                     f"{info.get('seconds_behind', 0)} s")
    rows = f"{info.get('rows', 0):,} rows"
    if "rows_per_s" in info:
        rows += f", {info['rows_per_s']:,} rows/s"
    parts.append(rows)
    if "in_flight" in info:
        parts.append(f"{info['in_flight']} splits in flight, {info.get('pending', 0)} pending")
    return "# " + " | ".join(parts)


def print_status(stream: Any) -> None:
    """Print :func:`status_line` of ``stream`` to stderr (one JSON object with
    ``--log-format json``)."""
    from icefloe.cli.logs import emit_status

    info = stream.describe()
    emit_status(status_line(info), info)
