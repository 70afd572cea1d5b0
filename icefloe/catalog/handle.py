"""TableHandle: a table's metadata at a ref, refreshable, with its identity.

Runs on the driver / enumerator process.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.io import FileIO
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.refs import SnapshotRefType
from pyiceberg.table.snapshots import Snapshot

from icefloe.catalog.loader import auth_error
from icefloe.catalog.refresh import MetadataParser, PointerProbe, load_moved, probe_for
from icefloe.enumerator.lineage import snapshot_by_id
from icefloe.errors import CatalogError, RefNotFoundError, SnapshotNotFoundError, TableNotFoundError

log = logging.getLogger(__name__)
T = TypeVar("T")


@runtime_checkable
class VersionedCatalog(Protocol):
    """A catalog whose tables live on references of their own (Nessie).

    Such a catalog loads a table at a catalog-level ref and refreshes it cheaply: it
    returns None from :meth:`refresh_if_moved` when the ref did not move (no metadata read).
    """

    def load_table_at(self, identifier: str, ref: str) -> Table: ...

    def refresh_if_moved(self, table: Table, *, follow_renames: bool = False) -> Table | None:
        ...


@dataclass
class TableHandle:
    """A loaded table and how to reload it.

    ``identity`` is the table uuid (or a Nessie content id for Nessie tables): when
    it changes between two loads the table was dropped and re-created.

    For a :class:`VersionedCatalog` (Nessie) table, the ``ref`` given to :meth:`head` /
    :meth:`ref_type` names the *catalog* reference (a Nessie branch, tag or
    ``branch@hash``): the handle re-loads the table at that reference when it was
    loaded at another one, and the head is the table's current snapshot there.
    ``follow_renames`` lets :meth:`refresh` follow a Nessie rename of the table.
    """

    catalog: Catalog
    identifier: str
    table: Table
    follow_renames: bool = False
    _probe: PointerProbe | None = field(default=None, init=False, repr=False)
    _probed: bool = field(default=False, init=False, repr=False)
    _parser: MetadataParser = field(default_factory=MetadataParser, init=False, repr=False)
    version: int = field(default=0, init=False)
    """Counts the loads that replaced :attr:`table` (0: the first); equal versions mean the
    same metadata, so a caller may keep what it derived from it."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "table" and "table" in self.__dict__ and value is not self.__dict__["table"]:
            object.__setattr__(self, "version", self.version + 1)
        object.__setattr__(self, name, value)

    @property
    def pointer_probe(self) -> PointerProbe | None:
        """How :meth:`refresh` asks the catalog for the metadata pointer (None: before the
        first refresh, for a Nessie table, or for a catalog that is reloaded whole)."""
        return self._probe

    @property
    def metadata(self) -> TableMetadata:
        return self.table.metadata

    @property
    def io(self) -> FileIO:
        return self.table.io

    @property
    def identity(self) -> str:
        return str(getattr(self.table, "content_id", None) or self.metadata.table_uuid)

    @property
    def commit_hash(self) -> str | None:
        """The Nessie commit hash the table was read at; None for other catalogs."""
        value = getattr(self.table, "commit_hash", None)
        return str(value) if value is not None else None

    @property
    def _versioned(self) -> VersionedCatalog | None:
        if isinstance(self.catalog, VersionedCatalog) and hasattr(self.table, "commit_hash"):
            return self.catalog
        return None

    def refresh(self) -> TableHandle:
        """Reload the table's metadata from the catalog (in place); returns self.

        The pointer first (:mod:`icefloe.catalog.refresh`): the catalog is asked where the
        metadata is now, and nothing more is read when it did not move (a Nessie
        reference's head, a SQL catalog's row, a REST ETag); a moved table is parsed
        reusing the snapshots already known. A catalog without a pointer probe is
        reloaded whole.
        """
        versioned = self._versioned
        if versioned is not None:
            moved = _guard(self.catalog, self.identifier, lambda: versioned.refresh_if_moved(
                self.table, follow_renames=self.follow_renames))
            if moved is not None:
                self.table = moved
            return self
        if not self._probed:
            self._probe, self._probed = probe_for(self.catalog, self.identifier), True
        probe = self._probe
        if probe is None:
            self.table = _load(self.catalog, self.identifier)
            return self
        pointer = _guard(self.catalog, self.identifier, lambda: probe.probe(self.table))
        if pointer.location is None:
            self.table = _load(self.catalog, self.identifier)
        elif pointer.location != self.table.metadata_location:
            self.table = _guard(self.catalog, self.identifier,
                                lambda: load_moved(self.catalog, self.table, pointer,
                                                   self._parser))
        return self

    def _bind(self, ref: str) -> bool:
        """Load a Nessie table at ``ref`` if it was loaded at another ref; False if not Nessie."""
        versioned = self._versioned
        if versioned is None:
            return False
        if getattr(self.table, "ref_spec", None) != ref:
            self.table = _guard(self.catalog, self.identifier,
                                lambda: versioned.load_table_at(self.identifier, ref))
        return True

    def ref_type(self, ref: str) -> str | None:
        """``branch``, ``tag`` or None when the table has no such ref."""
        if self._bind(ref):
            nessie: Any = self.table  # a NessieTable
            return "tag" if nessie.reference.type == "TAG" else "branch"
        snapshot_ref = self.metadata.refs.get(ref)
        if snapshot_ref is None:
            return None
        return "tag" if snapshot_ref.snapshot_ref_type == SnapshotRefType.TAG else "branch"

    def head(self, ref: str, kind: str = "any") -> Snapshot | None:
        """The snapshot ``ref`` points at; None for ``main`` of a table with no snapshot.

        Raises:
            RefNotFoundError: the ref does not exist (or is not of ``kind``).
        """
        if self._bind(ref):
            actual = self.ref_type(ref)
            if kind != "any" and actual != kind:
                raise RefNotFoundError(
                    f"Nessie ref {ref!r} of table {self.identifier} is a {actual}, not a "
                    f"{kind}; use the option {actual} (or ref)"
                )
            nessie_table: Any = self.table
            head: Snapshot | None = nessie_table.head_snapshot()
            return head
        snapshot_ref = self.metadata.refs.get(ref)
        if snapshot_ref is None:
            if ref == "main" and self.metadata.current_snapshot_id is None:
                return None
            known = ", ".join(sorted(self.metadata.refs)) or "none"
            raise RefNotFoundError(
                f"table {self.identifier} has no branch or tag {ref!r} (refs: {known})"
            )
        actual = self.ref_type(ref)
        if kind != "any" and actual != kind:
            raise RefNotFoundError(
                f"{ref!r} of table {self.identifier} is a {actual}, not a {kind}; "
                f"use the option {actual} (or ref)"
            )
        return self.snapshot(snapshot_ref.snapshot_id)

    def snapshot(self, snapshot_id: int) -> Snapshot:
        """The snapshot with ``snapshot_id``.

        Raises:
            SnapshotNotFoundError: no such snapshot in the table metadata.
        """
        snapshot = snapshot_by_id(self.metadata, snapshot_id)
        if snapshot is None:
            raise SnapshotNotFoundError(
                f"table {self.identifier} has no snapshot {snapshot_id} (it never existed or "
                f"was expired); list them with `icefloe snapshots {self.identifier}`"
            )
        return snapshot


def _load(catalog: Catalog, identifier: str, ref: str | None = None) -> Table:
    if ref is not None and isinstance(catalog, VersionedCatalog):
        return _guard(catalog, identifier, lambda: catalog.load_table_at(identifier, ref))
    return _guard(catalog, identifier, lambda: catalog.load_table(identifier))


def _guard(catalog: Catalog, identifier: str, call: Callable[[], T]) -> T:
    """Run a catalog call, translating failures into icefloe's catalog errors."""
    try:
        return call()
    except NoSuchTableError as exc:
        raise TableNotFoundError(
            f"no table {identifier!r} in catalog {catalog.name!r}{_where(catalog)}; check the "
            "namespace and name, or the catalog"
        ) from exc
    except CatalogError:
        raise
    except Exception as exc:
        refused = auth_error(catalog.name, exc)
        if refused is not None:
            raise refused from exc
        reason = " ".join(str(exc).split())  # one line
        raise CatalogError(
            f"catalog {catalog.name!r} failed to load table {identifier!r}: "
            f"{type(exc).__name__}: {reason}"
        ) from exc


def _where(catalog: Catalog) -> str:
    """Where an embedded (SQLite) catalog lives; nothing for others (URIs may hold secrets)."""
    uri = str(catalog.properties.get("uri", ""))
    return f" (at {uri.removeprefix('sqlite:///')})" if uri.startswith("sqlite:///") else ""


def open_table(catalog: Catalog, identifier: str, ref: str | None = None,
               follow_renames: bool = False) -> TableHandle:
    """Load ``identifier`` (``namespace.table``) from ``catalog``.

    Args:
        ref: for a :class:`VersionedCatalog` (Nessie), the catalog reference to load at
            (branch, tag or ``branch@hash``); ignored by other catalogs, whose refs live
            in the table metadata.
        follow_renames: let :meth:`TableHandle.refresh` follow a Nessie rename.
    """
    return TableHandle(catalog=catalog, identifier=identifier,
                       table=_load(catalog, identifier, ref), follow_renames=follow_renames)
