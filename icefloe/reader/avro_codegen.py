"""Avro writer schema -> Arrow schema and generated block decoders. Runs on a worker.

Once per writer schema (:func:`decoder_for`) and column selection
(:meth:`AvroDecoder.block_decoder`), one straight-line Python function decodes a block's
records: PyIceberg's Cython ``BinaryDecoder`` methods called inline, each projected
top-level value appended to its column's list, unprojected columns stepped over (the
approach of :mod:`icefloe.enumerator.manifest_decoder`). How the lists become Arrow
arrays (top-level doubles as raw 8-byte values, strings as UTF-8 bytes) is
:func:`icefloe.reader.avro.to_batch`'s side of the contract. Only names the code
generator creates go into generated code, never text from a file.

Field ids (Java's ``AvroSchemaUtil``): ``field-id`` of record fields, ``element-id`` of
arrays, ``key-id`` / ``value-id`` of maps; maps with non-string keys are arrays of
key/value records with ``logicalType: map``. They become ``PARQUET:field_id`` metadata.
"""

from __future__ import annotations

import json
import struct
import uuid
from collections.abc import Callable
from decimal import Decimal
from functools import lru_cache
from typing import Any

import pyarrow as pa
from pyiceberg.avro.decoder import BinaryDecoder, new_decoder

FIELD_ID_KEY = b"PARQUET:field_id"
_DOUBLE = struct.Struct("<d")

DECODER: Callable[[bytes], BinaryDecoder] = type(new_decoder(b""))
"""PyIceberg's Cython binary decoder class (``new_decoder`` imports on every call)."""
_PRIMITIVE_READS = {
    "boolean": "read_boolean", "int": "read_int", "long": "read_int",
    "float": "read_float", "double": "read_double", "string": "read_utf8",
    "bytes": "read_bytes",
}
_PRIMITIVE_SKIPS = {
    "boolean": "skip_boolean", "int": "skip_int", "long": "skip_int",
    "float": "skip_float", "double": "skip_double", "string": "skip_utf8",
    "bytes": "skip_bytes",
}
_PRIMITIVE_ARROW = {
    "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(),
    "double": pa.float64(), "string": pa.string(), "bytes": pa.binary(), "null": pa.null(),
}


class UnsupportedAvroSchema(ValueError):
    """A writer schema icefloe cannot map to Arrow (named in the message)."""


def _decimal_reader(scale: int) -> Callable[[bytes], Decimal]:
    def to_decimal(raw: bytes) -> Decimal:
        return Decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-scale)
    return to_decimal


def _unpack_double(raw: bytes) -> float:
    return float(_DOUBLE.unpack(raw)[0])


def _uuid_from_string(text: str) -> bytes:
    return uuid.UUID(text).bytes


def read_blocks(d: BinaryDecoder, item: Callable[[BinaryDecoder], Any]) -> list[Any]:
    """An Avro array or map body: blocks of ``count`` items until a 0 count; a negative
    count is followed by the block's size in bytes."""
    out: list[Any] = []
    count = d.read_int()
    while count:
        if count < 0:
            count = -count
            d.read_int()
        for _ in range(count):
            out.append(item(d))
        count = d.read_int()
    return out


class _Codegen:
    """Turns an Avro writer schema into Arrow fields and decoding expressions. Only
    names this class creates go into generated code, never text from the file."""

    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {
            name: getattr(DECODER, name)
            for name in {*_PRIMITIVE_READS.values(), *_PRIMITIVE_SKIPS.values(), "read"}
        }
        self.namespace["read_blocks"] = read_blocks
        self.named: dict[str, Any] = {}  # named types (records, fixed, enums) by full name
        self.functions: list[str] = []
        self.depth = 0  # 0 while typing top-level columns (see ``primitive``: doubles, strings)

    def bind(self, value: Any) -> str:
        name = f"_v{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def function(self, expr: str) -> str:
        """A generated ``def _fN(d): return expr`` (for items of arrays and maps)."""
        name = f"_f{len(self.functions)}"
        self.functions.append(f"def {name}(d):\n    return {expr}\n")
        return name

    def resolve(self, schema: Any, where: str) -> Any:
        if isinstance(schema, str) and schema not in _PRIMITIVE_ARROW:
            if schema not in self.named:
                raise UnsupportedAvroSchema(f"{where}: unknown named type {schema!r}")
            return self.named[schema]
        if isinstance(schema, dict) and schema.get("type") in ("record", "enum", "fixed"):
            name = schema.get("name")
            if name:
                namespace = schema.get("namespace")
                self.named[name] = schema
                if namespace and "." not in name:
                    self.named[f"{namespace}.{name}"] = schema
        return schema

    def type_of(self, schema: Any, where: str) -> tuple[pa.DataType, bool, str]:
        """``(arrow type, nullable, read expression)`` of a value of ``schema``."""
        schema = self.resolve(schema, where)
        if isinstance(schema, dict) and schema.get("type") in ("record", "array", "map"):
            self.depth += 1
            try:
                return self._nested(schema, where)
            finally:
                self.depth -= 1
        if isinstance(schema, list):
            return self.union(schema, where)
        if isinstance(schema, str):
            return self.primitive(schema, {}, where)
        kind = schema.get("type")
        if kind == "enum":  # bytes at the top level, as strings are (see ``primitive``)
            symbols = self.bind(tuple(s.encode() if self.depth == 0 else s
                                      for s in schema["symbols"]))
            return pa.string(), False, f"{symbols}[read_int(d)]"
        if kind == "fixed":
            return self.fixed(schema, where)
        if isinstance(kind, str) and kind in _PRIMITIVE_ARROW:
            return self.primitive(kind, schema, where)
        if isinstance(kind, str | list | dict):  # {"type": <a named type or a schema>}
            return self.type_of(kind, where)
        raise UnsupportedAvroSchema(f"{where}: unsupported Avro type {kind!r}")

    def _nested(self, schema: dict[str, Any], where: str) -> tuple[pa.DataType, bool, str]:
        kind = schema["type"]
        if kind == "record":
            return self.record(schema, where)
        if kind == "array":
            return self.array(schema, where)
        key_field = pa.field("key", pa.string(), nullable=False,
                             metadata=_id_meta(schema.get("key-id")))
        value_type, value_null, value_expr = self.type_of(schema["values"], f"{where}.value")
        value_field = pa.field("value", value_type, nullable=value_null,
                               metadata=_id_meta(schema.get("value-id")))
        item = self.function(f"(read_utf8(d), {value_expr})")
        return pa.map_(key_field, value_field), False, f"read_blocks(d, {item})"

    def union(self, branches: list[Any], where: str) -> tuple[pa.DataType, bool, str]:
        if len(branches) == 1:
            return self.type_of(branches[0], where)
        nulls = [i for i, b in enumerate(branches) if b == "null"]
        if len(branches) != 2 or len(nulls) != 1:
            raise UnsupportedAvroSchema(
                f"column {where!r} is an Avro union of {len(branches)} types; icefloe reads "
                "only optional values (a union of null and one type)")
        value = 1 - nulls[0]
        arrow_type, _, expr = self.type_of(branches[value], where)
        return arrow_type, True, f"({expr} if read_int(d) == {value} else None)"

    def primitive(self, kind: str, schema: dict[str, Any],
                  where: str) -> tuple[pa.DataType, bool, str]:
        logical = schema.get("logicalType")
        read = f"{_PRIMITIVE_READS[kind]}(d)" if kind != "null" else "None"
        if kind == "int" and logical == "date":
            return pa.date32(), False, read
        if kind == "int" and logical == "time-millis":  # not written by Iceberg: migrated
            return pa.time64("us"), False, f"{read} * 1000"
        if kind == "long" and logical in ("timestamp-millis", "local-timestamp-millis"):
            return (pa.timestamp("us", tz="UTC" if _utc(schema, logical) else None), False,
                    f"{read} * 1000")
        if kind == "long" and logical in ("time-micros", "timestamp-micros",
                                          "timestamp-nanos", "local-timestamp-micros",
                                          "local-timestamp-nanos"):
            if logical == "time-micros":
                return pa.time64("us"), False, read
            unit = "ns" if logical.endswith("nanos") else "us"
            return pa.timestamp(unit, tz="UTC" if _utc(schema, logical) else None), False, read
        if kind == "string" and logical != "uuid" and self.depth == 0:
            # top-level strings stay UTF-8 bytes: one Arrow cast (with validation) per
            # batch costs less than a str per value
            return pa.string(), False, "read_bytes(d)"
        if kind == "double":
            # not the decoder's read_double: PyIceberg 0.12's Cython decoder narrows it to a
            # 32-bit float (apache/iceberg-python#3808). Top-level columns keep the 8 raw
            # bytes (viewed as float64 by _to_batch); nested values unpack to a float.
            if self.depth == 0:
                return pa.float64(), False, "read(d, 8)"
            return pa.float64(), False, f"{self.bind(_unpack_double)}(read(d, 8))"
        if kind == "bytes" and logical == "decimal":
            convert = self.bind(_decimal_reader(int(schema.get("scale", 0))))
            return (pa.decimal128(int(schema["precision"]), int(schema.get("scale", 0))),
                    False, f"{convert}(read_bytes(d))")
        if kind == "string" and logical == "uuid":
            convert = self.bind(_uuid_from_string)
            return pa.uuid(), False, f"{convert}(read_utf8(d))"
        return _PRIMITIVE_ARROW[kind], kind == "null", read

    def fixed(self, schema: dict[str, Any], where: str) -> tuple[pa.DataType, bool, str]:
        size = int(schema["size"])
        read = f"read(d, {size})"
        logical = schema.get("logicalType")
        if logical == "decimal":
            convert = self.bind(_decimal_reader(int(schema.get("scale", 0))))
            return (pa.decimal128(int(schema["precision"]), int(schema.get("scale", 0))),
                    False, f"{convert}({read})")
        if logical == "uuid" and size == 16:
            return pa.uuid(), False, read
        return pa.binary(size), False, read

    def fields(self, schema: dict[str, Any], where: str) -> list[tuple[pa.Field, str]]:
        """Each field of a record: its Arrow field and read expression."""
        out = []
        for field in schema.get("fields", []):
            name = field["name"]
            path = f"{where}.{name}" if where else name
            arrow_type, nullable, expr = self.type_of(field["type"], path)
            out.append((pa.field(name, arrow_type, nullable=nullable,
                                 metadata=_id_meta(field.get("field-id"))), expr))
        return out

    def record(self, schema: dict[str, Any], where: str) -> tuple[pa.DataType, bool, str]:
        fields = self.fields(schema, where)
        names = self.bind(tuple(f.name for f, _ in fields))
        values = ", ".join(expr for _, expr in fields)
        return (pa.struct([f for f, _ in fields]), False,
                f"dict(zip({names}, ({values},)))" if fields else "{}")

    def array(self, schema: dict[str, Any], where: str) -> tuple[pa.DataType, bool, str]:
        items = self.resolve(schema["items"], where)
        if schema.get("logicalType") == "map" and isinstance(items, dict) \
                and items.get("type") == "record" and len(items.get("fields", [])) == 2:
            (key, key_expr), (value, value_expr) = self.fields(items, where)
            item = self.function(f"({key_expr}, {value_expr})")
            key = pa.field("key", key.type, nullable=False, metadata=key.metadata)
            value = pa.field("value", value.type, nullable=value.nullable,
                             metadata=value.metadata)
            return pa.map_(key, value), False, f"read_blocks(d, {item})"
        item_type, item_null, item_expr = self.type_of(items, f"{where}.element")
        element = pa.field("element", item_type, nullable=item_null,
                           metadata=_id_meta(schema.get("element-id")))
        return pa.list_(element), False, f"read_blocks(d, {self.function(item_expr)})"


def _utc(schema: dict[str, Any], logical: str) -> bool:
    """Whether a timestamp is UTC-adjusted: its ``adjust-to-utc`` property, else not a
    ``local-`` type (Java's ``AvroSchemaUtil.isTimestamptz``: no property means UTC)."""
    return str(schema.get("adjust-to-utc", not logical.startswith("local"))).lower() == "true"


def _id_meta(field_id: Any) -> dict[bytes, bytes] | None:
    return None if field_id is None else {FIELD_ID_KEY: str(int(field_id)).encode()}


class AvroDecoder:
    """The Arrow schema of a writer schema and the generated per-selection decoders."""

    def __init__(self, schema_json: str) -> None:
        schema = json.loads(schema_json)
        if not isinstance(schema, dict) or schema.get("type") != "record":
            raise UnsupportedAvroSchema("the file's schema is not an Avro record")
        self.codegen = _Codegen()
        self.codegen.resolve(schema, "")
        fields = self.codegen.fields(schema, "")
        self.schema = pa.schema([f for f, _ in fields])
        self.expressions = [expr for _, expr in fields]
        self.skips = [self._skip(f["type"]) for f in schema.get("fields", [])]
        self._by_selection: dict[tuple[str, ...] | None, Any] = {}

    def _skip(self, schema: Any) -> str | None:
        """A statement that steps over a primitive or optional primitive, or None."""
        if isinstance(schema, dict) and schema.get("type") in _PRIMITIVE_SKIPS:
            schema = schema["type"]  # e.g. a long with a logical type: skipped as a long
        if isinstance(schema, str) and schema in _PRIMITIVE_SKIPS:
            return f"{_PRIMITIVE_SKIPS[schema]}(d)"
        if isinstance(schema, list) and len(schema) == 2 and "null" in schema:
            value = 1 - schema.index("null")
            inner = self._skip(schema[value])
            if inner is not None:
                return f"if read_int(d) == {value}: {inner}"
        return None

    def block_decoder(self, columns: tuple[str, ...] | None) -> tuple[Any, pa.Schema]:
        """``(decode(d, count, *appends), schema)`` for the top-level ``columns``."""
        cached = self._by_selection.get(columns)
        if cached is not None:
            return cached
        names = self.schema.names
        wanted = set(names if columns is None else columns)
        chosen = [i for i, name in enumerate(names) if name in wanted]
        params = ", ".join(f"c{i}" for i in range(len(chosen)))
        body = []
        for i, expr in enumerate(self.expressions):
            if i in chosen:
                body.append(f"        c{chosen.index(i)}({expr})")
            else:
                body.append(f"        {self.skips[i] or expr}")
        source = "".join(self.codegen.functions) + (
            f"def decode(d, count{', ' if params else ''}{params}):\n"
            "    for _ in range(count):\n" + ("\n".join(body) if body else "        pass") + "\n")
        namespace = dict(self.codegen.namespace)
        exec(compile(source, "<icefloe avro decoder>", "exec"), namespace)
        result = (namespace["decode"], pa.schema([self.schema.field(i) for i in chosen]))
        self._by_selection[columns] = result
        return result


@lru_cache(maxsize=64)
def decoder_for(schema_json: str) -> AvroDecoder:
    """The (cached) decoder of a writer schema.

    Raises:
        UnsupportedAvroSchema: a type icefloe cannot map to Arrow.
    """
    return AvroDecoder(schema_json)

