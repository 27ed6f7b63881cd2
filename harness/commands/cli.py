"""`mtp-harness`: one subcommand per module of harness/commands/, each with its `add_arguments(parser)` and
`main(args) -> int`: run (the suites), mutants (the mutation catalogue), nightly, engine (engine environments),
matrix (engine releases), summarize (markdown of runs) and bench (speed)."""

from __future__ import annotations

import argparse
import sys

from harness.commands import bench, engine, matrix, mutants, nightly, run, summarize

COMMANDS = {
    "run": run,
    "mutants": mutants,
    "nightly": nightly,
    "engine": engine,
    "matrix": matrix,
    "summarize": summarize,
    "bench": bench,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mtp-harness", description="Correctness harness for MTP-assisted decoding.")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, command in COMMANDS.items():
        description = getattr(command, "DESCRIPTION", None)
        command.add_arguments(commands.add_parser(name, help=command.HELP, description=description))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return COMMANDS[args.command].main(args)


if __name__ == "__main__":
    sys.exit(main())
