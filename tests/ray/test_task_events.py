"""Task events of a Ray stream's actors: off unless ``task_events=True``.

Every actor call of a stream (several per split, for as long as it runs) becomes a task
event that Ray keeps in its GCS; the soak measured the GCS growing 300 MB in 30 minutes
(benchmarks/RESULTS.md, "Long runs: the soak"). Read back from Ray's own store of task
events (what ``ray.timeline()`` reads) on a real local Ray.
"""

from __future__ import annotations

from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog

import icefloe.ray
from tests.helpers.tables import make_table, rows
from tests.helpers.waiting import wait_for

from .conftest import RAY_WARNINGS

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300), *RAY_WARNINGS]


def events_of(actor_ids: set[bytes]) -> int:
    """Task events Ray holds for method calls on the actors ``actor_ids``."""
    from ray._private.state import state

    return sum(1 for event in state._get_all_task_events()
               if event.task_info.actor_id in actor_ids
               and "." in event.task_info.func_or_class_name)


def stream_actor_ids(task_events: bool, catalog: SqlCatalog) -> tuple[set[bytes], int]:
    """Run an available-now Ray stream over ``db.task_events``; its actors' ids and rows."""
    got = 0
    stream = icefloe.ray.RayStream("db.task_events", catalog=catalog, available_now=True,
                                   num_readers=1, reader_num_cpus=0.25,
                                   metrics_interval_s=0, task_events=task_events)
    with stream:
        actors: list[Any] = [stream.enumerator, *stream.readers.values()]
        ids = {actor._actor_id.binary() for actor in actors}
        for item in stream:
            got += item.batch.num_rows
            item.ack()
    return ids, got


def test_task_events_are_off_unless_asked(catalog: SqlCatalog, ray_local: None) -> None:
    table = make_table(catalog, "db.task_events")
    for i in range(3):
        table.append(rows(20, start=100 * i))
    quiet, quiet_rows = stream_actor_ids(False, catalog)
    traced, traced_rows = stream_actor_ids(True, catalog)
    assert quiet_rows == traced_rows == 60
    # the traced stream's events reach the GCS (reported every second): by then the
    # quiet stream's would have too, had its actors recorded any
    wait_for(lambda: events_of(traced) > 0, "the traced stream's task events in the GCS")
    assert events_of(quiet) == 0
