"""icefloe benchmarks: run with ``uv run python -m benchmarks.run --scale quick|full``.

Every ``bench_*.py`` module exposes ``run(scale) -> str`` (a markdown section body);
:mod:`benchmarks.run` calls them and writes ``benchmarks/RESULTS.md``.
"""
