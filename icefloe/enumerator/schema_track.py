"""Schema changes during a stream: what changed, and what ``onSchemaChange`` does about it.

A stream reads with one schema at a time, the *stream schema* (:class:`StreamSchema`). It
starts as the table's current schema when the stream starts fresh; every snapshot
committed up to the head at that moment (``since``, a sequence number) is read in it, as
any Iceberg scan reads old data files with a newer schema (by field id: added columns
null, renamed ones followed). A snapshot committed after that whose ``schema-id`` gives
different columns is a *change*, seen at the snapshot boundary (a schema change is a
metadata-only commit, so the first snapshot written under it is where it shows). What
happens then is :class:`SchemaPolicy`'s business, per ``onSchemaChange``:

- ``fail``: the snapshots before it are delivered; the enumeration then raises
  :class:`~icefloe.errors.SchemaChangedError` naming the snapshot and the change. A
  restart reads with the table's schema of that moment (as a Spark query fixes its
  schema when it starts); a rename or drop since the checkpoint's schema needs
  ``allowColumnRename`` / ``allowColumnDrop`` on the restart (Delta's explicit unblock).
- ``evolve``: splits from that snapshot on are read in the new schema (never within a
  snapshot), and the stream tells its consumer (``item.schema_change``). Renames and
  drops need ``allowColumnRename`` / ``allowColumnDrop``, or the stream fails there.
- ``keep``: the start schema stays; new columns are not read (lossy), renamed ones are
  followed by field id; a dropped column reads as null and needs ``allowColumnDrop``; a
  widened column cannot be read in its narrower start type and fails.

Partition spec changes leave the schema id alone and never change rows. Runs where the
enumerator runs (the coordinator's thread, the Spark driver); every value here pickles.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

from pyiceberg.schema import Schema, index_by_id
from pyiceberg.types import ListType, MapType, NestedField, PrimitiveType, StructType

from icefloe.errors import SchemaChangedError

if TYPE_CHECKING:
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.snapshots import Snapshot

SchemaMode = Literal["fail", "evolve", "keep"]
SCHEMA_MODES: tuple[SchemaMode, ...] = ("fail", "evolve", "keep")

SCHEMA_EPOCH = 1 << 32
"""Schema tags of a stream that an ``onLineageBreak`` reset moved onto a re-created table.

A re-created table numbers its schemas from 0 again, so a schema id of the old table may
mean other columns in the new one. The splits of the n-th table a stream follows carry
``schema_id + n * SCHEMA_EPOCH`` (``FileSplit.schema_id``), and the read contexts are
keyed by that tag: no reader takes a context of the old table for the new one. Tags live
only in the running stream; checkpoints hold table schema ids (:class:`StreamSchema`).
"""


def table_schema_id(tag: int) -> int:
    """The table's schema id of a split's schema tag (see :data:`SCHEMA_EPOCH`)."""
    return tag % SCHEMA_EPOCH


def new_table_change(old: Schema | None, new: Schema) -> SchemaChange:
    """What a stream that moved onto a re-created table sees: every column of the new
    table is new, every one of the old table is gone (other field ids, none of the old
    values, even where a name is the same)."""
    return SchemaChange(
        from_schema_id=old.schema_id if old is not None else new.schema_id,
        to_schema_id=new.schema_id,
        added=tuple(f.name for f in new.fields),
        dropped=tuple(f.name for f in old.fields) if old is not None else ())


@dataclass(frozen=True, slots=True)
class SchemaChange:
    """What changed between two schemas, by field id (full dotted names).

    Attributes:
        from_schema_id / to_schema_id: the stream's schema before, the table's after.
        snapshot_id: the first snapshot committed in the new schema (None: seen when a
            stream restarted on a table whose schema changed since its checkpoint).
        added: new columns (a nested field only when its parent existed before).
        dropped: columns gone (a column dropped and added again by name is a drop plus
            an add: another field id, none of the old values).
        renamed: ``(old name, new name)``.
        widened: ``(name, old type, new type)``: int -> long, float -> double, decimal
            precision.
        made_optional: required columns that became optional.
        reordered: structs whose fields changed order (``""``: the top level).
    """

    from_schema_id: int
    to_schema_id: int
    snapshot_id: int | None = None
    added: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    renamed: tuple[tuple[str, str], ...] = ()
    widened: tuple[tuple[str, str, str], ...] = ()
    made_optional: tuple[str, ...] = ()
    reordered: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        """True when no column changed (e.g. only identifier fields or docs)."""
        return not (self.added or self.dropped or self.renamed or self.widened
                    or self.made_optional or self.reordered)

    @property
    def kinds(self) -> frozenset[str]:
        """The kinds present: ``added``, ``dropped``, ``renamed``, ``widened``,
        ``made_optional``, ``reordered``."""
        return frozenset(k for k in ("added", "dropped", "renamed", "widened",
                                     "made_optional", "reordered") if getattr(self, k))

    def describe(self) -> str:
        """One line, e.g. ``added 'c'; renamed 'a' to 'b'``."""
        parts = []
        if self.added:
            parts.append("added " + ", ".join(repr(n) for n in self.added))
        if self.dropped:
            parts.append("dropped " + ", ".join(repr(n) for n in self.dropped))
        if self.renamed:
            parts.append("renamed " + ", ".join(f"{a!r} to {b!r}" for a, b in self.renamed))
        if self.widened:
            parts.append("widened " + ", ".join(f"{n!r} from {a} to {b}"
                                                for n, a, b in self.widened))
        if self.made_optional:
            parts.append("made optional " + ", ".join(repr(n) for n in self.made_optional))
        if self.reordered:
            parts.append("reordered the columns of " + ", ".join(
                repr(n) if n else "the table" for n in self.reordered))
        return "; ".join(parts) or "no column changed"


def _children(field_type: object) -> list[NestedField]:
    if isinstance(field_type, StructType):
        return list(field_type.fields)
    if isinstance(field_type, ListType):
        return [field_type.element_field]
    if isinstance(field_type, MapType):
        return [field_type.key_field, field_type.value_field]
    return []


def _struct_orders(schema: Schema) -> dict[int, list[int]]:
    """Struct id (0: the top level) -> its field ids in order, for every struct."""
    out: dict[int, list[int]] = {0: [f.field_id for f in schema.fields]}
    stack = list(schema.fields)
    while stack:
        f = stack.pop()
        if isinstance(f.field_type, StructType):
            out[f.field_id] = [c.field_id for c in f.field_type.fields]
        stack.extend(_children(f.field_type))
    return out


def _parents(schema: Schema) -> dict[int, int]:
    out: dict[int, int] = {}
    stack = [(0, f) for f in schema.fields]
    while stack:
        parent, f = stack.pop()
        out[f.field_id] = parent
        stack.extend((f.field_id, c) for c in _children(f.field_type))
    return out


def diff_schemas(old: Schema, new: Schema, snapshot_id: int | None = None) -> SchemaChange:
    """The change from ``old`` to ``new``, matched by field id (see :class:`SchemaChange`)."""
    old_fields, new_fields = index_by_id(old), index_by_id(new)
    old_parent, new_parent = _parents(old), _parents(new)

    def name(schema: Schema, field_id: int) -> str:
        return schema.find_column_name(field_id) or str(field_id)

    added = tuple(name(new, i) for i in sorted(new_fields.keys() - old_fields.keys())
                  if new_parent[i] in old_fields or new_parent[i] == 0)
    dropped = tuple(name(old, i) for i in sorted(old_fields.keys() - new_fields.keys())
                    if old_parent[i] in new_fields or old_parent[i] == 0)
    renamed: list[tuple[str, str]] = []
    widened: list[tuple[str, str, str]] = []
    optional: list[str] = []
    for i in sorted(old_fields.keys() & new_fields.keys()):
        a, b = old_fields[i], new_fields[i]
        if a.name != b.name:
            renamed.append((name(old, i), name(new, i)))
        if isinstance(a.field_type, PrimitiveType) and a.field_type != b.field_type:
            widened.append((name(new, i), str(a.field_type), str(b.field_type)))
        if a.required and not b.required:
            optional.append(name(new, i))
    old_orders, new_orders = _struct_orders(old), _struct_orders(new)
    reordered = []
    for struct_id, order in sorted(new_orders.items()):
        before = old_orders.get(struct_id)
        if before is None:
            continue
        common = set(before) & set(order)
        if [i for i in before if i in common] != [i for i in order if i in common]:
            reordered.append("" if struct_id == 0 else name(new, struct_id))
    return SchemaChange(old.schema_id, new.schema_id, snapshot_id, added, dropped,
                        tuple(renamed), tuple(widened), tuple(optional), tuple(reordered))


@dataclass(frozen=True, slots=True)
class StreamSchema:
    """A stream's schema at a position.

    Attributes:
        schema_id: the schema batches are read in.
        since: snapshots with a sequence number at or below it predate the stream's
            schema: they are read in it and never count as a change.
    """

    schema_id: int
    since: int


def snapshot_schema_id(snapshot: Snapshot, metadata: TableMetadata) -> int:
    """The schema a snapshot was committed under (its ``schema-id``; metadata written
    without one: the table's current schema)."""
    return snapshot.schema_id if snapshot.schema_id is not None else metadata.current_schema_id


def _refusal(change: SchemaChange, mode: SchemaMode, allow_rename: bool,
             allow_drop: bool) -> str | None:
    """Why ``mode`` cannot go on through ``change`` (None: it can)."""
    if mode == "keep":
        if change.widened:
            col, a, b = change.widened[0]
            return (f"onSchemaChange=keep cannot read column {col!r}, now {b}, in its start "
                    f"type {a}; use onSchemaChange=evolve, or restart the stream from a new "
                    "checkpoint")
        if change.dropped and not allow_drop:
            return ("with onSchemaChange=keep a dropped column reads as null from here on; "
                    "set allowColumnDrop=true to accept that")
        return None
    if change.renamed and not allow_rename:
        return "a rename changes the stream's column names; set allowColumnRename=true to " \
            "accept it"
    if change.dropped and not allow_drop:
        return "a drop removes a column from the stream; set allowColumnDrop=true to accept it"
    return None


DIFF_CACHE_SIZE = 64
"""Schema pairs whose diff a :class:`SchemaPolicy` keeps (the oldest goes first)."""


@dataclass
class SchemaPolicy:
    """``onSchemaChange`` / ``allowColumnRename`` / ``allowColumnDrop`` of one stream.

    Args:
        mode: ``fail``, ``evolve`` or ``keep``.
        allow_rename / allow_drop: the explicit unblocks.
        table: the table identifier, for messages.
    """

    mode: SchemaMode
    allow_rename: bool = False
    allow_drop: bool = False
    table: str = ""
    _diffs: dict[tuple[int, int], SchemaChange] = field(default_factory=dict, repr=False)

    def diff(self, metadata: TableMetadata, from_id: int, to_id: int) -> SchemaChange:
        """The change between two schemas of ``metadata`` (cached; without snapshot id).

        Raises:
            SchemaChangedError: a schema id the metadata no longer holds.
        """
        key = (from_id, to_id)
        change = self._diffs.get(key)
        if change is None:
            change = diff_schemas(self._schema(metadata, from_id),
                                  self._schema(metadata, to_id))
            if len(self._diffs) >= DIFF_CACHE_SIZE:  # a stream lives for months: bounded
                self._diffs.pop(next(iter(self._diffs)))
            self._diffs[key] = change
        return change

    def forget(self) -> None:
        """Drop the cached diffs (the stream moved onto a re-created table, whose schema
        ids mean other schemas)."""
        self._diffs.clear()

    def _schema(self, metadata: TableMetadata, schema_id: int) -> Schema:
        schema = metadata.schema_by_id(schema_id)
        if schema is None:
            raise SchemaChangedError(
                None, None, f"schema {schema_id} of the stream on table {self.table} is no "
                "longer in the table metadata (removed by metadata clean-up); start from a "
                "new checkpoint location")
        return schema

    def start(self, metadata: TableMetadata, head: Snapshot | None,
              restored: StreamSchema | None) -> StreamSchema:
        """The stream schema at a (re)start.

        Fresh (``restored`` None): the current schema, ``since`` the head. ``evolve`` /
        ``keep`` resume the checkpoint's. ``fail`` takes the current schema, as a Spark
        query does when it starts; a rename or drop since the checkpoint's schema needs
        its allow option.

        Raises:
            SchemaChangedError: ``fail`` restarted across a change it may not pass.
        """
        since = (head.sequence_number or 0) if head is not None else 0
        current = StreamSchema(metadata.current_schema_id, since)
        if restored is None:
            return current
        if self.mode != "fail":
            self._schema(metadata, restored.schema_id)
            return restored
        self.check_restart(metadata, restored.schema_id)
        return current

    def check_restart(self, metadata: TableMetadata, schema_id: int) -> None:
        """A restart of a stream whose last schema was ``schema_id`` with the current one.

        Raises:
            SchemaChangedError: a rename / drop in between without its allow option.
        """
        if schema_id == metadata.current_schema_id:
            return
        change = self.diff(metadata, schema_id, metadata.current_schema_id)
        why = _refusal(change, "fail", self.allow_rename, self.allow_drop)
        if why is not None:
            raise SchemaChangedError(
                None, change, f"the schema of table {self.table} changed since the stream's "
                f"checkpoint (schema {change.from_schema_id} -> {change.to_schema_id}: "
                f"{change.describe()}); {why} on the restart")

    def at_unit(self, metadata: TableMetadata, state: StreamSchema,
                snapshot: Snapshot) -> tuple[StreamSchema, SchemaChange | None]:
        """What the stream does at the boundary before ``snapshot``'s data.

        Returns:
            ``(state after, change)``: ``change`` is set when ``evolve`` switches to the
            snapshot's schema (the splits from here on are read in it); otherwise the
            state is unchanged and ``change`` None.

        Raises:
            SchemaChangedError: ``fail`` at any change; ``evolve`` / ``keep`` at one they
                may not pass (see :func:`_refusal`).
        """
        seq = snapshot.sequence_number or 0
        to_id = snapshot_schema_id(snapshot, metadata)
        if seq <= state.since or to_id == state.schema_id:
            return state, None
        change = self.diff(metadata, state.schema_id, to_id)
        if change.empty:
            return state, None
        change = replace(change, snapshot_id=snapshot.snapshot_id)
        where = f"snapshot {snapshot.snapshot_id} of table {self.table} was committed under " \
            f"schema {to_id}, the stream reads schema {state.schema_id}: {change.describe()}"
        if self.mode == "fail":
            raise SchemaChangedError(
                snapshot.snapshot_id, change,
                f"{where}. Everything before it was delivered; restart the stream to read on "
                "in the new schema (onSchemaChange=fail), or set onSchemaChange=evolve / keep")
        why = _refusal(change, self.mode, self.allow_rename, self.allow_drop)
        if why is not None:
            raise SchemaChangedError(snapshot.snapshot_id, change, f"{where}; {why}")
        if self.mode == "keep":
            return state, None
        return StreamSchema(to_id, state.since), change

