"""Log context and secret masking shared by every icefloe log line.

- :func:`bind`: fields (``table``, ``snapshot``, ``split``) that the log lines of this
  thread carry while a block runs; a structured formatter (the CLI's
  ``--log-format json``, :class:`icefloe.cli.logs.JsonFormatter`) adds them to every
  record, and a record's own ``extra=`` fields win. Threads start without context: the
  enumeration loop binds its table itself.
- :func:`mask_secrets`: a log line or message with credentials removed: the values of
  ``catalog.<prop>=`` / ``checkpoint.<prop>=`` options (as ``SourceOptions`` shows only
  their keys), passwords in URLs (``scheme://user:***@``) and values of keys that name a
  secret (``secret``, ``password``, ``token``, ``credential``, ``access-key``).
"""

from __future__ import annotations

import contextlib
import contextvars
import re
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

_EMPTY: Mapping[str, Any] = MappingProxyType({})
_context: contextvars.ContextVar[Mapping[str, Any]] = contextvars.ContextVar(
    "icefloe_log_context", default=_EMPTY)

CONTEXT_FIELDS = ("table", "snapshot", "split", "error_type")
"""The structured fields a record may carry (``extra=`` or :func:`bind`)."""


@contextlib.contextmanager
def bind(**fields: Any) -> Iterator[None]:
    """Add ``fields`` (None values dropped) to this thread's log context for the block."""
    token = _context.set({**_context.get(),
                          **{k: v for k, v in fields.items() if v is not None}})
    try:
        yield
    finally:
        _context.reset(token)


def context() -> Mapping[str, Any]:
    """The fields bound in this thread (see :func:`bind`)."""
    return _context.get()


_PROPERTY_VALUE = re.compile(r"\b((?:catalog|checkpoint)\.[^\s=]+)=\S+")
_URL_PASSWORD = re.compile(r"\b([a-zA-Z][\w+.-]*://[^/\s:@]+):[^/\s@]+@")
_SECRET_VALUE = re.compile(
    r"""(['"]?[\w.-]*(?:secret|password|passwd|token|credential|access-key|"""
    r"""access_key|session-key)[\w.-]*['"]?\s*[=:]\s*)(['"]?)[^\s,'"}\]]+""",
    re.IGNORECASE)


_SECRET_NAME = re.compile(
    r"secret|password|passwd|token|credential|access-key|access_key|session-key",
    re.IGNORECASE)


def secret_keys(options: Mapping[str, Any]) -> list[str]:
    """The keys of ``options`` that name a credential (the names :func:`mask_secrets`
    masks the values of: ``catalog.credential``, ``catalog.s3.secret-access-key``,
    ``catalog.token``...), sorted; only keys with a value."""
    return sorted(k for k, v in options.items() if v is not None and _SECRET_NAME.search(k))


def mask_secrets(text: str) -> str:
    """``text`` with credentials replaced by ``***`` (module docstring)."""
    text = _PROPERTY_VALUE.sub(r"\1=***", text)
    text = _URL_PASSWORD.sub(r"\1:***@", text)
    return _SECRET_VALUE.sub(r"\1\2***", text)
