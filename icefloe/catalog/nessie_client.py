"""A small, read-only client for the Project Nessie REST API v2 (standard library only).

Scope: what icefloe needs to follow an Iceberg table catalogued by Nessie. This module is the
HTTP side (requests, retries, error mapping, the token); the payload values and their parsing
live in :mod:`icefloe.catalog.nessie_model` (re-exported here). It stays one module of about
540 lines because it is one class: every public call goes through the same request path
(retries, ``Retry-After``, the error mapping below, token scrubbing), and splitting that
path from its callers would spread one request across files.

* ``GET {uri}/trees/{name}`` -> ``{"reference": {"type", "name", "hash"}}``
* ``GET {uri}/trees`` -> ``{"references": [...], "hasMore", "token"}``
* ``GET {uri}/trees/{ref}/contents/{key}`` -> ``{"content": {...}, "effectiveReference"}``
* ``GET {uri}/trees/{ref}/history?fetch=ALL&limit-hash=&max-records=&page-token=``
  -> ``{"logEntries": [{"commitMeta", "parentCommitHash", "operations"}], "hasMore", "token"}``

``uri`` is the API v2 base, e.g. ``http://nessie:19120/api/v2``. ``{ref}`` is ``name`` or
``name@hash``. Content keys travel in the path as dot-separated elements, dots inside an
element written as U+001D (the "legacy" representation every Nessie spec version accepts).

Errors follow Nessie's ``NessieError`` JSON (``status``, ``reason``, ``message``,
``errorCode``) and map onto :mod:`icefloe.errors`:

* ``REFERENCE_NOT_FOUND`` (unknown branch/tag, or a hash not on that ref) -> RefNotFoundError
* ``CONTENT_NOT_FOUND`` (no content under the key) -> TableNotFoundError
* HTTP 401 / 403 -> CatalogAuthError (never retried)
* connection errors, timeouts, HTTP 429 / 500 / 502 / 503 / 504 -> retried with exponential
  backoff up to ``max_attempts``, then CatalogError
* any other failure -> CatalogError (4xx are not retried)

The bearer token is sent as ``Authorization: Bearer <token>`` and is never logged, never part
of an exception message and never part of ``repr(client)``.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

# re-exported: the payload values were defined here before nessie_model split them out
from icefloe.catalog.nessie_model import (
    IcebergTableContent,
    LogEntry,
    Operation,
    Reference,
    check_key,
    encode_key,
    format_key,
    parse_iceberg,
    parse_list,
    parse_log_entry,
    parse_ref,
    parse_reference,
)
from icefloe.errors import (
    CatalogAuthError,
    CatalogError,
    InvalidOptionError,
    RefNotFoundError,
    TableNotFoundError,
)

__all__ = [
    "IcebergTableContent",
    "LogEntry",
    "NessieClient",
    "Operation",
    "Reference",
    "encode_key",
    "format_key",
    "parse_ref",
]

log = logging.getLogger(__name__)

#: HTTP statuses worth another attempt (throttling and server-side/transient failures).
RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})
#: Longest sleep honoured from a server's ``Retry-After`` header, in seconds.
MAX_RETRY_AFTER_S = 30.0


class _Secret:
    """Holds the token so that ``vars(client)`` and debuggers show ``'***'``, not the value."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "'***'"


class NessieClient:
    """Read-only Nessie REST API v2 client.

    Args:
        uri: the API v2 base URL, e.g. ``http://nessie:19120/api/v2``.
        token: bearer token, or None for an unauthenticated server.
        timeout_s: socket timeout of each HTTP attempt.
        max_attempts: attempts per request (1 = no retry) for transient failures.
        backoff_s: first retry delay; doubles each further attempt.

    Every method is one or more GET requests; all are idempotent, so retrying is safe.
    ``requests_made`` counts HTTP attempts sent (retries included); it is thread-safe.
    """

    def __init__(
        self,
        uri: str,
        token: str | None = None,
        timeout_s: float = 10.0,
        max_attempts: int = 4,
        backoff_s: float = 0.2,
    ) -> None:
        parsed = urllib.parse.urlsplit(uri) if isinstance(uri, str) else None
        if parsed is None or parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise InvalidOptionError(
                "uri", f"{uri!r} is not an http(s) URL; give e.g. 'http://nessie:19120/api/v2'"
            )
        if parsed.username or parsed.password:
            raise InvalidOptionError(
                "uri", "credentials must not be part of the Nessie uri; pass token= instead"
            )
        if timeout_s <= 0:
            raise InvalidOptionError("timeout_s", f"must be > 0, got {timeout_s!r}")
        if max_attempts < 1:
            raise InvalidOptionError("max_attempts", f"must be >= 1, got {max_attempts!r}")
        if backoff_s < 0:
            raise InvalidOptionError("backoff_s", f"must be >= 0, got {backoff_s!r}")
        self.uri = uri.rstrip("/")
        self._token = _Secret(token) if token else None
        self.timeout_s = float(timeout_s)
        self.max_attempts = int(max_attempts)
        self.backoff_s = float(backoff_s)
        self._lock = threading.Lock()
        self._requests_made = 0
        self._sleep: Callable[[float], None] = time.sleep

    def __repr__(self) -> str:
        auth = "bearer" if self._token is not None else "none"
        return (
            f"NessieClient(uri={self.uri!r}, auth={auth!r}, timeout_s={self.timeout_s}, "
            f"max_attempts={self.max_attempts})"
        )

    @property
    def requests_made(self) -> int:
        """HTTP attempts sent so far by this client (each retry counts)."""
        with self._lock:
            return self._requests_made

    # ------------------------------------------------------------------ public API

    def get_reference(self, name: str) -> Reference:
        """The branch or tag ``name`` and its current head hash.

        ``name@hash`` is accepted: the result then carries that hash, after checking (one more
        request) that the commit is on the reference's history.

        Raises:
            RefNotFoundError: no such branch/tag, or the hash is not on it.
        """
        ref_name, hash_ = parse_ref(name)
        body = self._get(f"/trees/{_quote_ref(ref_name)}", ref=name)
        reference = parse_reference(body.get("reference"), self.uri)
        if hash_ is None:
            return reference
        # Nessie's get-reference rejects hashes: confirm the commit via a one-entry log read.
        self._get(f"/trees/{_quote_ref(ref_name, hash_)}/history", {"max-records": 1}, ref=name)
        return Reference(reference.name, reference.type, hash_)

    def list_references(self) -> list[Reference]:
        """All branches and tags (follows paging)."""
        refs: list[Reference] = []
        token: str | None = None
        while True:
            body = self._get("/trees", {"page-token": token} if token else None)
            refs.extend(parse_reference(r, self.uri)
                        for r in parse_list(body, "references", self.uri))
            token = body.get("token")
            if not body.get("hasMore") or not token:
                return refs

    def get_content(
        self,
        ref: str,
        key: tuple[str, ...],
        hash: str | None = None,
        *,
        missing_ok: bool = False,
    ) -> IcebergTableContent | None:
        """The Iceberg table under ``key`` at ``ref`` (``name`` / ``name@hash``) or ``hash``.

        ``hash`` pins the read to a commit of ``ref`` (same as ``name@hash``; giving both
        with different hashes is an error).

        Returns:
            The content; None only with ``missing_ok=True`` when nothing is under ``key``.

        Raises:
            RefNotFoundError: unknown ref, or the hash is not on it.
            TableNotFoundError: nothing under ``key`` (unless ``missing_ok``), or the content
                there is not an Iceberg table.
        """
        key = check_key(key)
        ref_name, ref_hash = parse_ref(ref)
        if hash is not None:
            _, pinned = parse_ref(f"{ref_name}@{hash}")
            if ref_hash is not None and ref_hash != pinned:
                raise InvalidOptionError(
                    "hash", f"ref {ref!r} already pins another commit than hash={hash!r}"
                )
            ref_hash = pinned
        shown_ref = f"{ref_name}@{ref_hash}" if ref_hash else ref_name
        path = f"/trees/{_quote_ref(ref_name, ref_hash)}/contents/{encode_key(key)}"
        try:
            body = self._get(path, ref=shown_ref, key=key)
        except TableNotFoundError:
            if missing_ok:
                return None
            raise
        content = body.get("content")
        if not isinstance(content, dict):
            raise CatalogError(
                f"Nessie at {self.uri} answered without 'content' for key "
                f"{format_key(key)!r} on ref {shown_ref!r}; is this a Nessie API v2 endpoint?"
            )
        if content.get("type") != "ICEBERG_TABLE":
            raise TableNotFoundError(
                f"{format_key(key)!r} on Nessie ref {shown_ref!r} ({self.uri}) is a "
                f"{content.get('type')}, not an Iceberg table; check the table name"
            )
        return parse_iceberg(content, self.uri)

    def commit_log(
        self,
        ref: str,
        since_hash: str | None = None,
        limit: int | None = None,
        *,
        page_size: int | None = None,
        fetch_operations: bool = True,
    ) -> Iterator[LogEntry]:
        """Commits of ``ref`` (``name`` / ``name@hash``), newest first.

        Starts at the ref's head (or the pinned hash) and walks parents. With ``since_hash``
        the walk stops *before* that commit (exclusive), so the result is what happened after
        it. At most ``limit`` entries are yielded. Pages are fetched lazily (``max-records`` /
        ``page-token``); ``page_size`` is a hint to the server. ``fetch_operations`` asks for
        ``fetch=ALL`` so each entry carries its PUT / DELETE operations.

        Raises:
            RefNotFoundError: unknown ref, or ``since_hash`` / the pinned hash is not on it
                (e.g. the branch was reset past it).
        """
        ref_name, ref_hash = parse_ref(ref)
        if since_hash is not None:
            _, since_hash = parse_ref(f"{ref_name}@{since_hash}")
        if limit is not None and limit < 0:
            raise InvalidOptionError("limit", f"must be >= 0, got {limit!r}")
        if page_size is not None and page_size < 1:
            raise InvalidOptionError("page_size", f"must be >= 1, got {page_size!r}")
        return self._iter_log(
            ref, ref_name, ref_hash, since_hash, limit, page_size, fetch_operations
        )

    def find_rename(
        self,
        ref: str,
        content_id: str,
        since_hash: str,
        *,
        old_key: tuple[str, ...] | None = None,
    ) -> tuple[str, ...] | None:
        """Where the table ``content_id`` was renamed to on ``ref`` after ``since_hash``.

        A rename is a commit holding a DELETE of the old key plus a PUT of a new key whose
        content has the same content id (Nessie spec, "ALTER TABLE RENAME"). Commits are
        replayed oldest to newest, so chained renames (a -> b -> c) end at the last key; a
        later DELETE of that key without a PUT of the same id elsewhere (a drop) cancels it.

        The DELETE must be of ``old_key`` when given (then of the previous new key). Without
        ``old_key``, a candidate DELETE is confirmed by reading the deleted key's content at
        the commit's parent (one extra request per candidate), so an unrelated DROP in the
        same commit as an update of the table is not mistaken for a rename.

        Returns:
            The key of the latest rename still standing at the ref's head, or None.

        Raises:
            RefNotFoundError: unknown ref, or ``since_hash`` is not on it.
        """
        if not content_id:
            raise InvalidOptionError("content_id", "must be a non-empty content id")
        ref_name, _ = parse_ref(ref)
        current = check_key(old_key) if old_key is not None else None
        moved = False
        entries = list(self.commit_log(ref, since_hash=since_hash))
        for entry in reversed(entries):
            deletes = [op.key for op in entry.operations if op.type == "DELETE"]
            puts = [
                op.key
                for op in entry.operations
                if op.type == "PUT"
                and op.content is not None
                and op.content.content_id == content_id
            ]
            new_key = next((k for k in puts if current is None or k != current), None)
            if new_key is not None and deletes:
                if current is not None:
                    renamed = current in deletes
                else:
                    renamed = any(
                        self._held_id(ref_name, entry.parent_hash, d) == content_id
                        for d in deletes
                        if d != new_key
                    )
                if renamed:
                    current, moved = new_key, True
                    continue
            if moved and current in deletes and not puts:
                current, moved = None, False  # renamed, then dropped
        return current if moved else None

    def _held_id(self, ref_name: str, at_hash: str | None, key: tuple[str, ...]) -> str | None:
        """Content id under ``key`` at commit ``at_hash`` of ``ref_name`` (None if absent)."""
        if not at_hash:
            return None
        try:
            content = self.get_content(f"{ref_name}@{at_hash}", key, missing_ok=True)
        except TableNotFoundError:  # not an Iceberg table
            return None
        return content.content_id if content is not None else None

    # ------------------------------------------------------------------ internals

    def _iter_log(
        self,
        ref: str,
        ref_name: str,
        ref_hash: str | None,
        since_hash: str | None,
        limit: int | None,
        page_size: int | None,
        fetch_operations: bool,
    ) -> Iterator[LogEntry]:
        path = f"/trees/{_quote_ref(ref_name, ref_hash)}/history"
        yielded = 0
        token: str | None = None
        while limit is None or yielded < limit:
            query: dict[str, Any] = {}
            if fetch_operations:
                query["fetch"] = "ALL"
            if since_hash is not None:
                query["limit-hash"] = since_hash
            hint = page_size
            if limit is not None:
                # +1: the server returns the limit-hash commit itself, which we drop.
                wanted = limit - yielded + (1 if since_hash else 0)
                hint = min(hint, wanted) if hint is not None else wanted
            if hint is not None:
                query["max-records"] = hint
            if token is not None:
                query["page-token"] = token
            body = self._get(path, query, ref=ref)
            for raw in parse_list(body, "logEntries", self.uri):
                entry = parse_log_entry(raw, self.uri)
                if since_hash is not None and entry.hash == since_hash:
                    return
                yield entry
                yielded += 1
                if limit is not None and yielded >= limit:
                    return
            token = body.get("token")
            if not body.get("hasMore") or not token:
                return

    def _get(
        self,
        path: str,
        query: dict[str, Any] | None = None,
        *,
        ref: str | None = None,
        key: tuple[str, ...] | None = None,
    ) -> dict[str, Any]:
        """GET ``{uri}{path}?query`` as JSON, with retries and error mapping."""
        url = self.uri + path
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        headers = {"Accept": "application/json", "User-Agent": "icefloe-nessie-client"}
        if self._token is not None:
            headers["Authorization"] = "Bearer " + self._token.reveal()
        what = _describe(ref, key)
        last_problem = ""
        for attempt in range(1, self.max_attempts + 1):
            with self._lock:
                self._requests_made += 1
            request = urllib.request.Request(url, headers=headers, method="GET")
            retry_after: float | None = None
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    raw = response.read()
                return self._decode(raw, url, what)
            except urllib.error.HTTPError as err:
                with err:
                    status = err.code
                    payload = _error_payload(err)
                    retry_after = _retry_after(
                        err.headers.get("Retry-After") if err.headers else None
                    )
                if status not in RETRYABLE_STATUSES:
                    raise self._http_error(status, payload, url, ref, key) from None
                last_problem = f"HTTP {status}{self._server_says(payload)}"
            except (urllib.error.URLError, http.client.HTTPException, OSError) as err:
                reason = err.reason if isinstance(err, urllib.error.URLError) else err
                last_problem = f"{type(reason).__name__}: {self._scrub(str(reason))}"
            if attempt < self.max_attempts:
                delay = self.backoff_s * (2 ** (attempt - 1))
                if retry_after is not None:
                    delay = max(delay, min(retry_after, MAX_RETRY_AFTER_S))
                log.debug(
                    "Nessie GET %s failed (%s), attempt %d/%d; retrying in %.3fs",
                    url, last_problem, attempt, self.max_attempts, delay,
                )  # fmt: skip
                self._sleep(delay)
        raise CatalogError(
            f"Nessie at {self.uri} did not answer GET {url}{what} after {self.max_attempts} "
            f"attempts (last: {last_problem}); check that the server is up and the uri points "
            f"at its /api/v2 endpoint, or raise max_attempts / timeout_s"
        )

    def _decode(self, raw: bytes, url: str, what: str) -> dict[str, Any]:
        try:
            body = json.loads(raw.decode("utf-8")) if raw else {}
        except (UnicodeDecodeError, json.JSONDecodeError):
            body = None
        if not isinstance(body, dict):
            raise CatalogError(
                f"Nessie at {self.uri} sent a non-JSON-object answer to GET {url}{what}; "
                f"check that the uri is a Nessie REST API v2 endpoint (ends with /api/v2)"
            )
        return body

    def _http_error(
        self,
        status: int,
        payload: dict[str, Any],
        url: str,
        ref: str | None,
        key: tuple[str, ...] | None,
    ) -> CatalogError:
        code = str(payload.get("errorCode") or "")
        says = self._server_says(payload)
        what = _describe(ref, key)
        if status in (401, 403):
            fix = (
                "check the bearer token (it may be missing, expired or invalid)"
                if status == 401
                else "ask for read access to that reference and content"
            )
            return CatalogAuthError(
                f"Nessie at {self.uri} refused the request{what} (HTTP {status}){says}; {fix}"
            )
        if code == "REFERENCE_NOT_FOUND":
            return RefNotFoundError(
                f"Nessie at {self.uri}: reference {ref!r} not found{says}; check the branch/tag "
                f"name, and that a pinned hash is still on that branch (it may have been reset)"
            )
        if code == "CONTENT_NOT_FOUND":
            shown = format_key(key) if key else "?"
            return TableNotFoundError(
                f"Nessie at {self.uri}: no table {shown!r} on ref {ref!r}{says}; check the table "
                f"name and the ref (it may have been dropped or renamed)"
            )
        if status == 404:
            return CatalogError(
                f"Nessie at {self.uri} answered 404 to GET {url}{says}; check that the uri "
                f"points at the Nessie REST API v2 base (ends with /api/v2)"
            )
        return CatalogError(
            f"Nessie at {self.uri} rejected GET {url}{what} (HTTP {status}"
            f"{', ' + code if code else ''}){says}; this is not retried: fix the request"
        )

    def _server_says(self, payload: dict[str, Any]) -> str:
        message = payload.get("message") or payload.get("reason")
        if not message:
            return ""
        text = self._scrub(str(message))
        return f": {text[:500]}"

    def _scrub(self, text: str) -> str:
        """Remove the token from text that came from elsewhere (server messages, reasons)."""
        if self._token is not None and self._token.reveal() in text:
            return text.replace(self._token.reveal(), "***")
        return text


# ---------------------------------------------------------------------- helpers


def _quote_ref(name: str, hash_: str | None = None) -> str:
    spec = f"{name}@{hash_}" if hash_ else name
    return urllib.parse.quote(spec, safe="@/")


def _describe(ref: str | None, key: tuple[str, ...] | None) -> str:
    parts = []
    if key:
        parts.append(f"key {format_key(key)!r}")
    if ref:
        parts.append(f"ref {ref!r}")
    return f" ({', '.join(parts)})" if parts else ""


def _error_payload(err: urllib.error.HTTPError) -> dict[str, Any]:
    try:
        raw = err.read()
        body = json.loads(raw.decode("utf-8")) if raw else {}
    except (OSError, ValueError, http.client.HTTPException):
        return {}
    return body if isinstance(body, dict) else {}


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if seconds >= 0 else None
