"""``icefloe stream``: a continuous read into a sink until stopped, on any engine.

Runs in the user's process (the driver for Ray and Spark). The local and Ray streams share
one loop (:func:`consume`): write each item to the sink, ack it, print a status line
every few seconds. Ctrl-C or SIGTERM stops the stream, which writes its final
checkpoint; the command then says where the checkpoint stands and exits 130.

``--metrics-port N`` (local and Ray) serves the stream's metrics in the Prometheus text
format on ``http://HOST:N/metrics`` and its health on ``/healthz``
(:mod:`icefloe.metrics.prometheus`; ``0`` picks a free port; the command says which
on stderr) while it runs.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from icefloe.cli.common import (
    add_changelog_arg,
    add_remote_arg,
    add_table_args,
    check_remote,
    positive_int,
    print_status,
    source,
    table_options,
)
from icefloe.cli.failures import EXIT_INTERRUPTED
from icefloe.cli.logs import emit_note
from icefloe.cli.sinks import SINK_GRAMMAR, Sink, open_sink, parse_sink
from icefloe.errors import CheckpointError, InvalidOptionError
from icefloe.logs import bind

STATUS_EVERY_S = 2.0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("stream", help="ingest continuously, with a checkpoint")
    add_table_args(p)
    add_changelog_arg(p)
    p.add_argument("--checkpoint", required=True, help="checkpoint directory or URI")
    p.add_argument("--sink", default="console", help=SINK_GRAMMAR + " (default console)")
    p.add_argument("--parallelism", type=positive_int, default=2,
                   help="reader threads (local) or reader actors (ray)")
    p.add_argument("--available-now", action="store_true",
                   help="process what exists at start, then exit")
    p.add_argument("--engine", choices=["local", "spark", "ray"], default="local")
    p.add_argument("--master", help="Spark master URL")
    add_remote_arg(p)
    p.add_argument("--address", help="Ray address")
    p.add_argument("--max-seconds", type=float, default=None, help="stop after this long")
    p.add_argument("--metrics-port", type=port_number, default=None, metavar="N",
                   help="serve Prometheus metrics on :N/metrics and health on :N/healthz "
                   "(0: a free port; needs icefloe[metrics]; local and ray engines)")
    p.add_argument("--metrics-host", default="127.0.0.1",
                   help="interface of the metrics endpoint (default 127.0.0.1; 0.0.0.0: "
                   "every interface)")
    p.set_defaults(func=run)


def port_number(text: str) -> int:
    """argparse type: a TCP port, 0 to 65535 (0: any free one)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number; give 0 to "
                                         "65535") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port number; give 0 to 65535")
    return value


class Stopper:
    """Stops a stream from a signal, a deadline or the end of input (thread-safe)."""

    def __init__(self, max_seconds: float | None) -> None:
        self.event = threading.Event()
        self.interrupted = False
        self.deadline = time.monotonic() + max_seconds if max_seconds else None

    def on_signal(self, _signum: int, _frame: Any) -> None:
        self.interrupted = True
        self.event.set()

    def watch(self, stream: Any) -> None:
        """Ask ``stream`` to stop once a signal arrives or the deadline passes."""
        while not self.event.wait(0.2):
            if self.deadline is not None and time.monotonic() > self.deadline:
                self.event.set()
        stream.stop()  # thread-safe on both engines; writes the final checkpoint


@contextmanager
def signals(stopper: Stopper) -> Iterator[None]:
    """SIGINT / SIGTERM stop the stream gracefully while the block runs (main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, stopper.on_signal)
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def consume(stream: Any, sink: Sink, stopper: Stopper) -> None:
    """Write every item of ``stream`` to ``sink`` and ack it, until the stream ends or
    ``stopper`` fires; print the status line every few seconds and at the end."""
    watcher = threading.Thread(target=stopper.watch, args=(stream,), daemon=True)
    watcher.start()
    last = time.monotonic()
    try:
        for item in stream:
            sink.write(item)
            item.ack()
            if time.monotonic() - last > STATUS_EVERY_S:
                last = time.monotonic()
                print_status(stream)
            if stopper.event.is_set():
                break
    finally:
        stopper.event.set()
        sink.close()
    print_status(stream)


def check_checkpoint(location: str) -> None:
    """Refuse a local checkpoint location that cannot become a writable directory.

    Raises:
        CheckpointError: naming the location (nothing is created).
    """
    if "://" in location and not location.startswith("file://"):
        return  # object stores: the store reports its own errors
    path = Path(location.removeprefix("file://")).absolute()
    probe = path
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise CheckpointError(f"checkpoint directory {path} is not writable ({probe} is "
                              f"{'not a directory' if not probe.is_dir() else 'read-only'}); "
                              "give a directory this process can write")


def run(args: argparse.Namespace) -> int:
    with bind(table=args.table):
        return _run(args)


def _metrics_note(stream: Any) -> None:
    address = stream.metrics_address
    if address is not None:
        host, port = address
        emit_note(f"# metrics: http://{host}:{port}/metrics, health: "
                  f"http://{host}:{port}/healthz", metrics_port=port)


def _run(args: argparse.Namespace) -> int:
    check_remote(args)
    options = table_options(args)
    spec = parse_sink(args.sink)
    if args.engine != "spark":
        check_checkpoint(args.checkpoint)
    if args.metrics_port is not None:
        if args.engine == "spark":
            raise InvalidOptionError(
                "--metrics-port", "Spark reports a query's progress itself (its UI, "
                "StreamingQueryListener); turn it into icefloe's lag with "
                "icefloe.spark.progress_lag, or use --engine local / ray")
        from icefloe.metrics.prometheus import require_prometheus

        require_prometheus()
    if args.engine == "spark":
        from icefloe.spark.stream_job import stream as spark_stream

        return int(spark_stream(args.table, catalog=args.catalog, options=options,
                                sink=args.sink, checkpoint=args.checkpoint,
                                available_now=args.available_now, master=args.master,
                                max_seconds=args.max_seconds, remote=args.remote) or 0)
    stopper = Stopper(args.max_seconds)
    if args.engine == "ray":
        return _run_ray(args, options, spec, stopper)
    src = source(args)
    src.options.for_mode("continuous")  # refuse bounded-only options before any I/O
    sink = open_sink(spec)
    with signals(stopper):
        stream = src.stream(checkpoint=args.checkpoint, parallelism=args.parallelism,
                            available_now=args.available_now,
                            metrics_port=args.metrics_port, metrics_host=args.metrics_host)
        with stream:
            _metrics_note(stream)
            consume(stream, sink, stopper)
        committed = stream.committed().describe()
    return _finish(args, stopper, committed)


def _run_ray(args: argparse.Namespace, options: dict[str, str], spec: Any,
             stopper: Stopper) -> int:
    from icefloe.options import SourceOptions
    from icefloe.ray.session import ray_session
    from icefloe.ray.stream import RayStream

    SourceOptions.parse(options).for_mode("continuous")
    sink = open_sink(spec)
    with signals(stopper), ray_session(args.address):
        rs = RayStream(args.table, catalog=args.catalog, options=options,
                       checkpoint=args.checkpoint, available_now=args.available_now,
                       num_readers=args.parallelism, reader_num_cpus=0.5,
                       metrics_port=args.metrics_port, metrics_host=args.metrics_host)
        with rs:
            _metrics_note(rs)
            consume(rs, sink, stopper)
            committed = rs.committed().describe()
    return _finish(args, stopper, committed)


def _finish(args: argparse.Namespace, stopper: Stopper, committed: str) -> int:
    if stopper.interrupted:
        emit_note(f"# interrupted: checkpoint {args.checkpoint} written; it holds "
                  f"{committed}. Run the same command to resume from there.")
        return EXIT_INTERRUPTED
    return 0

