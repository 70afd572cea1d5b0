"""The icefloe command: plan, read, stream, snapshots, checkpoint, tune and demo.

Runs in the user's process. One module per subcommand (each has ``add_parser`` and
``run``); :mod:`icefloe.cli.failures` turns an error into one line on stderr and an exit
status (the table is in its docstring and the README); ``-v`` (anywhere on the line)
shows logs, engine output and tracebacks; ``--log-format json`` writes every stderr line
as one JSON object (:mod:`icefloe.cli.logs`).
"""

from __future__ import annotations

import argparse
import itertools
import logging
import sys
import traceback
from collections.abc import Sequence

from icefloe.cli import checkpoint, demo, plan, read, snapshots, stream, tune
from icefloe.cli.common import quiet_engines
from icefloe.cli.failures import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_USAGE, describe
from icefloe.cli.logs import FORMATS, configure, emit_error, json_mode, set_format
from icefloe.logs import mask_secrets

__all__ = ["build_parser", "main"]

DESCRIPTION = ("Parallel, checkpointed reads of Apache Iceberg tables on local threads, "
               "Spark and Ray.")


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors as one ``error:`` line (catalog and checkpoint property
    values masked) and the exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        # ``catalog.<prop>=`` / ``checkpoint.<prop>=`` values may be credentials (as in
        # SourceOptions' repr, only their keys are shown): argparse echoes them
        message = mask_secrets(f"{self.prog}: {message} (see {self.prog} --help)")
        if json_mode():
            emit_error(message, EXIT_USAGE)
            self.exit(EXIT_USAGE)
        self.exit(EXIT_USAGE, f"error: {message}\n")


def _version() -> str:
    import icefloe

    return f"icefloe {icefloe.__version__}"


def build_parser() -> argparse.ArgumentParser:
    """The ``icefloe`` argument parser (``-v`` is accepted before or after the subcommand)."""
    verbose = argparse.ArgumentParser(add_help=False)
    verbose.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                         help="show logs, engine output and tracebacks (-vv: debug)")
    verbose.add_argument("--log-format", choices=FORMATS, default=argparse.SUPPRESS,
                         help="text (default) or json: one JSON object per stderr line "
                         "(time, level, logger, message, table, snapshot, split, "
                         "error_type)")
    parser = _Parser(prog="icefloe", description=DESCRIPTION, parents=[verbose])
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_Parser)

    class _Sub:
        def add_parser(self, name: str, **kwargs: object) -> argparse.ArgumentParser:
            return sub.add_parser(name, parents=[verbose], **kwargs)  # type: ignore[arg-type,list-item]

    for module in (plan, read, stream, snapshots, checkpoint, tune, demo):
        module.add_parser(_Sub())
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status (see :mod:`icefloe.cli.failures`)."""
    words = list(sys.argv[1:] if argv is None else argv)
    json_asked = "--log-format=json" in words or any(
        a == "--log-format" and b == "json" for a, b in itertools.pairwise(words))
    set_format("json" if json_asked else "text")  # usage errors too
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else 0
    verbosity = getattr(args, "verbose", 0)
    level = logging.WARNING - 10 * min(verbosity, 2) if verbosity else logging.ERROR
    configure(level, getattr(args, "log_format", "text"))
    quiet_engines(verbosity)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if verbosity:
            traceback.print_exc()
        found = describe(exc)
        if found is not None:
            line, code = found
            emit_error(mask_secrets(line), code)
            return code
        emit_error(mask_secrets(f"internal: {type(exc).__name__}: {_one_line(str(exc))} (a "
                                "bug in icefloe: run again with -v for the traceback and "
                                "report it)"), EXIT_INTERNAL)
        return EXIT_INTERNAL


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]


if __name__ == "__main__":
    sys.exit(main())
