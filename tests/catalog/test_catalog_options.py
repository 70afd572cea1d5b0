"""One catalog-to-options converter for every engine: Spark and Ray re-open a catalog object
in other processes from the same options, and refuse the same unknown catalog classes."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog

from icefloe.catalog.loader import catalog_options, open_catalog
from icefloe.errors import EngineError
from tests.helpers.tables import make_catalog


class HomeMadeCatalog(SqlCatalog):
    """A catalog class icefloe cannot name by ``catalog.type``."""


def test_a_catalog_object_becomes_options_that_reopen_it(tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    catalog.create_namespace("ns")
    options = catalog_options(catalog)
    assert options["catalog"] == "test" and options["catalog.type"] == "sql"
    reopened = open_catalog(options["catalog"], {k.removeprefix("catalog."): v
                                                 for k, v in options.items() if k != "catalog"})
    assert ("ns",) in reopened.list_namespaces()


@pytest.mark.ray
def test_spark_and_ray_refuse_the_same_unknown_catalog_class(tmp_path: Path) -> None:
    from icefloe.ray.stream import catalog_as_options

    catalog = HomeMadeCatalog("odd", uri=f"sqlite:///{tmp_path}/c.db",
                              warehouse=f"file://{tmp_path}")
    with pytest.raises(EngineError, match="HomeMadeCatalog"):
        catalog_options(catalog)
    with pytest.raises(EngineError, match="HomeMadeCatalog"):
        catalog_as_options(catalog, {})
