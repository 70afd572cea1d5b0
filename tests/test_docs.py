"""Every code block of README.md and docs/*.md runs as written (issue 17, finding 5).

Each document is followed the way a reader would: in a fresh directory, after
``icefloe demo --no-spark --no-stream`` has built ``demo.events`` in the default embedded
warehouse, its blocks run in order. Python blocks of a document run as one script (later
blocks may use names of earlier ones, like cells of a notebook); ``sh`` blocks run in
bash with ``set -euo pipefail`` and the venv's ``icefloe`` first on the PATH.

A comment right before a block says where it runs:
- ``<!-- docs-test: spark -->`` / ``ray`` / ``nessie``: in a script of their own, with Spark
  (a plain ``SparkSession``, with neither ``PYSPARK_PYTHON`` nor the venv on the PATH), Ray,
  or a Nessie test double (``NESSIE_URI`` defined, the demo table committed to it);
- ``<!-- docs-test: connect -->``: against a real Spark Connect server, the test session's
  one (``connect_server`` in tests/conftest.py), its address put where the block says
  ``sc://localhost:15002`` (Spark Connect's default port);
- ``<!-- docs-test: cluster (where) -->``: run by the cluster tier (``make test-cluster``,
  root: tests/cluster/) on hosts in network namespaces, its host names substituted;
  this module leaves them out;
- ``<!-- docs-test: skip (reason) -->``: not run; the reason is required.
Blocks in other languages (``yaml``, plain fences) are configuration or drawings, not run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARK = re.compile(r"<!--\s*docs-test:\s*(\w+)(?:\s*\((.+)\))?\s*-->")
RUN_LANGS = {"python": "python", "py": "python", "sh": "sh", "bash": "sh", "shell": "sh"}
GROUPS = ("local", "spark", "ray", "nessie", "connect", "cluster")
CONNECT_URL = "sc://localhost:15002"
"""The Spark Connect address the README's connect blocks use (replaced in the test)."""


@dataclass
class Block:
    doc: Path
    line: int
    lang: str
    group: str
    code: str


def blocks(doc: Path) -> list[Block]:
    """The runnable blocks of ``doc`` (skipped ones left out; a skip without reason fails)."""
    out: list[Block] = []
    lines = doc.read_text().splitlines()
    i = 0
    mark: tuple[str, str | None] | None = None
    while i < len(lines):
        line = lines[i]
        found = MARK.search(line)
        if found:
            mark = (found.group(1), found.group(2))
            i += 1
            continue
        if line.startswith("```"):
            lang = line[3:].strip()
            end = i + 1
            while not lines[end].startswith("```"):
                end += 1
            code = "\n".join(lines[i + 1:end]) + "\n"
            kind = RUN_LANGS.get(lang)
            if kind is not None:
                group = mark[0] if mark else "local"
                if group == "skip":
                    assert mark and mark[1], f"{doc.name}:{i + 1}: a skip needs a (reason)"
                else:
                    assert group in GROUPS, f"{doc.name}:{i + 1}: unknown mark {group!r}"
                    out.append(Block(doc, i + 1, kind, group, code))
            mark = None
            i = end + 1
            continue
        if line.strip():
            mark = None
        i += 1
    return out


def _env(tmp: Path, plain_spark: bool = False) -> dict[str, str]:
    env = {**os.environ, "ICEFLOE_HOME": str(tmp / "icefloe-warehouse"),
           "PYTHONPATH": str(ROOT), "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}
    bindir = str(Path(sys.executable).parent)
    if plain_spark:  # what a user's shell has: no PYSPARK_PYTHON, no venv on the PATH
        for key in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV"):
            env.pop(key, None)
        env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                      if p and Path(p) != Path(bindir))
    else:
        env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    return env


def _run(cmd: list[str], tmp: Path, env: dict[str, str], what: str, timeout: float) -> None:
    proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, (
        f"{what} failed ({proc.returncode})\n--- stdout\n{proc.stdout[-3000:]}\n"
        f"--- stderr\n{proc.stderr[-5000:]}")


def _setup(tmp: Path) -> None:
    _run([sys.executable, "-m", "icefloe.cli", "demo", "--no-spark", "--no-stream"], tmp,
         _env(tmp), "icefloe demo", 300)


def _script(selected: list[Block], prelude: str = "") -> str:
    parts = [prelude]
    for b in selected:
        parts.append(f"# --- {b.doc.name}:{b.line}\n{b.code}")
    return "\n".join(parts)


def _follow(doc: Path, group: str, tmp: Path, prelude: str = "",
            plain_spark: bool = False, timeout: float = 600, setup: bool = True,
            substitute: dict[str, str] | None = None) -> None:
    selected = [b for b in blocks(doc) if b.group == group]
    for old, new in (substitute or {}).items():
        for b in selected:
            b.code = b.code.replace(old, new)
    if not selected:
        pytest.skip(f"{doc.name} has no {group} blocks")
    if setup:
        _setup(tmp)
    env = _env(tmp, plain_spark)
    python = [b for b in selected if b.lang == "python"]
    for b in selected:
        if b.lang == "sh":
            script = tmp / f"block-{b.line}.sh"
            script.write_text("set -euo pipefail\n" + b.code)
            _run(["bash", str(script)], tmp, env, f"{doc.name}:{b.line} (sh)", timeout)
    if python:
        script = tmp / f"{doc.stem}-{group}.py"
        script.write_text(_script(python, prelude))
        lines = ", ".join(str(b.line) for b in python)
        _run([sys.executable, str(script)], tmp, env,
             f"{doc.name} python blocks at lines {lines}", timeout)


def test_every_skip_has_a_reason_and_every_doc_has_runnable_blocks() -> None:
    for doc in DOCS:
        assert blocks(doc), f"{doc.name} has no runnable block"


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_local_blocks_run(doc: Path, tmp_path: Path) -> None:
    _follow(doc, "local", tmp_path)


@pytest.mark.spark
@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_spark_blocks_run_with_a_plain_session(doc: Path, tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    _follow(doc, "spark", tmp_path, plain_spark=True)


CONNECT_DOCS = [doc for doc in DOCS if any(b.group == "connect" for b in blocks(doc))]


@pytest.mark.spark
@pytest.mark.parametrize("doc", CONNECT_DOCS, ids=[d.name for d in CONNECT_DOCS])
def test_connect_blocks_run_against_a_connect_server(doc: Path, tmp_path: Path,
                                                    connect_server: Any) -> None:
    """Against the test session's Connect server (tests/conftest.py: one for these and the
    Connect suite, their tests in one xdist group)."""
    import pyarrow.parquet as pq

    from icefloe.catalog.loader import embedded_catalog

    _setup(tmp_path)
    _follow(doc, "connect", tmp_path, setup=False,
            substitute={CONNECT_URL: connect_server.url})
    expected = embedded_catalog(tmp_path / "icefloe-warehouse").load_table(
        "demo.events").scan().count()
    written = [d for d in ("connect-out", "cli-out", "connect-backfill")
               if (tmp_path / d).is_dir()]
    assert written, "the connect blocks wrote none of the README's outputs"
    for name in written:  # each holds every row of the table once
        files = (tmp_path / name).glob("*.parquet")
        assert sum(pq.read_metadata(f).num_rows for f in files) == expected, name


@pytest.mark.ray
@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_ray_blocks_run(doc: Path, tmp_path: Path) -> None:
    pytest.importorskip("ray")
    prelude = ("import ray\nray.init(num_cpus=2, include_dashboard=False, "
               "log_to_driver=False)\n")
    _follow(doc, "ray", tmp_path, prelude=prelude)
    written = sorted((tmp_path / "ray-out").glob("*.parquet"))
    if not any("ray-out" in b.code for b in blocks(doc) if b.group == "ray"):
        assert written == []
        return
    # the README's sample wrote its rows, and dates stay dates through map_batches
    import pyarrow as pa
    import pyarrow.parquet as pq

    assert written, f"{doc.name}'s Ray sample wrote no Parquet file to ray-out/"
    assert sum(pq.read_metadata(path).num_rows for path in written) > 0
    assert all(pq.read_schema(path).field("day").type == pa.date32() for path in written)


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_nessie_blocks_run(doc: Path, tmp_path: Path) -> None:
    if not any(b.group == "nessie" for b in blocks(doc)):
        pytest.skip(f"{doc.name} has no nessie blocks")
    from icefloe.catalog.loader import embedded_catalog
    from tests.helpers.nessie_fake import FakeNessieServer

    _setup(tmp_path)
    table = embedded_catalog(tmp_path / "icefloe-warehouse").load_table("demo.events")
    with FakeNessieServer() as nessie:
        nessie.put_table("main", "demo.events", table)
        _follow(doc, "nessie", tmp_path, prelude=f"NESSIE_URI = {nessie.uri!r}\n",
                setup=False)
