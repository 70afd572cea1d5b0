"""``icefloe.tune``: measure the read knobs on the user's own table, storage and engine.

Runs on the driver. The steps, each within the budget:

1. plan the read (icefloe's planner, the options given) and take the table's shape;
2. pick a deterministic sample of its files (or of one large file's row groups:
   :func:`~icefloe.tuning.sample.sample_parts`) and size it so that every planned read
   fits the budget (a calibration read of the baseline, which also warms the cache);
3. sweep the knobs one at a time in :data:`~icefloe.tuning.grid.KNOBS` order: every value
   of a knob, the others at the best values found so far, :data:`SWEEP_REPS` interleaved
   runs each; a value replaces the current one only when it is faster by more than the
   noise (:func:`~icefloe.tuning.measure.beats`); a knob that no longer fits the budget
   is reported as not swept (the first knob is always swept, past the budget if need be);
4. confirm: the sweep's best setting against the baseline, :data:`CONFIRM_REPS`
   interleaved runs each (and as many again when those leave it undecided and the budget
   allows: :func:`_confirm`). The verdict is ``recommend`` only when the sweep and the
   confirmation both found the difference larger than the noise.

Nothing is written to the table or the catalog.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pyiceberg.catalog import Catalog

from icefloe.enumerator.bounded import plan_bounded
from icefloe.errors import InvalidOptionError
from icefloe.local.engine import target_splits
from icefloe.options import SourceOptions
from icefloe.source import IcebergSource, default_parallelism
from icefloe.splits.split import FileSplit
from icefloe.tuning.budget import DEFAULT_BUDGET, parse_budget
from icefloe.tuning.engines import ENGINES, Engine, Work, open_engine
from icefloe.tuning.grid import KNOBS, Setting, baseline, grid, label, parse_sweep
from icefloe.tuning.measure import MIN_GAIN, beats, gain, interleaved, median, timed
from icefloe.tuning.result import Trial, TuneResult
from icefloe.tuning.sample import (
    FileInfo,
    Part,
    RowGroups,
    files_of,
    pick,
    row_groups_of,
    sample_parts,
    shape_of,
    window_splits,
)

log = logging.getLogger(__name__)

SWEEP_REPS = 3
CONFIRM_REPS = 7
INITIAL_SAMPLE_BYTES = 16 * 1024 * 1024
"""Bytes of the first sample (then scaled to the budget by the calibration reads)."""
MIN_READ_S = 0.05
"""Shortest read worth timing: below it, a sample grows when the table allows."""
CALIBRATION_READS = 4
CALIBRATION_SHARE = 0.25
"""Most of the budget (after planning and the engine's start) the calibration takes."""
MAX_LOOPS = 50
"""Most reads of a whole small table in one timed run (a run shorter than a few tens of
milliseconds measures the machine's noise, not the setting)."""
BUDGET_SHARE = 0.75
"""Share of the budget left after calibration that the planned reads are sized to (the
rest absorbs slow runs on a loaded machine)."""


def tune(table: str, catalog: str | Catalog | None = None,
         options: Mapping[str, Any] | None = None, *, engine: str = "local",
         budget: str | float | dt.timedelta = DEFAULT_BUDGET, parallelism: int | None = None,
         sweep: Mapping[str, Sequence[Any] | str] | None = None, master: str | None = None,
         address: str | None = None, progress: Callable[[str], None] | None = None,
         ) -> TuneResult:
    """Measure the read knobs of ``table`` on ``engine`` within ``budget``; see the module.

    Args:
        table: ``namespace.table``.
        catalog: as :class:`icefloe.IcebergSource`'s.
        options: the bounded-read options the table is read with (``snapshotId``,
            ``columns``, ``filter``...; a knob given here is the baseline's value).
        engine: ``local``, ``spark`` or ``ray``.
        budget: the wall time to spend (``90s``, ``2min``, seconds, a timedelta), engine
            start included; the confirmation may overrun it by a few reads.
        parallelism: the local engine's reader threads of the baseline (None:
            ``read()``'s default, :func:`icefloe.source.default_parallelism`). Spark's
            baseline is the session's default parallelism, Ray's the
            blocks ``icefloe.ray.read`` asks for.
        sweep: the values to sweep, per knob (``{"batchSize": [16384, 262144]}``);
            default: a grid chosen from the table's shape and the engine.
        master: the Spark master when no session is running (default ``local[*]``).
        address: the Ray cluster when Ray is not initialized (default: a local Ray).
        progress: called with a line before each step (the CLI shows them).

    Raises:
        InvalidOptionError: a bad option, budget, engine or sweep value, or a read with
            no data files.
        CatalogError, SnapshotError: the table or snapshot cannot be resolved.
        ImportError: the engine's extra is not installed (naming it).
    """
    started = time.monotonic()
    budget_s = parse_budget(budget)
    if engine not in ENGINES:
        raise InvalidOptionError("engine", f"{engine!r} is not an engine; give one of "
                                 f"{', '.join(ENGINES)}")
    given = parse_sweep(sweep) if sweep else None
    source = IcebergSource(table, catalog=catalog, options=options)
    opts = source.options.for_mode("bounded")
    if opts.net_changes:
        raise InvalidOptionError("netChanges", "reads a range as one task, so no knob "
                                 "changes it; tune the read without it")
    say = progress or (lambda line: None)
    say(f"planning {table}")
    plan = source.bounded_plan()
    files = files_of(plan.splits())
    if not files:
        raise InvalidOptionError("table", f"the read of {table} has no data files (an empty "
                                 "table, snapshot or filter): tune needs data to measure")
    say(f"starting engine {engine}")
    if parallelism is None:
        parallelism = default_parallelism(plan)
    eng = open_engine(engine, parallelism, master, address)
    try:
        bench = _Bench(source, opts, eng, files, plan.handle.io)
        base = baseline(opts, engine, eng.default_parallelism())
        shape = shape_of(files, pick(files, INITIAL_SAMPLE_BYTES), plan.handle.io)
        sample = bench.resample(INITIAL_SAMPLE_BYTES)
        knobs = given or grid(shape, engine, base, eng.cpus())
        knobs = {k: v if base[k] in v else [base[k], *v] for k, v in knobs.items()}
        reads = sum(len(v) for v in knobs.values()) * SWEEP_REPS + 2 * CONFIRM_REPS
        deadline = started + budget_s
        sample, per_read, target = _calibrate(bench, base, files, sample, deadline, reads,
                                              say)
        bench.sample = tuple(sample)
        if len(sample) == len(files) and all(p.whole for p in sample) \
                and per_read < target / 2:  # a small table
            bench.loops = min(MAX_LOOPS, int(target / max(per_read, 1e-6)))
            per_read *= bench.loops
        trials, current, skipped = _sweep(bench, base, knobs, deadline, per_read, say)
        sample_splits = bench.work(base).splits
        loops = bench.loops
        whole = _whole_read(bench, files, sample_splits, per_read, deadline)
        if whole:
            say(f"confirming on the whole read: {_describe(list(bench.sample), files)}")
        conf, verdict = _confirm(bench, base, current, trials, deadline, say)
        return TuneResult(
            table=table, engine=engine, shape=shape, sample_files=len(sample),
            sample_bytes=sum(s.length for s in sample_splits),
            sample_rows=sum(s.record_count for s in sample_splits), baseline=base,
            sample_groups=_groups(sample),
            trials=trials, skipped=skipped, confirmation=conf, verdict=verdict,
            loops=loops, confirm_whole=whole,
            budget_s=budget_s, elapsed_s=time.monotonic() - started, reps=SWEEP_REPS,
            confirm_reps=len(conf[0].seconds),
            base_options={k: str(v) for k, v in (options or {}).items() if v is not None
                          and not str(k).lower().startswith(("catalog.", "checkpoint."))})
    finally:
        eng.close()


def _groups(sample: Sequence[Part]) -> tuple[int, int] | None:
    """``(row groups read, row groups in the file)`` of a sample that is part of a file."""
    parts = [p for p in sample if not p.whole]
    if not parts:
        return None
    return sum(len(p.groups) for p in parts), sum(p.of_groups for p in parts)


class _Bench:
    """Readers of the sample under a setting (plans cached per ``splitSize``)."""

    def __init__(self, source: IcebergSource, options: SourceOptions, engine: Engine,
                 files: list[FileInfo], io: Any) -> None:
        self.source = source
        self.options = options
        self.engine = engine
        self.files = files
        self.io = io
        self.sample: tuple[Part, ...] = ()
        self.loops = 1
        self._splits: dict[tuple[Any, int, tuple[Part, ...]], list[FileSplit]] = {}
        self._footers: dict[str, RowGroups | None] = {}

    def resample(self, target_bytes: int) -> list[Part]:
        """About ``target_bytes`` of the read's files (:func:`sample_parts`; footers
        read once)."""
        def groups_of(info: FileInfo) -> RowGroups | None:
            if info.path not in self._footers:
                self._footers[info.path] = row_groups_of(info, self.io)
            return self._footers[info.path]

        return sample_parts(self.files, target_bytes, groups_of)

    def work(self, setting: Setting) -> Work:
        """The sample's splits under ``setting``: cut at its ``splitSize``, or where it is
        ``auto`` as the engine cuts a read without one (the adaptive split size for the
        setting's ``parallelism``: :func:`icefloe.local.engine.target_splits` splits on
        the local engine, of files on the local file system; ``parallelism`` splits on
        Spark and Ray), a sampled window of a file cut into pieces as long as the file's."""
        io = setting["ioConcurrency"]
        auto = setting["splitSize"] == "auto"
        parallelism = int(setting["parallelism"])
        opts = dataclasses.replace(
            self.options, batch_size=int(setting["batchSize"]),
            split_size=self.options.split_size if auto else int(setting["splitSize"]),
            io_concurrency=None if io == "auto" else int(io))
        plan = plan_bounded(self.source.handle, opts)
        key = (setting["splitSize"], parallelism if auto else 0, self.sample)
        if key not in self._splits:
            local = self.engine.name == "local"
            planned = plan.splits(target_splits(parallelism) if local else parallelism,
                                  local_only=local) if auto else plan.splits()
            parts = {p.file.path: p for p in self.sample}
            of_file: dict[str, list[FileSplit]] = {}
            for split in planned:
                if split.file_path in parts:
                    of_file.setdefault(split.file_path, []).append(split)
            splits: list[FileSplit] = []
            for path, file_splits in of_file.items():
                part = parts[path]
                if part.whole:
                    splits += file_splits
                else:
                    splits += window_splits(part, file_splits[0], opts.split_size,
                                            len(file_splits) if auto else None)
            self._splits[key] = splits
        return Work(self._splits[key], plan.context, opts, parallelism)

    def reader(self, work: Work) -> Callable[[], int]:
        """Reads ``work`` :attr:`loops` times; returns the rows read."""
        read = self.engine.reader(work)
        loops = self.loops
        return read if loops == 1 else lambda: sum(read() for _ in range(loops))

    def trial(self, knob: str, setting: Setting, work: Work,
              runs: list[tuple[float, Any]]) -> Trial:
        return Trial(knob, setting, tuple(t for t, _ in runs), runs[0][1],
                     sum(s.length for s in work.splits) * self.loops)


def _calibrate(bench: _Bench, base: Setting, files: list[FileInfo], sample: list[Part],
               deadline: float, reads: int, say: Callable[[str], None],
               ) -> tuple[list[Part], float, float]:
    """A sample whose read takes about the budget's share of one planned read. Reads of
    the baseline: the first warms the engine up (Spark's and Ray's first job starts
    workers) and is not used; the last leaves the sample's files warm. Stops after
    :data:`CALIBRATION_SHARE` of the time left. Returns the sample, its read's seconds
    and that share."""
    started = time.monotonic()
    stop = started + (deadline - started) * CALIBRATION_SHARE
    bench.sample = tuple(sample)
    say(f"warming up: reading {_describe(sample, files)}")
    bench.reader(bench.work(base))()
    seconds = target = 0.0
    for _ in range(CALIBRATION_READS):
        bench.sample = tuple(sample)
        say(f"calibrating: reading {_describe(sample, files)}")
        seconds, _ = timed(bench.reader(bench.work(base)))
        target = max(MIN_READ_S, (deadline - time.monotonic()) * BUDGET_SHARE / max(reads, 1))
        ratio = target / max(seconds, 1e-6)
        grow = ratio > 2 and sum(p.size for p in sample) < sum(f.size for f in files)
        shrink = ratio < 0.8  # resample() says when nothing smaller is left
        if not (grow or shrink) or time.monotonic() + seconds * min(ratio, 16) > stop:
            break
        size = sum(p.size for p in sample) * min(16.0, max(1 / 16, ratio))
        resized = bench.resample(int(size))
        if resized == sample:
            break
        sample = resized
    bench.sample = tuple(sample)
    return sample, seconds, target


def _describe(sample: Sequence[Part], files: Sequence[FileInfo]) -> str:
    """``2 of 5 files`` or ``4 of the 16 row groups of 1 of 1 files``."""
    groups = _groups(sample)
    text = f"{len(sample)} of {len(files)} files"
    return text if groups is None else f"{groups[0]} of the {groups[1]} row groups of {text}"


def _sweep(bench: _Bench, base: Setting, knobs: Mapping[str, list[Any]], deadline: float,
           per_read: float, say: Callable[[str], None],
           ) -> tuple[list[Trial], Setting, list[str]]:
    trials: list[Trial] = []
    skipped: list[str] = []
    current = dict(base)
    for knob in [k for k in KNOBS if k in knobs]:
        settings = [{**current, knob: v} for v in knobs[knob]]
        reserve = 2 * CONFIRM_REPS * per_read
        if trials and time.monotonic() + len(settings) * SWEEP_REPS * per_read \
                > deadline - reserve:
            skipped.append(knob)
            continue
        say(f"sweeping {knob}: {', '.join(str(s[knob]) for s in settings)} "
            f"({SWEEP_REPS} runs each)")
        works = [bench.work(s) for s in settings]
        readers = {str(i): bench.reader(w) for i, w in enumerate(works)}
        runs = interleaved(readers, SWEEP_REPS, warmup=False)
        round_trials = [bench.trial(knob, s, works[i], runs[str(i)])
                        for i, s in enumerate(settings)]
        trials += round_trials
        now = next(t for t in round_trials if t.setting == current)
        best = min(round_trials, key=lambda t: t.median_s)
        if best.setting != current and beats(now.seconds, best.seconds):
            log.info("%s: %s beats %s", knob, best.setting[knob], current[knob])
            current = dict(best.setting)
        per_read = median([s for t in round_trials for s in t.seconds])
    return trials, current, skipped


CONFIRM_MARGIN = 1.0
"""The confirmation reads the whole read (:func:`_whole_read`) only when this many times
its estimated time fits in the budget left (the estimate, from the sample's time per
byte, runs high: a longer read hides its start better; 64 files of 1 MB at 10 ms: the
table read in 0.76 s where the sample's rate said 1.15 s)."""


def _whole_read(bench: _Bench, files: list[FileInfo], sample_splits: Sequence[FileSplit],
                per_read: float, deadline: float) -> bool:
    """Whether the confirmation reads every file of the read, whole, instead of the
    sample: when the sample is not that already and the confirmation's
    2 x :data:`CONFIRM_REPS` reads of it, estimated from the sample's time per byte
    (``per_read``: one timed run of the sample, ``bench.loops`` reads), fit in the budget
    left (:data:`CONFIRM_MARGIN`). Then ``bench`` reads the whole read from
    here on, once per run. A sample's reads are short, and where a read's start costs
    round trips (an object store) a setting can win on the sample what it does not on
    the table (``parallelism=8`` on 64 files of 1 MB at 10 ms: 2.1-2.3x on the sample,
    1.0-1.2x on the table; benchmarks/RESULTS.md, "Defaults matrix"): the confirmation then
    checks the candidate on what the user reads."""
    whole = tuple(Part(f) for f in files)
    if bench.sample == whole or per_read <= 0:  # no timed read to estimate from
        return False
    sampled = sum(s.length for s in sample_splits) * bench.loops
    estimate = per_read * sum(f.size for f in files) / max(sampled, 1)
    if time.monotonic() + 2 * CONFIRM_REPS * estimate * CONFIRM_MARGIN > deadline:
        return False
    bench.sample, bench.loops = whole, 1
    return True


def _confirm(bench: _Bench, base: Setting, current: Setting, trials: list[Trial],
             deadline: float, say: Callable[[str], None],
             ) -> tuple[tuple[Trial, Trial], Any]:
    """The candidate against the baseline, :data:`CONFIRM_REPS` interleaved runs each.
    When that leaves a sweep's winner undecided (faster by :data:`MIN_GAIN` or more, but
    not by more than the noise) and the budget still holds as long again, a second look
    runs as many more and decides on all of them (so one stalled run on a loaded machine
    does not discard a real difference)."""
    others = [t for t in trials if t.setting != base]
    candidate = current if current != base else \
        (min(others, key=lambda t: t.median_s).setting if others else base)
    say(f"confirming: {label(candidate, base)} against the baseline "
        f"({CONFIRM_REPS} runs each)")
    works = {"baseline": bench.work(base), "candidate": bench.work(candidate)}
    readers = {k: bench.reader(w) for k, w in works.items()}
    started = time.monotonic()
    runs = interleaved(readers, CONFIRM_REPS, warmup=False)
    took = time.monotonic() - started

    def seconds() -> tuple[list[float], list[float]]:
        return ([s for s, _ in runs["baseline"]], [s for s, _ in runs["candidate"]])

    def decided() -> bool:
        return current != base and beats(*seconds())

    if current != base and not decided() and time.monotonic() + took <= deadline \
            and gain(*seconds()) >= MIN_GAIN:
        say(f"confirming again: within the noise so far ({CONFIRM_REPS} more runs each)")
        more = interleaved(readers, CONFIRM_REPS, warmup=False)
        runs = {k: runs[k] + more[k] for k in runs}
    base_trial, cand_trial = (bench.trial("confirmation", s, works[k], runs[k])
                              for k, s in (("baseline", base), ("candidate", candidate)))
    return (base_trial, cand_trial), "recommend" if decided() else "within-noise"
