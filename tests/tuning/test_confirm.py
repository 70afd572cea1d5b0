"""The confirmation's second look (``icefloe.tuning.run._confirm``) on scripted timings:
when the first seven runs each leave a real difference undecided, seven more decide it,
within the budget only. The runs' seconds are scripted (deterministic); the reads are
real reads of a real table."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog

from icefloe.options import SourceOptions
from icefloe.source import IcebergSource
from icefloe.tuning import run
from icefloe.tuning.engines import open_engine
from icefloe.tuning.grid import baseline
from icefloe.tuning.sample import Part, files_of
from tests.tuning.support import GOOD_BATCH, WRONG_BATCH, by_design_table

STALLED = [0.30, 0.31, 0.74, 0.30, 0.81, 0.29, 0.30]  # two of seven stalled: noise
CLEAN = [0.30, 0.31, 0.30, 0.29, 0.30, 0.31, 0.30]
FAST = [0.125, 0.13, 0.12, 0.126, 0.14, 0.125, 0.127]


@pytest.fixture
def bench(catalog: SqlCatalog) -> Iterator[run._Bench]:
    by_design_table(catalog)
    source = IcebergSource("db.tune", catalog=catalog)
    engine = open_engine("local", 2, None, None)
    files = files_of(source.plan())
    b = run._Bench(source, SourceOptions.parse({}), engine, files, source.handle.io)
    b.sample = tuple(Part(f) for f in files)
    try:
        yield b
    finally:
        engine.close()


def _scripted(monkeypatch: pytest.MonkeyPatch, looks: list[tuple[list[float], list[float]]]
              ) -> list[int]:
    """``interleaved`` runs the reads for real and returns the scripted seconds."""
    calls: list[int] = []

    def fake(readers: dict[str, Callable[[], Any]], reps: int, warmup: bool = True
             ) -> dict[str, list[tuple[float, Any]]]:
        base_s, cand_s = looks[len(calls)]
        calls.append(reps)
        rows = {k: r() for k, r in readers.items()}
        return {"baseline": [(s, rows["baseline"]) for s in base_s],
                "candidate": [(s, rows["candidate"]) for s in cand_s]}

    monkeypatch.setattr(run, "interleaved", fake)
    return calls


def _settings(b: run._Bench) -> tuple[dict[str, Any], dict[str, Any]]:
    base = {**baseline(b.options, "local", 2), "batchSize": WRONG_BATCH}
    return base, {**base, "batchSize": GOOD_BATCH}


def test_a_second_look_decides_what_one_stall_left_open(
        bench: run._Bench, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _scripted(monkeypatch, [(STALLED, FAST), (CLEAN, FAST)])
    base, cand = _settings(bench)
    (b, c), verdict = run._confirm(bench, base, cand, [], time.monotonic() + 600,
                                   lambda _: None)
    assert calls == [run.CONFIRM_REPS, run.CONFIRM_REPS]
    assert b.seconds == tuple(STALLED + CLEAN) and c.seconds == tuple(FAST + FAST)
    assert b.rows == c.rows > 0
    assert verdict == "recommend"


def test_no_second_look_past_the_budget(bench: run._Bench,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _scripted(monkeypatch, [(STALLED, FAST), (CLEAN, FAST)])
    base, cand = _settings(bench)
    (b, _), verdict = run._confirm(bench, base, cand, [], time.monotonic() - 1,
                                   lambda _: None)
    assert calls == [run.CONFIRM_REPS] and len(b.seconds) == run.CONFIRM_REPS
    assert verdict == "within-noise"


def test_no_second_look_when_the_first_decides_or_nothing_won(
        bench: run._Bench, monkeypatch: pytest.MonkeyPatch) -> None:
    base, cand = _settings(bench)
    calls = _scripted(monkeypatch, [(CLEAN, FAST)])
    assert run._confirm(bench, base, cand, [], time.monotonic() + 600, lambda _: None
                        )[1] == "recommend"
    assert calls == [run.CONFIRM_REPS]
    calls = _scripted(monkeypatch, [(STALLED, FAST)])  # the sweep kept the baseline
    assert run._confirm(bench, base, base, [], time.monotonic() + 600, lambda _: None
                        )[1] == "within-noise"
    assert calls == [run.CONFIRM_REPS]
