"""Open a PyIceberg catalog from what the user gave.

Runs on the driver / enumerator process only: readers never open a catalog.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyiceberg.catalog import Catalog, load_catalog

from icefloe.errors import CatalogAuthError, CatalogError, EngineError

if TYPE_CHECKING:  # SQLAlchemy is imported only when the embedded catalog is opened
    from pyiceberg.catalog.sql import SqlCatalog

log = logging.getLogger(__name__)

EMBEDDED_NAME = "local"
HOME_ENV = "ICEFLOE_HOME"


def icefloe_home() -> Path:
    """Where the embedded catalog lives: ``$ICEFLOE_HOME``, else ``./icefloe-warehouse``."""
    return Path(os.environ.get(HOME_ENV, "icefloe-warehouse")).absolute()


def embedded_catalog(home: str | os.PathLike[str] | None = None,
                     create: bool = True) -> SqlCatalog:
    """The embedded default: a SQLite catalog with a local-filesystem warehouse.

    Args:
        home: directory holding ``catalog.db`` and ``warehouse/``; defaults to
            :func:`icefloe_home`.
        create: create the directory when missing; with False, a missing catalog is a
            :class:`CatalogError` naming the directory (nothing is created).
    """
    root = Path(home).absolute() if home is not None else icefloe_home()
    if not create and not (root / "catalog.db").is_file():
        raise CatalogError(
            f"no embedded catalog at {root} (no catalog.db there); run `icefloe demo`, create "
            f"tables with icefloe.catalog.loader.embedded_catalog(), point ${HOME_ENV} or "
            "-o catalog.home=DIR at an existing one, or name a configured catalog")
    (root / "warehouse").mkdir(parents=True, exist_ok=True)
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog(
        EMBEDDED_NAME,
        uri=f"sqlite:///{root / 'catalog.db'}",
        warehouse=(root / "warehouse").as_uri(),
    )


def auth_error(catalog_name: str, exc: BaseException) -> CatalogAuthError | None:
    """A :class:`CatalogAuthError` when ``exc`` is a catalog's refusal of the credentials.

    PyIceberg's REST catalog raises ``OAuthError`` (the token endpoint refused the client
    credentials), ``UnauthorizedError`` (401) and ``ForbiddenError`` (403). Such a refusal
    does not heal by waiting, so it is never retried. The message names the catalog and
    the property to fix, never a credential's value.
    """
    from pyiceberg.exceptions import ForbiddenError, OAuthError, UnauthorizedError

    if not isinstance(exc, OAuthError | UnauthorizedError | ForbiddenError):
        return None
    reason = " ".join(str(exc).split())  # one line
    return CatalogAuthError(
        f"catalog {catalog_name!r} refused the credentials ({type(exc).__name__}: {reason}); "
        "check its credential / token properties (catalog.credential, catalog.token or "
        "PYICEBERG_CATALOG__<NAME>__CREDENTIAL)")


def _configured(name: str) -> bool:
    """Whether PyIceberg's config file or environment defines catalog ``name``."""
    from pyiceberg.utils.config import Config

    env_prefix = f"PYICEBERG_CATALOG__{name.upper()}__"
    if any(k.startswith(env_prefix) for k in os.environ):
        return True
    return Config().get_catalog_config(name) is not None


def open_catalog(catalog: str | Catalog | None,
                 properties: dict[str, str] | None = None) -> Catalog:
    """Resolve ``catalog`` to a PyIceberg ``Catalog``.

    Args:
        catalog: a ``Catalog`` (used as is); a catalog name configured in PyIceberg's
            ``~/.pyiceberg.yaml`` or ``PYICEBERG_CATALOG__<NAME>__*`` variables; or None /
            ``"local"`` (when not configured) for the embedded SQLite default.
        properties: ``catalog.<prop>`` options (prefix removed). With a name, they are
            merged over PyIceberg's configuration; a ``home`` property moves the embedded
            default.

    Raises:
        CatalogAuthError: the catalog refused the credentials (not worth retrying).
        CatalogError: the catalog could not be opened (message names the catalog, never
            property values, which may be credentials).
    """
    props = dict(properties or {})
    if isinstance(catalog, Catalog):
        if props:
            raise CatalogError(
                "catalog.<prop> options cannot be applied to a Catalog object; "
                "configure the object instead"
            )
        return catalog
    name = catalog or EMBEDDED_NAME
    try:
        if name == EMBEDDED_NAME and not _configured(name) and "type" not in props \
                and "uri" not in props:
            return embedded_catalog(props.get("home"), create=False)
        if name == "nessie" and not _configured(name) and "type" not in props:
            props["type"] = "nessie"
        if not _configured(name) and not {"type", "uri", "py-catalog-impl"} & set(props):
            raise CatalogError(
                f"catalog {name!r} is not configured; define it in ~/.pyiceberg.yaml or "
                f"PYICEBERG_CATALOG__{name.upper()}__* variables, or pass -o catalog.type=... "
                "-o catalog.uri=... (catalog.<prop> options)")
        if props.get("type") == "nessie":
            from icefloe.catalog.nessie import NessieCatalog

            return NessieCatalog(name, **props)
        return load_catalog(name, **props)
    except CatalogError:
        raise
    except Exception as exc:
        refused = auth_error(name, exc)
        if refused is not None:
            raise refused from exc
        raise CatalogError(
            f"cannot open catalog {name!r} ({type(exc).__name__}: {exc}); configure it in "
            "~/.pyiceberg.yaml, PYICEBERG_CATALOG__<NAME>__* variables or catalog.<prop> options"
        ) from exc


def describe(catalog: Any) -> str:
    """A short, secret-free description of a catalog for logs."""
    return f"{type(catalog).__name__}({getattr(catalog, 'name', '?')!r})"


_CATALOG_TYPES = {
    "SqlCatalog": "sql",
    "RestCatalog": "rest",
    "HiveCatalog": "hive",
    "GlueCatalog": "glue",
    "DynamoDbCatalog": "dynamodb",
    "BigQueryMetastoreCatalog": "bigquery",
    "InMemoryCatalog": "in-memory",
}


def catalog_options(catalog: str | Catalog | None) -> dict[str, str]:
    """Options that name ``catalog`` in another process (Spark executors, Ray actors): its
    name, plus ``catalog.<prop>`` options (its properties and ``catalog.type``) for an object,
    or ``catalog.home`` for the embedded catalog (None or ``local``). Options the user gives
    are merged over these.

    Runs on the driver. The properties may hold credentials: they travel as options, which
    icefloe never logs (Spark redacts option values matching ``spark.redaction.regex``).

    Raises:
        EngineError: a catalog object of a type icefloe cannot re-open by properties.
    """
    if catalog is None or (catalog == EMBEDDED_NAME and not _configured(catalog)):
        # the embedded catalog: its home as the driver resolves it ($ICEFLOE_HOME, else
        # ./icefloe-warehouse), not as a worker would in its own environment and directory
        named = {} if catalog is None else {"catalog": catalog}
        return {**named, "catalog.home": str(icefloe_home())}
    if isinstance(catalog, str):
        return {"catalog": catalog}
    props = {f"catalog.{k}": str(v) for k, v in catalog.properties.items()}
    if "catalog.type" not in props and "catalog.py-catalog-impl" not in props:
        kind = _CATALOG_TYPES.get(type(catalog).__name__)
        if kind is None:
            raise EngineError(
                f"cannot pass a {type(catalog).__name__} to another process; configure it in "
                "~/.pyiceberg.yaml and pass its name, or pass catalog.<prop> options"
            )
        props["catalog.type"] = kind
    return {"catalog": catalog.name, **props}
