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

from harness.contract.budget import BUDGET_HELP, BUDGETS, DEFAULT_BUDGET
from harness.contract.paths import DEFAULT_MODEL, REPORTS
from harness.contract.run_options import RunOptions
from harness.contract.suites import CATALOGUE_SUITES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mutant", action="append", help="only these mutants (repeatable; default: all)")
    parser.add_argument(
        "--suite", action="append", choices=CATALOGUE_SUITES, help="only these suites (repeatable; default: all)"
    )
    parser.add_argument("-n", "--workers", type=int, default=2, help="decoders run in parallel (default 2)")
    parser.add_argument(
        "-k", "--select", default=None, help="only the cases matching this pytest -k expression (a quick slice)"
    )
    parser.add_argument("--model", default=str(DEFAULT_MODEL), help="model directory or fixture name")
    parser.add_argument("--device", default="cpu", help="torch device (default: cpu)")
    parser.add_argument("--dtype", default=None, help="model dtype (default: float64 on CPU)")
    parser.add_argument("--harness-seed", default=None, help="session seed (default: the plugin's fixed seed)")
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
    parser.add_argument("--budget", choices=sorted(BUDGETS), default=DEFAULT_BUDGET, help=BUDGET_HELP)


def parse(arguments: list[str]) -> argparse.Namespace:
    """The options of `mtp-harness mutants ARGUMENTS`."""
    parser = argparse.ArgumentParser(prog="mtp-harness mutants")
    add_arguments(parser)
    return parser.parse_args(arguments)


def status(line: str) -> None:
    """A progress line: stderr, so stdout holds only the table or the JSON."""
    print(line, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from harness.contract.paths import resolve_model_path
    from harness.contract.seeds import DEFAULT_SEED
    from harness.models.loading import checkpoint_is_hybrid
    from harness.mutation.catalogue import CORRECT_DECODER, catalogue_table, format_table, run_catalogue
    from harness.subjects.mutants import MUTANTS, RECURRENT_MUTANTS
    from harness.subjects.registry import MUTANT_PREFIX

    unknown = sorted(set(args.mutant or ()) - set(MUTANTS))
    if unknown:
        status(f"mtp-harness mutants: unknown mutant(s) {', '.join(unknown)}; known: {', '.join(MUTANTS)}")
        return 2
    suites = [suite for suite in CATALOGUE_SUITES if suite in (args.suite or CATALOGUE_SUITES)]
    names = list(args.mutant or MUTANTS)
    if not checkpoint_is_hybrid(resolve_model_path(args.model)):  # nothing for them to break: no recurrent layer
        skipped = [name for name in names if name in RECURRENT_MUTANTS]
        names = [name for name in names if name not in RECURRENT_MUTANTS]
        if skipped:
            status(f"mtp-harness mutants: {', '.join(skipped)} need a hybrid model (linear-attention layers); skipped")
    decoders = [CORRECT_DECODER] + [MUTANT_PREFIX + name for name in names]
    seed = args.harness_seed if args.harness_seed in ("random", "last") else int(args.harness_seed or DEFAULT_SEED)
    options = RunOptions(model=args.model, device=args.device, dtype=args.dtype, budget=args.budget, seed=seed)
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
    index = write_catalogue_report(args, run_dir, table, passed, started_at)  # kept if what follows fails
    if args.efficiency:
        from harness.mutation.efficiency_table import efficiency_rows

        status("mtp-harness mutants: measuring the sampling suite's efficiency on each mutant it caught")
        table["efficiency"] = efficiency_rows(table, args.model, args.device, args.dtype)
        index = write_catalogue_report(args, run_dir, table, passed, started_at)
    print(json.dumps(table, indent=2) if args.json else format_table(table))
    status(f"mtp-harness mutants: report {index}")
    return 0 if passed else 1


def write_catalogue_report(args: argparse.Namespace, run_dir: Path, table: dict, passed: bool, started: str) -> Path:
    from harness.contract.paths import resolve_model_path
    from harness.contract.records import SCHEMA, Results
    from harness.contract.seeds import DEFAULT_SEED
    from harness.mutation.catalogue import catalogue_cases
    from harness.report.render import write_report
    from harness.report.run_header import run_header
    from harness.triage.groups import failure_groups

    model = resolve_model_path(args.model)
    command = shlex.join(["mtp-harness", *sys.argv[1:]]) if sys.argv[1:2] == ["mutants"] else "mtp-harness mutants"
    seed = int(args.harness_seed) if (args.harness_seed or "").isdigit() else DEFAULT_SEED
    options = RunOptions(decoder="mutant catalogue", model=str(model), device=args.device, dtype=args.dtype, seed=seed)
    header = run_header(run_dir.name, options, command, args.workers)
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
