"""Helpers of the cluster tier's tests: catalog options and the secret check."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from pyiceberg.catalog import load_catalog
from pyiceberg.table import Table

from icefloe.seaweed import ACCESS_KEY, SECRET_KEY, SeaweedFS
from tests.helpers.tables import make_table, rows


def rest_options(seaweed: SeaweedFS) -> dict[str, str]:
    return {"catalog": "lake", **{f"catalog.{k}": v for k, v in seaweed.rest_properties().items()}}


def rest_table(seaweed: SeaweedFS, identifier: str, appends: int, rows_each: int,
               delete_below: int | None = None) -> Table:
    """A table in the REST catalog written by PyIceberg: ``appends`` appends of
    ``rows_each`` rows (one data file each), then a delete of the ids below
    ``delete_below`` (a copy-on-write rewrite) when given."""
    catalog = load_catalog("lake", **seaweed.rest_properties())
    catalog.create_namespace_if_not_exists(identifier.split(".")[0])
    table = make_table(catalog, identifier)
    for i in range(appends):
        table.append(rows(rows_each, start=i * rows_each))
    if delete_below is not None:
        table.delete(f"id < {delete_below}")
    return catalog.load_table(identifier)


CANARY = ("catalog.canary-credential", "icf27-canary-5d81e0")
"""An option a classic Spark driver and a Ray driver pass with the catalog's options: a
credential-like value under a key that Spark's ``spark.redaction.regex``
(``secret|password|token|access.?key``) matches neither by key nor by value, so only
icefloe and the engines never printing the options keep it out of logs (the test keys
contain "secret": Spark would mask them)."""

SECRETS = [SECRET_KEY, f"{ACCESS_KEY}:{SECRET_KEY}", CANARY[1]]
"""What no log may hold: the S3 secret key, the REST catalog's credential
(``access:secret``) and the canary."""


def sink_spec(seaweed: SeaweedFS, prefix: str, keys: bool = True) -> dict[str, str]:
    """The S3 sink of a streaming job (``spark_stream_job.py``, ``ray_job.py``): its
    objects under ``prefix`` of the plain bucket, written with the S3 keys (``keys``),
    else with the AWS defaults of the process that writes (``AWS_*`` variables)."""
    return {"bucket": seaweed.bucket, "prefix": prefix,
            "endpoint": seaweed.s3_endpoint.removeprefix("http://"),
            **({"access_key": ACCESS_KEY, "secret_key": SECRET_KEY} if keys else {})}


def lines_containing(path: Path, needles: list[str]) -> list[str]:
    """``path: line`` for each line of the file holding any of ``needles`` (the needles
    shown as ``<secret>``, the line cut to 400 characters): what a leak check reports."""
    found = []
    for line in path.read_text(errors="replace").splitlines():
        if any(n in line for n in needles):
            for n in needles:
                line = line.replace(n, "<secret>")
            found.append(f"{path}: {line.strip()[:400]}")
    return found


def files_containing(roots: list[Path], needles: list[str]) -> list[str]:
    """The lines (:func:`lines_containing`) of files under ``roots`` (logs, event logs)
    that hold any of ``needles``."""
    found = []
    for root in roots:
        for path in root.rglob("*"):
            if path.is_file() and path.suffix not in (".gz", ".jar", ".parquet", ".so") \
                    and "environment" not in path.parts:
                found += lines_containing(path, needles)
    return found


FIGURES = Path(__file__).resolve().parents[2] / "build" / "cluster" / "figures.jsonl"
"""One JSON line per fault scenario run (RELIABILITY.md, "Hosts lost")."""


def record(scenario: str, **figures: object) -> None:
    """Append a scenario's figures (kills, processes, rows checked, lost, duplicates)."""
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    with FIGURES.open("a") as out:
        out.write(json.dumps({"scenario": scenario, "at": time.strftime("%Y-%m-%dT%H:%M:%S"),
                              **figures}) + "\n")


README = Path(__file__).resolve().parents[2] / "README.md"


def readme_block(contains: str, substitute: dict[str, str] | None = None) -> str:
    """The README's one ``docs-test: cluster`` block containing ``contains``, with the
    host names of its example replaced by the tier's (``substitute``: old -> new)."""
    from tests.test_docs import blocks

    found = [b.code for b in blocks(README) if b.group == "cluster" and contains in b.code]
    assert len(found) == 1, f"{len(found)} cluster blocks of README.md contain {contains!r}"
    code = found[0]
    for old, new in (substitute or {}).items():
        assert old in code, f"{old!r} is no longer in the README block: update the test"
        code = code.replace(old, new)
    return code


def catalog_env(name: str, properties: dict[str, str]) -> dict[str, str]:
    """PyIceberg's configuration of catalog ``name`` as environment variables
    (``PYICEBERG_CATALOG__LAKE__S3__ACCESS_KEY_ID``...), as a user sets them on a driver."""
    return {"PYICEBERG_CATALOG__" + "__".join([name, *key.split(".")]).upper()
            .replace("-", "_"): value for key, value in properties.items()}


def _s3(seaweed: SeaweedFS) -> Any:
    from pyarrow import fs

    return fs.S3FileSystem(endpoint_override=seaweed.s3_endpoint, scheme="http",
                           access_key=ACCESS_KEY, secret_key=SECRET_KEY, region="us-east-1")


def _objects(seaweed: SeaweedFS, prefix: str) -> list[Any]:
    from pyarrow import fs

    found = _s3(seaweed).get_file_info(fs.FileSelector(f"{seaweed.bucket}/{prefix}",
                                                       allow_not_found=True))
    return sorted((i for i in found if i.path.endswith(".parquet")), key=lambda i: i.path)


def sink_ids(seaweed: SeaweedFS, prefix: str) -> list[int]:
    """Every id in a stream's S3 sink (Parquet objects under ``prefix`` of the plain
    bucket), read by this process over the network; duplicates kept."""
    s3 = _s3(seaweed)
    return [i for info in _objects(seaweed, prefix)
            for i in pq.read_table(info.path, filesystem=s3).column("id").to_pylist()]


def sink_objects(seaweed: SeaweedFS, prefix: str) -> int:
    """How many non-empty Parquet objects the sink under ``prefix`` holds."""
    return sum(1 for info in _objects(seaweed, prefix) if info.size > 0)


def object_paths(seaweed: SeaweedFS, prefix: str) -> list[str]:
    """The keys of every object under ``prefix`` of the plain bucket (recursively, read
    through the S3 API), without the bucket."""
    from pyarrow import fs

    found = _s3(seaweed).get_file_info(fs.FileSelector(f"{seaweed.bucket}/{prefix}",
                                                       recursive=True, allow_not_found=True))
    return sorted(i.path.removeprefix(f"{seaweed.bucket}/") for i in found
                  if i.type == fs.FileType.File)
