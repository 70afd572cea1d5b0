"""FileIOs that fail reads of manifest lists (or of data files) while a fault budget
lasts (any process).

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

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io import FileIO, InputFile, InputStream, OutputFile
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


DATA_FAULTS_PROPERTY = "test.data-faults-file"


class _FlakyInput(InputFile):
    """An input file whose ``open`` takes a fault from the budget first."""

    def __init__(self, inner: InputFile, faults_file: str) -> None:
        super().__init__(inner.location)
        self.inner = inner
        self.faults_file = faults_file

    def __len__(self) -> int:
        return len(self.inner)

    def exists(self) -> bool:
        return self.inner.exists()

    def open(self, seekable: bool = True) -> InputStream:
        if take_fault(self.faults_file):
            raise ConnectionResetError(f"injected transient fault reading {self.location}")
        return self.inner.open(seekable)


class FlakyDataFileIO(FileIO):
    """A FileIO (PyArrowFileIO underneath, not a subclass: readers open files through
    ``new_input``) whose opens of Parquet data files fail while the budget file named by
    the ``test.data-faults-file`` property says so."""

    def __init__(self, properties: Any = None) -> None:
        super().__init__(properties or {})
        self.inner = PyArrowFileIO(properties or {})
        self.faults_file = (properties or {}).get(DATA_FAULTS_PROPERTY)

    def new_input(self, location: str) -> InputFile:
        inner = self.inner.new_input(location)
        if self.faults_file and "/data/" in location and location.endswith(".parquet"):
            return _FlakyInput(inner, self.faults_file)
        return inner

    def new_output(self, location: str) -> OutputFile:
        return self.inner.new_output(location)

    def delete(self, location: str | InputFile | OutputFile) -> None:
        self.inner.delete(location)


def data_faults_catalog(directory: Path, faults: Path) -> SqlCatalog:
    """A SQLite catalog under ``directory`` whose tables read through
    :class:`FlakyDataFileIO` with the budget file ``faults`` (created empty: no fault)."""
    faults.write_text("0")
    return SqlCatalog("flaky", uri=f"sqlite:///{directory}/flaky.db",
                      warehouse=f"file://{directory}/flaky-wh",
                      **{"py-io-impl": "tests.helpers.flaky_io.FlakyDataFileIO",
                         DATA_FAULTS_PROPERTY: str(faults)})
