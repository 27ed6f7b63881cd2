"""Structured results of a pytest run, written as reports/<run-id>/results.json and index.html.

Tests attach their records with record_property under RECORD_PREFIX names (JSON strings): divergence,
sampling, invariants, acceptance. The recorder runs in the controlling process only: pytest-xdist sends
every worker's reports, user properties included, to it, so results merge without worker files. It writes
results.json (status "running") at most every PARTIAL_EVERY_S seconds while the run goes, and the full
report at session end, also after Ctrl-C ("interrupted") or an internal error ("crashed").
"""

from __future__ import annotations

import json
import platform
import re
import shlex
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness.engines.catalogue import engine_of_decoder
from harness.paths import REPO_ROOT, REPORTS, suite_of
from harness.triage import failure_groups

RECORD_PREFIX = "mtp_harness."
RECORDS = ("divergence", "sampling", "invariants", "acceptance")
PARTIAL_EVERY_S = 20.0
UNFINISHED = "unfinished"  # set up but no call report yet (running, or interrupted): left out of the results
MESSAGE_LIMIT = 4000
XDIST_GROUP_SUFFIX = re.compile(r"@[^\[\]@/:]+$")  # `--dist loadgroup` appends "@<group>" to node ids
XDIST_WORKER_LINE = re.compile(r"^\[gw\d+\] [^\n]*\n")  # "[gw0] linux -- Python ...": which worker, not what failed


def run_directory(option: str) -> Path:
    """--harness-report value -> the run directory ('auto': reports/<time-stamp>)."""
    if option == "auto":
        return REPORTS / datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return Path(option)


def git_commit() -> str | None:
    """The clone's commit; None for an installed harness (its version is in the header)."""
    if REPO_ROOT is None:
        return None
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


def write_reproducers(results: dict, run_dir: Path) -> None:
    """Each failure group with a reproduced minimal case gets its script, repro-group-N.py, in the run directory."""
    from harness.reproducer import reproducer_script

    run = results["run"]
    engine = engine_of_decoder(run["decoder"])
    for group in results["groups"]:
        minimal = group.get("minimal") or {}
        if not minimal.get("reproduced"):
            continue
        name = f"repro-group-{group['group']}.py"
        if engine is not None and engine.reproducer is not None and "engine_config" in minimal:
            script = engine.reproducer(group, run, name)
            python = engine.environment.python("cuda" if str(run["device"]).startswith("cuda") else "cpu")
            group["reproducer_command"] = shlex.join([str(python), name])
            group["reproducer_about"] = (
                f"uses {engine.environment.name} alone, no harness import: it compares {engine.environment.name}'s "
                f"MTP decoding of the minimal request with {engine.environment.name} without speculation and "
                "exits 1 when they differ"
            )
        else:
            script = reproducer_script(group, run, name)
            group["reproducer_command"] = f"python {name}"
            group["reproducer_about"] = (
                "prints expected against actual tokens (or the broken invariants) and exits 1 on the failure; "
                "--decoder mtp runs the same request on the correct decoder"
            )
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / name).write_text(script)
        group["reproducer"] = name


def harness_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mtp-harness")
    except PackageNotFoundError:
        return "unknown"


def merge_invariants(first: dict, second: dict) -> dict:
    """One test that checks several runs records each: passes add up, violations follow each other, and the
    request of the first violation is kept."""
    merged = {
        "passes": first["passes"] + second["passes"],
        "recurrent_checks": first.get("recurrent_checks", 0) + second.get("recurrent_checks", 0),
        "violations": first["violations"] + second["violations"],
    }
    request = first.get("first_request") or second.get("first_request")
    return merged | ({"first_request": request} if request else {})


class Recorder:
    """Collects one record per test (setup, call and teardown reports folded together)."""

    def __init__(self, config: pytest.Config, run_dir: Path, header: dict[str, object]) -> None:
        self.config = config
        self.run_dir = run_dir
        self.header = header
        self.cases: dict[str, dict[str, object]] = {}
        self.minimal: dict[int, dict] = {}  # failure group -> its minimal case (set by the plugin at session end)
        self.last_partial = time.monotonic()

    # --- collecting ---------------------------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        nodeid = XDIST_GROUP_SUFFIX.sub("", report.nodeid)
        case = self.cases.setdefault(nodeid, self._new_case(nodeid))
        case["duration_s"] = round(float(case["duration_s"]) + report.duration, 4)
        for name, value in report.user_properties:
            key = name.removeprefix(RECORD_PREFIX)
            if name.startswith(RECORD_PREFIX) and key in (*RECORDS, "params"):
                record = json.loads(value) if isinstance(value, str) else value
                case[key] = merge_invariants(case[key], record) if key == "invariants" and case[key] else record
        self._fold_outcome(case, report)
        if time.monotonic() - self.last_partial > PARTIAL_EVERY_S:
            self.write(status="running", exit_status=None, html=False)

    def _new_case(self, nodeid: str) -> dict[str, object]:
        return {
            "nodeid": nodeid,
            "suite": suite_of(nodeid),
            "case": nodeid.split("::", 1)[-1],
            "decoder": self.header["decoder"],
            "model": self.header["model"],
            "params": {},
            "outcome": UNFINISHED,
            "duration_s": 0.0,
            "message": "",
            **dict.fromkeys(RECORDS[:3]),
        }

    @staticmethod
    def _fold_outcome(case: dict[str, object], report: pytest.TestReport) -> None:
        if report.when == "call" and report.passed and case["outcome"] == UNFINISHED:
            case["outcome"] = "passed"
        elif hasattr(report, "wasxfail") and report.skipped:  # an expected failure: a recorded engine finding
            case["outcome"], case["message"] = "xfailed", str(report.wasxfail)
        elif report.skipped and case["outcome"] in (UNFINISHED, "passed"):
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            case["outcome"], case["message"] = "skipped", reason.removeprefix("Skipped: ")
        elif report.failed and case["outcome"] not in ("failed", "error"):  # the first failure tells what broke
            case["outcome"] = "failed" if report.when == "call" else "error"
            case["message"] = XDIST_WORKER_LINE.sub("", report.longreprtext, count=1)[-MESSAGE_LIMIT:]
        divergence = case.get("divergence")
        if case["outcome"] == "passed" and isinstance(divergence, dict) and divergence.get("near_tie"):
            case["outcome"] = "near-tie"

    # --- writing ------------------------------------------------------------------------------------------
    def finished_cases(self) -> list[dict[str, object]]:
        finished = (c for c in self.cases.values() if c["outcome"] != UNFINISHED)
        return sorted(finished, key=lambda c: str(c["nodeid"]))

    def results(self, status: str, exit_status: int | None) -> dict[str, object]:
        ordered = self.finished_cases()
        acceptance = next((c["acceptance"] for c in ordered if c.get("acceptance")), None)
        cases = [{key: value for key, value in c.items() if key != "acceptance"} for c in ordered]
        finished = None if status == "running" else datetime.now(UTC).isoformat(timespec="seconds")
        return {
            "schema": 1,
            "run": {**self.header, "finished": finished, "status": status, "exit_status": exit_status},
            "cases": cases,
            "groups": [
                {**group, "minimal": self.minimal.get(group["group"])} for group in failure_groups(cases, self.header)
            ],
            "acceptance": acceptance,
            "mutants": None,
        }

    def write(self, status: str, exit_status: int | None, html: bool = True) -> Path:
        from harness.report import write_report, write_results_json  # pandas and jinja2 load only here

        self.last_partial = time.monotonic()
        results = self.results(status, exit_status)
        if html:
            write_reproducers(results, self.run_dir)
            return write_report(results, self.run_dir)
        return write_results_json(results, self.run_dir)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        status = {pytest.ExitCode.INTERRUPTED: "interrupted", pytest.ExitCode.INTERNAL_ERROR: "crashed"}
        path = self.write(status.get(exitstatus, "complete"), int(exitstatus))
        self.config.stash[REPORT_PATH] = path

    def pytest_terminal_summary(self, terminalreporter) -> None:  # noqa: ANN001 - TerminalReporter
        path = self.config.stash.get(REPORT_PATH, None)
        if path is not None:
            terminalreporter.write_sep("-", f"mtp-harness report: {path}")


REPORT_PATH = pytest.StashKey[Path]()


def run_header(
    run_id: str, decoder: str, model: Path, device: str, dtype: str, seed: int | None, command: str, workers: int
) -> dict[str, object]:
    """Who ran what, where and with which versions; `command` replays the run."""
    import torch
    import transformers

    return {
        "run_id": run_id,
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "session_seed": seed,
        "decoder": decoder,
        "model": str(model),
        "device": device,
        "dtype": dtype,
        "git_commit": git_commit(),
        "mtp_harness": harness_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "command": command,
        "workers": workers,
    }


def pytest_run_header(config: pytest.Config, seed: int, dtype: str, model: Path, run_id: str) -> dict[str, object]:
    """The header of a pytest run; its command replays the run with its session seed."""
    args = [str(a) for a in config.invocation_params.args if not str(a).startswith("--harness-seed")]
    command = shlex.join([sys.executable, "-m", "pytest", *args, f"--harness-seed={seed}"])
    workers = int(getattr(config.option, "numprocesses", 0) or 0)
    decoder, device = config.getoption("--decoder"), config.getoption("--device")
    header = run_header(run_id, decoder, model, device, dtype, seed, command, workers)
    from harness.engines.catalogue import engine_of_decoder

    engine = engine_of_decoder(decoder)
    if engine is not None:  # an out-of-process engine: which build of it ran
        flavour = "cuda" if str(device).startswith("cuda") else "cpu"
        version = engine.environment.installed_version(flavour) or "not installed"
        header["engine"] = f"{engine.environment.name} {version} ({flavour})"
    return header
