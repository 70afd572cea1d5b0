"""A Ray stream driver process for the Ray kill campaign: reads a table with RayStream.

Run as ``python -m tests.reliability.ray_child --address HOST:PORT --root DIR ...``: it
connects to the running Ray at ``--address`` (the campaign's; the parent SIGKILLs this
process, and Ray ends the job's enumerator and reader actors with it), restores the
checkpoint and ingests the table into a line sink, the design of
:mod:`tests.reliability.child`:

- ``--mode sink``: the sink runs in the reader actors. For every batch it appends one
  JSON line ``{"run", "split", "consumed", "ids"}`` to ``--out`` and fsyncs it (``split``
  is ``split id@reader id``, see :func:`delivery`); the
  reader then acks, waits for the enumerator to record the ack (``checkpoint_interval_s=0``:
  the checkpoint is written before the ack returns) and calls ``acked``, which appends
  ``{"run", "ack", "consumed"}``.
- ``--mode driver``: the reader actors hand batches to this process, which writes the
  same batch line (fsync), calls ``item.ack(wait=True)``, then writes the ack line.

An ack line therefore proves the batch was durably acknowledged. With ``--kill-every S``
a killer thread ``ray.kill``s a random reader actor every ~S seconds (the stream replaces
it and hands its unacknowledged splits out again); each kill is one line in ``--kills``.
``--status`` receives, once the stream runs, the pids of the job's actors (the parent
waits for them to exit before it restarts a killed driver).

``--available-now`` processes what exists at start and exits 0; without it the stream
runs until killed (or ``--max-seconds`` passes).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

import ray

import icefloe.ray
from tests.reliability.child import catalog_for


def _append(path: str, record: dict[str, Any], fsync: bool) -> None:
    """Append one JSON line with a single write (O_APPEND: lines of concurrent writers
    never interleave on a local file system)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(record) + "\n").encode())
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def delivery(item: icefloe.ray.RayStreamItem) -> str:
    """``split@reader``: the judge keys batches by (run, split, consumed), and within one
    run a batch can be delivered twice (by a killed reader, unacknowledged, and again by
    the reader its split was handed to); the reader id keeps the two apart."""
    return f"{item.split_id}@{item.reader_id}"


def batch_line(run: int, item: icefloe.ray.RayStreamItem) -> dict[str, Any]:
    return {"run": run, "split": delivery(item), "consumed": item.consumed,
            "ids": item.batch.column("id").to_pylist()}


def ack_line(run: int, item: icefloe.ray.RayStreamItem) -> dict[str, Any]:
    return {"run": run, "ack": delivery(item), "consumed": item.consumed}


class LineSink:
    """The line sink, run in the reader actors (picklable: a path and two numbers)."""

    def __init__(self, out: str, run: int, delay_s: float = 0.0) -> None:
        self.out = out
        self.run = run
        self.delay_s = delay_s

    def write(self, item: icefloe.ray.RayStreamItem) -> None:
        time.sleep(self.delay_s)  # a sink's own latency: kills land mid-stream
        _append(self.out, batch_line(self.run, item), fsync=True)

    def acked(self, item: icefloe.ray.RayStreamItem) -> None:
        _append(self.out, ack_line(self.run, item), fsync=False)


def _actor_pids(stream: icefloe.ray.RayStream) -> list[int]:
    """Process ids of the stream's enumerator and reader actors."""
    actors = [stream.enumerator, *stream.readers.values()]
    return ray.get([a.__ray_call__.remote(lambda _self: os.getpid()) for a in actors])


def _phase(t0: float, what: str) -> None:
    print(f"ray_child: {what} after {time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)


def _ready(stream: icefloe.ray.RayStream, timeout_s: float) -> list[tuple[str, Any]]:
    """The stream's reader actors that are up: their ping answers within ``timeout_s``."""
    pings = {actor.ping.remote(): (reader_id, actor)
             for reader_id, actor in list(stream.readers.items())}
    if not pings:
        return []
    done, _ = ray.wait(list(pings), num_returns=len(pings), timeout=timeout_s)
    up = []
    for ref in done:
        try:
            if ray.get(ref):
                up.append(pings[ref])
        except Exception:  # died meanwhile
            continue
    return up


def _killer(stream: icefloe.ray.RayStream, every_s: float, kills: str, run: int,
            stop: threading.Event, rng: random.Random) -> None:
    """Every ~``every_s`` seconds (jittered +-50%), kill a random reader actor that is up
    (one still starting holds no split: killing it would test nothing)."""
    while not stop.wait(every_s * rng.uniform(0.5, 1.5)):
        up = _ready(stream, timeout_s=1.0)
        if not up or stop.is_set():
            continue
        reader_id, actor = rng.choice(up)
        ray.kill(actor, no_restart=True)
        _append(kills, {"run": run, "killed": reader_id, "t": time.time()}, fsync=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", required=True)
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--table", default="db.events")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--kills", required=True)
    parser.add_argument("--status")
    parser.add_argument("--run", type=int, default=0)
    parser.add_argument("--mode", choices=("sink", "driver"), default="sink")
    parser.add_argument("--readers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--poll-ms", type=int, default=200)
    parser.add_argument("--kill-every", type=float, default=0.0)
    parser.add_argument("--sink-delay", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--available-now", action="store_true")
    parser.add_argument("--max-seconds", type=float, default=600.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    t0 = time.monotonic()
    ray.init(address=args.address, log_to_driver=False, configure_logging=False)
    _phase(t0, "connected")
    options = {"batchSize": str(args.batch_size), "pollIntervalMs": str(args.poll_ms)}
    sink = LineSink(args.out, args.run, args.sink_delay) if args.mode == "sink" else None
    stream = icefloe.ray.RayStream(
        args.table, catalog=catalog_for(args.root), options=options, checkpoint=args.checkpoint,
        num_readers=args.readers, sink=sink, available_now=args.available_now,
        checkpoint_interval_s=0, reader_num_cpus=0.25)
    stop = threading.Event()
    deadline = time.monotonic() + args.max_seconds
    with stream:
        _phase(t0, "started")
        if args.status:
            Path(args.status).write_text(json.dumps({"run": args.run,
                                                     "pids": _actor_pids(stream)}))
            _phase(t0, "actors up")
        if args.kill_every > 0:
            threading.Thread(target=_killer, daemon=True,
                             args=(stream, args.kill_every, args.kills, args.run, stop,
                                   random.Random(args.seed))).start()
        try:
            if sink is not None:
                stream.run(max_seconds=args.max_seconds)
            else:
                for item in stream:
                    time.sleep(args.sink_delay)
                    _append(args.out, batch_line(args.run, item), fsync=True)
                    item.ack(wait=True)
                    _append(args.out, ack_line(args.run, item), fsync=False)
                    if time.monotonic() > deadline:
                        break
        finally:
            stop.set()
        _phase(t0, "done")
    _phase(t0, "closed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
