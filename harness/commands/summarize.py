"""`mtp-harness summarize`: markdown tables of runs' results (counts per suite, the mutation and efficiency tables),
headed by each run's date, commit and command (what docs/measurements/ pastes), or with --json what each run judged
per suite."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = (
    "markdown tables of runs' results (counts per suite, the mutation and efficiency tables), headed by each run's "
    "date, commit and command: what docs/measurements/ pastes"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "runs",
        nargs="+",
        type=Path,
        help="run directories (reports/<run-id>), results.json files, or --report-dirs (their latest run)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print what each run judged per suite as JSON (verdict, judged, passed, failed, expected failures by "
        "finding, not judged by reason, the command beneath a masking finding's fix) instead of the markdown",
    )


def main(args: argparse.Namespace) -> int:
    from harness.report.markdown import judgement_json, summary

    print(judgement_json(args.runs) if args.json else summary(args.runs), end="")
    return 0
