"""Recording the ``parallelism`` a read hands to the local engine (for the tests of the
default reader threads)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest


def record_parallelism(monkeypatch: pytest.MonkeyPatch, module: ModuleType) -> list[int]:
    """Wrap ``module.read_splits`` (the real engine still reads) so each call appends its
    ``parallelism`` to the returned list."""
    threads: list[int] = []
    real = module.read_splits

    def recording(splits: Any, context: Any, parallelism: int, *args: Any,
                  **kwargs: Any) -> Any:
        threads.append(parallelism)
        return real(splits, context, parallelism, *args, **kwargs)

    monkeypatch.setattr(module, "read_splits", recording)
    return threads
