"""A real Spark Connect server for tests: PySpark's ``sbin/start-connect-server.sh --wait``.

The server runs in the foreground of its own process group (so stopping it stops the JVM
and every Python worker it forked), listens on ``host:port`` only, keeps its logs, work
and temp files under one directory, and runs its Python workers with ``python`` (an
interpreter with icefloe installed, as on a user's server hosts).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyspark

SPARK_HOME = Path(pyspark.__file__).parent

CONNECT_ENV = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE")
"""Variables PySpark sets when a process creates a Connect session."""


@contextlib.contextmanager
def connect_client(url: str) -> Iterator[Any]:
    """A Connect client session to ``url`` with icefloe registered, stopped at the end.

    PySpark marks the whole process as a Connect client once one exists (environment
    variables): they are restored afterwards, so a classic session in the same process
    (the Spark suite's) keeps working.
    """
    import icefloe.spark

    saved = {key: os.environ.get(key) for key in CONNECT_ENV}
    spark = None
    try:
        spark = icefloe.spark.session(remote=url)
        yield spark
    finally:
        if spark is not None:
            spark.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now on ``host``."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_open(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex((host, port)) == 0


class ConnectServer:
    """A Spark Connect server on ``host:port`` (started by :meth:`start`, stopped by
    :meth:`stop`, also as a context manager).

    Args:
        root: directory for its logs, local dirs and working directory (created).
        host: address to listen on (also the driver's address).
        port: gRPC port (default: a free one on ``host``).
        master: the server's Spark master.
        python: the interpreter of its Python workers.
        conf: more ``--conf`` settings.
        prefix: a command prefix (e.g. ``ip netns exec HOST``) to start it elsewhere.
        env: more environment variables of the server.
        spark_home: the Spark installation as the server's host sees it.
        base_env: the environment to start from (default: this process's).
    """

    def __init__(self, root: Path, host: str = "127.0.0.1", port: int | None = None,
                 master: str = "local[2]", python: str = sys.executable,
                 conf: Mapping[str, str] | None = None, prefix: Sequence[str] = (),
                 env: Mapping[str, str] | None = None, spark_home: Path = SPARK_HOME,
                 base_env: Mapping[str, str] | None = None) -> None:
        self.root = root
        self.host = host
        self.port = port if port is not None else free_port(host)
        self.master = master
        self.python = python
        self.conf = dict(conf or {})
        self.prefix = list(prefix)
        self.extra_env = dict(env or {})
        self.spark_home = spark_home
        self.base_env = dict(base_env) if base_env is not None else None
        self.log = root / "connect-server.log"
        self.process: subprocess.Popen[bytes] | None = None
        self._log_from = 0
        """Where this start's lines begin in :attr:`log` (a restart appends to it)."""

    @property
    def url(self) -> str:
        return f"sc://{self.host}:{self.port}"

    def command(self) -> list[str]:
        conf = {
            "spark.connect.grpc.binding.address": self.host,
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.driver.host": self.host,
            "spark.driver.bindAddress": self.host,
            "spark.driver.memory": "1g",
            "spark.ui.enabled": "false",
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.shuffle.partitions": "2",
            "spark.pyspark.python": self.python,
            "spark.python.worker.reuse": "true",
            "spark.python.daemon.module": "icefloe.spark.daemon",
            "spark.local.dir": str(self.root / "local"),
            **self.conf,
        }
        args = [*self.prefix, str(self.spark_home / "sbin" / "start-connect-server.sh"), "--wait",
                "--master", self.master]
        for key, value in conf.items():
            args += ["--conf", f"{key}={value}"]
        return args

    def start(self, timeout_s: float = 180.0) -> ConnectServer:
        """Start the server and wait until its port answers (fails with its log's tail)."""
        (self.root / "local").mkdir(parents=True, exist_ok=True)
        self._log_from = self.log.stat().st_size if self.log.exists() else 0
        base = self.base_env if self.base_env is not None else os.environ
        env = {**base, "SPARK_HOME": str(self.spark_home), "SPARK_LOCAL_IP": self.host,
               "SPARK_LOG_DIR": str(self.root), "SPARK_PID_DIR": str(self.root),
               "PYSPARK_PYTHON": self.python, **self.extra_env}
        for key in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "PYSPARK_DRIVER_PYTHON"):
            env.pop(key, None)
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(self.command(), cwd=self.root, env=env,
                                            stdout=out, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while not self._ready():
            if self.process.poll() is not None:
                raise RuntimeError(f"the Spark Connect server exited "
                                   f"({self.process.returncode}): {self.tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the Spark Connect server did not listen on {self.url} "
                                   f"within {timeout_s:.0f} s: {self.tail()}")
            time.sleep(0.5)
        return self

    def _ready(self) -> bool:
        with self.log.open("rb") as log:
            log.seek(self._log_from)
            return b"Spark Connect server started" in log.read()

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def kill(self) -> int:
        """SIGKILL the server's whole process group (its JVM, the driver, and the Python
        workers it forked) at once, as a crash would; returns how many processes it had."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return 0
        found = subprocess.run(["pgrep", "-g", str(process.pid)], capture_output=True,
                               text=True).stdout.split()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        return len(found)

    def stop(self) -> None:
        """Stop the server's whole process group (SIGTERM, then SIGKILL); idempotent."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        for sig, wait_s in ((signal.SIGTERM, 30), (signal.SIGKILL, 30)):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                return
            try:
                process.wait(timeout=wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
        with contextlib.suppress(ProcessLookupError):  # Python workers the JVM forked
            os.killpg(process.pid, signal.SIGKILL)

    def __enter__(self) -> ConnectServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
