"""Incremental discovery's manifest-list reader: only the manifests one snapshot added.

Runs on the enumerator. Finding what a new snapshot added means reading its manifest
list, whose length follows the table (one entry per live manifest), not the change.
PyIceberg's reader builds a ``ManifestFile`` record per entry, with a
``PartitionFieldSummary`` record per partition field and an enum for the content; at a
million files (500 manifests) that was most of the cost of discovering one snapshot.

This reader starts, like :mod:`icefloe.enumerator.manifest_decoder`, from the reader
tree PyIceberg resolves for the file (``resolve_reader`` of the file's writer schema
against PyIceberg's own manifest-list read schema, so v1 / v2 / v3 layouts and defaults
are PyIceberg's), and compiles, once per writer schema, one straight-line function per
entry that reads only ``added_snapshot_id`` and steps over every other field (partition
summaries included) without building anything. Only an entry whose
``added_snapshot_id`` is the snapshot is then decoded again, from its first byte, by
PyIceberg's full reader (same record types and enums as ``Snapshot.manifests``).

Contract (checked against ``Snapshot.manifests`` in
``tests/enumerator/test_manifest_list_decoder.py``): :func:`added_manifests` returns, in
manifest-list order, exactly the ``ManifestFile`` records PyIceberg reads from the same
bytes whose ``added_snapshot_id`` equals the given snapshot id, equal field by field
(path, length, spec id, content, sequence numbers, counts, partition summaries, key
metadata). A v1 list has no sequence numbers or content: PyIceberg's defaults (0, DATA)
apply, as in ``Snapshot.manifests``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any, NamedTuple

from pyiceberg.avro.decoder import BinaryDecoder, new_decoder
from pyiceberg.avro.reader import (
    DefaultReader,
    ListReader,
    NoneReader,
    OptionReader,
    Reader,
    StructReader,
)
from pyiceberg.avro.resolver import EnumReader, resolve_reader
from pyiceberg.manifest import (
    DEFAULT_READ_VERSION,
    MANIFEST_LIST_FILE_SCHEMAS,
    ManifestContent,
    ManifestFile,
    PartitionFieldSummary,
)
from pyiceberg.schema import Schema
from pyiceberg.utils.schema_conversion import AvroSchemaConversion

from icefloe.enumerator.manifest_decoder import (
    _DECODER,
    _INLINE_SKIPS,
    CodegenBase,
    avro_blocks,
    open_avro,
)

_LIST_SCHEMA = MANIFEST_LIST_FILE_SCHEMAS[DEFAULT_READ_VERSION]
# what Snapshot.manifests passes to its AvroFile (pyiceberg.manifest.read_manifest_list)
_READ_TYPES: dict[int, Any] = {-1: ManifestFile, 508: PartitionFieldSummary}
_READ_ENUMS: dict[int, Any] = {517: ManifestContent}
_ADDED_SNAPSHOT_ID = 503


class _Codegen(CodegenBase):
    """Builds the source of ``scan_entry(d)``: steps over one manifest-list entry and
    returns its ``added_snapshot_id``."""

    def __init__(self) -> None:
        super().__init__()
        self.result = "None"
        self.depth = 0

    def skip(self, reader: Reader, indent: str) -> None:
        """Statements that step over one value as ``reader.read(d)`` would read it."""
        if isinstance(reader, EnumReader):  # its own skip steps over nothing: the value's
            self.skip(reader.reader, indent)
        elif isinstance(reader, DefaultReader | NoneReader):  # not in the file: no bytes
            return
        elif type(reader) is OptionReader:
            self.lines.append(f"{indent}if read_int(d) > 0:")
            self.body(reader.option, indent + "    ")
        elif (inline := _INLINE_SKIPS.get(type(reader).skip)) is not None:
            self.lines.append(f"{indent}{inline}(d)")
        elif type(reader) is StructReader:
            for _, field in reader.field_readers:
                self.skip(field, indent)
        elif type(reader) is ListReader:  # Avro blocks; a sized block is stepped over whole
            n = f"n{self.depth}"
            self.depth += 1
            self.lines += [
                f"{indent}{n} = read_int(d)",
                f"{indent}while {n}:",
                f"{indent}    if {n} < 0:",
                f"{indent}        skip(d, read_int(d))",
                f"{indent}    else:",
                f"{indent}        for _ in range({n}):",
            ]
            self.body(reader.element, indent + "            ")
            self.lines.append(f"{indent}    {n} = read_int(d)")
        else:
            self.lines.append(f"{indent}{self.bind(reader.skip)}(d)")

    def body(self, reader: Reader, indent: str) -> None:
        """:meth:`skip` as the body of a block (never empty)."""
        before = len(self.lines)
        self.skip(reader, indent)
        if len(self.lines) == before:
            self.lines.append(f"{indent}pass")

    def entry(self, reader: StructReader) -> None:
        """Every field of the entry in file order; ``added_snapshot_id`` is kept."""
        for pos, child in reader.field_readers:
            field_id = _LIST_SCHEMA.fields[pos].field_id if pos is not None else None
            if field_id != _ADDED_SNAPSHOT_ID:
                self.skip(child, "    ")
            elif isinstance(child, DefaultReader | NoneReader):  # not in the file
                self.result = self.bind(child.read(new_decoder(b"")))
            else:
                self.lines.append(f"    sid = {self.read_expr(child)}")
                self.result = "sid"

    def source(self) -> str:
        return "\n".join(["def scan_entry(d):", *self.lines, f"    return {self.result}", ""])


class _Plan(NamedTuple):
    scan_entry: Callable[[BinaryDecoder], int | None]
    read_entry: Callable[[BinaryDecoder], Any]  # a ManifestFile (read type -1)
    source: str


@lru_cache(maxsize=16)
def _plan(avro_schema: str) -> _Plan:
    """The scan and full readers of one writer schema (a table writes one or two)."""
    file_schema: Schema = AvroSchemaConversion().avro_to_iceberg(json.loads(avro_schema))
    reader = resolve_reader(file_schema, _LIST_SCHEMA, _READ_TYPES, _READ_ENUMS)
    if not isinstance(reader, StructReader):
        raise TypeError(f"manifest list entry is not a struct: {reader!r}")
    gen = _Codegen()
    gen.entry(reader)
    source = gen.source()
    # the source holds only names made here (decoder methods, bound readers, counters),
    # never text from the file
    exec(compile(source, "<icefloe manifest list scanner>", "exec"), gen.namespace)
    return _Plan(gen.namespace["scan_entry"], reader.read, source)


def added_manifests(content: bytes, snapshot_id: int) -> list[ManifestFile]:
    """The manifests of a manifest list's bytes added by ``snapshot_id``, in list order
    (see the module contract). Other entries are stepped over, never built.

    Raises:
        ValueError: not an Avro file, an unknown codec or a bad sync marker.
        EOFError: the bytes end inside a block.
    """
    decoder, header, decompress = open_avro(content)
    scan_entry, read_entry, _ = _plan(header.meta["avro.schema"])
    new_block = _DECODER
    out: list[ManifestFile] = []
    for count, data in avro_blocks(decoder, header.sync, decompress):
        block = new_block(data)
        for _ in range(count):
            start = block.tell()
            if scan_entry(block) == snapshot_id:
                again = new_block(data)
                again.skip(start)
                out.append(read_entry(again))
    return out
