"""``benchmarks.profile_io --bounds``: icefloe's lower bound on a link and the verdict per
target, from every read's figures (RESULTS.md, "the ceilings on S3")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.profile_io import bounds, reader_options


def _line(reader: str, s: float, cpu: float = 1.2, proxy: float = 0.05, weed: float = 0.1,
          cell: str = "32:1") -> str:
    read = {"s": s, "rows": 1, "cpu": cpu, "proxy_cpu": proxy, "weed_cpu": weed,
            "machine_cpu": 1.8 * s}
    return json.dumps({"cell": cell, "delay": 0.01, "reader": reader, "which": "warm",
                       "load": 3.0, "reads": [read, read, read]})


@pytest.mark.parametrize(("decode_cpu", "bound", "verdicts"), [
    # (1.0 + 0.15) / 2 + 4 x 10 ms: above PyArrow's 0.5 s and PyIceberg's 0.6 / 1.5
    (1.0, "0.615", ["PyArrow: ceiling (bound 1.23x the need)",
                    "PyIceberg: ceiling (bound 1.54x the need)"]),
    # a decode dearer than the readers' own 1.2 s (pq.read_table's whole table): the
    # floor is the least CPU any of them took, (1.2 + 0.15) / 2 + 0.04 s
    (2.0, "0.715", ["PyArrow: ceiling (bound 1.43x the need)",
                    "PyIceberg: ceiling (bound 1.79x the need)"]),
    # (0.2 + 0.15) / 2 + 0.04 s: below both needs; icefloe's 1.0 s misses both
    (0.2, "0.215", ["PyArrow: missed by 0.500 s, bound 0.285 s under the need",
                    "PyIceberg: missed by 0.600 s, bound 0.185 s under the need"]),
])
def test_the_bound_and_the_verdicts(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    decode_cpu: float, bound: str,
                                    verdicts: list[str]) -> None:
    path = tmp_path / "reads.jsonl"
    path.write_text("\n".join([
        _line("icefloe", 1.0), _line("icefloe-plan", 0.1, proxy=0.0, weed=0.0),
        # the server's CPU counted is the least any reader caused: PyArrow's 0.15 s
        _line("pyarrow", 0.5, proxy=0.05, weed=0.10),
        _line("pyiceberg", 0.6, proxy=0.1, weed=0.2),
        _line("decode", 0.5, cpu=decode_cpu, proxy=0.0, weed=0.0)]) + "\n")
    bounds(str(path))
    row = capsys.readouterr().out.splitlines()[2].split(" | ")
    assert row[0] == "| 32 MB x 1, 10 ms"
    assert row[6].startswith(f"{bound} (")  # the bound, then as built: planning 0.1 s
    assert row[9] == "; ".join(verdicts)


def test_a_reader_name_carries_icefloe_options() -> None:
    """``icefloe:key=value;...`` compares settings in one interleaved run."""
    assert reader_options("icefloe:ioConcurrency=4;batchSize=65536", '{"splitSize": "1"}') \
        == ("icefloe", {"splitSize": "1", "ioConcurrency": "4", "batchSize": "65536"})
    assert reader_options("pyiceberg", "{}") == ("pyiceberg", {})
    with pytest.raises(ValueError, match="'ioConcurrency' is not key=value"):
        reader_options("icefloe:ioConcurrency", "{}")


def test_a_reader_name_can_set_its_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """``env.NAME=value`` in a reader name is an environment variable of the reader's
    process (an experiment's switch), not an icefloe option."""
    import os

    monkeypatch.setenv("ICEFLOE_PROFILE_IO_TEST", "0")  # restored after the test
    assert reader_options("icefloe:env.ICEFLOE_PROFILE_IO_TEST=1;batchSize=8", "{}") \
        == ("icefloe", {"batchSize": "8"})
    assert os.environ["ICEFLOE_PROFILE_IO_TEST"] == "1"
