"""The SeaweedFS start-up probe waits out the REST catalog's start-up race.

Right after ``weed mini`` starts, listing namespaces answers 404 and then, for a moment,
500 "attribute not found: s3tables.metadata" (the table bucket exists, its metadata not
yet written; seen in CI, where the 500 escaped the probe and ended ``icefloe demo --s3``
as an internal error). The real server cannot be made to hit that window on demand, so
a stand-in HTTP server answers the catalog's calls with the 500 SeaweedFS sent."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from icefloe.seaweed import SeaweedFS

STARTING = {"error": {"message": "failed to list namespaces: attribute not found: "
                      "s3tables.metadata", "type": "InternalServerError", "code": 500}}


class _Starting(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.startswith("/v1/config"):
            self._send(200, {"defaults": {}, "overrides": {}})
        else:
            self._send(500, STARTING)

    def do_POST(self) -> None:
        self._send(200, {"access_token": "t", "token_type": "bearer", "expires_in": 3600})


@pytest.fixture
def starting_catalog() -> Iterator[str]:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Starting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_a_500_while_the_table_bucket_starts_is_not_ready(starting_catalog: str,
                                                          tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    server = SeaweedFS(tmp_path)
    monkeypatch.setattr(server, "rest_properties", lambda endpoint=None: {
        "type": "rest", "uri": starting_catalog, "credential": "a:b",
        "oauth2-server-uri": f"{starting_catalog}/v1/oauth/tokens"})
    assert server._catalog_ready() is False
