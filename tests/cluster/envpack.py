"""icefloe packed as users ship code to a cluster: a virtual environment with icefloe and
its dependencies installed (not editable), packed with ``venv-pack`` into a ``.tar.gz``
that Spark unpacks on every executor (``spark.archives=env.tar.gz#environment``) and
Ray's ``runtime_env`` can point at.

PySpark itself is left out (Spark's workers put their own ``pyspark.zip`` on the Python
workers' path). The archive is cached under ``build/cluster/`` by the hash of
``uv.lock`` and icefloe's sources, so a rerun does not pack again.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "build" / "cluster"


def _fingerprint(extra: str) -> str:
    digest = hashlib.sha256(extra.encode() + (ROOT / "uv.lock").read_bytes()
                            + Path(__file__).read_bytes())
    for path in sorted((ROOT / "icefloe").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(ROOT)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _run(args: list[str]) -> None:
    done = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:3])} failed: {done.stderr[-2000:]}")


def packed_env(extra: str = "spark", project: bool = True) -> Path:
    """The path of the packed environment with icefloe's ``extra`` (``spark``: without
    PySpark; ``ray``: Ray included, the nodes' Ray), with icefloe itself or (``project``
    false) only its dependencies; built once per lock file and sources."""
    kind = f"{extra}-{'icefloe' if project else 'deps'}"
    archive = CACHE / f"{kind}-env-{_fingerprint(kind)}.tar.gz"
    if archive.exists():
        return archive
    work = CACHE / f"pack-{kind}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    uv = shutil.which("uv") or str(Path.home() / ".local" / "bin" / "uv")
    requirements = work / "requirements.txt"
    # the ray pack also takes the spark extra's dependencies: its grpcio is what Ray Client
    # needs (ray[client]), and the lock pins it there
    extras = [arg for name in ((extra, "spark") if extra == "ray" else (extra,))
              for arg in ("--extra", name)]
    _run([uv, "export", "--frozen", "--no-dev", *extras, "--no-emit-project",
          "--no-hashes", "--quiet", "-o", str(requirements)])
    wanted = [line for line in requirements.read_text().splitlines()
              if line and not line.startswith((" ", "#", "pyspark"))]
    requirements.write_text("\n".join(wanted) + "\n")
    env = work / "env"
    base = getattr(sys, "_base_executable", sys.executable)
    _run([uv, "venv", "--quiet", "--python", base, str(env)])
    _run([uv, "pip", "install", "--quiet", "--python", str(env / "bin" / "python"),
          "-r", str(requirements)])
    if project:
        _run([uv, "pip", "install", "--quiet", "--python", str(env / "bin" / "python"),
              "--no-deps", str(ROOT)])
    partial = archive.with_suffix(".partial")
    _run([str(Path(sys.executable).parent / "venv-pack"), "-p", str(env), "-o", str(partial),
          "--format", "tar.gz", "--compress-level", "1", "--force", "--quiet"])
    partial.rename(archive)
    shutil.rmtree(work, ignore_errors=True)
    return archive
