"""One local Ray for the whole Ray suite (session-scoped), shut down at the end."""

from __future__ import annotations

import os

import pytest

# before Ray is imported (it reads the variable then): workers use this venv as is, also
# under a plain `uv run pytest tests/ray` (without it Ray starts them with `uv run`)
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
pytest.importorskip("ray")

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.table import Table
from pyiceberg.transforms import IdentityTransform

from tests.helpers.ray_local import RAY_WARNINGS, ray_local
from tests.helpers.tables import make_table, rows

__all__ = ["BY_KIND", "RAY_WARNINGS", "partitioned", "ray_local"]


BY_KIND = PartitionSpec(
    PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="kind")
)


@pytest.fixture
def partitioned(catalog: SqlCatalog) -> Table:
    """``db.events`` partitioned by ``kind``: three appends of 50 rows (9 data files)."""
    table = make_table(catalog, partition_spec=BY_KIND)
    for i in range(3):
        table.append(rows(50, start=100 * i))
    return table
