"""Fault injectors for in-process reliability tests (small fakes, no mocks).

- :class:`FlakyFileIO`: a PyIceberg ``FileIO`` delegating to ``PyArrowFileIO`` that fails
  a fraction of manifest (``.avro``) and data-file (``.parquet``) reads with ``OSError``,
  at open or in the middle of a read. Install it with the catalog property
  ``py-io-impl=tests.reliability.faults.FlakyFileIO``; tune it through :data:`PLAN`.
- :class:`FlakyCatalog`: a ``SqlCatalog`` that is unreachable (``ConnectionError``)
  while ``down`` is set.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from typing import Any

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io import FileIO, InputFile, InputStream, OutputFile
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.table import Table
from pyiceberg.typedef import Identifier


@dataclass
class FaultPlan:
    """What :class:`FlakyFileIO` breaks. ``broken`` paths (substrings) fail every time."""

    manifest_rate: float = 0.0
    data_rate: float = 0.0
    broken: tuple[str, ...] = ()
    seed: int = 0
    injected: int = 0
    rng: random.Random = field(default_factory=random.Random)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self, manifest_rate: float = 0.0, data_rate: float = 0.0,
              broken: tuple[str, ...] = (), seed: int = 0) -> None:
        with self.lock:
            self.manifest_rate, self.data_rate, self.broken = manifest_rate, data_rate, broken
            self.rng.seed(seed)
            self.injected = 0

    def should_fail(self, location: str) -> bool:
        with self.lock:
            if any(b in location for b in self.broken):
                self.injected += 1
                return True
            rate = self.manifest_rate if location.endswith(".avro") else \
                self.data_rate if location.endswith(".parquet") else 0.0
            if rate and self.rng.random() < rate:
                self.injected += 1
                return True
            return False


PLAN = FaultPlan()


def _fault(location: str) -> OSError:
    return ConnectionResetError(f"injected fault reading {location}")


class _FlakyStream:
    """An input stream that may fail on a read (after the open succeeded)."""

    def __init__(self, inner: InputStream, location: str) -> None:
        self._inner = inner
        self._location = location

    def read(self, size: int | None = None) -> bytes:
        if PLAN.should_fail(self._location):
            raise _fault(self._location)
        return self._inner.read() if size is None or size < 0 else self._inner.read(size)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __enter__(self) -> _FlakyStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self._inner.close()


class _FlakyInput(InputFile):
    def __init__(self, inner: InputFile) -> None:
        super().__init__(inner.location)
        self._inner = inner

    def __len__(self) -> int:
        return len(self._inner)

    def exists(self) -> bool:
        return self._inner.exists()

    def open(self, seekable: bool = True) -> InputStream:
        if PLAN.should_fail(self.location):
            raise _fault(self.location)
        stream = self._inner.open(seekable=seekable)
        if not self.location.endswith((".avro", ".parquet")):
            return stream
        return _FlakyStream(stream, self.location)  # type: ignore[return-value]


class FlakyFileIO(FileIO):
    """PyArrowFileIO whose reads fail as :data:`PLAN` says (writes never fail)."""

    def __init__(self, properties: dict[str, str] | None = None) -> None:
        super().__init__(properties or {})
        self._inner = PyArrowFileIO(self.properties)

    def new_input(self, location: str) -> InputFile:
        return _FlakyInput(self._inner.new_input(location))

    def new_output(self, location: str) -> OutputFile:
        return self._inner.new_output(location)

    def delete(self, location: str | InputFile | OutputFile) -> None:
        self._inner.delete(location)


class FlakyCatalog(SqlCatalog):
    """A SQLite catalog that raises ``ConnectionError`` from ``load_table`` while ``down``."""

    def __init__(self, name: str, **properties: str) -> None:
        super().__init__(name, **properties)
        self.down = threading.Event()
        self.refused = 0

    def load_table(self, identifier: str | Identifier) -> Table:
        if self.down.is_set():
            self.refused += 1
            raise ConnectionError("injected: catalog unreachable")
        return super().load_table(identifier)
