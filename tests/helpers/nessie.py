"""Helpers of the Nessie tests (``tests/catalog/test_nessie_*.py``): sources and catalogs
on a (fake or live) Nessie server, appends, PyIceberg's oracle scan, a stream opener."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyiceberg.table import Table

from icefloe import IcebergSource, LocalStream, StreamItem
from icefloe.catalog.loader import open_catalog
from icefloe.catalog.nessie import NessieCatalog
from tests.helpers.tables import rows

KEY = "db.events"


def nessie_source(uri: str, table: str = KEY, **options: Any) -> IcebergSource:
    """An IcebergSource on the Nessie catalog at ``uri`` (``catalog="nessie"``)."""
    return IcebergSource(table, catalog="nessie",
                         options={"catalog.uri": uri, "catalog.backoff-s": "0.001", **options})


def nessie_catalog(uri: str, **props: str) -> NessieCatalog:
    catalog = open_catalog("nessie", {"uri": uri, "backoff-s": "0.001", **props})
    assert isinstance(catalog, NessieCatalog)
    return catalog


def append(table: Table, start: int, n: int = 4) -> int:
    """Append rows ``start .. start+n-1`` with PyIceberg; returns the new snapshot id."""
    table.append(rows(n, start=start))
    snapshot = table.current_snapshot()
    assert snapshot is not None
    return snapshot.snapshot_id


def oracle(table: Table, snapshot_id: int) -> pa.Table:
    """PyIceberg's own scan of ``snapshot_id``."""
    return table.scan(snapshot_id=snapshot_id).to_arrow()


def open_stream(src: IcebergSource, **kwargs: Any) -> tuple[LocalStream, Iterator[StreamItem]]:
    """A local stream of ``src`` (checkpoint on every ack) and its iterator."""
    stream = src.stream(parallelism=2, checkpoint_interval_s=0, **kwargs)
    return stream, iter(stream)


def take(items: Iterator[StreamItem], n: int) -> list[int]:
    """Consume and ack items until ``n`` rows arrived; returns their sorted ids."""
    got: list[int] = []
    while len(got) < n:
        item = next(items)
        got.extend(item.batch.column("id").to_pylist())
        item.ack()
    return sorted(got)
