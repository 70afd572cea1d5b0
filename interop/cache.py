"""Where the interop tables live: ``build/interop/<key>``, keyed by the writer's own files.

Pure standard library: imported by the writer (``.venv-interop``) and by the tests (``.venv``).
A change to the writer, the session or the lock file gives a new key, so the tables are
written again; otherwise a run reuses them. A directory is complete once ``cases.json``
exists (written last).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
KEYED = ("writer.py", "session.py", "duckdb_oracle.py", "uv.lock", "cache.py")


def key() -> str:
    """A short hash of the files that decide what the writer writes."""
    digest = hashlib.sha256()
    for name in KEYED:
        digest.update(name.encode())
        digest.update((HERE / name).read_bytes())
    return digest.hexdigest()[:16]


def home() -> Path:
    """The cache directory of this writer (``$ICEFLOE_INTEROP_HOME`` overrides it)."""
    override = os.environ.get("ICEFLOE_INTEROP_HOME")
    if override:
        return Path(override).resolve()
    return ROOT / "build" / "interop" / key()


def complete(path: Path) -> bool:
    """Whether the writer finished writing ``path``."""
    return (path / "cases.json").is_file()
