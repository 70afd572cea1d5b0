"""TableHandle: a table's metadata at a ref, refreshable, with its identity.

Runs on the driver / enumerator process.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.io import FileIO
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.refs import SnapshotRefType
from pyiceberg.table.snapshots import Snapshot

from icefloe.errors import CatalogError, RefNotFoundError, SnapshotNotFoundError, TableNotFoundError

log = logging.getLogger(__name__)


@dataclass
class TableHandle:
    """A loaded table and how to reload it.

    ``identity`` is the table uuid (or a Nessie content id for Nessie tables): when
    it changes between two loads the table was dropped and re-created.
    """

    catalog: Catalog
    identifier: str
    table: Table

    @property
    def metadata(self) -> TableMetadata:
        return self.table.metadata

    @property
    def io(self) -> FileIO:
        return self.table.io

    @property
    def identity(self) -> str:
        return str(getattr(self.table, "content_id", None) or self.metadata.table_uuid)

    def refresh(self) -> TableHandle:
        """Reload the table's metadata from the catalog (in place); returns self."""
        self.table = _load(self.catalog, self.identifier)
        return self

    def ref_type(self, ref: str) -> str | None:
        """``branch``, ``tag`` or None when the table has no such ref."""
        snapshot_ref = self.metadata.refs.get(ref)
        if snapshot_ref is None:
            return None
        return "tag" if snapshot_ref.snapshot_ref_type == SnapshotRefType.TAG else "branch"

    def head(self, ref: str, kind: str = "any") -> Snapshot | None:
        """The snapshot ``ref`` points at; None for ``main`` of a table with no snapshot.

        Raises:
            RefNotFoundError: the ref does not exist (or is not of ``kind``).
        """
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
        snapshot = self.metadata.snapshot_by_id(snapshot_id)
        if snapshot is None:
            raise SnapshotNotFoundError(
                f"table {self.identifier} has no snapshot {snapshot_id} (it never existed or "
                "was expired); list snapshots with `icefloe plan` or PyIceberg's inspect API"
            )
        return snapshot


def _load(catalog: Catalog, identifier: str) -> Table:
    try:
        return catalog.load_table(identifier)
    except NoSuchTableError as exc:
        raise TableNotFoundError(
            f"no table {identifier!r} in catalog {catalog.name!r}; check the namespace and name"
        ) from exc
    except CatalogError:
        raise
    except Exception as exc:
        raise CatalogError(
            f"catalog {catalog.name!r} failed to load table {identifier!r}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def open_table(catalog: Catalog, identifier: str) -> TableHandle:
    """Load ``identifier`` (``namespace.table``) from ``catalog``."""
    return TableHandle(catalog=catalog, identifier=identifier, table=_load(catalog, identifier))
