"""NessieCatalog: a read-only PyIceberg catalog over the Nessie REST API v2.

Runs on the driver / enumerator process only (readers never open a catalog).

A Nessie table is an ``ICEBERG_TABLE`` content under a content key on a reference
(branch, tag, or ``branch@<commit hash>``). Loading it is: resolve the reference to a
commit hash, read the content at that hash (content id + ``metadataLocation``), then read
the Iceberg metadata JSON with PyIceberg's FileIO. The returned :class:`NessieTable` is a
PyIceberg ``Table`` that also carries the content id (the table's identity across renames
and branches), the commit hash it was read at and the reference it follows.

Cheap polls: :meth:`NessieCatalog.refresh_if_moved` asks Nessie for the reference's head
hash (one request) and reads nothing else when it did not move; when it moved but the
table's content did not change (another table was committed), it reads no Iceberg
metadata either.

Lineage across Nessie history: when the new metadata does not descend from the previous
one (the branch was reassigned, or a merge rewrote the table), the snapshots only the
previous metadata knew are carried over as non-ancestors of the new head, so the
enumerator reports a *lineage break* (and applies ``onLineageBreak``) instead of an
*expired position*.

The bearer token is held by the :class:`NessieClient` only: it is never stored in
``catalog.properties`` and never appears in logs, errors or reprs.
"""

from __future__ import annotations

import logging
import threading
import urllib.parse
from typing import Any, NoReturn

from pyiceberg.catalog import Catalog
from pyiceberg.io import FileIO, load_file_io
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.typedef import Identifier

from icefloe.catalog.nessie_client import (
    IcebergTableContent,
    NessieClient,
    Reference,
    format_key,
    parse_ref,
)
from icefloe.errors import CatalogError, RefNotFoundError, TableNotFoundError

__all__ = ["NessieCatalog", "NessieTable"]

log = logging.getLogger(__name__)

API_V2_PATH = "/api/v2"
_CLIENT_PROPS = ("token", "uri", "ref", "timeout-s", "max-attempts", "backoff-s")


class NessieTable(Table):
    """A PyIceberg ``Table`` read from Nessie, plus where in Nessie it was read.

    Attributes:
        content_id: Nessie content id (stable across renames; new after drop + create).
        commit_hash: the Nessie commit the content was read at.
        reference: the reference followed (name, BRANCH/TAG, head hash when read).
        pinned: True when the ref was ``name@hash`` (a fixed commit: never moves).
        key: the content key the table was found under (changes when a rename is followed).
        content: the Nessie content (metadata location, on-reference snapshot id, ...).
    """

    content_id: str
    commit_hash: str
    reference: Reference
    pinned: bool
    key: tuple[str, ...]
    content: IcebergTableContent

    @property
    def ref_spec(self) -> str:
        """The ref as it was given: ``name`` or ``name@hash`` when pinned."""
        name = self.reference.name
        return f"{name}@{self.commit_hash}" if self.pinned else name

    def head_snapshot(self) -> Snapshot | None:
        """The Iceberg snapshot this Nessie commit points at (None: no snapshot yet).

        Nessie's on-reference ``snapshotId`` wins; the metadata's current snapshot is the
        fallback when the content does not name one.
        """
        if self.content.snapshot_id >= 0:
            snapshot = self.metadata.snapshot_by_id(self.content.snapshot_id)
            if snapshot is not None:
                return snapshot
        return self.metadata.current_snapshot()


class NessieCatalog(Catalog):
    """Read-only PyIceberg catalog backed by a Nessie server (REST API v2).

    Args:
        name: catalog name (for messages).
        uri: Nessie API v2 base, e.g. ``http://nessie:19120/api/v2`` (a bare
            ``http://nessie:19120`` gets ``/api/v2`` appended).
        token: bearer token, or None for an unauthenticated server. Kept out of
            ``properties``, logs, errors and ``repr``.
        ref: default reference of :meth:`load_table`: ``branch``, ``tag`` or ``branch@hash``.
        **properties: FileIO properties (``s3.*``, ``py-io-impl``, ``warehouse``, ...) and
            client tuning ``timeout-s``, ``max-attempts``, ``backoff-s``.

    Raises:
        CatalogError: no ``uri``. InvalidOptionError: a malformed uri or ref.
    """

    def __init__(self, name: str, uri: str | None = None, token: str | None = None,
                 ref: str = "main", **properties: str) -> None:
        props = {k: v for k, v in properties.items() if k not in _CLIENT_PROPS}
        super().__init__(name, **props)
        if not uri:
            raise CatalogError(
                f"Nessie catalog {name!r} needs a uri; set catalog.uri=http://host:19120/api/v2"
            )
        parse_ref(ref)
        self.uri = _api_v2(uri)
        self.ref = ref
        self.client = NessieClient(
            self.uri,
            token=token,
            timeout_s=float(properties.get("timeout-s", 10.0)),
            max_attempts=int(properties.get("max-attempts", 4)),
            backoff_s=float(properties.get("backoff-s", 0.2)),
        )
        self._lock = threading.Lock()
        self._metadata_reads = 0

    def __repr__(self) -> str:
        return f"NessieCatalog({self.name!r}, client={self.client!r}, ref={self.ref!r})"

    @property
    def metadata_reads(self) -> int:
        """Iceberg metadata JSON files read so far (tests use it to check cheap polls)."""
        with self._lock:
            return self._metadata_reads

    # ------------------------------------------------------------------ read path

    def load_table(self, identifier: str | Identifier) -> NessieTable:
        """Load ``identifier`` at the catalog's default ref (see :meth:`load_table_at`)."""
        return self.load_table_at(identifier, self.ref)

    def load_table_at(self, identifier: str | Identifier, ref: str) -> NessieTable:
        """Load ``identifier`` (``namespace.table``) at Nessie ``ref``.

        ``ref`` is a branch, a tag or ``branch@hash`` (pinned to that commit). Costs two
        requests (three when pinned) and one metadata read.

        Raises:
            RefNotFoundError: unknown ref, or the hash is not on it.
            TableNotFoundError: no Iceberg table under that key at that commit.
            CatalogAuthError / CatalogError: refused, or the server did not answer.
        """
        key = Catalog.identifier_to_tuple(identifier)
        reference = self.client.get_reference(ref)
        _, pinned = parse_ref(ref)
        content = self.client.get_content(f"{reference.name}@{reference.hash}", key)
        assert content is not None  # missing_ok=False raises instead
        return self._table(key, content, reference, pinned is not None, previous=None)

    def refresh_if_moved(self, table: Table, *, follow_renames: bool = False) -> Table | None:
        """The table at its reference's new head, or None when nothing needs reloading.

        One request when the reference did not move (nothing else is read); no metadata
        read when it moved but the table's content did not change (a table with the new
        commit hash and the same metadata object is returned). A pinned ref never moves.

        Args:
            table: a :class:`NessieTable` from this catalog.
            follow_renames: when the key is gone because the table was renamed, follow it
                to its new key (logged); otherwise raise an error naming the new key.

        Raises:
            TableNotFoundError: the key is gone (dropped, or renamed without
                ``follow_renames``; the message names the new key then).
            RefNotFoundError: the reference was deleted.
        """
        if not isinstance(table, NessieTable):
            raise TypeError(f"not a table of a NessieCatalog: {type(table).__name__}")
        if table.pinned:
            return None
        reference = self.client.get_reference(table.reference.name)
        if reference.hash == table.commit_hash:
            return None
        at = f"{reference.name}@{reference.hash}"
        key = table.key
        content = self.client.get_content(at, key, missing_ok=True)
        if content is None:
            key = self._renamed_to(table, reference, follow_renames)
            content = self.client.get_content(at, key)
            assert content is not None
        if content == table.content and key == table.key:
            return self._with_commit(table, reference)
        return self._table(key, content, reference, False, previous=table)

    # ------------------------------------------------------------------ internals

    def _renamed_to(self, table: NessieTable, reference: Reference,
                    follow_renames: bool) -> tuple[str, ...]:
        old = format_key(table.key)
        try:
            new_key = self.client.find_rename(
                reference.name, table.content_id, since_hash=table.commit_hash,
                old_key=table.key)
        except RefNotFoundError:  # the branch was reassigned past the commit we read
            new_key = None
        if new_key is None:
            raise TableNotFoundError(
                f"table {old!r} is gone from Nessie ref {reference.name!r} at commit "
                f"{reference.hash} (dropped); nothing to follow")
        if not follow_renames:
            raise TableNotFoundError(
                f"table {old!r} was renamed to {format_key(new_key)!r} on Nessie ref "
                f"{reference.name!r}; set followRenames=true to follow it, or read "
                f"{format_key(new_key)!r}")
        log.info("table %s was renamed to %s on Nessie ref %s (content id %s); following it",
                 old, format_key(new_key), reference.name, table.content_id)
        return new_key

    def _read_metadata(self, location: str) -> tuple[TableMetadata, FileIO]:
        io = load_file_io(self.properties, location)
        with self._lock:
            self._metadata_reads += 1
        try:
            return FromInputFile.table_metadata(io.new_input(location)), io
        except Exception as exc:
            raise CatalogError(
                f"cannot read Iceberg metadata {location!r} named by Nessie at {self.uri} "
                f"({type(exc).__name__}: {exc}); check the FileIO properties (catalog.s3.*, "
                "catalog.py-io-impl) and that the file exists") from exc

    def _table(self, key: tuple[str, ...], content: IcebergTableContent, reference: Reference,
               pinned: bool, previous: NessieTable | None) -> NessieTable:
        if previous is not None and previous.content.metadata_location == \
                content.metadata_location:
            metadata, io = previous.metadata, previous.io
        else:
            metadata, io = self._read_metadata(content.metadata_location)
        if previous is not None and previous.content_id == content.content_id:
            metadata = _carry_lineage(previous, metadata, content.metadata_location)
        table = NessieTable(key, metadata, content.metadata_location, io, self)
        table.content_id = content.content_id
        table.commit_hash = reference.hash
        table.reference = reference
        table.pinned = pinned
        table.key = key
        table.content = content
        return table

    def _with_commit(self, table: NessieTable, reference: Reference) -> NessieTable:
        return self._table(table.key, table.content, reference, table.pinned, previous=table)

    def _unsupported(self, what: str) -> NoReturn:
        raise NotImplementedError(
            f"{what} is not supported by icefloe's read-only NessieCatalog {self.name!r}; "
            "write through Nessie's Iceberg REST endpoint with PyIceberg's REST catalog "
            "(see docs/nessie.md)")

    # ------------------------------------------------------------------ the rest of Catalog

    def table_exists(self, identifier: str | Identifier) -> bool:
        """Whether an Iceberg table is under ``identifier`` at the default ref."""
        key = Catalog.identifier_to_tuple(identifier)
        return self.client.get_content(self.ref, key, missing_ok=True) is not None

    def supports_server_side_planning(self) -> bool:
        return False

    def create_table(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._unsupported("create_table")

    def create_table_transaction(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._unsupported("create_table_transaction")

    def commit_table(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._unsupported("commit_table (writing to a table)")

    def register_table(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._unsupported("register_table")

    def rename_table(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._unsupported("rename_table")

    def drop_table(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._unsupported("drop_table")

    def purge_table(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._unsupported("purge_table")

    def list_tables(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._unsupported("list_tables")

    def list_namespaces(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._unsupported("list_namespaces")

    def create_namespace(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._unsupported("create_namespace")

    def drop_namespace(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._unsupported("drop_namespace")

    def namespace_exists(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._unsupported("namespace_exists")

    def load_namespace_properties(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._unsupported("load_namespace_properties")

    def update_namespace_properties(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._unsupported("update_namespace_properties")

    def create_view(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._unsupported("create_view")

    def drop_view(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._unsupported("drop_view")

    def list_views(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._unsupported("list_views")

    def load_view(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._unsupported("load_view")

    def view_exists(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._unsupported("view_exists")

    def register_view(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._unsupported("register_view")


def _api_v2(uri: str) -> str:
    """``uri`` with ``/api/v2`` appended when it has no path (``http://host:19120``)."""
    parsed = urllib.parse.urlsplit(uri)
    if parsed.path in ("", "/"):
        return uri.rstrip("/") + API_V2_PATH
    return uri.rstrip("/")


def _carry_lineage(previous: NessieTable, metadata: TableMetadata,
                   location: str) -> TableMetadata:
    """``metadata``, plus the snapshots only ``previous`` knew when it is not a successor.

    The new metadata descends from the previous one when it is the same file or lists it
    in its metadata log. Otherwise (branch reassigned, a merge rewrote the table) a
    position in the previous lineage is not an ancestor of the new head: keeping those
    snapshots (never ancestors of the new head) makes that a lineage break rather than an
    expired position. Planning is unaffected: it only walks the new head's ancestors.
    """
    old = previous.metadata_location
    if old == location or any(e.metadata_file == old for e in metadata.metadata_log):
        return metadata
    known = {s.snapshot_id for s in metadata.snapshots}
    extra = [s for s in previous.metadata.snapshots if s.snapshot_id not in known]
    if not extra:
        return metadata
    log.warning("Nessie ref %s moved from commit %s to a table state that does not descend "
                "from the one read before (branch reassigned or merge rewrote the table)",
                previous.reference.name, previous.commit_hash)
    return metadata.model_copy(update={"snapshots": [*metadata.snapshots, *extra]})
