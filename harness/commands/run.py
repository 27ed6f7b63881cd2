"""`mtp-harness run`: the suites through pytest, then a one-screen summary and the verdict.

The run's options are the table's (harness/contract/run_options.py), declared here as `--NAME` (and as pytest spells
them, `--harness-NAME`) and handed to pytest unchecked: the door in pytest's controller reads them once, names a
mistake as this command spells it, and exits with status 2 before any test runs (harness/door/). `--suite mutants`
runs the mutation catalogue instead (harness/commands/mutants.py).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import time
from pathlib import Path

from harness.commands import mutants as mutants_command
from harness.contract.errors import HarnessError
from harness.contract.invocation import suites_pytest, wait_through_ctrl_c
from harness.contract.paths import REPORTS, SUITES_DIR
from harness.contract.run_options import Given, declare_options, given_arguments, given_options
from harness.contract.suites import ALL, SUITE_NAMES, marker_expression, parse_suites
from harness.door.reading import FRONT_END_VARIABLE, RUN
from harness.report.judgement import NOT_JUDGED_EXIT

HELP = "run the suites on a decoder and model, print a summary"
DESCRIPTION = (
    "Run the suites through pytest, one pytest-xdist worker per usable core by default. Progress: a line every 5% of "
    "the cases (or each minute) with cases done, total and the time left; then a summary per suite and the path of "
    "the HTML report. Every run option is also accepted as pytest spells it (--harness-NAME)."
)
MUTANTS = "mutants"  # --suite mutants: the mutation catalogue (harness/commands/mutants.py)
USAGE_ERROR = 2  # the exit status of a command line that cannot work (argparse and the door use it too)
WORKERS_HELP = (
    "pytest-xdist workers: a number, 0 for one process, or auto for one per usable core; default: one per "
    "usable core on a CPU device, one process on an accelerator (each worker loads its own copy of the model)"
)


def suites_option(value: str) -> str:
    """--suite: a suite (harness/contract/suites.py), several joined by commas, `all`, or `mutants` alone."""
    if value.strip() == MUTANTS:
        return MUTANTS
    try:
        return ",".join(parse_suites(value))
    except HarnessError as error:
        raise argparse.ArgumentTypeError(f"{error}; or {MUTANTS} (the mutation catalogue) alone") from None


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS has one), at least 1."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def workers_option(value: str) -> int | str:
    """-n: a count of workers (0: no pytest-xdist) or 'auto'."""
    if value == "auto":
        return value
    try:
        count = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of workers or 'auto', got {value!r}") from None
    if count < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more workers, got {count}")
    return count


def resolve_workers(requested: int | str | None, device: str) -> int:
    """The pytest-xdist workers of a run; 0 runs the suites in one process (also where xdist is missing)."""
    if requested is None:
        requested = "auto" if device.split(":")[0] == "cpu" else 0
    workers = usable_cores() if requested == "auto" else int(requested)
    if workers == 1 and requested == "auto":
        return 0  # one core: a single worker only adds a process
    if workers and importlib.util.find_spec("xdist") is None:
        print("mtp-harness run: pytest-xdist is not installed; running in one process", flush=True)
        return 0
    return workers


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--suite",
        type=suites_option,
        default=ALL,
        metavar="{" + ",".join([*SUITE_NAMES, ALL, MUTANTS]) + "}",
        help=f"which suites, one or several joined by commas (default: {ALL} = {', '.join(SUITE_NAMES)}; "
        f"{MUTANTS}: the mutation catalogue)",
    )
    declare_options(parser.add_argument, lambda row: [row.cli_flag, row.pytest_flag])
    parser.add_argument("-n", "--workers", type=workers_option, default=None, help=WORKERS_HELP)
    parser.add_argument(
        "--report-dir", type=Path, default=REPORTS, help="where run directories go (default: ./reports)"
    )
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help="extra pytest arguments after --")


def pytest_command(args: argparse.Namespace, given: dict[str, Given], junit: Path) -> list[str]:
    """The pytest invocation for `mtp-harness run` (the progress plugin prints it once the door has passed, so a run
    can be reproduced by hand): the options given, as the plugin spells them; the report beside the JUnit file.
    Progress comes from harness.plugin.progress instead of a dot per test; the costliest cases go first
    (harness.plugin.case_order), in that order to the workers (--no-loadscope-reorder)."""
    command = [*suites_pytest([SUITES_DIR]), "-m", marker_expression(tuple(args.suite.split(","))), "-q"]
    command += ["-p", "harness.plugin.progress", "-p", "harness.plugin.case_order"]
    command += ["-o", "console_output_style=classic"]
    command.append(f"--harness-report={junit.parent}")
    command += given_arguments(given)
    workers = resolve_workers(args.workers, str(given["device"]))
    if workers:
        command += ["-n", str(workers), "--dist", "loadgroup", "--no-loadscope-reorder"]
    command.append(f"--junitxml={junit}")
    extra = args.pytest_args[1:] if args.pytest_args[:1] == ["--"] else args.pytest_args
    return command + extra


def not_judged_suites(results_json: Path, asked: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """The suites of a run's results.json that judged none of their cases, or fewer than the run asked of them
    (harness/report/judgement.py), each with its verdict; a suite not applicable to the decoder is none of them unless
    it was `asked` for by name (`--suite engine` on a decoder with no engine: nothing of what was asked was judged)."""
    from harness.report.judgement import NOT_APPLICABLE_VERDICT, judge_run

    if not results_json.is_file():
        return []
    results = json.loads(results_json.read_text())
    return [
        (j.suite, j.verdict)
        for j in judge_run(results["cases"], results["run"])
        if j.falls_short or (j.verdict == NOT_APPLICABLE_VERDICT and j.suite in asked)
    ]


def named_suites(suite: str) -> tuple[str, ...]:
    """The suites a --suite value (as suites_option reads it) names: none for the default selection, every suite,
    which `all` and the default both expand to (argparse reads a default through the option's type too)."""
    named = tuple(suite.split(","))
    return () if set(named) == set(SUITE_NAMES) else named


def run_catalogue(args: argparse.Namespace, given: dict[str, Given]) -> int:
    """--suite mutants: the mutation catalogue with this run's model, device, dtype, seed, budget and report dir."""
    catalogue = mutants_command.parse([])
    for name in mutants_command.RUN_OPTIONS:
        setattr(catalogue, name.replace("-", "_"), given[name])
    catalogue.workers = 2 if args.workers is None else usable_cores() if args.workers == "auto" else args.workers
    catalogue.workers = max(1, catalogue.workers)
    catalogue.report_dir = args.report_dir
    return mutants_command.main(catalogue)


def main(args: argparse.Namespace) -> int:
    given = given_options(args)
    if args.suite == MUTANTS:
        return run_catalogue(args, given)
    run_dir = args.report_dir / time.strftime("%Y%m%d-%H%M%S")  # made by pytest's recorder once the door passed
    command = pytest_command(args, given, run_dir / "junit.xml")
    started = time.perf_counter()
    process = subprocess.Popen(command, env={**os.environ, FRONT_END_VARIABLE: RUN.name})
    code = wait_through_ctrl_c(process)
    elapsed = time.perf_counter() - started
    if code == USAGE_ERROR and not run_dir.exists():  # the door refused an option: its one line said why
        return USAGE_ERROR
    print()
    if code == 5:
        print("mtp-harness: no test matched these suites")
    verdict = "PASSED" if code == 0 else "FAILED"
    unjudged = not_judged_suites(run_dir / "results.json", named_suites(args.suite))
    report = run_dir / "index.html"
    where = f"report {report}" if report.is_file() else f"results in {run_dir}"
    print(f"mtp-harness: {verdict} in {elapsed:.1f}s (pytest exit code {code}); {where}")
    if unjudged:  # silence is never success: a suite that judged nothing fails the run
        print(
            f"mtp-harness: NOT JUDGED: {', '.join(f'{suite} ({verdict})' for suite, verdict in unjudged)} (the "
            f"summary above says why): exit status {NOT_JUDGED_EXIT}"
        )
        return code or NOT_JUDGED_EXIT
    return code
