"""Helpers of the cluster tier's tests: catalog options and the secret check."""

from __future__ import annotations

from pathlib import Path

from icefloe.seaweed import SeaweedFS


def rest_options(seaweed: SeaweedFS) -> dict[str, str]:
    return {"catalog": "lake", **{f"catalog.{k}": v for k, v in seaweed.rest_properties().items()}}


def files_containing(roots: list[Path], needles: list[str]) -> list[str]:
    """Files under ``roots`` whose text contains any of ``needles`` (logs, event logs)."""
    found = []
    for root in roots:
        for path in root.rglob("*"):
            if path.is_file() and path.suffix not in (".gz", ".jar", ".parquet", ".so") \
                    and "environment" not in path.parts:
                text = path.read_text(errors="replace")
                found += [f"{path}: {n[:4]}..." for n in needles if n in text]
    return found
