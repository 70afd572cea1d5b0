"""Finding 1 of issue 17: icefloe installs anywhere without uv and can read.

``uv build`` makes the wheel and the sdist; the wheel goes into a fresh virtual environment
made by plain ``python -m venv`` and installed with pip (PyPI and pip's own cache, no uv),
which then runs ``icefloe --version``, ``icefloe demo --no-spark`` and a read checked
against PyIceberg's scan in that environment. About a minute with a warm pip cache.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _uv() -> str:
    found = shutil.which("uv") or str(Path.home() / ".local" / "bin" / "uv")
    if not Path(found).exists():
        pytest.skip("uv is not installed (make setup installs it)")
    return found


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None,
         timeout: float = 600) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def test_wheel_installs_with_pip_and_reads(tmp_path: Path) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    dist = tmp_path / "dist"
    _run([_uv(), "build", "--out-dir", str(dist), str(ROOT)], ROOT)
    wheel = next(dist.glob("icefloe-*.whl"))
    sdist = next(dist.glob("icefloe-*.tar.gz"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "icefloe/py.typed" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "icefloe/cli/__main__.py" in names
    with tarfile.open(sdist) as tar:
        assert any(m.name.endswith("/LICENSE") for m in tar.getmembers())

    venv = tmp_path / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    _run([base, "-m", "venv", str(venv)], tmp_path)
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "ICEFLOE_HOME", "UV_PROJECT_ENVIRONMENT")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    _run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
          "--prefer-binary", str(wheel)], tmp_path, env)

    work = tmp_path / "work"
    work.mkdir()
    icefloe = str(venv / "bin" / "icefloe")
    assert _run([icefloe, "--version"], work, env).strip() == f"icefloe {project['version']}"
    demo = _run([icefloe, "demo", "--no-spark"], work, env)
    assert "== demo OK" in demo
    read = _run([icefloe, "read", "demo.events", "--to", "events.parquet"], work, env)
    oracle = _run([str(python), "-c", (
        "from icefloe.catalog.loader import embedded_catalog\n"
        "t = embedded_catalog('icefloe-warehouse').load_table('demo.events')\n"
        "print(t.scan().to_arrow().num_rows)")], work, env).strip()
    assert f"wrote {int(oracle):,} rows in 1 file to events.parquet" in read
    pyspark = subprocess.run([str(python), "-c", "import pyspark"], cwd=work, env=env,
                             capture_output=True)
    assert pyspark.returncode != 0  # the base install is engine-free: extras add engines
