"""Benchmark-driven tuning on the user's own table: :func:`tune` (``icefloe tune``).

The knobs and their grid are in :mod:`icefloe.tuning.grid`, the sample in
:mod:`icefloe.tuning.sample`, timing and the noise rule in :mod:`icefloe.tuning.measure`,
the engines in :mod:`icefloe.tuning.engines`, the report in :mod:`icefloe.tuning.report`
(needs the ``tune`` extra: matplotlib).
"""

from __future__ import annotations

from icefloe.tuning.budget import parse_budget
from icefloe.tuning.result import Trial, TuneResult
from icefloe.tuning.run import tune

__all__ = ["Trial", "TuneResult", "parse_budget", "tune"]
