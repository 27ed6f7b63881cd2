"""`mtp-harness mutants`: the mutation catalogue as a command (the nightly job runs it too).

Output: the table (or with --json the JSON document alone) goes to stdout; progress and the report's path go
to stderr, so `mtp-harness mutants --json | jq` works.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

from harness.contract.paths import REPORTS
from harness.contract.run_options import RUN_OPTION_TABLE, RunOptions, declare_options, given_options
from harness.contract.suites import CATALOGUE_SUITES

HELP = "the mutation catalogue: every suite against every mutant and the correct decoder"
RUN_OPTIONS = ("model", "device", "dtype", "seed", "budget")  # the run options of the catalogue (the table's rows)
TABLE = tuple(row for row in RUN_OPTION_TABLE if row.name in RUN_OPTIONS)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mutant", action="append", help="only these mutants (repeatable; default: all)")
    parser.add_argument(
        "--suite", action="append", choices=CATALOGUE_SUITES, help="only these suites (repeatable; default: all)"
    )
    parser.add_argument("-n", "--workers", type=int, default=2, help="decoders run in parallel (default 2)")
    parser.add_argument(
        "-k", "--select", default=None, help="only the cases matching this pytest -k expression (a quick slice)"
    )
    declare_options(parser.add_argument, lambda row: [row.cli_flag, row.pytest_flag], TABLE)
    parser.add_argument("--report-dir", type=Path, default=REPORTS, help="where run directories go (./reports)")
    parser.add_argument(
        "--efficiency",
        action="store_true",
        help="also measure, per sampling mutant, the samples to first rejection vs the ideal test's",
    )
    parser.add_argument(
        "--full-table",
        action="store_true",
        help="run every suite on every mutant (default: stop each mutant at its first catch, target suite first)",
    )
    parser.add_argument("--json", action="store_true", help="print the table as JSON (stdout holds only the JSON)")


def parse(arguments: list[str]) -> argparse.Namespace:
    """The options of `mtp-harness mutants ARGUMENTS`."""
    parser = argparse.ArgumentParser(prog="mtp-harness mutants")
    add_arguments(parser)
    return parser.parse_args(arguments)


def status(line: str) -> None:
    """A progress line: stderr, so stdout holds only the table or the JSON."""
    print(line, file=sys.stderr, flush=True)


def main(args: argparse.Namespace) -> int:
    from harness.contract.paths import resolve_model_path
    from harness.door import FrontEnd, UsageError, read_run_options
    from harness.models.loading import checkpoint_is_hybrid
    from harness.mutation.catalogue import CORRECT_DECODER, catalogue_table, format_table, run_catalogue
    from harness.subjects.decoder_registry import MUTANT_PREFIX
    from harness.subjects.mutant_decoders import MUTANTS, RECURRENT_MUTANTS

    front_end = FrontEnd("mtp-harness mutants", lambda row: row.cli_flag)
    try:  # bad input stops here, as one line, before any decoder runs
        options = read_run_options(given_options(args, table=TABLE), front_end)  # the others at their defaults
    except UsageError as error:
        status(f"{front_end.name}: {error}")
        return 2
    unknown = sorted(set(args.mutant or ()) - set(MUTANTS))
    if unknown:
        status(f"mtp-harness mutants: unknown mutant(s) {', '.join(unknown)}; known: {', '.join(MUTANTS)}")
        return 2
    suites = [suite for suite in CATALOGUE_SUITES if suite in (args.suite or CATALOGUE_SUITES)]
    names = list(args.mutant or MUTANTS)
    if not checkpoint_is_hybrid(resolve_model_path(options.model)):  # nothing for them to break: no recurrent layer
        skipped = [name for name in names if name in RECURRENT_MUTANTS]
        names = [name for name in names if name not in RECURRENT_MUTANTS]
        if skipped:
            status(f"mtp-harness mutants: {', '.join(skipped)} need a hybrid model (linear-attention layers); skipped")
    decoders = [CORRECT_DECODER] + [MUTANT_PREFIX + name for name in names]
    selection = ["-k", args.select] if args.select else []
    run_dir = args.report_dir / (time.strftime("%Y%m%d-%H%M%S") + "-mutants")
    status(f"mtp-harness mutants: {len(decoders)} decoders x {len(suites)} suites, {args.workers} at a time")

    def progress(decoder_run) -> None:  # noqa: ANN001 - DecoderRun
        cells = ", ".join(f"{suite} {cell.status}" for suite, cell in decoder_run.cells.items())
        status(f"  {decoder_run.decoder:<40} {cells} ({decoder_run.elapsed_s:.0f}s)")

    started, started_at = time.perf_counter(), time.strftime("%Y-%m-%dT%H:%M:%S")
    runs = run_catalogue(decoders, suites, run_dir, options, args.workers, progress, args.full_table, selection)
    table = catalogue_table(runs, suites, time.perf_counter() - started, args.full_table)
    passed = table["score"] == 1.0 and table["correct_passes"] and table["controls_pass"]
    (run_dir / "mutants.json").write_text(json.dumps(table, indent=2))  # the table first: nothing below can lose it
    index = write_catalogue_report(args, options, run_dir, table, passed, started_at)  # kept if what follows fails
    if args.efficiency:
        from harness.mutation.efficiency_table import efficiency_rows

        status("mtp-harness mutants: measuring the sampling suite's efficiency on each mutant it caught")
        table["efficiency"] = efficiency_rows(table, options.model, options.device, options.dtype)
        index = write_catalogue_report(args, options, run_dir, table, passed, started_at)
    print(json.dumps(table, indent=2) if args.json else format_table(table))
    status(f"mtp-harness mutants: report {index}")
    return 0 if passed else 1


def write_catalogue_report(
    args: argparse.Namespace, options: RunOptions, run_dir: Path, table: dict, passed: bool, started: str
) -> Path:
    from dataclasses import replace

    from harness.contract.paths import resolve_model_path
    from harness.contract.records import SCHEMA, Results
    from harness.contract.seeds import DEFAULT_SEED
    from harness.mutation.catalogue import catalogue_cases
    from harness.report.render import write_report
    from harness.report.run_header import run_header
    from harness.triage.groups import failure_groups

    model = resolve_model_path(options.model)
    command = shlex.join(["mtp-harness", *sys.argv[1:]]) if sys.argv[1:2] == ["mutants"] else "mtp-harness mutants"
    seed = options.seed if isinstance(options.seed, int) else DEFAULT_SEED
    catalogue = replace(options, decoder="mutant catalogue", model=str(model), seed=seed)
    header = run_header(run_dir.name, catalogue, command, args.workers)
    finished = time.strftime("%Y-%m-%dT%H:%M:%S")
    header.update(started=started, finished=finished, status="complete", exit_status=0 if passed else 1)
    cases = catalogue_cases(table, str(model))
    results = Results(
        schema=SCHEMA,
        run=header,
        cases=cases,
        groups=failure_groups(cases, header),
        acceptance=None,
        mutants=table,
    )
    return write_report(results, run_dir)
