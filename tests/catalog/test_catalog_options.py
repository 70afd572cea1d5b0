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


def test_the_embedded_catalog_travels_as_the_drivers_home(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker started elsewhere (a Ray actor of a Ray instance started before
    ``$ICEFLOE_HOME`` was set, an executor in another directory) opens the driver's
    embedded catalog, not the one its own environment and directory would name (a CLI
    Ray stream failed with 'no embedded catalog at <cwd>/icefloe-warehouse' that way)."""
    from icefloe.catalog.loader import embedded_catalog

    home = tmp_path / "home"
    embedded_catalog(home).create_namespace("ns")
    monkeypatch.setenv("ICEFLOE_HOME", str(home))
    for named in (None, "local"):
        options = catalog_options(named)
        assert options["catalog.home"] == str(home)
        assert options.get("catalog") == named
    worker = catalog_options(None)
    monkeypatch.delenv("ICEFLOE_HOME")
    monkeypatch.chdir(tmp_path)  # a worker's own home would be ./icefloe-warehouse here
    reopened = open_catalog(None, {"home": worker["catalog.home"]})
    assert ("ns",) in reopened.list_namespaces()
    assert not (tmp_path / "icefloe-warehouse").exists()
