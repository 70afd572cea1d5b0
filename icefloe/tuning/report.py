"""``icefloe tune --report DIR``: the figures (PNG, drawn by matplotlib), the figures'
data (``result.json``) and a small HTML page that shows them. Runs on the driver.

Needs the ``tune`` extra (``pip install 'icefloe[tune]'``: matplotlib). Every file is
written under a temporary name in ``DIR`` and renamed into place when complete, so a
failed or interrupted run never leaves a file that looks whole; files of an earlier
report in ``DIR`` are replaced one by one.
"""

from __future__ import annotations

import html
import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from icefloe.errors import OutputError
from icefloe.tuning.grid import KNOBS, label
from icefloe.tuning.result import Trial, TuneResult

FILES = ("index.html", "throughput.png", "confirmation.png", "result.json")


def require_matplotlib() -> None:
    """Raises ImportError naming the extra when matplotlib is not installed."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise ImportError("the tuning report needs matplotlib; install the extra: "
                          "pip install 'icefloe[tune]'") from exc


def check_dir(directory: str | Path) -> Path:
    """``directory`` as an absolute path, checked before any measurement.

    Raises:
        OutputError: it is a file, or its parent does not exist.
    """
    path = Path(directory).absolute()
    if path.exists() and not path.is_dir():
        raise OutputError(f"--report {directory} is a file; give a directory")
    if not path.exists() and not path.parent.is_dir():
        raise OutputError(f"--report {directory}: directory {path.parent} does not exist; "
                          "create it first")
    return path


def write_report(result: TuneResult, directory: str | Path) -> list[Path]:
    """Write :data:`FILES` into ``directory`` (created if missing); returns their paths.

    Raises:
        ImportError: matplotlib is not installed (naming the ``tune`` extra).
        OutputError: ``directory`` cannot be used (see :func:`check_dir`).
    """
    require_matplotlib()
    root = check_dir(directory)
    root.mkdir(exist_ok=True)
    data = json.dumps(result.to_json(), indent=2).encode()
    writers: dict[str, Callable[[Path], None]] = {
        "throughput.png": lambda p: _throughput_figure(result).savefig(p, format="png",
                                                                      dpi=110),
        "confirmation.png": lambda p: _confirmation_figure(result).savefig(p, format="png",
                                                                          dpi=110),
        "result.json": lambda p: _ignore(p.write_bytes(data)),
        "index.html": lambda p: _ignore(p.write_text(_page(result), encoding="utf-8")),
    }
    return [_atomic(root / name, writer) for name, writer in writers.items()]


def _ignore(_: object) -> None:
    return None


def _atomic(target: Path, write: Callable[[Path], None]) -> Path:
    temp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        write(temp)
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return target


def _rates(trial: Trial) -> tuple[float, float, float]:
    """(median, slowest, fastest) rows/s of ``trial``'s runs."""
    return (trial.rows_per_s, trial.rows / max(trial.seconds),
            trial.rows / max(min(trial.seconds), 1e-9))


def _throughput_figure(result: TuneResult) -> Any:
    from matplotlib.figure import Figure

    knobs = [k for k in KNOBS if any(t.knob == k for t in result.trials)]
    fig = Figure(figsize=(max(6.0, 4.2 * len(knobs)), 3.8), layout="constrained")
    axes = fig.subplots(1, max(1, len(knobs)), squeeze=False)[0]
    for ax, knob in zip(axes, knobs, strict=False):
        trials = [t for t in result.trials if t.knob == knob]
        names = [str(t.setting[knob]) for t in trials]
        mid, low, high = zip(*(_rates(t) for t in trials), strict=True)
        colors = ["tab:gray" if t.setting == result.baseline else "tab:blue" for t in trials]
        ax.bar(names, [m / 1e6 for m in mid], color=colors,
               yerr=[[(m - lo) / 1e6 for m, lo in zip(mid, low, strict=True)],
                     [(hi - m) / 1e6 for m, hi in zip(mid, high, strict=True)]], capsize=4)
        ax.set_title(knob)
        ax.set_ylabel("Mrows/s (median, slowest..fastest)")
        ax.tick_params(axis="x", labelrotation=30)
    if not knobs:
        axes[0].text(0.5, 0.5, "no knob swept", ha="center", va="center")
    fig.suptitle(f"{result.table} ({result.engine}): throughput per setting; gray: "
                 "baseline", fontsize=10)
    return fig


def _confirmation_figure(result: TuneResult) -> Any:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.5, 3.4), layout="constrained")
    ax = fig.subplots()
    base, cand = result.confirmation
    for x, trial in enumerate((base, cand)):
        ax.scatter([x] * len(trial.seconds), trial.seconds, color="tab:blue", alpha=0.7)
        ax.hlines(trial.median_s, x - 0.25, x + 0.25, color="black")
    ax.set_xticks([0, 1], ["baseline", label(cand.setting, result.baseline)])
    ax.set_ylabel("seconds per read (line: median)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"confirmation: {result.ratio:.2f}x, noise {result.noise * 100:.0f}% "
                 f"({result.verdict})")
    return fig


def _page(result: TuneResult) -> str:
    esc = html.escape
    rows = "".join(
        f"<tr><td>{esc(t.knob)}</td><td>{esc(label(t.setting, result.baseline))}</td>"
        f"<td>{t.median_s:.3f}</td><td>{t.spread * 100:.0f}%</td>"
        f"<td>{t.rows_per_s:,.0f}</td><td>{t.bytes_per_s / 1e6:,.1f}</td></tr>"
        for t in result.trials)
    text = esc(result.render())
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>icefloe tune {esc(result.table)}</title>
<style>body{{font-family:sans-serif;max-width:70em;margin:2em auto}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:.2em .6em;
text-align:right}}pre{{background:#f6f6f6;padding:1em;overflow:auto}}</style></head>
<body>
<h1>icefloe tune {esc(result.table)} ({esc(result.engine)})</h1>
<p>Verdict: <strong>{esc(result.verdict)}</strong>; the candidate read at
{result.ratio:.2f}x the baseline's throughput, noise {result.noise * 100:.0f}%.</p>
<img src="throughput.png" alt="throughput per setting">
<img src="confirmation.png" alt="confirmation runs">
<h2>Settings measured</h2>
<table><tr><th>knob</th><th>setting</th><th>median s</th><th>spread</th><th>rows/s</th>
<th>MB/s</th></tr>{rows}</table>
<h2>Output</h2>
<pre>{text}</pre>
<p>The figures' data: <a href="result.json">result.json</a>.</p>
</body></html>
"""
