"""A loopback TCP proxy that delays each direction by a fixed time (the kernel here has no netem).

Every chunk read from one side is forwarded to the other ``delay_s`` after it was read, in
order, so a request/response round trip costs ``2 * delay_s`` more, as on a link with that
one-way latency; bandwidth is not limited (chunks in flight overlap). Used by the
``objectstore`` benchmark and a few tests to make S3 behave like a remote object store.
"""

from __future__ import annotations

import collections
import contextlib
import socket
import threading
import time
from typing import Any

_CHUNK = 256 * 1024


class LatencyProxy:
    """Listen on 127.0.0.1:<port> and forward to ``target`` with ``delay_s`` each way."""

    def __init__(self, target: tuple[str, int], delay_s: float) -> None:
        self.target = target
        self.delay_s = delay_s
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, name="latency-proxy", daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LatencyProxy:
        self._thread.start()
        return self

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.close()

    def __enter__(self) -> LatencyProxy:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                if self._closed.is_set():  # closed while connecting: close() missed these
                    client.close()
                    upstream.close()
                    return
                self._sockets += [client, upstream]
            self._pipe(client, upstream)
            self._pipe(upstream, client)

    def _pipe(self, src: socket.socket, dst: socket.socket,
              on_read: Any = None, on_sent: Any = None) -> None:
        """Two threads per direction: one reads and stamps chunks, one sends them when due.
        ``on_read(data)`` / ``on_sent(data)`` (optional; a subclass's hooks) are called
        with each chunk read (``b""`` at the end) and each chunk sent."""
        queue: collections.deque[tuple[float, bytes]] = collections.deque()
        ready = threading.Condition()

        def read() -> None:
            while True:
                try:
                    data = src.recv(_CHUNK)
                except OSError:
                    data = b""
                if on_read is not None:
                    on_read(data)
                with ready:
                    queue.append((time.monotonic() + self.delay_s, data))
                    ready.notify()
                if not data:
                    return

        def send() -> None:
            while True:
                with ready:
                    while not queue:
                        ready.wait()
                    due, data = queue.popleft()
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                if not data:
                    with contextlib.suppress(OSError):
                        dst.shutdown(socket.SHUT_WR)
                    return
                try:
                    dst.sendall(data)
                except OSError:
                    return
                if on_sent is not None:
                    on_sent(data)

        for target in (read, send):
            threading.Thread(target=target, daemon=True, name="latency-proxy-pipe").start()
