"""Finding 12 of issue 17: start-up. The install compiles bytecode; paths import only what
they need (the timing targets are measured by benchmarks/bench_startup.py, not here)."""

from __future__ import annotations

import subprocess
import sys

from tests.cli.support import ROOT


def _loaded(code: str) -> set[str]:
    script = code + "\nimport sys\nprint(' '.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    return set(out.split())


def test_make_setup_compiles_bytecode() -> None:
    setup = (ROOT / "Makefile").read_text().split("\nsetup:")[1].split("\n\n")[0]
    assert "uv sync" in setup and "--compile-bytecode" in setup


def test_version_and_help_import_no_engine_stack() -> None:
    loaded = _loaded("from icefloe.cli import build_parser\nbuild_parser().format_help()")
    heavy = {"pyarrow", "pyiceberg", "sqlalchemy", "pandas", "pyspark", "ray"}
    assert not heavy & loaded


def test_a_reader_process_imports_no_catalog_stack() -> None:
    loaded = _loaded("import icefloe.reader")
    assert not {"sqlalchemy", "pyiceberg.catalog.sql", "pyspark", "ray"} & loaded


def test_spark_extra_keeps_pandas_in_pysparks_supported_range() -> None:
    """PySpark warns (FutureWarning) under pandas >= 3: the extra and the lock keep < 3."""
    import tomllib

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["spark"]
    assert any(dep.replace(" ", "").startswith("pandas") and "<3" in dep for dep in extra)
    try:
        import pandas
    except ImportError:
        return
    assert int(pandas.__version__.split(".")[0]) < 3
