"""How the ``icefloe`` command reports a failure: one line on stderr and an exit status.

Runs in the user's process. icefloe's own errors keep their type and message, even when
Spark (an ``AnalysisException`` or a Py4J error carrying a Python worker's traceback) or
Ray (a ``RayTaskError``) wraps them; only ``-v`` shows a traceback.

Exit statuses (the README's table):

====  ==========================================================================
 0    success
 1    the command ran but its check failed (``icefloe demo``: counts differ)
 2    usage: a bad argument or option (``InvalidOptionError``)
 3    catalog: cannot open it, no such table / branch / tag (``CatalogError``)
 4    snapshot or lineage: no such snapshot, a policy refusal, a broken lineage
 5    checkpoint: missing, corrupt, of another table, not writable
 6    data: a split or data file cannot be read (``SplitError``)
 7    engine: Spark or Ray could not do its part (``EngineError``)
 8    output: ``--to`` or a sink target exists or cannot be written (``OutputError``)
 70   internal: an unexpected error (a bug: run with ``-v`` and report the traceback)
 130  interrupted (Ctrl-C / SIGTERM); a stream has written its final checkpoint
====  ==========================================================================
"""

from __future__ import annotations

import re

from icefloe import errors

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_CATALOG = 3
EXIT_SNAPSHOT = 4
EXIT_CHECKPOINT = 5
EXIT_DATA = 6
EXIT_ENGINE = 7
EXIT_OUTPUT = 8
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130

_CODES: dict[type[errors.IcefloeError], int] = {
    errors.InvalidOptionError: EXIT_USAGE,
    errors.CatalogError: EXIT_CATALOG,
    errors.SnapshotError: EXIT_SNAPSHOT,
    errors.LineageError: EXIT_SNAPSHOT,
    errors.CheckpointError: EXIT_CHECKPOINT,
    errors.SplitError: EXIT_DATA,
    errors.EngineError: EXIT_ENGINE,
    errors.OutputError: EXIT_OUTPUT,
    errors.StreamClosedError: EXIT_ENGINE,
    errors.UnknownSplitError: EXIT_ENGINE,
}
_ENGINE_MODULES = ("pyspark", "py4j", "ray")
_NAMES = {name: getattr(errors, name) for name in errors.__all__}
_WRAPPED = re.compile(r"(?:icefloe\.errors\.)?\b(" + "|".join(sorted(_NAMES, key=len, reverse=True))
                      + r"): (.+)")


def exit_code(kind: type[BaseException]) -> int:
    """The exit status of an icefloe error class (by its nearest listed ancestor)."""
    for klass in kind.__mro__:
        if klass in _CODES:
            return _CODES[klass]
    return EXIT_INTERNAL


def describe(exc: BaseException) -> tuple[str, int] | None:
    """``(one line, exit status)`` for an icefloe error, wrapped or not; None otherwise."""
    cause = getattr(exc, "cause", None)  # Ray's RayTaskError keeps the original here
    if isinstance(cause, errors.IcefloeError):
        exc = cause
    if isinstance(exc, errors.IcefloeError) and not _is_wrapper(exc):
        return f"{type(exc).__name__}: {_first_line(str(exc))}", exit_code(type(exc))
    found = _find_wrapped(exc)
    if found is not None:
        name, message = found
        return f"{name}: {message}", exit_code(_NAMES[name])
    if type(exc).__module__.split(".")[0] in _ENGINE_MODULES:  # Spark / Ray failed itself
        return (f"EngineError: {type(exc).__name__}: {_clean(str(exc))} (run with -v for "
                "the engine's output)"), EXIT_ENGINE
    return None


def _is_wrapper(exc: BaseException) -> bool:
    return type(exc).__module__.startswith("ray.")


def _find_wrapped(exc: BaseException) -> tuple[str, str] | None:
    """An icefloe error named in the text of ``exc`` or its causes (Spark, Py4J, Ray)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = str(current)
        matches = list(_WRAPPED.finditer(text))
        if matches:
            last = matches[-1]  # the innermost raise in a worker traceback comes last
            return last.group(1), _clean(last.group(2))
        current = current.__cause__ or current.__context__
    return None


def _clean(message: str) -> str:
    line = _first_line(message)
    # Spark appends its own context after the Python message: drop it
    for marker in (" SQLSTATE:", "\tat ", " JVM stacktrace:"):
        line = line.split(marker)[0]
    return line.strip().rstrip(".")


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return text.strip()
