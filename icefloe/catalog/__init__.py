"""Opening tables: PyIceberg catalogs (embedded default, by name, objects), refs, Nessie."""

from icefloe.catalog.handle import TableHandle, open_table
from icefloe.catalog.loader import embedded_catalog, open_catalog

__all__ = ["TableHandle", "embedded_catalog", "open_catalog", "open_table"]
