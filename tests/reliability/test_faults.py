"""I/O and catalog faults: transient ones are retried, permanent ones stop with a clear
error after the configured attempts, and the checkpoint never passes unread data."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog

from icefloe import IcebergSource
from icefloe.errors import CatalogError, DataFileError
from icefloe.retry import RetryPolicy, call_with_retry, is_transient
from icefloe.state import open_store
from tests.helpers.tables import live_data_files, make_table, rows
from tests.reliability.faults import PLAN, FlakyCatalog

IO_IMPL = "tests.reliability.faults.FlakyFileIO"


@pytest.fixture(autouse=True)
def _no_faults() -> Iterator[None]:
    PLAN.reset()
    yield
    PLAN.reset()


def _catalog(root: Path, cls: type[SqlCatalog] = SqlCatalog) -> SqlCatalog:
    (root / "warehouse").mkdir(parents=True, exist_ok=True)
    return cls("test", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/warehouse",
               **{"py-io-impl": IO_IMPL})


def _fill(catalog: SqlCatalog, files: int = 8, per: int = 1000) -> list[int]:
    table = make_table(catalog)
    for i in range(files):
        table.append(rows(per, start=i * per))
    return list(range(files * per))


def _drain(source: IcebergSource, checkpoint: Path, counts: Counter[int],
           parallelism: int = 2) -> None:
    with source.stream(checkpoint=str(checkpoint), parallelism=parallelism,
                       available_now=True, checkpoint_interval_s=0) as stream:
        for item in stream:
            counts.update(item.batch.column("id").to_pylist())
            item.ack()


OPTS = {"batchSize": "250", "maxAttempts": "12", "retryBackoffMs": "1"}


def test_flaky_manifest_and_data_reads_are_retried_exactly_once(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    expected = _fill(catalog)
    # a failed planning pass re-plans from its position and reads every manifest again (and
    # the manifest pool reads up to 8 ahead of a failure), so a pass succeeds only if all of
    # its ~20-30 manifest reads do: at a 10% rate that is a few percent, and 12 attempts in
    # a row failed now and then (CI). 5% and 40 attempts: a pass succeeds in >20% of tries.
    # Data reads are retried per split (no re-planning), so their rate can be high: at 40%
    # of 8 files' reads, no fault at all is a 2% chance (threads consume the seeded
    # generator in varying order, so the count varies from run to run).
    PLAN.reset(manifest_rate=0.05, data_rate=0.4, seed=7)
    counts: Counter[int] = Counter()
    _drain(IcebergSource("db.events", catalog=catalog, options={**OPTS, "maxAttempts": "40"}),
           tmp_path / "ck", counts)
    assert PLAN.injected >= 1  # the retries were exercised
    assert counts == Counter(expected)  # every row once: nothing skipped, nothing repeated


def test_permanent_data_fault_stops_and_checkpoint_does_not_pass_it(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    expected = _fill(catalog)
    victim = sorted(live_data_files(catalog.load_table("db.events")))[3]
    PLAN.reset(broken=(victim,))
    counts: Counter[int] = Counter()
    source = IcebergSource("db.events", catalog=catalog,
                           options={**OPTS, "maxAttempts": "3"})
    with pytest.raises(DataFileError) as info:
        _drain(source, tmp_path / "ck", counts)
    assert victim in str(info.value)
    assert PLAN.injected == 3  # exactly maxAttempts attempts
    delivered_before = set(counts)
    PLAN.reset()  # the fault heals; a restart delivers the rest and re-reads no acked row
    again: Counter[int] = Counter()
    _drain(IcebergSource("db.events", catalog=catalog, options=OPTS), tmp_path / "ck", again)
    assert set(again) | delivered_before == set(expected)
    assert not set(again) & delivered_before


def test_permanent_manifest_fault_reaches_the_consumer(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    _fill(catalog, files=2)
    PLAN.reset(manifest_rate=1.0)
    source = IcebergSource("db.events", catalog=catalog,
                           options={**OPTS, "maxAttempts": "2"})
    with pytest.raises(DataFileError, match=r"cannot read manifest list .*injected fault") \
            as info:
        _drain(source, tmp_path / "ck", Counter())
    assert isinstance(info.value.__cause__, ConnectionResetError)
    assert is_transient(info.value)  # transient: retried, and given up on after 2 attempts
    assert PLAN.injected == 2  # exactly maxAttempts reads of the manifest list
    ckpt = open_store(str(tmp_path / "ck")).read()
    assert ckpt is not None  # the stream's start was checkpointed ...
    assert (ckpt.position.phase, ckpt.position.next_ordinal) == ("scan", 0)  # ... nothing more


def test_catalog_outage_is_ridden_out_by_a_continuous_stream(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path, FlakyCatalog)
    assert isinstance(catalog, FlakyCatalog)
    expected = set(_fill(catalog, files=2))
    writer = _catalog(tmp_path)
    source = IcebergSource("db.events", catalog=catalog,
                           options={**OPTS, "pollIntervalMs": "20", "retryBackoffMs": "50",
                                    "maxAttempts": "10"})
    seen: Counter[int] = Counter()

    def outage() -> None:
        catalog.down.set()
        writer.load_table("db.events").append(rows(500, start=10_000))
        time.sleep(0.6)
        catalog.down.clear()

    expected |= set(range(10_000, 10_500))
    started = False
    deadline = time.monotonic() + 60
    with source.stream(checkpoint=str(tmp_path / "ck"), checkpoint_interval_s=0) as stream:
        for item in stream:
            seen.update(item.batch.column("id").to_pylist())
            item.ack()
            if not started:
                started = True
                threading.Thread(target=outage, daemon=True).start()
            if set(seen) >= expected or time.monotonic() > deadline:
                break
    assert catalog.refused >= 1
    assert seen == Counter(expected)


def test_catalog_down_for_good_stops_with_catalog_error(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path, FlakyCatalog)
    assert isinstance(catalog, FlakyCatalog)
    _fill(catalog, files=1)
    source = IcebergSource("db.events", catalog=catalog,
                           options={"pollIntervalMs": "10", "retryBackoffMs": "10",
                                    "maxAttempts": "3"})
    with pytest.raises(CatalogError, match="unreachable"), \
            source.stream(checkpoint=str(tmp_path / "ck")) as stream:
        for item in stream:
            item.ack()
            catalog.down.set()
    assert catalog.refused == 3


def test_retry_policy_contract() -> None:
    calls: list[int] = []
    sleeps: list[float] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise TimeoutError("slow")
        return "ok"

    policy = RetryPolicy(max_attempts=4, backoff_ms=100, max_backoff_ms=150)
    assert call_with_retry(flaky, policy, "test", sleep=sleeps.append) == "ok"
    assert sleeps == [0.1, 0.15]
    with pytest.raises(ValueError):
        call_with_retry(lambda: int("x"), policy, "test", sleep=sleeps.append)
    assert not is_transient(FileNotFoundError("gone"))
    assert is_transient(CatalogError("down"))
    wrapped = DataFileError("cannot read")
    wrapped.__cause__ = ConnectionResetError("reset")
    assert is_transient(wrapped)
    assert not is_transient(DataFileError("corrupt"))
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=0)


def test_bounded_read_retries_flaky_manifests_and_data_files(tmp_path: Path) -> None:
    """``read`` / ``to_arrow`` / ``plan`` ride out transient faults: each row exactly once,
    the same splits in the same order as a fault-free plan."""
    catalog = _catalog(tmp_path)
    expected = _fill(catalog)
    source = IcebergSource("db.events", catalog=catalog, options=OPTS)
    clean_plan = [s.split_id for s in source.plan()]
    PLAN.reset(manifest_rate=0.1, data_rate=0.2, seed=11)
    replanned = [s.split_id for s in IcebergSource("db.events", catalog=catalog,
                                                   options=OPTS).plan()]
    counts: Counter[int] = Counter()
    for batch in IcebergSource("db.events", catalog=catalog, options=OPTS).read():
        counts.update(batch.column("id").to_pylist())
    table = IcebergSource("db.events", catalog=catalog, options=OPTS).to_arrow()
    assert PLAN.injected > 5
    assert replanned == clean_plan
    assert counts == Counter(expected)
    assert Counter(table.column("id").to_pylist()) == Counter(expected)


def test_bounded_read_stops_after_max_attempts_on_a_permanent_fault(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    _fill(catalog)
    victim = sorted(live_data_files(catalog.load_table("db.events")))[2]
    PLAN.reset(broken=(victim,))
    source = IcebergSource("db.events", catalog=catalog, options={**OPTS, "maxAttempts": "2"})
    with pytest.raises(DataFileError) as info:
        source.to_arrow()
    assert victim in str(info.value)
    assert PLAN.injected == 2


def test_bounded_read_without_retries_fails_on_the_first_fault(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    _fill(catalog)
    PLAN.reset(data_rate=1.0)
    with pytest.raises(DataFileError):
        IcebergSource("db.events", catalog=catalog,
                      options={**OPTS, "maxAttempts": "1"}).to_arrow(parallelism=1)
    assert PLAN.injected == 1  # one reader thread, one attempt, no retry


def test_cli_read_re_plans_after_flaky_manifests(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """``icefloe read`` plans as ``IcebergSource.read`` does: a transient fault reading a
    manifest is retried (re-planned from its position), and the file it writes holds each
    row once, as the fault-free table does (before, the CLI planned without retries and
    the first fault ended the read)."""
    import pyarrow.parquet as pq

    from icefloe.cli import main

    catalog = _catalog(tmp_path)
    expected = _fill(catalog)
    out = tmp_path / "out.parquet"
    PLAN.reset(manifest_rate=0.1, seed=11)
    code = main(["read", "db.events", "--catalog", "test", "--to", str(out), "-q",
                 "-o", f"catalog.uri=sqlite:///{tmp_path}/catalog.db",
                 "-o", f"catalog.warehouse=file://{tmp_path}/warehouse",
                 "-o", f"catalog.py-io-impl={IO_IMPL}",
                 *[f"-o{k}={v}" for k, v in OPTS.items()]])
    assert code == 0, capsys.readouterr().err
    assert PLAN.injected >= 1
    assert Counter(pq.read_table(out).column("id").to_pylist()) == Counter(expected)
