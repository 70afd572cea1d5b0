"""Bad input: fuzzed checkpoints fed to a real stream start, corrupt data and manifest
files, malformed options. Expected: a typed icefloe error (or a fallback to the previous
good checkpoint), never a crash loop, never an overwritten checkpoint."""

from __future__ import annotations

import struct
import tempfile
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyiceberg.catalog.sql import SqlCatalog

from icefloe import IcebergSource
from icefloe.errors import CheckpointError, DataFileError, IcefloeError, InvalidOptionError
from icefloe.state.store import CURRENT_NAME, PREV_NAME
from tests.helpers.tables import live_data_files, make_catalog, make_table, rows


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[SqlCatalog, bytes, bytes, int]:
    """A table of 3 files, its last two good checkpoints (prev, current) and the rows a
    start from prev delivers."""
    root = tmp_path_factory.mktemp("bad")
    catalog = make_catalog(root)
    table = make_table(catalog)
    for i in range(3):
        table.append(rows(100, start=i * 100))
    ckdir = root / "ck"
    source = IcebergSource("db.events", catalog=catalog)
    with source.stream(checkpoint=str(ckdir), available_now=True,
                       checkpoint_interval_s=0) as stream:
        for item in stream:
            item.ack()
    prev = (ckdir / PREV_NAME).read_bytes()
    only_prev = root / "only-prev"
    only_prev.mkdir()
    (only_prev / CURRENT_NAME).write_bytes(prev)
    after_prev = _start(catalog, only_prev)
    assert after_prev > 0
    return catalog, prev, (ckdir / CURRENT_NAME).read_bytes(), after_prev


def _future_version(good: bytes) -> bytes:
    payload = good[9:]
    body = bytes([99]) + payload
    return b"IFCK" + bytes([99]) + struct.pack(">I", zlib.crc32(body)) + payload


def mutations(good: bytes) -> st.SearchStrategy[bytes]:
    truncated = st.integers(0, len(good) - 1).map(lambda n: good[:n])
    flipped = st.tuples(st.integers(0, len(good) - 1), st.integers(1, 255)).map(
        lambda t: good[:t[0]] + bytes([good[t[0]] ^ t[1]]) + good[t[0] + 1:])
    foreign = st.binary(max_size=300)
    return st.one_of(truncated, flipped, foreign, st.just(_future_version(good)))


def _start(catalog: SqlCatalog, ckdir: Path) -> int:
    """Start a stream on ``ckdir``, drain it; returns the rows delivered."""
    source = IcebergSource("db.events", catalog=catalog)
    delivered = 0
    with source.stream(checkpoint=str(ckdir), available_now=True,
                       checkpoint_interval_s=0) as stream:
        for item in stream:
            delivered += item.batch.num_rows
            item.ack()
    return delivered


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), with_prev=st.booleans())
def test_fuzzed_checkpoint_is_refused_or_falls_back(
        setup: tuple[SqlCatalog, bytes, bytes, int], data: st.DataObject,
        with_prev: bool) -> None:
    catalog, prev, good, after_prev = setup
    bad = data.draw(mutations(good))
    with tempfile.TemporaryDirectory() as tmp:
        ckdir = Path(tmp)
        (ckdir / CURRENT_NAME).write_bytes(bad)
        if with_prev:
            (ckdir / PREV_NAME).write_bytes(prev)
        try:
            delivered = _start(catalog, ckdir)
        except CheckpointError:
            # refused: nothing overwritten, and refusing again (no crash loop) is stable
            assert (ckdir / CURRENT_NAME).read_bytes() == bad
            if with_prev:
                assert (ckdir / PREV_NAME).read_bytes() == prev
            with pytest.raises(CheckpointError):
                _start(catalog, ckdir)
            assert (ckdir / CURRENT_NAME).read_bytes() == bad
            return
        # accepted: either the bytes still decode as the good checkpoint (nothing left
        # to read) or the start fell back to prev (re-reading only the rows after it)
        assert delivered in (0, after_prev), delivered
        if delivered:
            assert with_prev


def test_corrupt_data_file_names_the_file(tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    table = make_table(catalog)
    table.append(rows(100))
    path = next(iter(live_data_files(table)))
    local = Path(path.removeprefix("file://"))
    local.write_bytes(b"not parquet at all" * 10)
    with pytest.raises(DataFileError, match=str(local.name)):
        IcebergSource("db.events", catalog=catalog).to_arrow()


def test_corrupt_manifest_file_names_the_file(tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    table = make_table(catalog)
    table.append(rows(100))
    manifest = table.current_snapshot().manifests(table.io)[0].manifest_path  # type: ignore[union-attr]
    Path(manifest.removeprefix("file://")).write_bytes(b"Obj\x01garbage" * 20)
    with pytest.raises(DataFileError, match=Path(manifest).name):
        IcebergSource("db.events", catalog=catalog).to_arrow()


@pytest.mark.parametrize("options", [
    {"maxAttempts": "0"}, {"maxAttempts": "many"}, {"retryBackoffMs": "-5"},
    {"batchSize": "1.5"}, {"snapshotId": "-1"}, {"pollIntervalMs": "soon"},
    {"noSuchOption": "1"}, {"ignoreDeletes": "perhaps"}, {"onLineageBreak": "panic"},
    {"filter": "id >>> 3"}, {"ignoreChanges": "true", "skipChangeCommits": "true"},
])
def test_malformed_options_raise_invalid_option_error(options: dict[str, str]) -> None:
    with pytest.raises(InvalidOptionError) as info:
        IcebergSource("db.events", options=options)
    assert isinstance(info.value, ValueError) and isinstance(info.value, IcefloeError)
    message = str(info.value)
    # names the option, and the bad value (or that the option itself is unknown)
    assert any(message.startswith(f"option {key!r}: ") for key in options), message
    if len(options) == 1:
        (value,) = options.values()
        assert value in message or "unknown option" in message, message
