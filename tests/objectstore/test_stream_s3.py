"""Continuous local streams of tables in S3 with checkpoints in S3, behind the REST catalog and
behind a SQL catalog, checked against PyIceberg's scans."""

from __future__ import annotations

import logging
import threading
import time
import uuid

import pyarrow as pa
import pytest
from pyarrow import fs as pafs

from icefloe import IcebergSource
from icefloe.errors import CheckpointError
from icefloe.state import ObjectCheckpointStore, open_store
from tests.conftest import assert_same_rows
from tests.helpers.seaweed import (
    ACCESS_KEY,
    READ_ONLY_ACCESS_KEY,
    READ_ONLY_SECRET_KEY,
    SECRET_KEY,
    SeaweedFS,
)
from tests.helpers.tables import rows
from tests.objectstore.conftest import History, S3Catalog, oracle


def _ckpt(seaweed: SeaweedFS) -> str:
    return f"s3://{seaweed.bucket}/stream-ckpt/{uuid.uuid4().hex}"


def test_stream_with_deletes_in_history_reads_the_head(s3_catalog: S3Catalog,
                                                       history: History,
                                                       seaweed: SeaweedFS) -> None:
    src = IcebergSource(history.identifier, options=s3_catalog.options())
    ids = []
    batches = []
    with src.stream(checkpoint=_ckpt(seaweed), available_now=True) as stream:
        for item in stream:
            batches.append(item.batch)
            ids.extend(item.batch.column("id").to_pylist())
            item.ack()
    assert_same_rows(pa.Table.from_batches(batches), oracle(history))


def test_stream_resumes_from_an_s3_checkpoint(s3_catalog: S3Catalog, seaweed: SeaweedFS,
                                              caplog: pytest.LogCaptureFixture) -> None:
    table = s3_catalog.new_table("stream")
    table.append(rows(50, start=0))
    identifier = ".".join(table.name())
    ckpt = _ckpt(seaweed)
    options = s3_catalog.options(pollIntervalMs="100")
    seen: list[int] = []

    def writer() -> None:
        time.sleep(0.3)
        table.append(rows(40, start=1000))

    with caplog.at_level(logging.DEBUG, logger="icefloe"), \
            IcebergSource(identifier, options=options).stream(
                checkpoint=ckpt, checkpoint_interval_s=0) as stream:
        thread = threading.Thread(target=writer)
        thread.start()
        deadline = time.monotonic() + 60
        for item in stream:
            seen.extend(item.batch.column("id").to_pylist())
            item.ack()
            if len(seen) >= 90 or time.monotonic() > deadline:
                break
        thread.join()
    table.append(rows(30, start=2000))
    with IcebergSource(identifier, options=options).stream(
            checkpoint=ckpt, available_now=True) as resumed:
        again = []
        for item in resumed:
            again.extend(item.batch.column("id").to_pylist())
            item.ack()
    assert sorted(again) == list(range(2000, 2030))  # nothing acknowledged came again
    expected = table.refresh().scan().to_arrow().column("id").to_pylist()
    assert sorted(seen + again) == sorted(expected)
    store = open_store(ckpt, seaweed.s3_properties())
    assert isinstance(store, ObjectCheckpointStore)
    assert store.read() is not None
    for info in store.fs.get_file_info(pafs.FileSelector(store.root)):
        with store.fs.open_input_stream(info.path) as stream:
            raw = stream.read()
        assert SECRET_KEY.encode() not in raw and ACCESS_KEY.encode() not in raw
    assert SECRET_KEY not in caplog.text and ckpt in caplog.text


def test_checkpoint_options_override_the_catalog_s3_properties(
        s3_catalog: S3Catalog, history: History, seaweed: SeaweedFS) -> None:
    ckpt = _ckpt(seaweed)
    options = s3_catalog.options(**{
        "checkpoint.s3.access-key-id": READ_ONLY_ACCESS_KEY,
        "checkpoint.s3.secret-access-key": READ_ONLY_SECRET_KEY,
    })
    src = IcebergSource(history.identifier, options=options)
    assert READ_ONLY_SECRET_KEY not in repr(src) and SECRET_KEY not in repr(src)
    # the resolved start is written at once: refused for the read-only keys
    with pytest.raises(CheckpointError, match="ACCESS_DENIED") as info, \
            src.stream(checkpoint=ckpt, available_now=True):
        pass
    message = str(info.value)
    assert ckpt in message and "\n" not in message
    assert READ_ONLY_SECRET_KEY not in message and SECRET_KEY not in message
