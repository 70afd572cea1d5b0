"""The CLI's log output: ``--log-format text`` (the default) or ``json``.

Runs in the user's process. Levels are the same in both formats (errors only by
default, ``-v`` info, ``-vv`` debug); only the shape of a line changes. With ``json`` every
line the command writes to stderr is one JSON object:

- log records: ``time`` (ISO 8601, UTC, milliseconds), ``level``, ``logger``,
  ``message`` and, where known, ``table``, ``snapshot``, ``split`` and ``error_type``
  (from the record's ``extra=``, the thread's :func:`icefloe.logs.bind` context, or the
  exception logged), plus ``traceback`` when one is logged (``-v``);
- the stream's status lines (:func:`emit_status`, logger ``icefloe.cli.status``, level
  ``INFO``, always written as today), with the figures as fields;
- the final error (:func:`emit_error`, level ``ERROR``, with ``error_type`` and
  ``exit_code``).

No secrets: every message and traceback goes through :func:`icefloe.logs.mask_secrets`,
in both formats (the promise the usage errors already keep).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
from typing import Any

from icefloe.logs import CONTEXT_FIELDS, context, mask_secrets

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_json = False


class MaskingFormatter(logging.Formatter):
    """The text format, with secrets masked."""

    def format(self, record: logging.LogRecord) -> str:
        return mask_secrets(super().format(record))


class JsonFormatter(logging.Formatter):
    """One JSON object per record (module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC)
            .isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": mask_secrets(record.getMessage()),
        }
        bound = context()
        for key in CONTEXT_FIELDS:
            value = getattr(record, key, None)
            if value is None:
                value = bound.get(key)
            if value is not None:
                out[key] = value if isinstance(value, int | float | bool) else str(value)
        if record.exc_info and record.exc_info[0] is not None:
            out.setdefault("error_type", record.exc_info[0].__name__)
            out["traceback"] = mask_secrets(self.formatException(record.exc_info))
        return json.dumps(out, default=str)


def set_format(fmt: str) -> None:
    """Write the command's own stderr lines in ``fmt`` (``text`` / ``json``)."""
    global _json
    _json = fmt == "json"


def configure(level: int, fmt: str) -> None:
    """Send log records of ``level`` and above to stderr in ``fmt`` (``text``/``json``);
    like ``logging.basicConfig``, a no-op for the records when the root logger already
    has handlers (an embedding application's, a test runner's)."""
    set_format(fmt)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if _json else MaskingFormatter(TEXT_FORMAT))
    logging.basicConfig(level=level, handlers=[handler])


def json_mode() -> bool:
    """True when ``--log-format json`` was given."""
    return _json


def _emit(level: str, logger: str, message: str, **fields: Any) -> None:
    out = {"time": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")
           .replace("+00:00", "Z"), "level": level, "logger": logger,
           "message": mask_secrets(message), **fields}
    print(json.dumps(out, default=str), file=sys.stderr, flush=True)


def emit_status(line: str, info: dict[str, Any]) -> None:
    """A stream's status line: as is, or one JSON object with ``info``'s figures."""
    if not _json:
        print(line, file=sys.stderr, flush=True)
        return
    _emit("INFO", "icefloe.cli.status", line.removeprefix("# "), **info)


def emit_note(line: str, **fields: Any) -> None:
    """A ``# ...`` note of a command (where the checkpoint stands, where metrics are)."""
    if not _json:
        print(line, file=sys.stderr, flush=True)
        return
    _emit("INFO", "icefloe.cli", line.removeprefix("# "), **fields)


def emit_error(line: str, exit_code: int) -> None:
    """The command's failure: ``error: <line>``, or one JSON object."""
    if not _json:
        print(f"error: {line}", file=sys.stderr)
        return
    error_type = line.split(":", 1)[0] if ":" in line else None
    _emit("ERROR", "icefloe.cli", line, error_type=error_type, exit_code=exit_code)
