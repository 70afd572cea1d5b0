"""The SeaweedFS fixture body: a SeaweedFS that cannot start skips the S3 tier, or fails it
where the tier is required (``ICEFLOE_S3_REQUIRED=1``, as the Makefile's test target sets)."""

from __future__ import annotations

from pathlib import Path

import pytest

import icefloe.seaweed
from tests.helpers.seaweed import REQUIRED_VARIABLE, running_or_skip


@pytest.fixture
def no_weed(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``weed`` binary anywhere: :meth:`SeaweedFS.start` raises SeaweedUnavailable."""
    monkeypatch.setattr(icefloe.seaweed, "weed_binary", lambda: None)


@pytest.mark.parametrize(("required", "outcome"), [
    (None, pytest.skip.Exception), ("0", pytest.skip.Exception), ("1", pytest.fail.Exception)])
def test_a_seaweedfs_that_cannot_start_skips_unless_required(
        no_weed: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        required: str | None, outcome: type[BaseException]) -> None:
    if required is None:
        monkeypatch.delenv(REQUIRED_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(REQUIRED_VARIABLE, required)
    with pytest.raises(outcome, match="SeaweedFS cannot start here: the `weed` binary is not"):
        next(running_or_skip(tmp_path))
