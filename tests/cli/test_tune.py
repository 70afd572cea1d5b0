"""``icefloe tune``: the printed table, ``--json``, ``--report`` and one-line errors, on a
real table in the embedded catalog (a temporary ``$ICEFLOE_HOME``)."""

from __future__ import annotations

import json
import re
import struct
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from icefloe.catalog.loader import embedded_catalog
from icefloe.cli.failures import EXIT_CATALOG, EXIT_OUTPUT, EXIT_USAGE
from icefloe.options import SourceOptions
from icefloe.tuning.run import CONFIRM_REPS
from tests.cli.support import assert_one_line, run
from tests.tuning.support import GOOD_BATCH, WRONG_BATCH, by_design_table

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
BY_DESIGN = ("-o", f"batchSize={WRONG_BATCH}", "--sweep", f"batchSize={WRONG_BATCH},{GOOD_BATCH}")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ICEFLOE_HOME", str(tmp_path / "wh"))
    monkeypatch.chdir(tmp_path)
    by_design_table(embedded_catalog(tmp_path / "wh"))
    return tmp_path


def test_json_parses_and_recommends_valid_options(home: Path, capsys) -> None:
    result = run(capsys, "tune", "db.tune", *BY_DESIGN, "--budget", "20s", "--json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["verdict"] == "recommend"
    options = data["recommended"]["options"]
    assert options == {"batchSize": str(GOOD_BATCH)}
    assert SourceOptions.parse(options).batch_size == GOOD_BATCH
    assert data["baseline"]["batchSize"] == WRONG_BATCH
    assert data["base_options"] == {"batchSize": str(WRONG_BATCH)}
    assert [t["setting"]["batchSize"] for t in data["trials"]] == [WRONG_BATCH, GOOD_BATCH]
    for trial in data["trials"]:
        assert len(trial["seconds"]) == data["reps"] == 3
        assert trial["median_s"] == sorted(trial["seconds"])[1]
    confirmation = data["confirmation"]
    assert len(confirmation["candidate"]["seconds"]) == data["confirm_reps"]
    assert confirmation["ratio"] > 1 + confirmation["noise"]
    # the sample is fitted to the budget by timed calibration reads: the whole table on a
    # quiet machine, fewer files when a read of all 4 took more than its share (a loaded one)
    assert data["shape"]["files"] == 4
    assert 1 <= data["sample"]["files"] <= 4


def test_table_report_and_its_files(home: Path, capsys) -> None:
    report = home / "report"
    result = run(capsys, "tune", "db.tune", *BY_DESIGN, "--budget", "20s", "--report",
                 str(report))
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("knob "))
    assert lines[header].split() == ["knob", "setting", "median", "spread", "rows/s", "MB/s",
                                     "vs", "ref"]
    rows = lines[header + 1:header + 3]
    assert rows[0].split()[:2] == ["batchSize", "baseline"]
    assert rows[1].split()[:2] == ["batchSize", f"batchSize={GOOD_BATCH}"]
    assert rows[0].rstrip().endswith("1.00x")
    # CONFIRM_REPS runs each, or twice as many where the first left the winner within the
    # noise (the second look, icefloe.tuning.run._confirm); on a loaded machine the sample is
    # fewer files than the table and the confirmation reads the whole read (CI, make test)
    confirmation = re.compile(rf"confirmation \(({CONFIRM_REPS}|{2 * CONFIRM_REPS}) interleaved"
                              r" runs each(, of the whole read)?\): ")
    assert any(confirmation.match(line) for line in lines), result.out
    assert lines[-1].strip() == f"-o batchSize={GOOD_BATCH}"
    assert f"report: {report / 'index.html'}" in result.err

    names = sorted(p.name for p in report.iterdir())
    assert names == ["confirmation.png", "index.html", "result.json", "throughput.png"]
    for png in ("throughput.png", "confirmation.png"):
        data = (report / png).read_bytes()
        assert data[:8] == PNG_SIGNATURE
        width, height = struct.unpack(">II", data[16:24])  # IHDR
        assert width > 300 and height > 200
        from PIL import Image

        with Image.open(report / png) as image:
            image.verify()
    refs = _references((report / "index.html").read_text())
    assert {"throughput.png", "confirmation.png", "result.json"} <= refs
    assert all((report / ref).is_file() for ref in refs)
    assert json.loads((report / "result.json").read_text())["verdict"] == "recommend"


class _Refs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("src", "href") and value:
                self.refs.add(value)


def _references(page: str) -> set[str]:
    parser = _Refs()
    parser.feed(page)
    return parser.refs


@pytest.mark.parametrize(("argv", "code", "needles"), [
    (["--budget", "2mni"], EXIT_USAGE, ["budget", "2mni", "2min"]),
    (["--sweep", "threads=1,2"], EXIT_USAGE, ["threads", "parallelism"]),
    (["--sweep", "batchSize=0"], EXIT_USAGE, ["batchSize", "0"]),
    (["-o", "batchSise=10"], EXIT_USAGE, ["batchSise", "batchSize"]),
    (["--engine", "flink"], EXIT_USAGE, ["flink"]),
])
def test_bad_arguments_are_one_line(home: Path, capsys, argv: list[str], code: int,
                                    needles: list[str]) -> None:
    result = run(capsys, "tune", "db.tune", "--budget", "10s", *argv)
    assert result.code == code
    assert_one_line(result, *needles)


def test_a_missing_table_is_a_catalog_error(home: Path, capsys) -> None:
    result = run(capsys, "tune", "db.nope", "--budget", "10s")
    assert result.code == EXIT_CATALOG
    assert_one_line(result, "db.nope")


def test_report_into_a_file_is_refused_before_measuring(home: Path, capsys) -> None:
    target = home / "taken"
    target.write_text("mine")
    result = run(capsys, "tune", "db.tune", "--budget", "10s", "--report", str(target))
    assert result.code == EXIT_OUTPUT
    assert_one_line(result, str(target), "directory")
    assert target.read_text() == "mine"


def test_report_without_matplotlib_names_the_extra(home: Path, capsys,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what a missing package does
    result = run(capsys, "tune", "db.tune", "--budget", "10s", "--report", str(home / "r"))
    assert result.code == EXIT_USAGE
    assert_one_line(result, "icefloe[tune]", "matplotlib")
    assert not (home / "r").exists()
    from icefloe.tuning.report import write_report

    with pytest.raises(ImportError, match=r"icefloe\[tune\]"):
        write_report(None, home / "r")  # type: ignore[arg-type]
