"""FakeNessieServer: an in-process HTTP TEST DOUBLE of a Nessie server. It is not Nessie.

It follows the shapes of the Nessie REST API v2 for the read endpoints icefloe uses, as
given by Nessie's OpenAPI examples (``api/model/src/main/resources/META-INF/openapi.yaml``),
``HttpTreeApi`` (paths, ``max-records`` / ``page-token`` / ``limit-hash`` / ``fetch``
parameters), ``NessieError`` / ``ErrorCode`` (error JSON) and ``TreeApiImpl.getCommitLog``
(newest first, first-parent walk, ``limit-hash`` inclusive, ``token`` = where the next page
starts):

* ``GET /api/v2/config``
* ``GET /api/v2/trees`` -> ``{"references": [...], "hasMore", "token"}``
* ``GET /api/v2/trees/{name}`` -> ``{"reference": {"type", "name", "hash"}}``
  (400 if ``name`` carries ``@hash``, as Nessie spec 2.1.1 says)
* ``GET /api/v2/trees/{ref}/contents/{key}`` -> ``{"content": {...}, "effectiveReference"}``
* ``GET /api/v2/trees/{ref}/history`` -> ``{"logEntries": [...], "hasMore", "token"}``

``{ref}`` is ``name``, ``name@hash``, ``@hash`` (detached) or ``-`` (default branch); a hash
on a named ref must be on that ref's history, else 404 ``REFERENCE_NOT_FOUND`` ("Could not
find commit ... in reference ..."). ``{key}`` accepts Nessie's legacy (U+001D) and escaping
(``*.``) representations. Errors are ``{"status", "reason", "message", "errorCode",
"serverStackTrace"}``; a 401 has an empty body and ``WWW-Authenticate: Bearer``.

Differences from Nessie, on purpose: no write endpoints over HTTP (tests mutate through the
Python API below), no namespace validation, no CEL filters, no ``POST`` variants, no
abbreviated hashes, paging tokens are plain commit hashes.

Test-side API: :meth:`create_branch`, :meth:`create_tag`, :meth:`commit` with :class:`Put` /
:class:`Delete`, :meth:`assign`, :meth:`merge`, :meth:`put_table` (a PyIceberg table),
:meth:`set_token`, :meth:`fail_next`, :meth:`drop_next`, :meth:`delay_next`, and the
``requests`` log of ``(method, path)``.
"""

from __future__ import annotations

import hashlib
import http
import json
import re
import threading
import time
import urllib.parse
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyiceberg.table import Table

__all__ = ["NO_ANCESTOR_HASH", "Delete", "FakeNessieServer", "Put"]

#: Nessie's "beginning of time" commit hash (``noAncestorHash`` in ``GET /config``).
NO_ANCESTOR_HASH = "2e1cfa82b035c26cbbbdae632cea070514eb8b773f616aaeaf668e2f0be8f10d"
DEFAULT_BRANCH = "main"
API_PREFIX = "/api/v2"

Key = tuple[str, ...]


def _key(key: Iterable[str] | str) -> Key:
    """A content key from a tuple/list of elements or a dotted string ("db.table")."""
    elements = tuple(key.split(".")) if isinstance(key, str) else tuple(key)
    if not elements or not all(isinstance(e, str) and e for e in elements):
        raise ValueError(f"bad content key {key!r}")
    return elements


@dataclass(frozen=True)
class Put:
    """Put an Iceberg table under ``key``; ``content_id=None`` means a new content (uuid4)."""

    key: Iterable[str] | str
    metadata_location: str
    content_id: str | None = None
    snapshot_id: int = -1
    schema_id: int = 0
    spec_id: int = 0
    sort_order_id: int = 0


@dataclass(frozen=True)
class Delete:
    """Remove whatever is under ``key`` (it must exist)."""

    key: Iterable[str] | str


@dataclass
class _Commit:
    hash: str
    parents: tuple[str, ...]  # first parent, then merge parent(s)
    message: str
    author: str
    commit_time: str
    operations: list[dict[str, Any]]
    tree: dict[Key, dict[str, Any]]


class _NessieError(Exception):
    def __init__(self, status: int, error_code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message


def _iso(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _key_json(key: Key) -> dict[str, Any]:
    return {"elements": list(key)}


def _decode_key(segment: str) -> Key:
    """Decode a content key path segment (already percent-decoded)."""
    if segment.startswith("."):  # escaping representation (Nessie spec 2.2.0)
        elements: list[str] = []
        current: list[str] = []
        escapes = {".": ".", "*": "*", "{": "/", "}": "\\", "[": "%"}
        i = 1
        while i < len(segment):
            ch = segment[i]
            if ch == "*" and i + 1 < len(segment) and segment[i + 1] in escapes:
                current.append(escapes[segment[i + 1]])
                i += 2
                continue
            if ch == ".":
                elements.append("".join(current))
                current = []
            else:
                current.append(ch)
            i += 1
        elements.append("".join(current))
        return tuple(elements)
    return tuple(e.replace("\u001d", ".") for e in segment.split("."))


def _format_key(key: Key) -> str:
    return ".".join(key)


class FakeNessieServer:
    """In-memory Nessie-like version store served over HTTP on 127.0.0.1 (ephemeral port).

    Starts serving on construction; use as a context manager (or call :meth:`close`).
    ``uri`` is the API v2 base to hand to a client. All methods are thread-safe.
    """

    def __init__(self, page_size: int = 100) -> None:
        #: Largest page the server returns (log and references), whatever max-records says.
        self.page_size = page_size
        #: Every HTTP request received, as (method, percent-decoded path without query).
        self.requests: list[tuple[str, str]] = []
        #: Query parameters of each request in ``requests`` (same index).
        self.queries: list[dict[str, str]] = []
        self._lock = threading.RLock()
        self._seq = 0
        self._token: str | None = None
        self._failures: list[tuple[int, float | None]] = []
        self._drops = 0
        self._delays: list[float] = []
        root = _Commit(NO_ANCESTOR_HASH, (), "", "", _iso(datetime.now(UTC)), [], {})
        self._commits: dict[str, _Commit] = {NO_ANCESTOR_HASH: root}
        self._branches: dict[str, str] = {DEFAULT_BRANCH: NO_ANCESTOR_HASH}
        self._tags: dict[str, str] = {}
        self._created = root.commit_time

        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.fake = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-nessie",
            daemon=True,
        )
        self._thread.start()
        self._closed = False

    # ----------------------------------------------------------------- lifecycle

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def uri(self) -> str:
        """``http://127.0.0.1:PORT/api/v2``."""
        return f"http://127.0.0.1:{self.port}{API_PREFIX}"

    def close(self) -> None:
        """Stop serving and close the listening socket (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeNessieServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FakeNessieServer(uri={self.uri!r})"

    # ----------------------------------------------------------------- test controls

    def set_token(self, token: str | None) -> None:
        """Require ``Authorization: Bearer <token>`` on every request (None: no auth)."""
        with self._lock:
            self._token = token

    def fail_next(self, n: int = 1, status: int = 503, retry_after: float | None = None) -> None:
        """Answer the next ``n`` requests with HTTP ``status`` and a NessieError body."""
        with self._lock:
            self._failures.extend([(status, retry_after)] * n)

    def drop_next(self, n: int = 1) -> None:
        """Close the connection of the next ``n`` requests without any answer."""
        with self._lock:
            self._drops += n

    def delay_next(self, n: int, seconds: float) -> None:
        """Sleep ``seconds`` before answering each of the next ``n`` requests."""
        with self._lock:
            self._delays.extend([seconds] * n)

    def request_count(self, path_suffix: str | None = None, method: str = "GET") -> int:
        """Requests received with ``method`` whose path ends with ``path_suffix`` (if given)."""
        with self._lock:
            return sum(
                1
                for m, p in self.requests
                if m == method and (path_suffix is None or p.endswith(path_suffix))
            )

    def reset_requests(self) -> None:
        with self._lock:
            self.requests.clear()
            self.queries.clear()

    # ----------------------------------------------------------------- version store API

    def head(self, ref: str) -> str:
        """Commit hash ``ref`` (branch, tag, ``name@hash`` or a bare hash) resolves to."""
        with self._lock:
            return self._resolve_for_test(ref)

    def content(self, ref: str, key: Iterable[str] | str) -> dict[str, Any] | None:
        """The content JSON under ``key`` at ``ref``, or None."""
        with self._lock:
            found = self._commits[self._resolve_for_test(ref)].tree.get(_key(key))
            return dict(found) if found is not None else None

    def create_branch(self, name: str, from_ref: str = DEFAULT_BRANCH) -> str:
        """Create branch ``name`` at ``from_ref``'s commit; returns that hash."""
        with self._lock:
            self._check_new_name(name)
            self._branches[name] = self._resolve_for_test(from_ref)
            return self._branches[name]

    def create_tag(self, name: str, ref: str) -> str:
        """Create tag ``name`` at ``ref``'s commit; returns that hash."""
        with self._lock:
            self._check_new_name(name)
            self._tags[name] = self._resolve_for_test(ref)
            return self._tags[name]

    def delete_ref(self, name: str) -> None:
        """Delete a branch or tag."""
        with self._lock:
            if self._branches.pop(name, None) is None and self._tags.pop(name, None) is None:
                raise KeyError(f"no reference {name!r}")

    def assign(self, ref: str, hash: str) -> None:
        """Point branch/tag ``ref`` at commit ``hash`` (any existing commit, e.g. a reset)."""
        with self._lock:
            if hash not in self._commits:
                raise KeyError(f"no commit {hash!r}")
            if ref in self._branches:
                self._branches[ref] = hash
            elif ref in self._tags:
                self._tags[ref] = hash
            else:
                raise KeyError(f"no reference {ref!r}")

    def commit(
        self,
        branch: str,
        operations: list[Put | Delete],
        message: str = "commit",
        author: str = "fake-nessie",
    ) -> str:
        """Commit ``operations`` on top of ``branch``'s head; returns the new commit hash.

        Each key may appear once. A Delete needs an existing key. A Put without
        ``content_id`` creates new content (a fresh uuid4), even over an existing key.
        """
        with self._lock:
            head = self._branch_head(branch)
            tree = dict(self._commits[head].tree)
            ops_json: list[dict[str, Any]] = []
            seen: set[Key] = set()
            for op in operations:
                key = _key(op.key)
                if key in seen:
                    raise ValueError(f"key {_format_key(key)!r} occurs twice in one commit")
                seen.add(key)
                if isinstance(op, Put):
                    content = {
                        "type": "ICEBERG_TABLE",
                        "id": op.content_id or str(uuid.uuid4()),
                        "metadataLocation": op.metadata_location,
                        "snapshotId": op.snapshot_id,
                        "schemaId": op.schema_id,
                        "specId": op.spec_id,
                        "sortOrderId": op.sort_order_id,
                    }
                    tree[key] = content
                    ops_json.append({"type": "PUT", "key": _key_json(key), "content": content})
                elif isinstance(op, Delete):
                    if key not in tree:
                        raise ValueError(f"cannot delete {_format_key(key)!r}: not on {branch}")
                    del tree[key]
                    ops_json.append({"type": "DELETE", "key": _key_json(key)})
                else:
                    raise TypeError(f"not an operation: {op!r}")
            return self._add_commit(branch, (head,), message, author, ops_json, tree)

    def merge(self, from_branch: str, into_branch: str, message: str | None = None) -> str:
        """Merge ``from_branch`` into ``into_branch``: one new commit on the target carrying
        what the source changed since their common ancestor (PUT / DELETE operations), with
        the source head as second parent. Returns the target's new head (unchanged if there
        is nothing to merge). Raises ValueError when both sides changed a key differently.
        """
        with self._lock:
            source = self._resolve_for_test(from_branch)
            target = self._branch_head(into_branch)
            base = self._merge_base(target, source)
            base_tree = self._commits[base].tree
            source_tree = self._commits[source].tree
            tree = dict(self._commits[target].tree)
            ops_json: list[dict[str, Any]] = []
            for key in sorted(set(base_tree) | set(source_tree)):
                before, after = base_tree.get(key), source_tree.get(key)
                if before == after:
                    continue
                if tree.get(key) not in (before, after):
                    raise ValueError(
                        f"merge conflict on {_format_key(key)!r}: changed on both "
                        f"{from_branch!r} and {into_branch!r}"
                    )
                if after is None:
                    tree.pop(key, None)
                    ops_json.append({"type": "DELETE", "key": _key_json(key)})
                else:
                    tree[key] = after
                    ops_json.append({"type": "PUT", "key": _key_json(key), "content": after})
            if not ops_json:
                return target
            text = message or f"Merged {from_branch} at {source} into {into_branch} at {target}"
            return self._add_commit(
                into_branch, (target, source), text, "fake-nessie", ops_json, tree
            )

    def put_table(
        self,
        branch: str,
        key: Iterable[str] | str,
        table: Table,
        message: str | None = None,
    ) -> str:
        """Put a PyIceberg ``table``'s current state under ``key`` on ``branch``.

        Uses ``table.metadata_location`` and the metadata's current snapshot id (-1 if none),
        current schema id, default spec id and default sort order id. Reuses the content id
        already under ``key`` on ``branch`` (an update), else creates a new one.
        """
        meta = table.metadata
        snapshot_id = meta.current_snapshot_id
        with self._lock:
            existing = self._commits[self._branch_head(branch)].tree.get(_key(key))
            put = Put(
                key=key,
                metadata_location=table.metadata_location,
                content_id=existing["id"] if existing else None,
                snapshot_id=snapshot_id if snapshot_id is not None else -1,
                schema_id=meta.current_schema_id,
                spec_id=meta.default_spec_id,
                sort_order_id=meta.default_sort_order_id,
            )
            text = message or f"put {_format_key(_key(key))} snapshot {put.snapshot_id}"
            return self.commit(branch, [put], text)

    # ----------------------------------------------------------------- store internals

    def _check_new_name(self, name: str) -> None:
        if not name or "@" in name:
            raise ValueError(f"bad reference name {name!r}")
        if name in self._branches or name in self._tags:
            raise ValueError(f"reference {name!r} already exists")

    def _branch_head(self, branch: str) -> str:
        if branch not in self._branches:
            raise KeyError(f"no branch {branch!r}")
        return self._branches[branch]

    def _add_commit(
        self,
        branch: str,
        parents: tuple[str, ...],
        message: str,
        author: str,
        operations: list[dict[str, Any]],
        tree: dict[Key, dict[str, Any]],
    ) -> str:
        self._seq += 1
        when = _iso(datetime.now(UTC))
        payload = json.dumps(
            [self._seq, list(parents), message, author, when, operations], sort_keys=True
        )
        hash_ = hashlib.sha256(payload.encode()).hexdigest()
        self._commits[hash_] = _Commit(hash_, parents, message, author, when, operations, tree)
        self._branches[branch] = hash_
        return hash_

    def _first_parent_chain(self, start: str) -> Iterator[_Commit]:
        """Commits from ``start`` back along first parents, excluding the no-ancestor root."""
        current: str | None = start
        while current is not None and current != NO_ANCESTOR_HASH:
            commit = self._commits[current]
            yield commit
            current = commit.parents[0] if commit.parents else None

    def _ancestors(self, start: str) -> set[str]:
        """All commits reachable from ``start`` through any parent, plus the root."""
        seen = {NO_ANCESTOR_HASH}
        stack = [start]
        while stack:
            h = stack.pop()
            if h in seen:
                continue
            seen.add(h)
            stack.extend(self._commits[h].parents)
        return seen

    def _merge_base(self, target: str, source: str) -> str:
        target_ancestors = self._ancestors(target)
        queue = [source]
        seen: set[str] = set()
        while queue:
            h = queue.pop(0)
            if h in target_ancestors:
                return h
            if h in seen:
                continue
            seen.add(h)
            queue.extend(self._commits[h].parents)
        return NO_ANCESTOR_HASH

    def _resolve_for_test(self, ref: str) -> str:
        if ref in self._commits:
            return ref
        try:
            return self._resolve(ref)[1]
        except _NessieError as err:
            raise KeyError(err.message) from None

    def _resolve(self, spec: str) -> tuple[dict[str, Any], str]:
        """Resolve a v2 ``ref`` path parameter to (effective reference JSON, commit hash)."""
        name, sep, hash_ = spec.partition("@")
        if name == "-":
            name = DEFAULT_BRANCH
        if sep and not re.fullmatch(r"[0-9a-fA-F]{8,64}", hash_):
            raise _NessieError(400, "BAD_REQUEST", f"Invalid hash '{hash_}' in '{spec}'.")
        if not name:
            if not sep or hash_.lower() not in self._commits:
                raise _NessieError(404, "REFERENCE_NOT_FOUND", f"Commit '{hash_}' not found")
            return {"type": "DETACHED", "name": "DETACHED", "hash": hash_.lower()}, hash_.lower()
        if name in self._branches:
            ref_type, head = "BRANCH", self._branches[name]
        elif name in self._tags:
            ref_type, head = "TAG", self._tags[name]
        else:
            raise _NessieError(404, "REFERENCE_NOT_FOUND", f"Named reference '{name}' not found")
        if not sep:
            return {"type": ref_type, "name": name, "hash": head}, head
        hash_ = hash_.lower()
        if hash_ not in self._ancestors(head):
            raise _NessieError(
                404,
                "REFERENCE_NOT_FOUND",
                f"Could not find commit '{hash_}' in reference '{name}'.",
            )
        return {"type": ref_type, "name": name, "hash": hash_}, hash_

    def _references(self) -> list[dict[str, Any]]:
        refs = [{"type": "BRANCH", "name": n, "hash": h} for n, h in self._branches.items()]
        refs += [{"type": "TAG", "name": n, "hash": h} for n, h in self._tags.items()]
        return sorted(refs, key=lambda r: r["name"])

    # ----------------------------------------------------------------- HTTP endpoints

    def _handle_get(self, raw_path: str, query: dict[str, str]) -> dict[str, Any]:
        if raw_path in (f"{API_PREFIX}/config", f"{API_PREFIX}/config/"):
            return {
                "defaultBranch": DEFAULT_BRANCH,
                "minSupportedApiVersion": 1,
                "maxSupportedApiVersion": 2,
                "actualApiVersion": 2,
                "specVersion": "2.1.0",
                "noAncestorHash": NO_ANCESTOR_HASH,
                "repositoryCreationTimestamp": self._created,
                "oldestPossibleCommitTimestamp": self._created,
            }
        if raw_path in (f"{API_PREFIX}/trees", f"{API_PREFIX}/trees/"):
            return self._get_all_references(query)
        prefix = f"{API_PREFIX}/trees/"
        if not raw_path.startswith(prefix):
            raise _NessieError(404, "", "")
        rest = raw_path[len(prefix) :]
        m = re.fullmatch(r"(.+)/contents/([^/]+)", rest)
        if m:
            ref = urllib.parse.unquote(m.group(1))
            key = _decode_key(urllib.parse.unquote(m.group(2)))
            return self._get_content(ref, key)
        m = re.fullmatch(r"(.+)/history", rest)
        if m:
            return self._get_commit_log(urllib.parse.unquote(m.group(1)), query)
        if rest.endswith(("/contents", "/entries", "/diff", "/recent-changes")):
            raise _NessieError(404, "", "")  # real endpoints the double does not offer
        return self._get_reference(urllib.parse.unquote(rest))

    def _get_all_references(self, query: dict[str, str]) -> dict[str, Any]:
        refs = self._references()
        start = 0
        if query.get("page-token"):
            names = [r["name"] for r in refs]
            token = query["page-token"]
            start = names.index(token) if token in names else len(refs)
        size = self._page_size(query)
        page = refs[start : start + size]
        more = start + size < len(refs)
        return {
            "hasMore": more,
            "token": refs[start + size]["name"] if more else None,
            "references": page,
        }

    def _get_reference(self, name: str) -> dict[str, Any]:
        if "@" in name:
            raise _NessieError(
                400, "BAD_REQUEST", f"Reference name must not contain a hash: '{name}'"
            )
        reference, _ = self._resolve(name)
        return {"reference": reference}

    def _get_content(self, ref: str, key: Key) -> dict[str, Any]:
        reference, hash_ = self._resolve(ref)
        content = self._commits[hash_].tree.get(key)
        if content is None:
            raise _NessieError(
                404,
                "CONTENT_NOT_FOUND",
                f"Could not find content for key '{_format_key(key)}' in reference '{ref}'.",
            )
        return {"content": content, "effectiveReference": reference}

    def _get_commit_log(self, ref: str, query: dict[str, str]) -> dict[str, Any]:
        reference, head = self._resolve(ref)
        start = head
        if query.get("page-token"):
            start = query["page-token"]
            if start not in self._ancestors(head):
                raise _NessieError(400, "BAD_REQUEST", f"Invalid page token '{start}'")
        stop = query.get("limit-hash")
        if stop:
            stop = stop.lower()
            if stop not in self._ancestors(start):
                raise _NessieError(
                    404,
                    "REFERENCE_NOT_FOUND",
                    f"Could not find commit '{stop}' in reference '{reference['name']}'.",
                )
        fetch_all = query.get("fetch", "MINIMAL").upper() == "ALL"
        size = self._page_size(query)
        entries: list[dict[str, Any]] = []
        token: str | None = None
        for commit in self._first_parent_chain(start):
            if len(entries) >= size:
                token = commit.hash
                break
            entries.append(self._log_entry(commit, fetch_all))
            if commit.hash == stop:
                break
        return {"logEntries": entries, "hasMore": token is not None, "token": token}

    def _page_size(self, query: dict[str, str]) -> int:
        try:
            wanted = int(query.get("max-records") or self.page_size)
        except ValueError:
            raise _NessieError(400, "BAD_REQUEST", "max-records must be an integer") from None
        return max(1, min(wanted, self.page_size))

    @staticmethod
    def _log_entry(commit: _Commit, fetch_all: bool) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "commitMeta": {
                "hash": commit.hash,
                "committer": "",
                "author": commit.author,
                "authors": [commit.author],
                "signedOffBy": None,
                "message": commit.message,
                "commitTime": commit.commit_time,
                "authorTime": commit.commit_time,
                "properties": {},
                "parentCommitHashes": list(commit.parents),
            },
            "parentCommitHash": commit.parents[0] if commit.parents else None,
        }
        if fetch_all:
            entry["operations"] = commit.operations
        return entry

    # ----------------------------------------------------------------- request plumbing

    def _respond(self, handler: _Handler) -> None:
        split = urllib.parse.urlsplit(handler.path)
        query = dict(urllib.parse.parse_qsl(split.query, keep_blank_values=True))
        with self._lock:
            self.requests.append((handler.command, urllib.parse.unquote(split.path)))
            self.queries.append(query)
            delay = self._delays.pop(0) if self._delays else 0.0
            drop = self._drops > 0
            if drop:
                self._drops -= 1
            failure = self._failures.pop(0) if (self._failures and not drop) else None
            token = self._token
        if delay:
            time.sleep(delay)
        if drop:
            handler.close_connection = True
            return
        if failure is not None:
            status, retry_after = failure
            code = {429: "TOO_MANY_REQUESTS", 503: "SERVICE_UNAVAILABLE"}.get(status, "UNKNOWN")
            headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
            self._send_error(handler, status, code, "injected failure", headers)
            return
        if token is not None and handler.headers.get("Authorization") != f"Bearer {token}":
            handler.send_response(401)
            handler.send_header("WWW-Authenticate", 'Bearer realm="fake-nessie"')
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return
        if handler.command != "GET":
            self._send_error(handler, 405, "UNKNOWN", "the test double only serves GET")
            return
        try:
            with self._lock:
                body = self._handle_get(split.path, query)
        except _NessieError as err:
            if not err.error_code:  # not a Nessie endpoint: plain 404 like a bare server
                handler.send_response(404)
                handler.send_header("Content-Length", "0")
                handler.end_headers()
                return
            self._send_error(handler, err.status, err.error_code, err.message)
            return
        self._send_json(handler, 200, body)

    @staticmethod
    def _send_json(
        handler: _Handler, status: int, body: Any, headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)

    def _send_error(
        self,
        handler: _Handler,
        status: int,
        error_code: str,
        message: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        body = {
            "status": status,
            "reason": http.HTTPStatus(status).phrase,
            "message": message,
            "errorCode": error_code,
            "serverStackTrace": None,
        }
        self._send_json(handler, status, body, headers)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeNessieServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Client went away (e.g. after a client-side timeout): nothing to report."""


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"

    def _any(self) -> None:
        self.server.fake._respond(self)

    do_GET = do_POST = do_PUT = do_DELETE = _any

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr access log."""
