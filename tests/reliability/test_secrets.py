"""Catalog credentials never leak into logs, errors, reprs or checkpoints."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from icefloe import IcebergSource
from icefloe.errors import CatalogError
from tests.helpers.tables import make_catalog, make_table, rows

TOKEN = "tok-SECRET-1f2e3d"
CREDENTIAL = "client:cred-SECRET-9a8b"
PASSWORD = "pw-SECRET-77c1"
SECRETS = (TOKEN, CREDENTIAL, PASSWORD, "SECRET")


def _clean(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"secret {secret!r} leaked into: {text[:300]}"


def test_secrets_stay_out_of_logs_reprs_and_checkpoints(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    make_table(make_catalog(tmp_path)).append(rows(300))
    options = {
        "catalog.type": "sql",
        "catalog.uri": f"sqlite:///{tmp_path}/catalog.db",
        "catalog.warehouse": f"file://{tmp_path}/warehouse",
        "catalog.token": TOKEN,
        "catalog.credential": CREDENTIAL,
        "catalog.password": PASSWORD,
        "batchSize": "100",
    }
    caplog.set_level(logging.DEBUG)
    source = IcebergSource("db.events", catalog="test", options=options)
    texts = [repr(source), repr(source.options), str(source.options)]
    with source.stream(checkpoint=str(tmp_path / "ck"), available_now=True,
                       checkpoint_interval_s=0) as stream:
        for item in stream:
            item.ack()
        texts += [repr(stream), repr(stream.context), repr(item), str(stream.describe())]
    texts.append(caplog.text)
    for text in texts:
        _clean(text)
    for path in (tmp_path / "ck").iterdir():
        data = path.read_bytes()
        for secret in SECRETS:
            assert secret.encode() not in data, f"{secret} in {path}"


def test_secrets_stay_out_of_catalog_errors(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    options = {
        "catalog.type": "sql",
        "catalog.uri": f"postgresql+psycopg2://icefloe:{PASSWORD}@127.0.0.1:1/nowhere",
        "catalog.token": TOKEN,
        "catalog.credential": CREDENTIAL,
    }
    source = IcebergSource("db.events", catalog="unreachable", options=options)
    with pytest.raises(CatalogError) as info:
        source.handle  # noqa: B018
    chain: list[str] = []
    exc: BaseException | None = info.value
    while exc is not None:  # the error and everything it was raised from
        chain += [str(exc), repr(exc)]
        exc = exc.__cause__ or exc.__context__
    for text in [*chain, caplog.text, repr(source)]:
        _clean(text)
