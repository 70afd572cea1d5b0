"""What a tuning run found: every setting's runs, the confirmation and the verdict.

Plain values (JSON-ready through :meth:`TuneResult.to_json`); :meth:`TuneResult.render`
is the table ``icefloe tune`` prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from icefloe.tuning.grid import KNOBS, Setting, label, option_texts
from icefloe.tuning.measure import gain, median, noise, spread
from icefloe.tuning.sample import TableShape, human_bytes

Verdict = Literal["recommend", "within-noise"]


@dataclass(frozen=True)
class Trial:
    """The runs of one setting.

    Attributes:
        knob: the knob swept when this was measured (``baseline`` for the calibration
            read, ``confirmation`` for the final comparison).
        setting: every knob's value.
        seconds: each run's wall time, in the order run.
        rows: rows one run read; ``nbytes``: bytes of storage one run read.
    """

    knob: str
    setting: Setting
    seconds: tuple[float, ...]
    rows: int
    nbytes: int

    @property
    def median_s(self) -> float:
        return median(self.seconds)

    @property
    def spread(self) -> float:
        """The runs' range over their median (0.1: the runs lie within 10 % of it)."""
        return spread(self.seconds)

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.median_s if self.median_s > 0 else 0.0

    @property
    def bytes_per_s(self) -> float:
        return self.nbytes / self.median_s if self.median_s > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"knob": self.knob, "setting": dict(self.setting),
                "seconds": [round(s, 6) for s in self.seconds],
                "median_s": round(self.median_s, 6), "spread": round(self.spread, 4),
                "rows_per_s": round(self.rows_per_s, 1),
                "bytes_per_s": round(self.bytes_per_s, 1)}


@dataclass(frozen=True)
class TuneResult:
    """A tuning run of ``table`` on ``engine``.

    Attributes:
        shape: the read's shape; ``sample_files`` of its files were read each time.
        baseline: the setting of a read with the options given (defaults elsewhere).
        trials: every setting measured while sweeping, in the order measured.
        skipped: knobs not swept because the budget ran out.
        confirmation: (baseline, candidate) measured again, interleaved; the candidate
            is the sweep's best setting, or when the sweep kept the baseline, the
            fastest other setting.
        verdict: ``recommend`` when both the sweep and the confirmation found the
            candidate faster by more than the noise, else ``within-noise``.
        elapsed_s: the run's wall time; ``budget_s``: what it was given.
        loops: reads of the sample in one timed run (more than one for a small table).
        sample_groups: ``(row groups read, row groups in the file)`` when the sample is
            a run of one large file's row groups (None: whole files).
        confirm_whole: the confirmation read every file of the read, whole, not the
            sample (when the budget allowed it).
    """

    table: str
    engine: str
    shape: TableShape
    sample_files: int
    sample_bytes: int
    sample_rows: int
    baseline: Setting
    trials: list[Trial]
    skipped: list[str]
    confirmation: tuple[Trial, Trial]
    verdict: Verdict
    budget_s: float
    elapsed_s: float
    reps: int
    confirm_reps: int
    loops: int = 1
    sample_groups: tuple[int, int] | None = None
    confirm_whole: bool = False
    base_options: dict[str, str] = field(default_factory=dict)

    @property
    def candidate(self) -> Setting:
        return self.confirmation[1].setting

    @property
    def ratio(self) -> float:
        """The confirmation's throughput of the candidate over the baseline's."""
        return 1.0 + gain(self.confirmation[0].seconds, self.confirmation[1].seconds)

    @property
    def noise(self) -> float:
        """The larger spread of the confirmation's two settings."""
        return noise(self.confirmation[0].seconds, self.confirmation[1].seconds)

    @property
    def recommended(self) -> Setting | None:
        """The candidate when the verdict is ``recommend``, else None."""
        return self.candidate if self.verdict == "recommend" else None

    def options(self) -> dict[str, str]:
        """The source options to set (those that differ from the baseline), to pass as
        ``options=`` or ``-o key=value``; empty unless the verdict is ``recommend``."""
        if self.recommended is None:
            return {}
        new = option_texts(self.recommended, self.engine)
        old = option_texts(self.baseline, self.engine)
        return {k: v for k, v in new.items() if old.get(k) != v}

    def parallelism(self) -> int | None:
        """The recommended reader threads (local) or read tasks (``override_num_blocks``,
        Ray) when they differ from the baseline's; None otherwise (on Spark it is the
        ``minPartitions`` option)."""
        rec = self.recommended
        if rec is None or self.engine == "spark" \
                or rec["parallelism"] == self.baseline["parallelism"]:
            return None
        return int(rec["parallelism"])

    def reference(self, trial: Trial) -> Trial:
        """The trial of ``trial``'s round with the swept knob at its baseline value (what
        the round's other values are compared with; the machine's load moves between
        rounds)."""
        knob = trial.knob
        return next((t for t in self.trials if t.knob == knob
                     and t.setting[knob] == self.baseline[knob]), trial)

    def to_json(self) -> dict[str, Any]:
        base, cand = self.confirmation
        return {
            "table": self.table, "engine": self.engine,
            "shape": {k: getattr(self.shape, k) for k in self.shape.__slots__},
            "sample": {"files": self.sample_files, "bytes": self.sample_bytes,
                       "rows": self.sample_rows, "reads_per_run": self.loops,
                       "row_groups": None if self.sample_groups is None
                       else list(self.sample_groups)},
            "budget_s": self.budget_s, "elapsed_s": round(self.elapsed_s, 3),
            "reps": self.reps, "confirm_reps": self.confirm_reps,
            "confirm_whole": self.confirm_whole,
            "base_options": self.base_options,
            "baseline": dict(self.baseline), "trials": [t.to_json() for t in self.trials],
            "skipped": list(self.skipped),
            "confirmation": {"baseline": base.to_json(), "candidate": cand.to_json(),
                             "ratio": round(self.ratio, 4), "noise": round(self.noise, 4)},
            "verdict": self.verdict,
            "recommended": None if self.recommended is None else {
                "setting": dict(self.recommended), "options": self.options(),
                "parallelism": self.parallelism()},
        }

    def render(self) -> str:
        """The report ``icefloe tune`` prints (plain text, one table)."""
        lines = [
            f"table: {self.table}: {self.shape.describe()}",
            "sample: " + ("" if self.sample_groups is None else
                          f"{self.sample_groups[0]} of the {self.sample_groups[1]} row groups "
                          "of ")
            + f"{self.sample_files:,} of {self.shape.files:,} files, "
            f"{human_bytes(self.sample_bytes)}, {self.sample_rows:,} rows"
            + (f", read {self.loops} times per run" if self.loops > 1 else "")
            + f"; engine {self.engine}; {self.reps} interleaved runs per setting; "
            f"{self.elapsed_s:.0f} s of a {self.budget_s:.0f} s budget",
            "baseline: " + ", ".join(f"{k}={self.baseline[k]}" for k in KNOBS),
            "",
        ]
        rows = [("knob", "setting", "median", "spread", "rows/s", "MB/s", "vs ref")]
        for t in self.trials:
            ref = self.reference(t)
            rows.append((t.knob, label(t.setting, self.baseline), f"{t.median_s:.3f} s",
                         f"{t.spread * 100:.0f}%", f"{t.rows_per_s:,.0f}",
                         f"{t.bytes_per_s / 1e6:,.1f}",
                         f"{t.rows_per_s / ref.rows_per_s:.2f}x" if ref.rows_per_s else "-"))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for r in rows:
            lines.append("  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                                   for i, (c, w) in enumerate(zip(r, widths, strict=True)))
                         .rstrip())
        lines.append("vs ref: throughput over the same round's setting with the knob at its "
                     "baseline value (rounds run at different times: compare within a round)")
        if self.skipped:
            lines.append(f"not swept (the budget ran out): {', '.join(self.skipped)}; "
                         "give a larger --budget")
        base, cand = self.confirmation
        lines += ["", f"confirmation ({self.confirm_reps} interleaved runs each"
                  + (", of the whole read" if self.confirm_whole else "") + "): "
                  f"{label(cand.setting, self.baseline)} {cand.median_s:.3f} s vs baseline "
                  f"{base.median_s:.3f} s: {self.ratio:.2f}x the baseline's throughput "
                  f"(noise {self.noise * 100:.0f}%)"]
        if self.verdict == "recommend":
            lines.append("recommended (faster than the baseline by more than the noise):")
            lines += [f"  -o {k}={v}" for k, v in self.options().items()]
            par = self.parallelism()
            if par is not None:
                lines.append(f"  --parallelism {par}" if self.engine == "local"
                             else f"  override_num_blocks={par}")
        else:
            lines.append("the difference is within the noise: no change recommended; keep "
                         "the baseline")
        return "\n".join(lines)
