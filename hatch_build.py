"""The build hook that compiles icefloe's C manifest decoder (issue 31).

Hatchling runs it for every wheel build: ``uv sync`` / ``make setup`` (an editable
build: the extension is written next to its source, ``icefloe/enumerator/_native_manifest``,
where the editable install imports it) and ``uv build --wheel`` (the extension goes into
the wheel, which is then a platform wheel). One C file, compiled and linked with zlib by
the C compiler Python was built with (``CC`` overrides it) with Python's own flags.

Without a working compiler or zlib's header (or with ``ICEFLOE_NATIVE_BUILD=0``) the
build still succeeds: it prints a warning and leaves the extension out, a pure-Python
wheel; ``icefloe.enumerator._native_manifest`` then fails to import and planning uses the
pure-Python decoder. ``ICEFLOE_NATIVE_BUILD=1`` makes a failed compile an error (CI).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PACKAGE = "icefloe/enumerator/_native_manifest"
SOURCE = f"{PACKAGE}/_core.c"


def compile_extension(root: Path, out: Path) -> str | None:
    """Compile ``SOURCE`` into the shared object ``out``; None, or why it failed."""
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    cflags = ["-O2", "-fPIC", "-fvisibility=hidden", "-Wall", "-std=c99",
              "-D_POSIX_C_SOURCE=200809L"]
    cmd = [*shlex.split(cc), *cflags, f"-I{sysconfig.get_paths()['include']}",
           "-shared", str(root / SOURCE), "-o", str(out), "-lz"]
    if sys.platform == "darwin":
        cmd[-1:-1] = ["-undefined", "dynamic_lookup"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{shlex.join(cmd)}: {exc}"
    if proc.returncode != 0:
        return f"{shlex.join(cmd)} exited {proc.returncode}: {proc.stderr[-2000:]}"
    return None


class NativeDecoderHook(BuildHookInterface):  # type: ignore[type-arg]
    """Compiles ``_core.c`` into the wheel (or next to its source for an editable one)."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or os.environ.get("ICEFLOE_NATIVE_BUILD") == "0":
            return
        root = Path(self.root)
        name = "_core" + (sysconfig.get_config_var("EXT_SUFFIX") or ".so")
        if version == "editable":
            out = root / PACKAGE / name
        else:
            out = Path(tempfile.mkdtemp(prefix="icefloe-native-")) / name
        error = compile_extension(root, out)
        if error is not None:
            if os.environ.get("ICEFLOE_NATIVE_BUILD") == "1":
                raise RuntimeError(f"icefloe: the C manifest decoder did not build: {error}")
            print(f"icefloe: WARNING: building without the C manifest decoder (planning "
                  f"uses the pure-Python one): {error}", file=sys.stderr)
            return
        if version != "editable":
            build_data["force_include"][str(out)] = f"{PACKAGE}/{name}"
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
