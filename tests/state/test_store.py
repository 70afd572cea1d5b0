"""Checkpoint stores: rotation, fallback to the previous checkpoint, crash safety, fsspec."""

from __future__ import annotations

import logging
import os
import struct
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import pytest

from icefloe.errors import CheckpointCorruptError, CheckpointError, CheckpointVersionError
from icefloe.state import (
    Checkpoint,
    CheckpointStore,
    FsspecCheckpointStore,
    LocalCheckpointStore,
    Position,
    encode,
    open_store,
    plan_fingerprint,
)
from icefloe.state.checkpoint import CURRENT_VERSION, MAGIC
from icefloe.state.store import CURRENT_NAME, PREV_NAME

FP = plan_fingerprint(None, True, 1024)


def _ckpt(n: int) -> Checkpoint:
    return Checkpoint("ns.t", "uuid-1", "main", FP, Position.after(100 + n, n), created_ms=n)


def _future_bytes() -> bytes:
    body = bytes([CURRENT_VERSION + 1]) + b"\x80"
    return MAGIC + body[:1] + struct.pack(">I", zlib.crc32(body)) + body[1:]


@pytest.fixture(params=["local", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CheckpointStore]:
    if request.param == "local":
        yield LocalCheckpointStore(tmp_path / "ckpt")
        return
    uri = f"memory://icefloe-tests/{uuid.uuid4().hex}/ckpt"
    yield FsspecCheckpointStore(uri)
    fs = fsspec.filesystem("memory")
    root = uri.removeprefix("memory://").rsplit("/", 1)[0]
    if fs.exists(root):
        fs.rm(root, recursive=True)


def _put(store: CheckpointStore, name: str, data: bytes) -> None:
    if isinstance(store, LocalCheckpointStore):
        store.directory.mkdir(parents=True, exist_ok=True)
        (store.directory / name).write_bytes(data)
    else:
        assert isinstance(store, FsspecCheckpointStore)
        store.fs.pipe_file(f"{store.root}/{name}", data)


def _get(store: CheckpointStore, name: str) -> bytes | None:
    return store._load(name)  # type: ignore[attr-defined]


def _names(store: CheckpointStore) -> set[str]:
    if isinstance(store, LocalCheckpointStore):
        return {p.name for p in store.directory.iterdir()}
    assert isinstance(store, FsspecCheckpointStore)
    return {p.rsplit("/", 1)[1] for p in store.fs.ls(store.root, detail=False)}


def test_no_files_reads_none(store: CheckpointStore) -> None:
    assert store.read() is None
    assert isinstance(store, CheckpointStore)


def test_write_read_and_rotation(store: CheckpointStore) -> None:
    store.write(_ckpt(1))
    assert store.read() == _ckpt(1)
    assert _names(store) == {CURRENT_NAME}
    store.write(_ckpt(2))
    store.write(_ckpt(3))
    assert store.read() == _ckpt(3)
    assert _get(store, PREV_NAME) == encode(_ckpt(2))
    assert _names(store) == {CURRENT_NAME, PREV_NAME}  # no temp files left behind


def test_corrupt_newest_falls_back_to_prev_with_warning(
        store: CheckpointStore, caplog: pytest.LogCaptureFixture) -> None:
    store.write(_ckpt(1))
    store.write(_ckpt(2))
    _put(store, CURRENT_NAME, encode(_ckpt(2))[:-3])  # torn write
    with caplog.at_level(logging.WARNING, logger="icefloe.state.store"):
        assert store.read() == _ckpt(1)
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert CURRENT_NAME in caplog.text and PREV_NAME in caplog.text


def test_missing_newest_falls_back_to_prev(store: CheckpointStore,
                                           caplog: pytest.LogCaptureFixture) -> None:
    _put(store, PREV_NAME, encode(_ckpt(1)))
    with caplog.at_level(logging.WARNING, logger="icefloe.state.store"):
        assert store.read() == _ckpt(1)
    assert "interrupted" in caplog.text


def test_both_corrupt_raises_with_both_paths(store: CheckpointStore) -> None:
    _put(store, CURRENT_NAME, b"garbage")
    _put(store, PREV_NAME, encode(_ckpt(1))[:20])
    with pytest.raises(CheckpointCorruptError) as info:
        store.read()
    assert CURRENT_NAME in str(info.value) and PREV_NAME in str(info.value)
    _put(store, PREV_NAME, b"")
    with pytest.raises(CheckpointCorruptError):
        store.read()


def test_corrupt_newest_without_prev_raises(store: CheckpointStore) -> None:
    _put(store, CURRENT_NAME, b"IFCK\x01")
    with pytest.raises(CheckpointCorruptError, match="no previous checkpoint"):
        store.read()


def test_write_after_fallback_keeps_the_good_one(store: CheckpointStore) -> None:
    store.write(_ckpt(1))
    store.write(_ckpt(2))
    _put(store, CURRENT_NAME, b"IFCK garbage")
    assert store.read() == _ckpt(1)
    store.write(_ckpt(3))
    assert store.read() == _ckpt(3)
    # the corrupt file was replaced, not rotated over the good previous one
    assert _get(store, PREV_NAME) == encode(_ckpt(1))


def test_newer_version_is_raised_not_skipped(store: CheckpointStore) -> None:
    store.write(_ckpt(1))
    store.write(_ckpt(2))
    _put(store, CURRENT_NAME, _future_bytes())
    with pytest.raises(CheckpointVersionError, match="newer icefloe"):
        store.read()
    with pytest.raises(CheckpointVersionError, match="refusing to overwrite"):
        store.write(_ckpt(3))
    assert _get(store, CURRENT_NAME) == _future_bytes()
    assert _get(store, PREV_NAME) == encode(_ckpt(1))


def test_write_refuses_a_checkpoint_that_does_not_round_trip(store: CheckpointStore) -> None:
    store.write(_ckpt(1))
    odd = Checkpoint("ns.t", "uuid-1", "main", FP, Position.after(1, 1), created_ms=1,
                     writer=b"bytes, not str")  # type: ignore[arg-type]
    with pytest.raises(CheckpointError):  # rejected before anything is written
        store.write(odd)
    assert store.read() == _ckpt(1)
    assert _names(store) == {CURRENT_NAME}


def test_crash_between_the_renames_keeps_a_good_checkpoint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = LocalCheckpointStore(tmp_path)
    store.write(_ckpt(1))
    store.write(_ckpt(2))
    real_replace = os.replace
    calls: list[tuple[Any, Any]] = []

    def crash_after_first(src: Any, dst: Any) -> None:
        calls.append((src, dst))
        if len(calls) > 1:
            raise OSError("simulated crash between the renames")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", crash_after_first)
    with pytest.raises(OSError, match="simulated crash"):
        store.write(_ckpt(3))
    monkeypatch.undo()
    assert Path(calls[0][0]).name == CURRENT_NAME and Path(calls[0][1]).name == PREV_NAME
    assert not (tmp_path / CURRENT_NAME).exists()
    assert LocalCheckpointStore(tmp_path).read() == _ckpt(2)  # the last committed one
    # a fresh writer recovers: cleans temps, writes, keeps the good one as prev
    fresh = LocalCheckpointStore(tmp_path)
    fresh.write(_ckpt(4))
    assert fresh.read() == _ckpt(4)
    assert _get(fresh, PREV_NAME) == encode(_ckpt(2))
    assert _names(fresh) == {CURRENT_NAME, PREV_NAME}


def _fail_from_step(monkeypatch: pytest.MonkeyPatch, step: int) -> None:
    """Make every os.replace / os.fsync call after the first ``step`` ones raise."""
    count = [0]
    for name in ("replace", "fsync"):
        real = getattr(os, name)

        def call(*args: Any, _real: Any = real) -> Any:
            count[0] += 1
            if count[0] > step:
                raise OSError(f"fail at step {step}")
            return _real(*args)

        monkeypatch.setattr(os, name, call)


def test_crash_at_every_step_of_a_write_keeps_a_good_checkpoint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the n-th filesystem step of a write for every n; a good checkpoint survives."""
    for step in range(4):  # fsync temp, rename to prev, fsync dir (tolerated), rename in
        directory = tmp_path / f"run{step}"
        store = LocalCheckpointStore(directory)
        store.write(_ckpt(1))
        store.write(_ckpt(2))
        _fail_from_step(monkeypatch, step)
        with pytest.raises(OSError, match="fail at step"):
            store.write(_ckpt(3))
        monkeypatch.undo()
        assert LocalCheckpointStore(directory).read() == _ckpt(2)


def test_memory_store_crash_between_moves_keeps_a_good_checkpoint(
        monkeypatch: pytest.MonkeyPatch) -> None:
    store = FsspecCheckpointStore(f"memory://icefloe-tests/{uuid.uuid4().hex}")
    store.write(_ckpt(1))
    store.write(_ckpt(2))
    real_mv = store.fs.mv
    calls: list[str] = []

    def crash_after_first(src: str, dst: str, **kwargs: Any) -> None:
        calls.append(src)
        if len(calls) > 1:
            raise OSError("simulated crash")
        real_mv(src, dst, **kwargs)

    monkeypatch.setattr(store.fs, "mv", crash_after_first)
    with pytest.raises(OSError):
        store.write(_ckpt(3))
    monkeypatch.undo()
    assert store.read() == _ckpt(2)
    store.write(_ckpt(4))
    assert store.read() == _ckpt(4)
    store.fs.rm(store.root, recursive=True)


def test_open_store_picks_the_backend(tmp_path: Path) -> None:
    local = open_store(str(tmp_path / "a"))
    assert isinstance(local, LocalCheckpointStore)
    assert local.directory == tmp_path / "a"
    via_uri = open_store(f"file://{tmp_path}/b%20c")
    assert isinstance(via_uri, LocalCheckpointStore)
    assert via_uri.directory == tmp_path / "b c"
    assert isinstance(open_store(tmp_path), LocalCheckpointStore)
    remote = open_store("memory://icefloe-tests/open")
    assert isinstance(remote, FsspecCheckpointStore)
    assert "memory://icefloe-tests/open" in remote.describe()
    assert str(tmp_path / "a") in local.describe()
