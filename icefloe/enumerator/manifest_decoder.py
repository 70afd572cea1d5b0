"""A planning-only decoder for data manifests: live data files as flat tuples.

Runs on the enumerator. Planning a full scan without a row filter needs, per entry,
only the status, the data sequence number and seven data-file fields (path, format,
partition, record count, size, split offsets). PyIceberg's reader builds a
``ManifestEntry`` and a ``DataFile`` record per entry, wraps three fields in enums and
then applies inheritance on those records; at a million files that is most of the
planning time. This decoder runs the same per-field readers PyIceberg resolves for the
file (``resolve_reader`` against PyIceberg's own manifest-entry read schema, so v1 / v2
layouts, optional fields, defaults and partition value types are PyIceberg's), but
flattens them into one list of read-or-skip steps over the entry's bytes and builds no
records: fields planning does not use (column stats maps, key metadata, equality ids,
...) are stepped over.

Contract (checked against ``ManifestFile.fetch_manifest_entry`` in
``tests/enumerator/test_manifest_decoder.py``): :func:`live_data_files` returns, in file
order, one :class:`LiveDataFile` per entry whose status is not DELETED, with

- ``sequence_number``: the entry's data sequence number, or, when it is null, the
  manifest's sequence number if the entry is ADDED or the manifest's sequence number is
  0 (v1), else None (Iceberg spec, "Sequence Number Inheritance"; as PyIceberg's
  ``_inherit_from_manifest``);
- ``partition``: the partition values in the file's partition field order, as the plain
  Python values PyIceberg decodes (ints for dates / times / timestamps, ``Decimal``,
  ``UUID``, ``bytes`` ...);
- ``file_format``: the :class:`~pyiceberg.manifest.FileFormat` member name.

Delete manifests and filtered scans (which need the column stats) keep using
PyIceberg's full entries (:mod:`icefloe.enumerator.discovery`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any, NamedTuple

from pyiceberg.avro.codecs import AVRO_CODEC_KEY, KNOWN_CODECS
from pyiceberg.avro.decoder import BinaryDecoder, new_decoder
from pyiceberg.avro.file import MAGIC, META_SCHEMA, SYNC_SIZE, AvroFileHeader
from pyiceberg.avro.reader import (
    BinaryReader,
    DefaultReader,
    IntegerReader,
    MapReader,
    NoneReader,
    OptionReader,
    Reader,
    StructReader,
)
from pyiceberg.avro.resolver import EnumReader, construct_reader, resolve_reader
from pyiceberg.manifest import (
    DEFAULT_READ_VERSION,
    MANIFEST_ENTRY_SCHEMAS,
    FileFormat,
    ManifestEntryStatus,
    ManifestFile,
)
from pyiceberg.schema import Schema
from pyiceberg.table import TableProperties
from pyiceberg.utils.schema_conversion import AvroSchemaConversion

# column_sizes, value_counts, null_value_counts, nan_value_counts, lower_bounds, upper_bounds
STATS_FIELD_IDS = frozenset({108, 109, 110, 137, 125, 128})
_ENTRY_SCHEMA = MANIFEST_ENTRY_SCHEMAS[DEFAULT_READ_VERSION]
_HEADER_READER = construct_reader(META_SCHEMA, {-1: AvroFileHeader})
_EMPTY = new_decoder(b"")

_STATUS, _SEQ, _PATH, _FORMAT, _PARTITION, _RECORDS, _SIZE, _OFFSETS = range(8)
_SLOTS = 8
# field id -> slot; fields absent from here are stepped over
_ENTRY_SLOTS = {0: _STATUS, 3: _SEQ}
_DATA_FILE_SLOTS = {100: _PATH, 101: _FORMAT, 102: _PARTITION, 103: _RECORDS, 104: _SIZE,
                    132: _OFFSETS}
_DATA_FILE_ID = 2
_PARTITION_ID = 102
_ADDED = ManifestEntryStatus.ADDED.value
_DELETED = ManifestEntryStatus.DELETED.value
_STATUSES = frozenset(s.value for s in ManifestEntryStatus)


class LiveDataFile(NamedTuple):
    """What planning needs of one live (ADDED / EXISTING) manifest entry."""

    file_path: str
    file_format: str
    partition: tuple[Any, ...]
    record_count: int
    file_size: int
    split_offsets: list[int] | None
    sequence_number: int | None


Step = tuple[int, Callable[[BinaryDecoder], Any]]  # (slot or -1 to skip, read / skip function)


def stats_skipper(reader: Any) -> Callable[[BinaryDecoder], None]:
    """A function that steps over one stats map's bytes (as ``reader`` would read them)
    and returns None; int->long and int->bytes maps take the decoder's bulk calls."""
    optional = isinstance(reader, OptionReader)
    inner = reader.option if optional else reader
    if not (isinstance(inner, MapReader) and isinstance(inner.key, IntegerReader)
            and isinstance(inner.value, IntegerReader | BinaryReader)):
        def skip_any(decoder: BinaryDecoder) -> None:
            reader.skip(decoder)
        return skip_any
    int_values = isinstance(inner.value, IntegerReader)

    def skip_map(decoder: BinaryDecoder) -> None:
        if optional and decoder.read_int() == 0:
            return
        scratch: dict[int, bytes] = {}
        count = decoder.read_int()
        while count != 0:
            if count < 0:  # a block with its size in bytes: step over it whole
                decoder.skip(decoder.read_int())
            elif int_values:
                decoder.read_ints(count * 2)
            else:
                decoder.read_int_bytes_dict(count, scratch)
            count = decoder.read_int()
    return skip_map


def _partition_reader(reader: Reader) -> Callable[[BinaryDecoder], tuple[Any, ...]] | None:
    """Partition values as a tuple, read with the partition struct's own field readers
    (None: the struct has no fields, the value is ``()`` and no byte is read)."""
    if not isinstance(reader, StructReader):
        raise TypeError(f"partition is not a struct: {reader!r}")
    positions = [pos for pos, _ in reader.field_readers]
    if not positions:
        return None
    if positions != list(range(len(positions))):  # not PyIceberg's layout: keep its reader
        read = reader.read

        def read_record(decoder: BinaryDecoder) -> tuple[Any, ...]:
            record: Any = read(decoder)
            return tuple(record[i] for i in range(len(record)))
        return read_record
    field_reads = tuple(field.read for _, field in reader.field_readers)

    def read_values(decoder: BinaryDecoder) -> tuple[Any, ...]:
        return tuple([read(decoder) for read in field_reads])
    return read_values


def _steps(reader: StructReader, read_schema_fields: tuple[Any, ...], slots: dict[int, int],
           defaults: list[Any]) -> list[Step]:
    """Flatten one resolved struct reader into read-or-skip steps (recursing into data_file).

    Readers of read-schema fields the file lacks (``DefaultReader`` / ``NoneReader``)
    read no bytes: their value is taken once into ``defaults`` instead of a step.
    """
    steps: list[Step] = []
    for pos, child in reader.field_readers:
        field_id = read_schema_fields[pos].field_id if pos is not None else None
        if pos is not None and field_id == _DATA_FILE_ID and isinstance(child, StructReader):
            df_fields = read_schema_fields[pos].field_type.fields
            steps.extend(_steps(child, df_fields, _DATA_FILE_SLOTS, defaults))
            continue
        slot = slots.get(field_id, -1) if field_id is not None else -1
        if isinstance(child, EnumReader):  # the raw value: status / format are mapped later
            child = child.reader
        if isinstance(child, DefaultReader | NoneReader):
            if slot >= 0:
                defaults[slot] = child.read(_EMPTY)
        elif slot < 0:
            steps.append((-1, stats_skipper(child) if field_id in STATS_FIELD_IDS
                          else child.skip))
        elif field_id == _PARTITION_ID:
            read_partition = _partition_reader(child)
            if read_partition is None:
                defaults[slot] = ()
            else:
                steps.append((slot, read_partition))
        else:
            steps.append((slot, child.read))
    return steps


class _Plan(NamedTuple):
    steps: tuple[Step, ...]
    defaults: tuple[Any, ...]


@lru_cache(maxsize=64)
def _plan(avro_schema: str) -> _Plan:
    """Steps for one writer schema (manifests of one table share a handful of schemas)."""
    file_schema: Schema = AvroSchemaConversion().avro_to_iceberg(json.loads(avro_schema))
    entry_reader = resolve_reader(file_schema, _ENTRY_SCHEMA)
    if not isinstance(entry_reader, StructReader):
        raise TypeError(f"manifest entry is not a struct: {entry_reader!r}")
    defaults: list[Any] = [None] * _SLOTS
    steps = _steps(entry_reader, _ENTRY_SCHEMA.fields, _ENTRY_SLOTS, defaults)
    return _Plan(tuple(steps), tuple(defaults))


_FORMAT_NAMES: dict[str, str] = {}


def _format_name(raw: str) -> str:
    name = _FORMAT_NAMES.get(raw)
    if name is None:
        name = _FORMAT_NAMES[raw] = FileFormat(raw).name
    return name


def live_data_files(content: bytes, manifest: ManifestFile) -> list[LiveDataFile]:
    """Live entries of one manifest file's bytes, in file order (see the module contract).

    Raises:
        ValueError: not an Avro file, an unknown codec or status, or a bad sync marker.
    """
    decoder = new_decoder(content)
    header = _HEADER_READER.read(decoder)
    if header.magic != MAGIC:
        raise ValueError(f"not an Avro file (magic {header.magic!r})")
    codec_name = header.meta.get(AVRO_CODEC_KEY, TableProperties.WRITE_AVRO_COMPRESSION_DEFAULT)
    if codec_name not in KNOWN_CODECS:
        raise ValueError(f"Unsupported codec: {codec_name}")
    codec = KNOWN_CODECS[codec_name]
    decompress = codec.decompress if codec else None
    plan = _plan(header.meta["avro.schema"])
    steps, defaults = plan.steps, plan.defaults
    sync = header.sync
    manifest_seq = manifest.sequence_number
    inherit_all = manifest_seq == 0
    out: list[LiveDataFile] = []
    append = out.append
    first = True
    while True:  # the container's blocks, as AvroFile.__next__
        try:
            if not first and decoder.read(SYNC_SIZE) != sync:
                raise ValueError("bad sync marker")
            count = decoder.read_int()
        except EOFError:
            break
        first = False
        data = decoder.read_bytes()
        block = new_decoder(decompress(data) if decompress else data)
        for _ in range(count):
            row = list(defaults)
            for slot, fn in steps:
                if slot < 0:
                    fn(block)
                else:
                    row[slot] = fn(block)
            status = row[_STATUS]
            if status == _DELETED:
                continue
            if status not in _STATUSES:
                raise ValueError(f"unknown manifest entry status {status!r}")
            seq = row[_SEQ]
            if seq is None and (inherit_all or status == _ADDED):
                seq = manifest_seq
            append(LiveDataFile(row[_PATH], _format_name(row[_FORMAT]), row[_PARTITION],
                                row[_RECORDS], row[_SIZE], row[_OFFSETS], seq))
    return out
