"""The nightly job: the suites (greedy, sampling, invariants, and the CUDA checks) at a budget, then the
mutation catalogue at that budget, merged into one report: reports/<run-id>/index.html + results.json.

Defaults follow the device: CUDA when torch sees one (bf16 model, float32 target-only re-scoring for
near-ties), else CPU in float32.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import time
from dataclasses import replace
from pathlib import Path

from harness.commands import mutants as mutants_command
from harness.contract.budget import BUDGETS
from harness.contract.invocation import suites_pytest, wait_through_ctrl_c
from harness.contract.paths import REPORTS, SUITES_DIR
from harness.contract.run_options import RunOptions, declare_options, option_named, pytest_arguments
from harness.contract.suites import SUITE_NAMES, marker_expression
from harness.door.reading import FRONT_END_VARIABLE

USAGE_ERROR = 2
NIGHTLY_MARKERS = marker_expression((*SUITE_NAMES, "gpu"))
HELP = "the nightly job: every suite and the mutation catalogue at a budget, one report"
RUN_OPTIONS = ("decoder", "model", "device", "dtype", "budget")  # the run options of the nightly (the table's rows)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    nightly = {  # the full budget; CUDA when torch sees one, else the CPU
        "budget": {"default": "full"},
        "device": {"default": None, "help": "torch device (default: cuda when torch sees one, else cpu)"},
        "dtype": {"help": "model dtype (default: bf16 on CUDA, float32 on CPU)"},
    }
    table = [replace(row, **nightly.get(row.name, {})) for row in map(option_named, RUN_OPTIONS)]
    declare_options(parser.add_argument, lambda row: [row.cli_flag], table)
    parser.add_argument("-n", "--workers", type=int, default=2, help="pytest-xdist workers / parallel mutants")
    parser.add_argument("--report-dir", type=Path, default=REPORTS, help="where run directories go")


def main(args: argparse.Namespace) -> int:
    return run_nightly(args.budget, args.decoder, args.model, args.device, args.dtype, args.workers, args.report_dir)


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def default_dtype(device: str) -> str:
    return "bfloat16" if device.startswith("cuda") else "float32"


def suites_command(
    budget: str, decoder: str, model: str, device: str, dtype: str, workers: int, run_dir: Path
) -> list[str]:
    # --harness-slow: a user suite's slow tests run too
    command = [*suites_pytest([SUITES_DIR]), "-m", NIGHTLY_MARKERS, "-q", "-rs", "--harness-slow"]
    options = RunOptions(decoder=decoder, model=model, device=device, dtype=dtype, budget=budget)
    command += [*pytest_arguments(options), f"--harness-report={run_dir}"]
    if workers > 1:
        command += ["-n", str(workers), "--dist", "loadgroup"]
    return command


def false_alarm_runs(budget: str, model: str, device: str, dtype: str, workers: int) -> dict:
    """The family-wise false-positive rate, checked: the sampling suite's cases on the correct decoder (`mtp`)
    under the budget's `false_alarm_seeds` session seeds, each a whole family of p-values at family-wise alpha
    1e-3. Run at the smoke budget's N: the rate holds at any N. The count of runs that rejected anything must stay
    near seeds x 1e-3 (a count of 2 in 50 is already a 1-in-800 event under a calibrated suite)."""
    from harness.contract.seeds import DEFAULT_SEED
    from harness.stats.multiple_testing import FAMILY_ALPHA

    seeds = [DEFAULT_SEED + 1 + i for i in range(BUDGETS[budget].false_alarm_seeds)]
    rejecting = []
    for seed in seeds:
        command = [*suites_pytest([SUITES_DIR / "sampling" / "test_target_distribution.py"], cache=False), "-q"]
        options = RunOptions(decoder="mtp", model=model, device=device, dtype=dtype, budget="smoke", seed=seed)
        command += pytest_arguments(options)
        command += ["-n", str(workers), "--dist", "loadgroup"] if workers > 1 else []
        print("mtp-harness nightly: false-alarm run:", shlex.join(command), flush=True)
        code = wait_through_ctrl_c(subprocess.Popen(command, stdout=subprocess.DEVNULL))
        if code != 0:
            rejecting.append({"seed": seed, "exit_status": code})
    return {"runs": len(seeds), "seeds": seeds, "rejecting": rejecting, "family_alpha": FAMILY_ALPHA}


def catalogue_arguments(budget: str, model: str, device: str, dtype: str, workers: int, report_dir: Path) -> list[str]:
    arguments = ["mutants", f"--model={model}", f"--device={device}", f"--dtype={dtype}", "-n", str(workers)]
    arguments += [f"--report-dir={report_dir}", f"--budget={budget}"]
    for name in BUDGETS[budget].mutants or ():
        arguments += ["--mutant", name]
    full = BUDGETS[budget].efficiency  # the full budget: every cell of the table and the efficiency figures
    return arguments + (["--efficiency", "--full-table"] if full else [])


def merge_catalogue(run_dir: Path, catalogue_dir: Path, false_alarms: dict | None = None) -> Path | None:
    """Put the catalogue's mutation table (and the false-alarm count) into the suites' report and re-render it."""
    from harness.report.render import write_report

    suites_results, catalogue_results = run_dir / "results.json", catalogue_dir / "results.json"
    if not (suites_results.is_file() and catalogue_results.is_file()):
        return None
    results = json.loads(suites_results.read_text())
    results["mutants"] = json.loads(catalogue_results.read_text())["mutants"]
    if false_alarms is not None:
        results["false_alarms"] = false_alarms
    return write_report(results, run_dir)


def run_nightly(
    budget: str, decoder: str, model: str, device: str | None, dtype: str | None, workers: int, report_dir: Path
) -> int:
    device = device or default_device()
    dtype = dtype or default_dtype(device)
    run_dir = report_dir / (time.strftime("%Y%m%d-%H%M%S") + f"-nightly-{budget}")
    command = suites_command(budget, decoder, model, device, dtype, workers, run_dir)
    print("mtp-harness nightly:", shlex.join(command), flush=True)
    front_end = {**os.environ, FRONT_END_VARIABLE: "mtp-harness nightly"}  # the door names options as nightly does
    suites_code = wait_through_ctrl_c(subprocess.Popen(command, env=front_end))
    if suites_code == USAGE_ERROR and not run_dir.exists():  # the door refused an option: its one line said why
        return USAGE_ERROR
    catalogue_dir = run_dir / "mutants"
    arguments = catalogue_arguments(budget, model, device, dtype, workers, catalogue_dir)
    print("mtp-harness nightly: mtp-harness", shlex.join(arguments), flush=True)
    catalogue_code = mutants_command.main(mutants_command.parse(arguments[1:]))
    alarms = false_alarm_runs(budget, model, device, dtype, workers)
    merged = merge_catalogue(run_dir, next(iter(sorted(catalogue_dir.glob("*-mutants"))), catalogue_dir), alarms)
    verdict = "PASSED" if suites_code == 0 and catalogue_code == 0 else "FAILED"
    print(
        f"mtp-harness nightly ({budget}, {device}, {dtype}): {verdict}; suites exit {suites_code}, catalogue exit "
        f"{catalogue_code}; sampling-suite false alarms {len(alarms['rejecting'])} in {alarms['runs']} seeded runs "
        f"(family alpha {alarms['family_alpha']}); report {merged or run_dir}"
    )
    return 0 if verdict == "PASSED" else 1
