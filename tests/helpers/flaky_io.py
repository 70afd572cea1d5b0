"""A FileIO that fails reads of manifest lists while a fault budget lasts (any process).

Set as a catalog's ``py-io-impl`` so that every process opening the catalog (the test,
a Ray actor) reads through it. The budget is a file (``ICEFLOE_TEST_FAULTS`` names it,
the catalog property ``test.faults-file`` too): each failed read takes one from it, so
a test arms N faults before a stream starts and checks afterwards that all were hit.
The fault is a ``ConnectionResetError`` (an ``OSError``: transient for icefloe).
"""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import Any

from pyiceberg.io import InputFile
from pyiceberg.io.pyarrow import PyArrowFileIO

FAULTS_PROPERTY = "test.faults-file"


def take_fault(path: str) -> bool:
    """Take one fault from the budget file at ``path``; False when none is left."""
    file = Path(path)
    if not file.exists():
        return False
    with file.open("r+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        left = int(f.read().strip() or 0)
        if left <= 0:
            return False
        f.seek(0)
        f.truncate()
        f.write(str(left - 1))
        return True


def faults_left(path: str) -> int:
    return int(Path(path).read_text().strip() or 0)


class FlakyFileIO(PyArrowFileIO):
    """PyArrowFileIO whose manifest-list reads fail while the budget file says so."""

    def __init__(self, properties: Any = None) -> None:
        super().__init__(properties or {})
        self.faults_file = (properties or {}).get(FAULTS_PROPERTY)

    def new_input(self, location: str) -> InputFile:
        if self.faults_file and "/snap-" in location and take_fault(self.faults_file):
            raise ConnectionResetError(f"injected transient fault reading {location}")
        return super().new_input(location)
