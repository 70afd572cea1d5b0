"""The README's "Object storage and REST catalogs" section runs: its Python and shell samples
are executed against SeaweedFS (endpoints and keys substituted), the data checked against
PyIceberg's scans."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from pyiceberg.catalog import load_catalog

from tests.conftest import assert_same_rows
from tests.helpers.seaweed import ACCESS_KEY, SECRET_KEY, SeaweedFS
from tests.helpers.tables import make_table, rows

README = Path(__file__).resolve().parents[2] / "README.md"
TITLE = "## Object storage and REST catalogs"


def _section() -> str:
    text = README.read_text()
    start = text.index(TITLE)
    end = text.index("\n## ", start + len(TITLE))
    return text[start:end]


def _blocks(section: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", section, flags=re.S)


def _localize(code: str, seaweed: SeaweedFS) -> str:
    return (code.replace("http://localhost:8181", seaweed.rest_uri)
            .replace("http://localhost:8333", seaweed.s3_endpoint)
            .replace("ACCESS_KEY", ACCESS_KEY).replace("SECRET_KEY", SECRET_KEY))


def test_readme_object_storage_samples_run(seaweed: SeaweedFS, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    section = _section()
    python, shell = _blocks(section, "python"), _blocks(section, "sh")
    assert len(python) == 3 and len(shell) == 1
    monkeypatch.chdir(tmp_path)  # the SQL sample's sqlite:///lake.db is relative
    rest = load_catalog("lake", **seaweed.rest_properties())
    sql = load_catalog("lake_sql", **{**seaweed.sql_properties(tmp_path / "lake.db"),
                                      "warehouse": f"s3://{seaweed.bucket}/lake"})
    tables = {}
    for name, catalog in (("rest", rest), ("sql", sql)):
        if catalog.table_exists("lake.events"):
            catalog.purge_table("lake.events")
        tables[name] = make_table(catalog, "lake.events")
        tables[name].append(rows(40, start=0 if name == "rest" else 1000))

    namespace: dict[str, object] = {}
    exec(compile(_localize(python[0], seaweed), "README-rest", "exec"), namespace)
    assert_same_rows(namespace["events"], tables["rest"].scan().to_arrow())  # type: ignore[arg-type]
    exec(compile(_localize(python[1], seaweed), "README-sql", "exec"), namespace)
    assert_same_rows(namespace["events"], tables["sql"].scan().to_arrow())  # type: ignore[arg-type]
    exec(compile(_localize(python[2], seaweed), "README-stream", "exec"), namespace)

    command = shlex.split(_localize(shell[0], seaweed).replace("\\\n", " "))
    assert command[0] == "icefloe"
    done = subprocess.run([sys.executable, "-m", "icefloe.cli", *command[1:]],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    # both streams left a checkpoint in S3
    from icefloe.state import open_store

    for name in ("events", "cli"):
        ckpt = open_store(f"s3://{seaweed.bucket}/checkpoints/{name}",
                          seaweed.s3_properties()).read()
        assert ckpt is not None and ckpt.table == "lake.events"
    rest.purge_table("lake.events")
