"""Enumeration: which splits to read, bounded (one snapshot) or continuous (a ref's lineage).

- :mod:`~icefloe.enumerator.bounded`: :func:`plan_bounded`, the splits of one snapshot.
- :mod:`~icefloe.enumerator.continuous`: :class:`ContinuousEnumerator`, the next splits
  after a position along a ref's lineage, within :class:`Limits`.
- :mod:`~icefloe.enumerator.planner`: the :class:`SplitPlanner` protocol and the table's
  planner; :mod:`~icefloe.enumerator.lineage` and :mod:`~icefloe.enumerator.policy`: the
  lineage walk and the snapshot-kind policy; the ``*_decoder`` and
  :mod:`~icefloe.enumerator.discovery` modules read manifests.

Names are imported on first use (PEP 562): importing a submodule (the manifest
decoders, say) does not load the catalog stack.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "BoundedPlan": "icefloe.enumerator.bounded",
    "ContinuousEnumerator": "icefloe.enumerator.continuous",
    "EnumerationResult": "icefloe.enumerator.continuous",
    "Limits": "icefloe.enumerator.continuous",
    "SplitPlanner": "icefloe.enumerator.planner",
    "TableSplitPlanner": "icefloe.enumerator.planner",
    "UnitEnd": "icefloe.enumerator.continuous",
    "plan_bounded": "icefloe.enumerator.bounded",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'icefloe.enumerator' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
