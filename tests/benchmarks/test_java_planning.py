"""The planning benchmark's Java side says how to get the interop environment when missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import java_planning


def test_without_the_interop_env_the_reason_and_the_remedy_are_given(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ICEFLOE_INTEROP_VENV", str(tmp_path / "missing"))
    cp, why = java_planning.classpath()
    assert cp is None
    assert "missing" in why or "java" in why
    assert "make interop-env" in java_planning.HOW_TO
    with pytest.raises(RuntimeError):
        java_planning.plan_files(str(tmp_path / "v1.metadata.json"), 1)
