"""Retrying transient faults with capped exponential backoff.

Used at exactly two places: the local engine re-reads a split whose read failed
transiently from the last consumed record offset (never re-delivering or skipping
rows), and the local stream's enumeration loop retries catalog refreshes and
planning (manifest reads). Everything else fails fast.

Transient (worth retrying): ``OSError`` (which includes ``ConnectionError`` and
``TimeoutError``) except the ones that do not heal by waiting (see
:func:`is_permanent_os_error`: file missing, permission denied, is-a-directory, and the
same faults as object stores report them); icefloe's :class:`CatalogError` except
:class:`CatalogAuthError`, :class:`TableNotFoundError`, :class:`RefNotFoundError` and
one caused by a permanent ``OSError`` (a SQL catalog's metadata file access-denied);
a :class:`DataFileError` or :class:`CheckpointError` whose cause chain holds a transient
``OSError``. Everything else (corrupt data, policy failures, lineage errors, bugs) is
permanent.

Object stores. PyArrow's S3 filesystem raises a plain ``OSError`` whose message carries
the AWS error name (``AWS Error ACCESS_DENIED during HeadObject operation``,
``AWS Error NETWORK_CONNECTION ...``, ``AWS Error SLOW_DOWN ...``); it translates only a
missing key into ``FileNotFoundError``. Those names are classified here: access denied,
bad or unknown keys, bad signatures, no such bucket / key are permanent; network
errors, timeouts, throttling (503 SlowDown) and server errors stay transient. PyArrow's
AWS SDK has already retried a throttled or failed request a few times (its standard
retry strategy) before icefloe sees it.

After ``max_attempts`` attempts the last error is raised unchanged, so the caller
sees the same typed error it would have seen without retrying.

Observing: :func:`call_with_retry` reports every failed attempt to the
:data:`RetryListener` installed for the calling context by :func:`observe_retries`
(a stream's metrics count retries and errors by kind that way, including those of
calls made deep inside the enumerator); without one, nothing is reported.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from icefloe.errors import (
    CatalogAuthError,
    CatalogError,
    CheckpointError,
    DataFileError,
    RefNotFoundError,
    TableNotFoundError,
)

if TYPE_CHECKING:
    from icefloe.options import SourceOptions

log = logging.getLogger(__name__)
T = TypeVar("T")

_PERMANENT_OS_ERRORS = (FileNotFoundError, PermissionError, IsADirectoryError,
                        NotADirectoryError)
_PERMANENT_CATALOG_ERRORS = (CatalogAuthError, TableNotFoundError, RefNotFoundError)

PERMANENT_STORE_ERRORS = (
    # AWS SDK error names as PyArrow prints them (``AWS Error <NAME> during ...``)
    "ACCESS_DENIED", "INVALID_ACCESS_KEY_ID", "SIGNATURE_DOES_NOT_MATCH",
    "INVALID_CLIENT_TOKEN_ID", "UNRECOGNIZED_CLIENT", "MISSING_AUTHENTICATION_TOKEN",
    "NO_SUCH_BUCKET", "NO_SUCH_KEY", "NO_SUCH_UPLOAD", "RESOURCE_NOT_FOUND",
    "INVALID_SIGNATURE", "EXPIRED_TOKEN", "INVALID_BUCKET_NAME",
    # older PyArrow prints the AWS SDK's CoreErrors number: 3 INVALID_CLIENT_TOKEN_ID,
    # 15 ACCESS_DENIED, 16 RESOURCE_NOT_FOUND, 17 UNRECOGNIZED_CLIENT,
    # 22 SIGNATURE_DOES_NOT_MATCH, 23 INVALID_ACCESS_KEY_ID
    "AWS Error [code 3]", "AWS Error [code 15]", "AWS Error [code 16]",
    "AWS Error [code 17]", "AWS Error [code 22]", "AWS Error [code 23]",
    # S3 error codes as other clients print them
    "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "NoSuchBucket",
    "NoSuchKey", "Path does not exist",
)
"""Markers of an object-store error that waiting does not heal (matched in the message)."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently to retry a transient fault.

    Attributes:
        max_attempts: total attempts including the first (1 = never retry).
        backoff_ms: wait before the second attempt; doubled before each later one.
        max_backoff_ms: cap of a single wait.
    """

    max_attempts: int = 4
    backoff_ms: int = 200
    max_backoff_ms: int = 10_000

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        if self.backoff_ms < 0 or self.max_backoff_ms < 0:
            raise ValueError("backoff_ms and max_backoff_ms must be >= 0")

    @classmethod
    def from_options(cls, options: SourceOptions) -> RetryPolicy:
        """The policy of the ``maxAttempts`` / ``retryBackoffMs`` options."""
        return cls(max_attempts=options.max_attempts, backoff_ms=options.retry_backoff_ms,
                   max_backoff_ms=max(options.retry_backoff_ms, 10_000))

    def delay_s(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        return min(self.backoff_ms * 2 ** (attempt - 1), self.max_backoff_ms) / 1000


NO_RETRY = RetryPolicy(max_attempts=1, backoff_ms=0)

RetryListener = Callable[[BaseException, bool], None]
"""Called with ``(error, retrying)`` after each failed attempt of
:func:`call_with_retry`: ``retrying`` is False on the attempt that raises."""

_listener: contextvars.ContextVar[RetryListener | None] = contextvars.ContextVar(
    "icefloe_retry_listener", default=None)


@contextlib.contextmanager
def observe_retries(listener: RetryListener) -> Iterator[None]:
    """Report the failed attempts of :func:`call_with_retry` made in this context (this
    thread, while the block runs) to ``listener``. The listener must be cheap and must
    not raise."""
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)


def is_permanent_os_error(exc: OSError) -> bool:
    """Whether an ``OSError`` reports a fault waiting does not heal.

    Local: file missing, permission denied, is / is not a directory. Object stores
    (module docstring): access denied, unknown or bad credentials, no such bucket or key.
    """
    if isinstance(exc, _PERMANENT_OS_ERRORS):
        return True
    text = str(exc)
    return any(marker in text for marker in PERMANENT_STORE_ERRORS)


def _os_cause(exc: BaseException) -> OSError | None:
    """The first ``OSError`` in ``exc``'s cause chain (a bounded walk), or None."""
    cause = exc.__cause__
    seen = 0
    while cause is not None and seen < 8:
        if isinstance(cause, OSError):
            return cause
        cause, seen = cause.__cause__, seen + 1
    return None


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` may go away by itself (see the module docstring for the rule)."""
    if isinstance(exc, _PERMANENT_CATALOG_ERRORS):
        return False
    if isinstance(exc, OSError):
        return not is_permanent_os_error(exc)
    if isinstance(exc, CatalogError):
        cause = _os_cause(exc)
        return cause is None or not is_permanent_os_error(cause)
    if isinstance(exc, DataFileError | CheckpointError):
        cause = _os_cause(exc)
        return cause is not None and not is_permanent_os_error(cause)
    return False


def call_with_retry(fn: Callable[[], T], policy: RetryPolicy, what: str,
                    sleep: Callable[[float], object] = time.sleep) -> T:
    """Call ``fn`` until it succeeds, retrying transient errors per ``policy``.

    Args:
        fn: the call; it must be safe to repeat (idempotent or restartable).
        policy: attempts and backoff.
        what: what the call does, for log lines ("refresh table db.events").
        sleep: the waiting function (tests pass a fake clock).

    Returns:
        ``fn()``'s result.

    Raises:
        The first permanent error at once, or the last transient error after
        ``policy.max_attempts`` attempts (unchanged, with its type).
    """
    attempt = 1
    while True:
        try:
            return fn()
        except Exception as exc:
            retrying = is_transient(exc) and attempt < policy.max_attempts
            listener = _listener.get()
            if listener is not None:
                listener(exc, retrying)
            if not retrying:
                if attempt > 1:
                    log.error("%s failed after %d attempts: %s: %s", what, attempt,
                              type(exc).__name__, exc,
                              extra={"error_type": type(exc).__name__})
                raise
            delay = policy.delay_s(attempt)
            log.warning("%s failed (attempt %d of %d), retrying in %.2fs: %s: %s", what,
                        attempt, policy.max_attempts, delay, type(exc).__name__, exc,
                        extra={"error_type": type(exc).__name__})
            sleep(delay)
            attempt += 1
