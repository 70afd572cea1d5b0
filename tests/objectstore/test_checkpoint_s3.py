"""Checkpoints on S3 (SeaweedFS): numbered generations, the previous good one never lost,
typed one-line errors naming the location, and no credential anywhere."""

from __future__ import annotations

import logging
import uuid

import pytest
from pyarrow import fs as pafs

from icefloe.errors import CheckpointCorruptError, CheckpointError, CheckpointVersionError
from icefloe.retry import RetryPolicy
from icefloe.state import Checkpoint, ObjectCheckpointStore, Position, encode, open_store
from icefloe.state.checkpoint import plan_fingerprint
from icefloe.state.object_store import generation_name, s3_filesystem
from tests.helpers.seaweed import (
    READ_ONLY_ACCESS_KEY,
    READ_ONLY_SECRET_KEY,
    SECRET_KEY,
    SeaweedFS,
)
from tests.state.test_store import _future_bytes

FP = plan_fingerprint(None, True, 1024)


def _ckpt(n: int) -> Checkpoint:
    return Checkpoint("ns.t", "uuid-1", "main", FP, Position.after(100 + n, n), created_ms=n)


def _location(seaweed: SeaweedFS) -> str:
    return f"s3://{seaweed.bucket}/ckpt-tests/{uuid.uuid4().hex}"


def _store(seaweed: SeaweedFS, location: str | None = None) -> ObjectCheckpointStore:
    store = open_store(location or _location(seaweed), seaweed.s3_properties())
    assert isinstance(store, ObjectCheckpointStore)
    return store


def _names(store: ObjectCheckpointStore) -> list[str]:
    """The objects under the store's prefix, listed with a separate PyArrow client."""
    selector = pafs.FileSelector(store.root, allow_not_found=True)
    return sorted(info.base_name for info in store.fs.get_file_info(selector))


def _put_raw(store: ObjectCheckpointStore, generation: int, data: bytes) -> None:
    with store.fs.open_output_stream(f"{store.root}/{generation_name(generation)}") as out:
        out.write(data)


def test_round_trip_keeps_the_newest_two_generations(seaweed: SeaweedFS) -> None:
    store = _store(seaweed)
    assert store.read() is None
    for n in range(1, 5):
        store.write(_ckpt(n))
    assert _names(store) == [generation_name(3), generation_name(4)]
    # a fresh process (a new store) reads the newest
    assert _store(seaweed, store.uri).read() == _ckpt(4)


def test_corrupt_newest_falls_back_to_the_previous_good_one(
        seaweed: SeaweedFS, caplog: pytest.LogCaptureFixture) -> None:
    store = _store(seaweed)
    store.write(_ckpt(1))
    store.write(_ckpt(2))
    _put_raw(store, 3, encode(_ckpt(3))[:-5])  # a torn write of generation 3
    reader = _store(seaweed, store.uri)
    with caplog.at_level(logging.WARNING, logger="icefloe"):
        assert reader.read() == _ckpt(2)
    assert generation_name(3) in caplog.text and "unreadable" in caplog.text
    # the next write goes above the torn one and later clean-ups remove it
    reader.write(_ckpt(4))
    reader.write(_ckpt(5))
    assert _store(seaweed, store.uri).read() == _ckpt(5)
    assert _names(store) == [generation_name(4), generation_name(5)]


def test_nothing_decodes_is_a_typed_error(seaweed: SeaweedFS) -> None:
    store = _store(seaweed)
    _put_raw(store, 1, b"not a checkpoint")
    with pytest.raises(CheckpointCorruptError, match=f"delete checkpoint location {store.uri}"):
        store.read()


def test_newer_version_is_raised_and_not_written_over(seaweed: SeaweedFS) -> None:
    store = _store(seaweed)
    store.write(_ckpt(1))
    _put_raw(store, 2, _future_bytes())
    with pytest.raises(CheckpointVersionError, match=generation_name(2)):
        _store(seaweed, store.uri).read()
    with pytest.raises(CheckpointVersionError, match="refusing to write over"):
        _store(seaweed, store.uri).write(_ckpt(3))
    assert _names(store) == [generation_name(1), generation_name(2)]


class _Crash(BaseException):
    """A process death at a chosen step (BaseException: nothing catches it)."""


class _CrashingStore(ObjectCheckpointStore):
    """Dies at the ``crash_at``-th store mutation (PUT or DELETE) or verification GET."""

    def __init__(self, base: ObjectCheckpointStore, crash_at: int) -> None:
        super().__init__(base.uri, base.fs, base.root)
        self.steps = 0
        self.crash_at = crash_at

    def _step(self) -> None:
        self.steps += 1
        if self.steps == self.crash_at:
            raise _Crash

    def _put(self, generation: int, data: bytes) -> None:
        self._step()
        super()._put(generation, data)
        self._step()  # after the PUT, before anything else

    def _delete(self, generation: int) -> None:
        self._step()
        super()._delete(generation)
        self._step()


def test_a_crash_at_every_step_of_a_write_keeps_a_good_checkpoint(seaweed: SeaweedFS) -> None:
    crash_at = 1
    while True:
        store = _store(seaweed)
        for n in range(1, 4):
            store.write(_ckpt(n))  # generations 2 and 3 remain
        crashing = _CrashingStore(store, crash_at)
        crashing.read()
        try:
            crashing.write(_ckpt(4))
        except _Crash:
            after = _store(seaweed, store.uri).read()
            assert after in (_ckpt(3), _ckpt(4)), (crash_at, after)
            # the restarted writer continues and its next checkpoint wins
            restarted = _store(seaweed, store.uri)
            restarted.read()
            restarted.write(_ckpt(5))
            assert _store(seaweed, store.uri).read() == _ckpt(5)
            crash_at += 1
            continue
        assert _store(seaweed, store.uri).read() == _ckpt(4)
        break
    assert crash_at >= 4  # PUT before/after and at least one clean-up DELETE were crashed


def test_no_such_bucket_is_one_typed_line_naming_it(seaweed: SeaweedFS) -> None:
    location = "s3://no-such-bucket-icefloe/ckpt"
    with pytest.raises(CheckpointError) as info:
        open_store(location, seaweed.s3_properties()).read()
    message = str(info.value)
    assert "no such bucket 'no-such-bucket-icefloe'" in message and location in message
    assert "\n" not in message


def test_access_denied_is_one_typed_line_without_the_secret(seaweed: SeaweedFS) -> None:
    props = {**seaweed.s3_properties(), "s3.secret-access-key": "wrong-" + SECRET_KEY}
    location = _location(seaweed)
    store = open_store(location, props, RetryPolicy(max_attempts=4, backoff_ms=5_000))
    with pytest.raises(CheckpointError) as info:
        store.read()  # permanent: raised at once, not after 3 backoffs of 5 s
    message = str(info.value)
    assert location in message and "SIGNATURE_DOES_NOT_MATCH" in message
    assert "\n" not in message and SECRET_KEY not in message
    assert SECRET_KEY not in repr(store)


def test_read_only_credentials_cannot_write(seaweed: SeaweedFS) -> None:
    location = _location(seaweed)
    props = {**seaweed.s3_properties(), "s3.access-key-id": READ_ONLY_ACCESS_KEY,
             "s3.secret-access-key": READ_ONLY_SECRET_KEY}
    store = open_store(location, props)
    assert store.read() is None  # reading and listing are allowed
    with pytest.raises(CheckpointError, match="ACCESS_DENIED") as info:
        store.write(_ckpt(1))
    assert location in str(info.value) and READ_ONLY_SECRET_KEY not in str(info.value)


def test_s3_properties_in_pyiceberg_names_configure_pyarrow(seaweed: SeaweedFS) -> None:
    s3 = s3_filesystem({
        "s3.endpoint": seaweed.s3_endpoint, "client.access-key-id": READ_ONLY_ACCESS_KEY,
        "client.secret-access-key": READ_ONLY_SECRET_KEY, "s3.region": "us-east-1",
        "s3.force-virtual-addressing": "false", "s3.connect-timeout": "5",
    })
    assert s3.get_file_info(seaweed.bucket).type == pafs.FileType.Directory
    with pytest.raises(OSError, match="ACCESS_DENIED"), \
            s3.open_output_stream(f"{seaweed.bucket}/ro/x") as out:
        out.write(b"x")


def test_cli_shows_an_s3_checkpoint_with_aws_environment_variables(
        seaweed: SeaweedFS, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from icefloe.cli import main
    from tests.helpers.seaweed import ACCESS_KEY

    store = _store(seaweed)
    store.write(_ckpt(7))
    for name, value in {"AWS_ENDPOINT_URL": seaweed.s3_endpoint, "AWS_REGION": "us-east-1",
                        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                        "AWS_SECRET_ACCESS_KEY": SECRET_KEY}.items():
        monkeypatch.setenv(name, value)
    assert main(["checkpoint", "show", store.uri, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["lastAckedSnapshotID"] == str(_ckpt(7).position.snapshot_id)
