"""A planning-only decoder for data manifests: live data files as flat tuples.

Runs on the enumerator. Planning a full scan without a row filter needs, per entry,
only the status, the data sequence number and seven data-file fields (path, format,
partition, record count, size, split offsets). PyIceberg's reader builds a
``ManifestEntry`` and a ``DataFile`` record per entry, wraps three fields in enums and
then applies inheritance on those records; at a million files that is most of the
planning time. This decoder starts from the reader tree PyIceberg resolves for the file
(``resolve_reader`` against PyIceberg's own manifest-entry read schema, so v1 / v2
layouts, optional fields, defaults and partition value types are PyIceberg's) and turns
it, once per writer schema, into one straight-line Python loop per block: primitive
fields become direct calls of the binary decoder's methods (what PyIceberg's primitive
readers call), every other reader is called as PyIceberg's own ``read`` / ``skip``, no
record is built, and fields planning does not use (column stats maps unless a filter
needs them, key metadata, equality ids, ...) are stepped over. The generated source is
kept on the plan (``_plan(schema).source``) for inspection.

Contract (checked against ``ManifestFile.fetch_manifest_entry`` in
``tests/enumerator/test_manifest_decoder.py``): :func:`live_data_files` returns (and
:func:`iter_live_data_files` yields, a block at a time), in file order, one
:class:`LiveDataFile` per entry whose status is not DELETED, with

- ``sequence_number``: the entry's data sequence number, or, when it is null, the
  manifest's sequence number if the entry is ADDED or the manifest's sequence number is
  0 (v1), else None (Iceberg spec, "Sequence Number Inheritance"; as PyIceberg's
  ``_inherit_from_manifest``);
- ``partition``: the partition values in the file's partition field order, as the plain
  Python values PyIceberg decodes (ints for dates / times / timestamps, ``Decimal``,
  ``UUID``, ``bytes`` ...);
- ``file_format``: the :class:`~pyiceberg.manifest.FileFormat` member name.

With a ``keep`` function (a filtered scan), the five column stats maps the metrics
evaluator reads (value, null and NaN counts, lower and upper bounds) are decoded too, as
the dicts PyIceberg's map readers return, and each live entry is offered to ``keep`` as a
:class:`FileStats` (the ``DataFile`` fields PyIceberg's ``_InclusiveMetricsEvaluator``
reads, plus the partition tuple) before it is kept. ``column_sizes`` is always stepped over.

The whole block loop is generated (one call per Avro block, not per entry): status check,
sequence-number inheritance, the filter and the output tuple are in the generated code.

Delete manifests keep using PyIceberg's full entries (:mod:`icefloe.enumerator.discovery`).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any, Literal, NamedTuple

from pyiceberg.avro.codecs import AVRO_CODEC_KEY, KNOWN_CODECS
from pyiceberg.avro.decoder import BinaryDecoder, new_decoder
from pyiceberg.avro.file import MAGIC, META_SCHEMA, SYNC_SIZE, AvroFileHeader
from pyiceberg.avro.reader import (
    BinaryReader,
    BooleanReader,
    DecimalReader,
    DefaultReader,
    DoubleReader,
    FloatReader,
    IntegerReader,
    MapReader,
    NoneReader,
    OptionReader,
    Reader,
    StringReader,
    StructReader,
)
from pyiceberg.avro.resolver import EnumReader, construct_reader, resolve_reader
from pyiceberg.manifest import (
    DEFAULT_READ_VERSION,
    MANIFEST_ENTRY_SCHEMAS,
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    _inherit_from_manifest,
)
from pyiceberg.schema import Schema
from pyiceberg.table import TableProperties
from pyiceberg.utils.schema_conversion import AvroSchemaConversion

# column_sizes, value_counts, null_value_counts, nan_value_counts, lower_bounds, upper_bounds
STATS_FIELD_IDS = frozenset({108, 109, 110, 137, 125, 128})
# the stats a filtered scan decodes (the metrics evaluator's), by field id: FileStats slot
_FILTER_STATS_SLOTS = {109: 9, 110: 10, 137: 11, 125: 12, 128: 13}
ENTRY_SCHEMA = MANIFEST_ENTRY_SCHEMAS[DEFAULT_READ_VERSION]
_HEADER_READER = construct_reader(META_SCHEMA, {-1: AvroFileHeader})

# what the generated entry function returns, in this order (by field id of the read schema)
_ENTRY_SLOTS = {0: 0, 3: 1, 1: 8}  # status, sequence_number, snapshot_id
_DATA_FILE_SLOTS = {100: 2, 101: 3, 102: 4, 103: 5, 104: 6, 132: 7}  # path ... split_offsets
_SLOTS = 9
_STATS_SLOTS = 14
_DATA_FILE_ID = 2
_PARTITION_ID = 102
_ADDED = ManifestEntryStatus.ADDED.value
_DELETED = ManifestEntryStatus.DELETED.value
_STATUSES = frozenset(s.value for s in ManifestEntryStatus)

# new_decoder imports on every call (a few µs, once per block): use its class directly
_DECODER: Callable[[bytes], BinaryDecoder] = type(new_decoder(b""))
# PyIceberg's primitive readers are one decoder call: inline that call. Keyed by the
# reader class's method, so subclasses that keep it (DateReader, TimestampReader, ...)
# are inlined and any reader that overrides it is called as itself.
# Doubles are not the decoder's read_double: PyIceberg 0.12's Cython decoder narrows it
# (and so DoubleReader.read) to 32-bit precision (apache/iceberg-python#3808), which
# rounded identity partition values of double columns. ``read_double_exact`` unpacks
# the 8 little-endian bytes itself.
_INLINE_READS: dict[Any, str] = {
    IntegerReader.read: "read_int", StringReader.read: "read_utf8",
    BinaryReader.read: "read_bytes", BooleanReader.read: "read_boolean",
    FloatReader.read: "read_float", DoubleReader.read: "read_double_exact",
}
_unpack_double = struct.Struct("<d").unpack


def read_double_exact(decoder: BinaryDecoder) -> float:
    """One Avro double (8 bytes, little-endian IEEE 754) at full precision."""
    return float(_unpack_double(decoder.read(8))[0])

_INLINE_SKIPS: dict[Any, str] = {
    IntegerReader.skip: "skip_int", StringReader.skip: "skip_utf8",
    BinaryReader.skip: "skip_bytes", BooleanReader.skip: "skip_boolean",
    FloatReader.skip: "skip_float", DoubleReader.skip: "skip_double",
}


class LiveDataFile(NamedTuple):
    """What planning needs of one live (ADDED / EXISTING) manifest entry."""

    file_path: str
    file_format: str
    partition: tuple[Any, ...]
    record_count: int
    file_size: int
    split_offsets: list[int] | None
    sequence_number: int | None


class FileStats(NamedTuple):
    """What a filtered scan's evaluators read of one live entry: its partition values and
    the ``DataFile`` fields of PyIceberg's ``_InclusiveMetricsEvaluator`` (duck-typed)."""

    partition: tuple[Any, ...]
    record_count: int
    value_counts: dict[int, int] | None
    null_value_counts: dict[int, int] | None
    nan_value_counts: dict[int, int] | None
    lower_bounds: dict[int, bytes] | None
    upper_bounds: dict[int, bytes] | None


KeepFile = Callable[[FileStats], bool]


def _stats_map_shape(reader: Any) -> tuple[bool, bool] | None:
    """(optional, int values) of an int->long or int->bytes map reader, else None."""
    optional = isinstance(reader, OptionReader)
    inner = reader.option if optional else reader
    if not (isinstance(inner, MapReader) and isinstance(inner.key, IntegerReader)
            and isinstance(inner.value, IntegerReader | BinaryReader)):
        return None
    return optional, isinstance(inner.value, IntegerReader)


def stats_skipper(reader: Any) -> Callable[[BinaryDecoder], None]:
    """A function that steps over one stats map's bytes (as ``reader`` would read them)
    and returns None; int->long and int->bytes maps take the decoder's bulk calls."""
    shape = _stats_map_shape(reader)
    if shape is None:
        def skip_any(decoder: BinaryDecoder) -> None:
            reader.skip(decoder)
        return skip_any
    optional, int_values = shape

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


def stats_reader(reader: Any) -> Callable[[BinaryDecoder], dict[int, Any] | None]:
    """A function that reads one stats map as ``reader.read`` would (the same dict, or None
    for a null); int->long and int->bytes maps take the decoder's bulk calls."""
    shape = _stats_map_shape(reader)
    if shape is None:
        def read_any(decoder: BinaryDecoder) -> dict[int, Any] | None:
            return reader.read(decoder)
        return read_any
    optional, int_values = shape

    def read_map(decoder: BinaryDecoder) -> dict[int, Any] | None:
        if optional and decoder.read_int() == 0:
            return None
        out: dict[int, Any] = {}
        count = decoder.read_int()
        while count != 0:
            if count < 0:  # a block with its size in bytes: read it as a plain block
                count = -count
                decoder.read_int()
            if int_values:
                values = decoder.read_ints(count * 2)
                out.update(zip(values[::2], values[1::2], strict=True))
            else:
                decoder.read_int_bytes_dict(count, out)
            count = decoder.read_int()
        return out
    return read_map


class CodegenBase:
    """What every generated Avro entry function shares: its globals (the decoder's
    inlined read / skip methods, then :meth:`bind`-ed values) and value reads.
    Only names this class creates go into generated code, never text from a file."""

    def __init__(self, *extra: str) -> None:
        self.lines: list[str] = []
        self.namespace: dict[str, Any] = {
            name: getattr(_DECODER, name)
            for name in (*_INLINE_READS.values(), *_INLINE_SKIPS.values(), "skip", *extra)
            if name != "read_double_exact"
        }
        self.namespace["read_double_exact"] = read_double_exact

    def bind(self, value: Any) -> str:
        """A name for ``value`` in the generated function's globals."""
        name = f"_v{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def read_expr(self, reader: Reader) -> str:
        """An expression that reads one value as ``reader.read(d)`` would."""
        if type(reader) is OptionReader:  # union [null, T]: the branch index, then T
            return f"({self.read_expr(reader.option)} if read_int(d) > 0 else None)"
        inline = _INLINE_READS.get(type(reader).read)
        if inline is not None:
            return f"{inline}(d)"
        return f"{self.bind(reader.read)}(d)"


class _Codegen(CodegenBase):
    """Builds the source of ``decode_entry(d)`` from a resolved entry reader."""

    def __init__(self, with_stats: bool = False, raw_partition: bool = False,
                 stats_ids: tuple[int, ...] = ()) -> None:
        super().__init__("read_ints", "read_int_bytes_dict", "tell")
        self.with_stats = with_stats
        self.raw_partition = raw_partition
        self.stats_ids = stats_ids
        self.empty = self.bind({})  # never written to
        self.results = ["None"] * (_STATS_SLOTS if with_stats else _SLOTS)

    def skip(self, reader: Reader, field_id: int | None, indent: str = "    ") -> None:
        """Statements that step over one value as ``reader.skip(d)`` would."""
        if self.with_stats and self.raw_partition and field_id in _FILTER_STATS_SLOTS:
            # rows of columns: the values of the wanted keys, not the map (no dict lives on)
            slot = _FILTER_STATS_SLOTS[field_id]
            self.lines.append(f"{indent}m = {self.bind(stats_reader(reader))}(d) or {self.empty}")
            self.lines += [f"{indent}r{slot}_{i} = m.get({k})"
                           for i, k in enumerate(self.stats_ids)]
            self.results[slot] = "read"
        elif self.with_stats and field_id in _FILTER_STATS_SLOTS:
            slot = _FILTER_STATS_SLOTS[field_id]  # read, not skipped: the filter needs it
            self.lines.append(f"{indent}r{slot} = {self.bind(stats_reader(reader))}(d)")
            self.results[slot] = f"r{slot}"
        elif field_id in STATS_FIELD_IDS:
            self.skip_stats(reader, indent)
        elif type(reader) is OptionReader:
            self.lines.append(f"{indent}if read_int(d) > 0:")
            self.skip(reader.option, None, indent + "    ")
        elif (inline := _INLINE_SKIPS.get(type(reader).skip)) is not None:
            self.lines.append(f"{indent}{inline}(d)")
        else:
            self.lines.append(f"{indent}{self.bind(reader.skip)}(d)")

    def skip_partition(self, reader: Reader) -> None:
        """Step over a partition record: its fields' values in file order, a decimal as
        the fixed bytes its reader reads (PyIceberg 0.12's ``DecimalReader.skip`` steps
        over length-prefixed bytes instead, which is not how manifests store it)."""
        if not isinstance(reader, StructReader):
            raise TypeError(f"partition is not a struct: {reader!r}")
        for _, field in reader.field_readers:
            self.skip_value(field, "    ")

    def skip_value(self, reader: Reader, indent: str) -> None:
        if type(reader) is OptionReader:
            self.lines.append(f"{indent}if read_int(d) > 0:")
            self.skip_value(reader.option, indent + "    ")
        elif isinstance(reader, DecimalReader):
            self.lines.append(f"{indent}skip(d, {int(reader._length)})")
        elif isinstance(reader, DefaultReader | NoneReader):  # not in the file: no bytes
            self.lines.append(f"{indent}pass")
        else:
            self.skip(reader, None, indent)

    def skip_stats(self, reader: Reader, indent: str) -> None:
        """Step over a column stats map (as :func:`stats_skipper`, inlined)."""
        shape = _stats_map_shape(reader)
        if shape is None:
            self.lines.append(f"{indent}{self.bind(stats_skipper(reader))}(d)")
            return
        optional, int_values = shape
        if optional:
            self.lines.append(f"{indent}if read_int(d) > 0:")
            indent += "    "
        step = ("read_ints(d, n * 2)" if int_values
                else f"read_int_bytes_dict(d, n, {self.bind({})})")  # a scratch dict
        self.lines += [
            f"{indent}n = read_int(d)",
            f"{indent}while n:",
            f"{indent}    if n < 0:  # a block with its size in bytes",
            f"{indent}        skip(d, read_int(d))",
            f"{indent}    else:",
            f"{indent}        {step}",
            f"{indent}    n = read_int(d)",
        ]

    def partition(self, reader: Reader, slot: int) -> None:
        """The partition values as a tuple, each read by its field's own reader."""
        if not isinstance(reader, StructReader):
            raise TypeError(f"partition is not a struct: {reader!r}")
        positions = [pos for pos, _ in reader.field_readers]
        if not positions:
            self.results[slot] = "()"
        elif positions == list(range(len(positions))):
            values = "".join(f"{self.read_expr(field)}, " for _, field in reader.field_readers)
            self.lines.append(f"    r{slot} = ({values})")  # evaluated left to right
            self.results[slot] = f"r{slot}"
        else:  # not the layout PyIceberg resolves today: its record, as a tuple
            self.lines.append(f"    r{slot} = {self.bind(_record_tuple)}"
                              f"({self.bind(reader.read)}(d))")
            self.results[slot] = f"r{slot}"

    def struct(self, reader: StructReader, read_fields: tuple[Any, ...],
               slots: dict[int, int]) -> None:
        """Every field of ``reader`` in file order (recursing into data_file)."""
        for pos, child in reader.field_readers:
            field_id = read_fields[pos].field_id if pos is not None else None
            if pos is not None and field_id == _DATA_FILE_ID and isinstance(child, StructReader):
                self.struct(child, read_fields[pos].field_type.fields, _DATA_FILE_SLOTS)
                continue
            slot = slots.get(field_id, -1) if field_id is not None else -1
            if isinstance(child, EnumReader):  # the raw value: status / format mapped later
                child = child.reader
            if isinstance(child, DefaultReader | NoneReader):  # not in the file: no bytes
                if slot >= 0:
                    self.results[slot] = self.bind(child.read(new_decoder(b"")))
            elif slot < 0:
                self.skip(child, field_id)
            elif field_id == _PARTITION_ID and self.raw_partition:
                # the record's bytes as they are in the block (``data``: the block's bytes)
                self.lines.append("    p0 = tell(d)")
                self.skip_partition(child)
                self.lines.append(f"    r{slot} = data[p0:tell(d)]")
                self.results[slot] = f"r{slot}"
            elif field_id == _PARTITION_ID:
                self.partition(child, slot)
            else:
                self.lines.append(f"    r{slot} = {self.read_expr(child)}")
                self.results[slot] = f"r{slot}"

    def block_source(self, mode: DecodeMode = "live") -> str:
        """``decode_block(d, count, append, manifest_seq, inherit_all, keep, added_by)``:
        every entry of one Avro block, each live one appended as a :class:`LiveDataFile`
        (the module contract; with stats, only those ``keep`` accepts). Mode ``added``:
        only ADDED entries whose snapshot id is ``added_by`` (a null snapshot id,
        inherited from a manifest that ``added_by`` added, counts as it). Mode ``own``:
        the offset in the block (``tell``) of each ADDED or DELETED entry of ``added_by``
        is appended instead, nothing is built."""
        r = self.results
        status, seq, path, fmt, partition, records, size, offsets, snapshot = r[:_SLOTS]
        if mode == "own":
            return "\n".join([
                "def decode_block(d, count, append, manifest_seq, inherit_all, keep, added_by):",
                "    for _ in range(count):",
                "        at = tell(d)",
                *("    " + line for line in self.lines),
                f"        if {status} not in {self.bind(_STATUSES)}:",
                f"            {self.bind(_unknown_status)}({status})",
                f"        if ({status} == {_ADDED} or {status} == {_DELETED}) and "
                f"({snapshot} is None or {snapshot} == added_by):",
                "            append(at)",
                "",
            ])
        added_only = mode == "added"
        out = self.bind(LiveDataFile)
        keep = []
        if self.raw_partition:  # a row of columns (:func:`column_rows`): no filter here
            head = "def decode_block(d, count, append, manifest_seq, inherit_all, data, added_by):"
            stats: list[str] = []
            for i, k in enumerate(self.stats_ids):  # per id: counts, then bounds
                stats += [f"r{slot}_{i}" if r[slot] == "read"  # absent: the default's
                          else f"({r[slot]} or {self.empty}).get({k})"
                          for slot in (9, 10, 11, 12, 13)]
            row = ", ".join([path, "fmt", partition, records, size, offsets, "seq", *stats])
            emit = f"        append(({row},))"
        else:
            head = "def decode_block(d, count, append, manifest_seq, inherit_all, keep, added_by):"
            emit = (f"        append({self.bind(tuple.__new__)}({out}, ({path}, fmt, "
                    f"{partition}, {records}, {size}, {offsets}, seq)))")
        if self.with_stats and not self.raw_partition:
            offered = ", ".join([partition, records, *r[_SLOTS:]])
            keep = [f"        if not keep({self.bind(tuple.__new__)}"
                    f"({self.bind(FileStats)}, ({offered},))):",
                    "            continue"]
        if added_only:
            status_check = [
                f"        if {status} != {_ADDED}:",
                f"            if {status} not in {self.bind(_STATUSES)}:",
                f"                {self.bind(_unknown_status)}({status})",
                "            continue",
                f"        if {snapshot} is not None and {snapshot} != added_by:",
                "            continue",
            ]
        else:
            status_check = [
                f"        if {status} == {_DELETED}:",
                "            continue",
                f"        if {status} not in {self.bind(_STATUSES)}:",
                f"            {self.bind(_unknown_status)}({status})",
            ]
        return "\n".join([
            head,
            "    for _ in range(count):",
            *("    " + line for line in self.lines),
            *status_check,
            f"        seq = {seq}",
            f"        if seq is None and (inherit_all or {status} == {_ADDED}):",
            "            seq = manifest_seq",
            f"        fmt = {self.bind(_FORMAT_NAMES)}.get({fmt})",
            "        if fmt is None:",
            f"            fmt = {self.bind(_format_name)}({fmt})",
            *keep,
            emit,
            "",
        ])


def _unknown_status(status: Any) -> None:
    raise ValueError(f"unknown manifest entry status {status!r}")


def _record_tuple(record: Any) -> tuple[Any, ...]:
    return tuple(record[i] for i in range(len(record)))


DecodeMode = Literal["live", "added", "own"]
# append takes a LiveDataFile, or an int offset in mode "own"
# the sixth argument is the filter (``keep``), or the block's bytes for rows of columns
BlockDecoder = Callable[[BinaryDecoder, int, Callable[[Any], None], int, bool, Any,
                         "int | None"], None]


class _Plan(NamedTuple):
    decode_block: BlockDecoder
    source: str


@lru_cache(maxsize=64)
def _entry_reader(avro_schema: str) -> StructReader:
    """The manifest-entry reader PyIceberg resolves for one writer schema."""
    file_schema: Schema = AvroSchemaConversion().avro_to_iceberg(json.loads(avro_schema))
    entry_reader = resolve_reader(file_schema, ENTRY_SCHEMA)
    if not isinstance(entry_reader, StructReader):
        raise TypeError(f"manifest entry is not a struct: {entry_reader!r}")
    return entry_reader


@lru_cache(maxsize=64)
def _plan(avro_schema: str, with_stats: bool = False, mode: DecodeMode = "live",
          raw_partition: bool = False, stats_ids: tuple[int, ...] = ()) -> _Plan:
    """The decoders of one writer schema (a table's manifests share a few schemas); with
    ``with_stats``, the filter's stats maps are read (slots 9-13) instead of skipped;
    ``mode`` as :meth:`_Codegen.block_source`; with ``raw_partition``, rows of columns
    (:func:`column_rows`: the stats of ``stats_ids`` when ``with_stats``) instead of
    :class:`LiveDataFile` tuples."""
    entry_reader = _entry_reader(avro_schema)
    gen = _Codegen(with_stats, raw_partition, stats_ids)
    gen.struct(entry_reader, ENTRY_SCHEMA.fields, _ENTRY_SLOTS)
    source = gen.block_source(mode)
    # the source holds only names made here (decoder methods, bound readers and values,
    # slot variables, int constants), never text from the file
    exec(compile(source, "<icefloe manifest block decoder>", "exec"), gen.namespace)
    return _Plan(gen.namespace["decode_block"], source)


_FORMAT_NAMES: dict[str, str] = {}


def _format_name(raw: str) -> str:
    name = _FORMAT_NAMES.get(raw)
    if name is None:
        name = _FORMAT_NAMES[raw] = FileFormat(raw).name
    return name


def open_avro(content: bytes) -> tuple[BinaryDecoder, Any, Callable[[bytes], bytes] | None]:
    """The decoder positioned after an Avro file's header, the header (``meta``, ``sync``)
    and the blocks' decompress function (None: uncompressed).

    Raises:
        ValueError: not an Avro file, or an unknown codec.
    """
    decoder = new_decoder(content)
    header = _HEADER_READER.read(decoder)
    if header.magic != MAGIC:
        raise ValueError(f"not an Avro file (magic {header.magic!r})")
    codec_name = header.meta.get(AVRO_CODEC_KEY, TableProperties.WRITE_AVRO_COMPRESSION_DEFAULT)
    if codec_name not in KNOWN_CODECS:
        raise ValueError(f"Unsupported codec: {codec_name}")
    codec = KNOWN_CODECS[codec_name]
    return decoder, header, codec.decompress if codec else None


def avro_blocks(decoder: BinaryDecoder, sync: bytes,
                decompress: Callable[[bytes], bytes] | None) -> Iterator[tuple[int, bytes]]:
    """``(entry count, decompressed bytes)`` of each block after the header, as
    ``AvroFile.__next__`` reads them.

    Raises:
        ValueError: a bad sync marker.
        EOFError: the bytes end inside a block.
    """
    first = True
    while True:
        try:
            if not first and decoder.read(SYNC_SIZE) != sync:
                raise ValueError("bad sync marker")
            count = decoder.read_int()
        except EOFError:
            return
        first = False
        data = decoder.read_bytes()
        yield count, decompress(data) if decompress else data


def live_data_files(content: bytes, manifest: ManifestFile, keep: KeepFile | None = None
                    ) -> list[LiveDataFile]:
    """Live entries of one manifest file's bytes, in file order (see the module contract);
    with ``keep``, only those whose :class:`FileStats` it accepts.

    Raises:
        ValueError: not an Avro file, an unknown codec or status, or a bad sync marker.
        EOFError: the bytes end inside a block.
    """
    return list(iter_live_data_files(content, manifest, keep))


def iter_live_data_files(content: bytes, manifest: ManifestFile, keep: KeepFile | None = None,
                         *, added_only: bool = False) -> Iterator[LiveDataFile]:
    """:func:`live_data_files`, decoded one Avro block at a time as it is iterated.

    A planning loop that consumes each file as it comes keeps no manifest's worth of
    tuples alive: they die young, and the cyclic garbage collector (whose full passes
    over the heap are triggered by objects that survive) stays out of planning.

    With ``added_only``, only the entries the manifest's own snapshot
    (``manifest.added_snapshot_id``) ADDED: what an incremental read of that snapshot
    takes from a manifest it wrote. Merged manifests carry the table's earlier files as
    EXISTING entries; they are stepped over like the stats, never built.

    Raises:
        ValueError, EOFError: as :func:`live_data_files`, while iterating.
    """
    decoder, header, decompress = open_avro(content)
    decode_block = _plan(header.meta["avro.schema"], keep is not None,
                         "added" if added_only else "live").decode_block
    new_block = _DECODER
    manifest_seq = manifest.sequence_number
    inherit_all = manifest_seq == 0
    added_by = manifest.added_snapshot_id
    out: list[LiveDataFile] = []
    append = out.append
    for count, data in avro_blocks(decoder, header.sync, decompress):
        decode_block(new_block(data), count, append, manifest_seq, inherit_all, keep, added_by)
        if out:
            yield from out
            out.clear()


def column_rows(content: bytes, manifest_seq: int, added_by: int | None,
                stats_ids: tuple[int, ...] = (), *, added_only: bool
                ) -> tuple[str, list[tuple[Any, ...]]]:
    """The writer schema (``avro.schema``) of one manifest file's bytes and, in file order,
    a row per entry :func:`iter_live_data_files` yields for a manifest of sequence number
    ``manifest_seq`` added by ``added_by``: ``(file_path, file_format, partition,
    record_count, file_size, split_offsets, sequence_number)``, where ``partition`` is the
    raw Avro bytes of the entry's partition record (decode them with
    :func:`partition_decoder`); then, for each field id of ``stats_ids`` in order, its
    value, null and NaN counts and its lower and upper bounds (None where the
    map is null or absent or lacks the key; no map is built without ``stats_ids``). The rows of
    :func:`icefloe.enumerator.columnar.decode_manifest`'s pure-Python implementation.

    Raises:
        ValueError, EOFError: as :func:`live_data_files`.
    """
    decoder, header, decompress = open_avro(content)
    schema = header.meta["avro.schema"]
    decode_block = _plan(schema, bool(stats_ids), "added" if added_only else "live",
                         True, stats_ids).decode_block
    new_block = _DECODER
    inherit_all = manifest_seq == 0
    rows: list[tuple[Any, ...]] = []
    append = rows.append
    for count, data in avro_blocks(decoder, header.sync, decompress):
        decode_block(new_block(data), count, append, manifest_seq, inherit_all, data, added_by)
    return schema, rows


def writer_schema(content: bytes) -> str:
    """The writer schema (``avro.schema``) in the header of one manifest file's bytes.

    Raises:
        ValueError: not an Avro file, or an unknown codec.
    """
    return str(open_avro(content)[1].meta["avro.schema"])


@lru_cache(maxsize=64)
def partition_decoder(avro_schema: str) -> Callable[[bytes], tuple[Any, ...]]:
    """A function from the raw bytes of a ``partition`` record of a manifest of writer
    schema ``avro_schema`` to its partition values: the same tuple
    :func:`iter_live_data_files` gives (PyIceberg's resolved readers, field for field)."""
    reader = _partition_reader(_entry_reader(avro_schema))
    positions = [pos for pos, _ in reader.field_readers]
    if not positions:
        return lambda _raw: ()
    gen = CodegenBase()
    new_block = gen.bind(_DECODER)
    if positions == list(range(len(positions))):
        values = "".join(f"{gen.read_expr(field)}, " for _, field in reader.field_readers)
        source = f"def decode_partition(raw):\n    d = {new_block}(raw)\n    return ({values})\n"
    else:  # as _Codegen.partition: PyIceberg's record, as a tuple
        source = (f"def decode_partition(raw):\n    return {gen.bind(_record_tuple)}("
                  f"{gen.bind(reader.read)}({new_block}(raw)))\n")
    exec(compile(source, "<icefloe partition decoder>", "exec"), gen.namespace)
    decode: Callable[[bytes], tuple[Any, ...]] = gen.namespace["decode_partition"]
    return decode


def _partition_reader(entry_reader: StructReader) -> StructReader:
    """The ``data_file.partition`` reader inside a resolved manifest-entry reader."""
    for pos, child in entry_reader.field_readers:
        if pos is not None and ENTRY_SCHEMA.fields[pos].field_id == _DATA_FILE_ID:
            data_fields = ENTRY_SCHEMA.fields[pos].field_type.fields  # type: ignore[attr-defined]
            assert isinstance(child, StructReader)
            for fpos, field in child.field_readers:
                if fpos is not None and data_fields[fpos].field_id == _PARTITION_ID:
                    if not isinstance(field, StructReader):
                        raise TypeError(f"partition is not a struct: {field!r}")
                    return field
    raise TypeError("manifest entry schema has no data_file.partition")


# what PyIceberg's manifest reading builds records of (``ManifestFile.fetch_manifest_entry``)
RECORD_READ_TYPES: dict[int, Any] = {-1: ManifestEntry, 2: DataFile}
RECORD_READ_ENUMS: dict[int, Any] = {0: ManifestEntryStatus, 101: FileFormat,
                                     134: DataFileContent}


@lru_cache(maxsize=64)
def _record_reader(avro_schema: str) -> Reader:
    """PyIceberg's reader of whole ``ManifestEntry`` records for one writer schema (what
    ``AvroFile`` resolves for ``ManifestFile.fetch_manifest_entry``)."""
    file_schema: Schema = AvroSchemaConversion().avro_to_iceberg(json.loads(avro_schema))
    return resolve_reader(file_schema, ENTRY_SCHEMA, RECORD_READ_TYPES, RECORD_READ_ENUMS)


def own_entries(content: bytes, manifest: ManifestFile) -> list[ManifestEntry]:
    """The entries of one manifest file's bytes that its own snapshot
    (``manifest.added_snapshot_id``) ADDED or DELETED, in file order, as PyIceberg's
    records with inherited sequence numbers and snapshot ids (what reading every entry
    with ``ManifestFile.fetch_manifest_entry`` and keeping those would give).

    The other entries (a merged manifest's EXISTING ones: most of it) are stepped over
    by the planning decoder, which notes where each own entry starts; only those are
    then read with PyIceberg's reader, from there.

    Raises:
        ValueError, EOFError: as :func:`live_data_files`.
    """
    decoder, header, decompress = open_avro(content)
    schema = header.meta["avro.schema"]
    find = _plan(schema, False, "own").decode_block
    read = _record_reader(schema).read
    new_block = _DECODER
    added_by = manifest.added_snapshot_id
    out: list[ManifestEntry] = []
    offsets: list[int] = []
    for count, data in avro_blocks(decoder, header.sync, decompress):
        find(new_block(data), count, offsets.append, 0, False, None, added_by)
        if not offsets:
            continue
        records = new_block(data)
        for at in offsets:
            records.skip(at - records.tell())
            out.append(_inherit_from_manifest(read(records), manifest))
        offsets.clear()
    return out
