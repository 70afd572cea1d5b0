"""The knobs the tuner sweeps, and their values for a table's shape and an engine.

Runs on the driver. Four knobs; what each one is on each engine:

=============  ======================  =========================  ========================
knob           local                   spark                      ray
=============  ======================  =========================  ========================
parallelism    reader threads          ``minPartitions`` (tasks)  read tasks (blocks)
splitSize      where big files are cut on row-group boundaries (every engine)
ioConcurrency  files fetched ahead per reader on an object store (nothing on local disk)
batchSize      rows per Arrow batch (Spark and Ray get these batches)
=============  ======================  =========================  ========================

The grid leaves out what cannot matter for the shape: a ``parallelism`` above the most
splits the read can have (the baseline's is kept), ``splitSize`` when files have one
row group or are small, ``ioConcurrency`` on a local disk, ``batchSize`` when no file has
more rows than the smallest candidate. A caller may give its own values
(:func:`parse_sweep`), also for a knob the grid would leave out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from icefloe.errors import InvalidOptionError
from icefloe.option_values import parse_int
from icefloe.options import SourceOptions
from icefloe.tuning.sample import TableShape

KNOBS = ("parallelism", "splitSize", "ioConcurrency", "batchSize")
"""Swept in this order (one at a time, the best value of each kept for the next)."""

Value = int | str
"""A knob's value: an integer, or ``auto``: ``ioConcurrency``'s default, and ``splitSize``'s
when the read gives none (the engine's adaptive split size: the configured size, files
cut into more splits where the read would have fewer than the engine's readers;
:meth:`icefloe.enumerator.bounded.BoundedPlan.adaptive_cut`)."""

Setting = dict[str, Value]
"""A value for every knob."""

BATCH_SIZES = (16_384, 65_536, 262_144)
IO_CONCURRENCIES: tuple[Value, ...] = (0, 4, "auto", 64)
KIB = 1024
MIB = 1024 * KIB


def baseline(options: SourceOptions, engine: str, parallelism: int) -> Setting:
    """The setting a read with ``options`` uses (icefloe's defaults where not given);
    ``parallelism`` is the engine's (threads, ``minPartitions`` or read tasks)."""
    io: Value = "auto" if options.io_concurrency is None else options.io_concurrency
    if engine == "spark" and options.min_partitions:
        parallelism = options.min_partitions
    split: Value = options.split_size if "splitSize" in options.given else "auto"
    return {"parallelism": parallelism, "splitSize": split,
            "ioConcurrency": io, "batchSize": options.batch_size}


def grid(shape: TableShape, engine: str, base: Setting, cpus: int) -> dict[str, list[Value]]:
    """The values to sweep per knob (each list holds the baseline's value), in
    :data:`KNOBS` order; a knob whose value cannot matter for ``shape`` is left out."""
    out: dict[str, list[Value]] = {}
    par = int(base["parallelism"])
    if engine == "local":
        pars = {1, 2, 4, cpus, 2 * cpus} | ({8, 16} if shape.remote else set())
    else:
        pars = {max(1, par // 2), par, 2 * par, 4 * par}
    most = min(64, shape.most_splits or 64)  # threads / tasks beyond the splits idle
    out["parallelism"] = sorted(p for p in pars | {par} if 1 <= p <= most or p == par <= 64)
    split_size = SourceOptions().split_size if base["splitSize"] == "auto" \
        else int(base["splitSize"])
    if shape.row_groups > 1 and shape.median_file_bytes > MIB:
        median = shape.median_file_bytes
        sizes = {split_size, median // 2, median // 4, int(median / shape.row_groups * 0.9)}
        if median > split_size:
            sizes.add(2 * split_size)
        sizes = {max(64 * KIB, s // KIB * KIB) for s in sizes if s < median or s == split_size}
        if base["splitSize"] == "auto":  # the default cut first, then explicit sizes
            out["splitSize"] = ["auto", *sorted(sizes)]
        else:
            out["splitSize"] = sorted(sizes)
    if shape.remote:
        out["ioConcurrency"] = _with(list(IO_CONCURRENCIES), base["ioConcurrency"])
    rows_per_file = shape.rows / max(shape.files, 1)
    if rows_per_file > BATCH_SIZES[0]:
        out["batchSize"] = sorted(set(BATCH_SIZES) | {int(base["batchSize"])})
    return {k: out[k] for k in KNOBS if k in out and len(out[k]) > 1}


def _with(values: list[Value], value: Value) -> list[Value]:
    return values if value in values else [*values, value]


def check_value(knob: str, value: Any) -> Value:
    """``value`` of ``knob`` parsed as a read would parse it.

    Raises:
        InvalidOptionError: an unknown knob, or a value its option rejects.
    """
    if knob == "parallelism":
        return parse_int("parallelism", value, minimum=1)
    if knob not in KNOBS:
        raise InvalidOptionError(knob, f"is not a knob icefloe tune sweeps; give one of "
                                 f"{', '.join(KNOBS)}")
    if knob == "splitSize" and str(value).strip().lower() == "auto":
        return "auto"
    try:
        parsed = SourceOptions.parse({knob: value})
    except InvalidOptionError as e:
        if knob != "splitSize":
            raise
        raise InvalidOptionError(knob, f"{value!r} is not a size in bytes; give bytes, "
                                 "or auto (the engine's adaptive split size)") from e
    if knob == "ioConcurrency":
        return "auto" if parsed.io_concurrency is None else parsed.io_concurrency
    return int(getattr(parsed, "batch_size" if knob == "batchSize" else "split_size"))


def parse_sweep(sweep: Mapping[str, Sequence[Any] | str]) -> dict[str, list[Value]]:
    """A caller's grid: ``{"batchSize": [1024, 65536]}`` or ``{"batchSize": "1024,65536"}``,
    each value checked (:func:`check_value`), in :data:`KNOBS` order.

    Raises:
        InvalidOptionError: an unknown knob, a bad value, or no value.
    """
    out: dict[str, list[Value]] = {}
    for knob, values in sweep.items():
        items = values.split(",") if isinstance(values, str) else list(values)
        parsed = [check_value(knob, str(v).strip()) for v in items if str(v).strip()]
        if not parsed:
            raise InvalidOptionError(knob, "no value to sweep; give values like "
                                     f"{knob}=1,2,4")
        out[knob] = list(dict.fromkeys(parsed))
    return {k: out[k] for k in KNOBS if k in out}


def option_texts(setting: Setting, engine: str) -> dict[str, str]:
    """The source options of ``setting`` (``parallelism`` is one only on Spark, as
    ``minPartitions``)."""
    out = {k: str(setting[k]) for k in ("splitSize", "ioConcurrency", "batchSize")
           if not (k == "splitSize" and setting[k] == "auto")}  # not an option value
    if engine == "spark":
        out["minPartitions"] = str(setting["parallelism"])
    return out


def label(setting: Setting, base: Setting) -> str:
    """``batchSize=262144, parallelism=4``: what differs from ``base`` (``baseline``)."""
    changed = [f"{k}={setting[k]}" for k in KNOBS if setting[k] != base[k]]
    return ", ".join(changed) if changed else "baseline"
