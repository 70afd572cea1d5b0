"""ReadContext: what every reader of one plan shares (schema, projection, filter, IO).

Built on the driver; shipped to workers (it must stay picklable and small: the
schema and specs travel as JSON, the FileIO as its properties, never as objects).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import pyarrow as pa
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.expressions.parser import parse as parse_filter
from pyiceberg.expressions.visitors import bind, extract_field_ids
from pyiceberg.io import FileIO, load_file_io
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema, prune_columns
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.name_mapping import NameMapping, parse_mapping_from_json
from pyiceberg.types import GeographyType, GeometryType, IcebergType, UnknownType

from icefloe.errors import InvalidOptionError, UnsupportedTypeError
from icefloe.options import SourceOptions
from icefloe.reader.names import TypedNames, rename_references

METADATA_FIELDS: dict[str, pa.DataType] = {
    "_snapshot_id": pa.int64(),
    "_sequence_number": pa.int64(),
    "_file": pa.string(),
    "_pos": pa.int64(),
    "_row_id": pa.int64(),
    "_last_updated_sequence_number": pa.int64(),
}
NULLABLE_METADATA = frozenset({"_row_id"})
"""Metadata columns that may be null: ``_row_id`` of rows without row lineage (a table
before v3, or a snapshot from before its upgrade to v3)."""
ROW_LINEAGE_FIELD_IDS = {"_row_id": 2147483540, "_last_updated_sequence_number": 2147483539}
"""The reserved field ids of the row lineage columns a v3 data file may store."""
CHANGE_FIELDS: dict[str, pa.DataType] = {
    "_change_type": pa.string(),
    "_change_ordinal": pa.int32(),
    "_commit_snapshot_id": pa.int64(),
    "_commit_timestamp": pa.timestamp("us", tz="UTC"),
}
"""The columns a changelog read appends (after the metadata columns), as Iceberg's changelog
view names them, plus ``_commit_timestamp``."""


UNSUPPORTED_TYPES: tuple[type[IcebergType], ...] = (UnknownType, GeometryType, GeographyType)
"""Iceberg v3 types icefloe does not read yet (``variant`` PyIceberg 0.12 cannot even parse:
loading such a table fails with a CatalogError naming the type)."""


def check_readable(read_schema: Schema, table_schema: Schema) -> None:
    """Fail fast when a column the read needs has a type icefloe cannot read.

    Raises:
        UnsupportedTypeError: naming the first such column (full name) and its type.
    """
    for field_id in sorted(read_schema.field_ids):
        field_type = read_schema.find_type(field_id)
        if isinstance(field_type, UNSUPPORTED_TYPES):
            name = table_schema.find_column_name(field_id) or str(field_id)
            raise UnsupportedTypeError(
                name, str(field_type),
                f"column {name!r} has type {field_type}, which icefloe cannot read yet; "
                "leave it out with the columns option (and out of the filter)")


def identifier_columns(schema: Schema, options: SourceOptions) -> tuple[str, ...]:
    """The key columns of a changelog read: ``identifierColumns``, else the schema's
    identifier fields (names); checked against ``schema``.

    Raises:
        InvalidOptionError: an unknown identifier column, or ``computeUpdates`` on a
            table without identifier fields and no ``identifierColumns``.
    """
    if not options.changelog:
        return ()
    if options.identifier_columns is not None:
        for name in options.identifier_columns:
            try:
                schema.find_field(name, options.case_sensitive)
            except ValueError:
                known = ", ".join(f.name for f in schema.fields)
                raise InvalidOptionError(
                    "identifierColumns", f"no column {name!r}; the table's columns are "
                    f"{known}") from None
        return options.identifier_columns
    names = tuple(schema.find_column_name(i) or str(i) for i in schema.identifier_field_ids)
    if options.compute_updates and not names:
        raise InvalidOptionError(
            "computeUpdates", "needs key columns and the table has no identifier fields; "
            "name them with identifierColumns=id[,...]")
    return names


@dataclass(frozen=True)
class ReadContext:
    """Everything a reader needs besides the split. Picklable; built by :meth:`create`.

    Attributes:
        schema_json: the read schema (Iceberg JSON): the snapshot's for time travel,
            the table's current one otherwise.
        columns: selected column names, or None for all.
        filter: PyIceberg row filter string (applied as a residual per row), or None.
        filter_renames: ``(name as typed, name in the schema)`` of the filter's columns
            that a rename since the filter was typed named otherwise
            (:mod:`icefloe.reader.names`); applied before it is bound.
        case_sensitive: name resolution of ``columns`` and ``filter``.
        batch_size: maximum rows per RecordBatch.
        metadata_columns: requested metadata columns, in order.
        io_properties: FileIO properties (may hold credentials: never logged).
        specs_json: (spec id, spec JSON) of every partition spec of the table.
        name_mapping_json: ``schema.name-mapping.default`` for files without field ids.
        format_version: table format version.
        location: the table's location (picks the FileIO).
        io_concurrency: ``ioConcurrency`` (None: auto; see :mod:`icefloe.reader.prefetch`).
        columns_in_table_order: ``columns`` came as PyIceberg's ``selected_fields``, which
            keeps the table's column order (else the order asked).
        changelog: a changelog read (batches carry :data:`CHANGE_FIELDS`).
        identifier_columns: the key of ``compute_updates`` (``identifierColumns``, else
            the table's identifier fields); empty when there is none.
        compute_updates: pair a commit's DELETE and INSERT of one key into UPDATE rows.
        net_changes: a bounded changelog collapsed to its net effect (an engine reads such
            a plan in one task, :meth:`SplitReader.read_many` nets it).
    """

    schema_json: str
    columns: tuple[str, ...] | None
    filter: str | None
    case_sensitive: bool
    batch_size: int
    metadata_columns: tuple[str, ...]
    io_properties: tuple[tuple[str, str], ...]
    specs_json: tuple[tuple[int, str], ...]
    name_mapping_json: str | None
    format_version: int
    location: str = ""
    columns_in_table_order: bool = False
    io_concurrency: int | None = None
    changelog: bool = False
    identifier_columns: tuple[str, ...] = ()
    compute_updates: bool = False
    net_changes: bool = False
    filter_renames: tuple[tuple[str, str], ...] = ()

    @classmethod
    def create(cls, metadata: TableMetadata, io: FileIO, schema: Schema,
               options: SourceOptions, names: TypedNames | None = None) -> ReadContext:
        """Build and validate (columns and filter must resolve against ``schema``).

        Args:
            names: the options' column names resolved by field id (a stream's: its
                ``columns``, ``filter`` and ``identifierColumns`` are then named as in
                ``schema``; a column ``schema`` dropped leaves ``columns``); None: the
                names as typed.

        Raises:
            InvalidOptionError: an unknown column in ``columns`` or ``filter``.
        """
        columns, key = options.columns, options.identifier_columns
        renames: tuple[tuple[str, str], ...] = ()
        if names is not None:
            columns, key = names.columns_in(columns, schema), names.columns_in(key, schema)
            renames = names.renames_in(schema)
            options = dataclasses.replace(options, identifier_columns=key)
        context = cls(
            schema_json=schema.model_dump_json(),
            columns=columns,
            filter=options.filter,
            filter_renames=renames,
            case_sensitive=options.case_sensitive,
            batch_size=options.batch_size,
            metadata_columns=options.metadata_columns,
            io_properties=tuple(sorted(io.properties.items())),
            specs_json=tuple((s.spec_id, s.model_dump_json()) for s in metadata.partition_specs),
            name_mapping_json=metadata.properties.get("schema.name-mapping.default"),
            format_version=metadata.format_version,
            location=metadata.location,
            columns_in_table_order=options.columns_in_table_order,
            io_concurrency=options.io_concurrency,
            changelog=options.changelog,
            identifier_columns=identifier_columns(schema, options),
            compute_updates=options.compute_updates,
            net_changes=options.net_changes,
        )
        context.projected_schema  # noqa: B018 - validate the column names now
        context.bound_filter  # noqa: B018
        check_readable(context.read_schema(), schema)
        if context.compute_updates:
            projected = {f.name for f in context.projected_schema.fields}
            missing = [n for n in context.identifier_columns if n.split(".")[0] not in projected]
            if missing:
                raise InvalidOptionError(
                    "columns", f"leaves out the key column(s) {', '.join(missing)} that "
                    "computeUpdates pairs rows by; add them to columns")
        return context

    def __repr__(self) -> str:  # io_properties may carry secrets
        return (f"ReadContext(columns={self.columns}, filter={self.filter!r}, "
                f"batch_size={self.batch_size}, metadata_columns={self.metadata_columns})")

    @functools.cached_property
    def schema(self) -> Schema:
        return Schema.model_validate_json(self.schema_json)

    @functools.cached_property
    def projected_schema(self) -> Schema:
        """The read's columns: the schema's top-level columns in ``columns``' order (nested
        fields named like ``s.a`` keep their struct's place at its first mention), or the
        whole schema."""
        if self.columns is None:
            return self.schema
        try:
            selected = self.schema.select(*self.columns, case_sensitive=self.case_sensitive)
            # top-level columns in the order asked (as Spark's select), first mention wins
            order: dict[int, int] = {}
            for name in self.columns:
                top = self.schema.select(name, case_sensitive=self.case_sensitive).fields[0]
                order.setdefault(top.field_id, len(order))
        except ValueError as exc:
            names = ", ".join(f.name for f in self.schema.fields)
            raise InvalidOptionError(
                "columns", f"{exc}; the table's columns are {names}"
            ) from exc
        if self.columns_in_table_order:  # PyIceberg's selected_fields
            return selected
        fields = sorted(selected.fields, key=lambda f: order[f.field_id])
        return Schema(*fields, schema_id=selected.schema_id,
                      identifier_field_ids=selected.identifier_field_ids)

    @functools.cached_property
    def bound_filter(self) -> BooleanExpression:
        if self.filter is None:
            return AlwaysTrue()
        try:
            expression = rename_references(parse_filter(self.filter),
                                           dict(self.filter_renames))
            return bind(self.schema, expression, self.case_sensitive)
        except ValueError as exc:
            raise InvalidOptionError("filter", f"{self.filter!r}: {exc}") from exc

    @functools.cached_property
    def filter_field_ids(self) -> frozenset[int]:
        if self.filter is None:
            return frozenset()
        return frozenset(extract_field_ids(self.bound_filter))

    def read_schema(self, extra_field_ids: frozenset[int] = frozenset()) -> Schema:
        """Projected schema widened by the filter's columns and ``extra_field_ids``."""
        needed = self.filter_field_ids | extra_field_ids
        projected_ids = self.projected_schema.field_ids
        if needed <= projected_ids:
            return self.projected_schema
        wanted = set(projected_ids) | set(needed)
        return prune_columns(self.schema, wanted, select_full_types=True)

    @functools.cached_property
    def specs(self) -> dict[int, PartitionSpec]:
        return {sid: PartitionSpec.model_validate_json(js) for sid, js in self.specs_json}

    @functools.cached_property
    def name_mapping(self) -> NameMapping | None:
        return parse_mapping_from_json(self.name_mapping_json) if self.name_mapping_json else None

    @functools.cached_property
    def io(self) -> FileIO:
        return load_file_io(dict(self.io_properties), self.location)

    @functools.cached_property
    def arrow_schema(self) -> pa.Schema:
        """The schema of every batch a reader yields (data columns, then metadata columns)."""
        from pyiceberg.io.pyarrow import schema_to_pyarrow

        base = schema_to_pyarrow(self.projected_schema, include_field_ids=False)
        for name in self.metadata_columns:
            base = base.append(pa.field(name, METADATA_FIELDS[name],
                                        nullable=name in NULLABLE_METADATA))
        if self.changelog:
            for name, change_type in CHANGE_FIELDS.items():
                base = base.append(pa.field(name, change_type, nullable=False))
        return base

    def data_context(self) -> ReadContext:
        """This context as the plain read a changelog reader runs under it: no change
        columns, ``_pos`` always (which rows changed is a question of positions)."""
        extra = () if "_pos" in self.metadata_columns else ("_pos",)
        return dataclasses.replace(self, changelog=False, compute_updates=False,
                                   net_changes=False,
                                   metadata_columns=self.metadata_columns + extra)

    def __getstate__(self) -> dict[str, object]:
        # drop cached (unpicklable / large) properties; they are rebuilt on the worker
        names = ("schema_json", "columns", "filter", "case_sensitive", "batch_size",
                 "metadata_columns", "io_properties", "specs_json", "name_mapping_json",
                 "format_version", "location", "columns_in_table_order", "io_concurrency",
                 "changelog", "identifier_columns", "compute_updates", "net_changes",
                 "filter_renames")
        return {n: self.__dict__[n] for n in names}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update({"io_concurrency": None, "changelog": False,
                              "identifier_columns": (), "compute_updates": False,
                              "net_changes": False, "filter_renames": (), **state})
