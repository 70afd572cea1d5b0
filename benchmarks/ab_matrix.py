"""Before / after of a change on the defaults matrix's local cells: icefloe at its defaults
from two source trees and PyArrow's dataset reader, interleaved in one run.

    uv run python -m benchmarks.ab_matrix --before /path/to/other/tree --cells 1:1,1:4 \\
        [--rounds 16] [--bare] [--arrow-schema]

Each cell (``SIZE_MB:ROW_GROUPS``, :func:`benchmarks.bench_matrix.cached_files`) is one
local-disk table (a SQLite catalog over the cached files, as the matrix's); its three
contenders are the matrix's own child processes (:class:`benchmarks.bench_matrix.Contender`,
fresh per cell, started before the reads, each read timed in the child), the "before"
child run from the other tree (:data:`CHILD`: that tree's ``icefloe`` and matrix child,
checked, with this tree's compiled manifest decoder and its own bytecode compiled:
:func:`prepare_tree`). With ``--bare``,
a fourth: the least a reader built as icefloe's reader threads
are can do (:func:`benchmarks.bench_matrix.bare_read`). The reads are round-robin with the
first rotated each round, as the matrix's; the first round (every process's first read:
its thread pools) is left out. Per contender: the median wall and CPU seconds, and
PyArrow's time over its time paired by round (:func:`benchmarks.bench_matrix.paired`;
> 1: faster than PyArrow). Why not the matrix itself: a change's effect is smaller than
the spread between two runs of a cell (session 20: the same code's 1 MB x 4 cell at 0.84x
and 0.95x in two runs), so the two trees must be measured in the same rounds.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from benchmarks.bench_matrix import BARE, MB, Contender, cached_files, local_catalog, paired
from benchmarks.common import ROOT, event_rows, median

SIDES = ("pyarrow dataset", "icefloe after", "icefloe before")
CHILD = """
import json, pathlib, sys
import icefloe
here = pathlib.Path(icefloe.__file__).resolve().parent.parent
assert str(here) == sys.argv[1], f"icefloe imported from {here}, not {sys.argv[1]}"
from icefloe.enumerator.columnar import native_decoder
assert (native_decoder() is not None) == (sys.argv[3] == "1"), "not the same manifest decoder"
from benchmarks.bench_matrix import _child
_child(json.loads(sys.argv[2]))
"""
"""The "before" child: the matrix's, with the other tree first on ``sys.path`` (``-c``
puts the working directory there), the ``icefloe`` it imports checked to be that tree's
and its manifest decoder (compiled or not) to be the kind this tree's uses."""
NATIVE = Path("icefloe/enumerator/_native_manifest")
"""The compiled manifest decoder's package: its module is built at install (``make
setup``) into this tree, not into a ``git worktree`` of another commit, whose planning
would then take the pure-Python decoder (session 21: an A/A run of the same code read
5-9 % slower on the other tree's side, on 1 MB x 1 and 32 MB x 4)."""


def same_native(tree: Path) -> str | None:
    """Give ``tree`` this tree's compiled manifest decoder where it has none and its C
    source is this tree's (the module is copied there; git ignores it); None when both
    decode alike, else why not (the C source differs: build it in ``tree``)."""
    built = sorted((ROOT.parent / NATIVE).glob("_core.*.so"))
    if not built or sorted((tree / NATIVE).glob("_core.*.so")):
        return None
    source = (ROOT.parent / NATIVE / "_core.c").read_bytes()
    other = tree / NATIVE / "_core.c"
    if not other.exists() or other.read_bytes() != source:
        return (f"{tree / NATIVE} has no compiled manifest decoder and its _core.c is not "
                f"this tree's: build it there (`cd {tree} && ICEFLOE_NATIVE_BUILD=1 uv sync "
                "--all-extras`) or compare trees whose decoders match")
    shutil.copy2(built[0], tree / NATIVE / built[0].name)
    print(f"(copied this tree's compiled manifest decoder to {tree / NATIVE})",
          file=sys.stderr)
    return None


COMPILED = ("icefloe", "benchmarks", "tests/helpers")
"""The other tree's packages whose bytecode :func:`prepare_tree` compiles."""


def prepare_tree(tree: Path) -> str | None:
    """Make ``tree`` (another source tree of icefloe) read as this one does apart from its
    code: this tree's compiled manifest decoder (:func:`same_native`), and its modules'
    bytecode compiled. With ``PYTHONDONTWRITEBYTECODE`` set (as here and in read-only
    images) a tree nobody installed compiles every module in every process, modules first
    imported during a read included: in session 25 the other tree's first reads carried
    about 0.5 s more system CPU than this tree's, on a cell both trees read alike. None
    when ready, else why not."""
    import compileall

    why = same_native(tree)
    if why:
        return why
    for name in COMPILED:
        if (tree / name).is_dir() and not compileall.compile_dir(tree / name, quiet=1):
            return f"{tree / name}: its modules do not compile"
    return None


def _contender(spec: dict[str, Any], tree: Path | None) -> Contender:
    """A matrix child for ``spec``, run from ``tree`` (None: this one)."""
    if tree is None:
        return Contender(spec)
    from icefloe.enumerator.columnar import native_decoder

    native = "1" if native_decoder() is not None else "0"
    return Contender(spec, [sys.executable, "-c", CHILD, str(tree.resolve()), json.dumps(spec),
                            native], cwd=tree)  # the other tree's directory: first on sys.path


def measure(cell: str, before: Path, rounds: int, bare: bool = False,
            arrow_schema: bool = False) -> dict[str, list[tuple[float, int, float]]]:
    """``rounds`` reads of each side of ``cell`` (``SIZE_MB:ROW_GROUPS``), round-robin;
    with ``bare``, :data:`benchmarks.bench_matrix.BARE` too; with ``arrow_schema``, of the
    cell's files as PyArrow writes them by default, their Arrow schema stored
    (:func:`benchmarks.bench_matrix.cached_files`)."""
    size, groups = (int(x) for x in cell.split(":"))
    files = cached_files(size * MB, groups, arrow_schema)
    with local_catalog("icefloe-ab-matrix-") as (props, catalog):
        table = catalog.create_table("matrix.t", schema=event_rows(1).schema,
                                     properties={"format-version": "2"})
        table.add_files([p.as_uri() for p in files])
        base = {"identifier": "matrix.t", "catalog": props, "s3": None}
        icefloe = {**base, "kind": "icefloe", "options": {}}
        procs = {SIDES[0]: _contender({**base, "kind": "pyarrow"}, None),
                 SIDES[1]: _contender(icefloe, None), SIDES[2]: _contender(icefloe, before)}
        if bare:
            procs[BARE] = _contender({**base, "kind": BARE}, None)
        try:
            for proc in procs.values():
                proc.ready()
            out: dict[str, list[tuple[float, int, float]]] = {n: [] for n in procs}
            names = list(procs)
            for r in range(rounds):
                for name in names[r % len(names):] + names[:r % len(names)]:
                    out[name].append(procs[name].read())
            rows = {n: {rows for _, rows, _ in runs} for n, runs in out.items()}
            assert all(r == rows[SIDES[0]] for r in rows.values()), rows
            return out
        finally:
            for proc in procs.values():
                proc.close()


def report(cell: str, out: dict[str, list[tuple[float, int, float]]]) -> list[str]:
    """A line per side: median wall and CPU (first round left out), PyArrow's ratio."""
    peer = [s for s, _, _ in out[SIDES[0]][1:]]
    lines = []
    for name, runs in out.items():
        walls, cpus = [s for s, _, _ in runs[1:]], [c for _, _, c in runs[1:]]
        lines.append(f"{cell:>6} {name:16} {median(walls) * 1000:7.1f} ms "
                     f"(min {min(walls) * 1000:6.1f})  CPU {median(cpus):.3f} s  "
                     f"vs pyarrow {paired(walls, peer):.2f}x")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True,
                        help="the other source tree (e.g. a `git worktree add` of a commit)")
    parser.add_argument("--cells", default="1:1,1:4,1:16",
                        help="comma-separated SIZE_MB:ROW_GROUPS (local disk)")
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--arrow-schema", action="store_true",
                        help="read the cells' files as PyArrow writes them by default (their "
                        "Arrow schema stored, strings as `string`), not as Java Iceberg, "
                        "Spark and Flink do (the matrix's files since session 21)")
    parser.add_argument("--bare", action="store_true",
                        help=f"also {BARE!r}: Arrow's Parquet reader file by file on two "
                        "threads, nothing else (bench_matrix.bare_read)")
    args = parser.parse_args(argv)
    if not (args.before / "icefloe" / "__init__.py").exists():
        parser.error(f"--before {args.before}: no icefloe/ there; give a source tree of "
                     f"icefloe, e.g. `git worktree add /tmp/before HEAD~1` in {ROOT.parent}")
    why = prepare_tree(args.before)
    if why:
        parser.error(f"--before {args.before}: {why}")
    for cell in args.cells.split(","):
        out = measure(cell, args.before, args.rounds, args.bare, args.arrow_schema)
        print("\n".join(report(cell, out)), flush=True)


if __name__ == "__main__":
    main()
