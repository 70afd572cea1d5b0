"""Render the panels of ``icefloe-stream.json`` from a real run, with matplotlib.

A STAND-IN for a Grafana screenshot: Grafana could not be installed on the machines this
project is built on (no Debian, PyPI or npm package ships the server), so this script
does what Grafana would with the same dashboard: it runs a real stream (the local
engine, a SQLite catalog in a temp directory, a writer appending 50 rows every 0.25 s,
the sink stalled for a while, the catalog locked for a while), scrapes the stream's real
``/metrics`` endpoint every 0.5 s, evaluates each panel's PromQL expression on the
scraped series (the few forms the dashboard uses: a metric, ``rate``, a ratio of rates,
``sum by (operation, error)`` of a rate, ``time() -`` a metric) and draws the panels.

Run from the repository root (matplotlib is not a dependency of icefloe)::

    uv run --with matplotlib python docs/grafana/render_standin.py docs/grafana/standin.png
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
import tempfile
import threading
import time
import urllib.request
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
from prometheus_client.parser import text_string_to_metric_families

from icefloe import IcebergSource
from icefloe.catalog.loader import embedded_catalog

HERE = Path(__file__).resolve().parent
RUN_S = 120.0
STALL = (30.0, 45.0)  # the sink stops acknowledging (lag builds up)
LOCKED = (70.0, 80.0)  # the catalog's SQLite file is locked (polls fail, retried)
RATE_WINDOW_S = 10.0  # the dashboard's [1m] windows, shortened for a two-minute run

Scrape = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def run(home: Path) -> list[tuple[float, Scrape]]:
    """Run the stream, the writer, the stall and the lock; return the scrapes."""
    catalog = embedded_catalog(home)
    catalog.create_namespace_if_not_exists("demo")
    schema = pa.schema([("id", pa.int64()), ("value", pa.float64())])
    table = catalog.create_table("demo.events", schema)
    stop = threading.Event()
    start = time.monotonic()

    def writer() -> None:
        next_id = 0
        while not stop.wait(0.25):
            ids = list(range(next_id, next_id + 50))
            try:
                table.append(pa.table({"id": ids, "value": [i / 2 for i in ids]},
                                      schema=schema))
            except Exception:  # the catalog is locked: the writer waits too
                continue
            next_id += 50

    source = IcebergSource("demo.events", catalog=catalog,
                           options={"pollIntervalMs": "200", "maxAttempts": "60",
                                    "retryBackoffMs": "100"})
    stream = source.stream(checkpoint=str(home / "ckpt"), parallelism=2, metrics_port=0)
    stream.start()
    assert stream.metrics_address is not None
    host, port = stream.metrics_address

    def consumer() -> None:
        for item in stream:
            elapsed = time.monotonic() - start
            if STALL[0] <= elapsed < STALL[1]:
                stop.wait(STALL[1] - elapsed)  # the sink is stuck
            item.ack()

    threads = [threading.Thread(target=writer, daemon=True),
               threading.Thread(target=consumer, daemon=True)]
    for t in threads:
        t.start()
    scrapes: list[tuple[float, Scrape]] = []
    lock: sqlite3.Connection | None = None
    while (elapsed := time.monotonic() - start) < RUN_S:
        if lock is None and LOCKED[0] <= elapsed < LOCKED[1]:
            lock = sqlite3.connect(home / "catalog.db", isolation_level=None, timeout=30)
            lock.execute("BEGIN EXCLUSIVE")
        elif lock is not None and elapsed >= LOCKED[1]:
            lock.rollback()
            lock.close()
            lock = None
        text = urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=30).read()
        scrape: Scrape = {}
        for family in text_string_to_metric_families(text.decode()):
            for s in family.samples:
                labels = tuple(sorted((k, v) for k, v in s.labels.items() if k != "table"))
                scrape[(s.name, labels)] = s.value
        scrapes.append((time.time(), scrape))
        time.sleep(0.5)  # the scrape interval of this stand-in, not a synchronization
    stop.set()
    threads[0].join()  # the writer's last commit is done before the directory goes
    stream.stop()
    threads[1].join(timeout=30)
    return scrapes


def _series(scrapes: list[tuple[float, Scrape]], name: str
            ) -> dict[tuple[tuple[str, str], ...], list[tuple[float, float]]]:
    out: dict[tuple[tuple[str, str], ...], list[tuple[float, float]]] = defaultdict(list)
    before = scrapes[0][0]
    for t, scrape in scrapes:
        for (sample, labels), value in scrape.items():
            if sample == name:
                if name.endswith("_total") and not out[labels] and before < t:
                    out[labels].append((before, 0.0))  # a labelled counter's first sample
                out[labels].append((t, value))
        before = t
    return out


def _rate(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out = []
    for i, (t, v) in enumerate(points):
        j = i
        while j > 0 and t - points[j - 1][0] <= RATE_WINDOW_S:
            j -= 1
        t0, v0 = points[j]
        if t > t0:
            out.append((t, (v - v0) / (t - t0)))
    return out


def evaluate(expr: str, scrapes: list[tuple[float, Scrape]]
             ) -> dict[tuple[tuple[str, str], ...], list[tuple[float, float]]]:
    """The dashboard's expression forms on the scraped series (module docstring)."""
    expr = expr.replace('{table=~"$table"}', "")
    if m := re.fullmatch(r"(icefloe_\w+)", expr):
        return _series(scrapes, m[1])
    if m := re.fullmatch(r"rate\((icefloe_\w+)\[\w+\]\)", expr):
        return {k: _rate(v) for k, v in _series(scrapes, m[1]).items()}
    if m := re.fullmatch(r"rate\((icefloe_\w+)\[\w+\]\) / rate\((icefloe_\w+)\[\w+\]\)",
                         expr):
        num, den = dict(_rate(_series(scrapes, m[1])[()])), _rate(_series(scrapes, m[2])[()])
        return {(): [(t, num[t] / d) for t, d in den if d and t in num]}
    if m := re.fullmatch(r"sum by \(operation, error\) \(rate\((icefloe_\w+)\[\w+\]\)\)",
                         expr):
        return {k: _rate(v) for k, v in _series(scrapes, m[1]).items()}
    if m := re.fullmatch(r"time\(\) - (icefloe_\w+)", expr):
        return {k: [(t, t - v) for t, v in pts] for k, pts in _series(scrapes, m[1]).items()}
    raise ValueError(f"the stand-in does not evaluate {expr!r}")


def draw(scrapes: list[tuple[float, Scrape]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dashboard = json.loads((HERE / "icefloe-stream.json").read_text())
    panels = dashboard["panels"]
    rows = (len(panels) + 1) // 2
    fig, axes = plt.subplots(rows, 2, figsize=(16, 3.1 * rows))
    t0 = scrapes[0][0]
    for ax, panel in zip(axes.flat, panels, strict=False):
        for target in panel["targets"]:
            for labels, points in sorted(evaluate(target["expr"], scrapes).items()):
                legend = target["legendFormat"].replace("{{table}}", "demo.events")
                for key, value in labels:
                    legend = legend.replace("{{" + key + "}}", value)
                ax.plot([t - t0 for t, _ in points], [v for _, v in points], label=legend)
        for lo, hi, color in ((*STALL, "orange"), (*LOCKED, "red")):
            ax.axvspan(lo, hi, color=color, alpha=0.08)
        ax.set_title(panel["title"], fontsize=9)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7, loc="upper left")
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle("STAND-IN, not Grafana: the panels of docs/grafana/icefloe-stream.json drawn "
                 "with matplotlib from a real run's /metrics scrapes\n(local engine, SQLite "
                 "catalog, 50 rows every 0.25 s; orange: sink stalled, red: catalog locked; "
                 f"rates over {RATE_WINDOW_S:.0f} s; x: seconds)", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(out, dpi=80)


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "standin.png"
    with tempfile.TemporaryDirectory() as home:
        scrapes = run(Path(home))
    draw(scrapes, out)
    print(f"wrote {out} from {len(scrapes)} scrapes")


if __name__ == "__main__":
    main()
