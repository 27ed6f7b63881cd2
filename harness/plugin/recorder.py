"""Structured results of a pytest run, written as reports/<run-id>/results.json and index.html.

Tests attach their records with harness.contract.records.attach_record (record_property under RECORD_PREFIX
names, JSON strings): divergence, sampling, invariants, acceptance. The recorder runs in the controlling
process only: pytest-xdist sends every worker's reports, user properties included, to it, so results merge
without worker files. It writes results.json (status "running") at most every PARTIAL_EVERY_S seconds while
the run goes, and the full report at session end, also after Ctrl-C ("interrupted") or an internal error ("crashed").
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness.contract.paths import REPORTS, suite_of
from harness.contract.records import (
    RECORD_PREFIX,
    RECORD_TYPES,
    SCHEMA,
    CaseRecord,
    GroupRecord,
    InvariantsRecord,
    Results,
    RunHeader,
)
from harness.contract.run_options import RunOptions, pytest_arguments, without_run_options
from harness.plugin.case_costs import bare_nodeid
from harness.report.run_header import run_header
from harness.subjects.engines.abilities import FailureReproducer, SourceBuild
from harness.subjects.engines.environments import flavour_of
from harness.subjects.engines.registry import engine_of_decoder
from harness.triage.groups import failure_groups, known_groups

PARTIAL_EVERY_S = 20.0
UNFINISHED = "unfinished"  # set up but no call report yet (running, or interrupted): left out of the results
MESSAGE_LIMIT = 4000
XDIST_WORKER_LINE = re.compile(r"^\[gw\d+\] [^\n]*\n")  # "[gw0] linux -- Python ...": which worker, not what failed


def run_directory(option: str) -> Path:
    """--harness-report value -> the run directory ('auto': reports/<time-stamp>)."""
    if option == "auto":
        return REPORTS / datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return Path(option)


def write_reproducers(results: Results, run_dir: Path) -> None:
    """Each failure group with a reproduced minimal case gets its script, repro-group-N.py, in the run directory."""
    from harness.triage.reproducer import reproducer_script

    run = results["run"]
    release = ((run.get("options") or {}).get("engine") or {}).get("version")
    engine = engine_of_decoder(run["decoder"], release)
    for group in results["groups"]:
        minimal = group.get("minimal") or {}
        if not minimal.get("reproduced"):
            continue
        name = f"repro-group-{group['group']}.py"
        writer = engine.ability(FailureReproducer) if engine is not None else None
        if writer is not None and "server_config" in minimal:
            script = writer.write(group, run, name)
            python = engine.environment.python(flavour_of(run["device"]), release)
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


def merge_invariants(first: InvariantsRecord, second: InvariantsRecord) -> InvariantsRecord:
    """One test that checks several runs records each: passes add up, violations follow each other, and the
    request of the first violation is kept."""
    merged = InvariantsRecord(
        passes=first["passes"] + second["passes"],
        recurrent_checks=first.get("recurrent_checks", 0) + second.get("recurrent_checks", 0),
        violations=first["violations"] + second["violations"],
    )
    request = first.get("first_request") or second.get("first_request")
    if request:
        merged["first_request"] = request
    return merged


class RunRecorder:
    """Collects one record per test (setup, call and teardown reports folded together)."""

    def __init__(self, config: pytest.Config, run_dir: Path, header: RunHeader) -> None:
        self.config = config
        self.run_dir = run_dir
        self.header = header
        self.cases: dict[str, dict] = {}  # node id -> its CaseRecord, with "acceptance" while the run goes
        self.final_groups: list[GroupRecord] | None = None  # the run's failure groups, once it has ended
        self.minimal: dict[int, dict] = {}  # failure group -> its minimal case (set by the plugin at session end)
        self.last_partial = time.monotonic()

    # --- collecting ---------------------------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        nodeid = bare_nodeid(report.nodeid)
        case = self.cases.setdefault(nodeid, self._new_case(nodeid))
        case["duration_s"] = round(float(case["duration_s"]) + report.duration, 4)
        for name, value in report.user_properties:
            key = name.removeprefix(RECORD_PREFIX)
            if name.startswith(RECORD_PREFIX) and (key in RECORD_TYPES or key == "params"):
                record = json.loads(value) if isinstance(value, str) else value
                case[key] = merge_invariants(case[key], record) if key == "invariants" and case[key] else record
        self._fold_outcome(case, report)
        if time.monotonic() - self.last_partial > PARTIAL_EVERY_S:
            self.write(status="running", exit_status=None, html=False)

    def _new_case(self, nodeid: str) -> dict:
        return {
            **CaseRecord(
                nodeid=nodeid,
                suite=suite_of(nodeid),
                case=nodeid.split("::", 1)[-1],
                decoder=self.header["decoder"],
                model=self.header["model"],
                params={},
                outcome=UNFINISHED,  # type: ignore[typeddict-item]  # until its call report arrives
                duration_s=0.0,
                message="",
                divergence=None,
                sampling=None,
                invariants=None,
            ),
            "acceptance": None,  # one case's acceptance profile is the run's (Results.acceptance)
        }

    @staticmethod
    def _fold_outcome(case: dict, report: pytest.TestReport) -> None:
        if report.when == "call" and report.passed and case["outcome"] == UNFINISHED:
            case["outcome"] = "passed"
        elif hasattr(report, "wasxfail") and report.skipped:  # an expected failure: a recorded engine finding
            # the failure itself is the evidence: its message (its records came with the report); `known` says why
            failure = report.longreprtext if not isinstance(report.longrepr, tuple) else ""
            failure = XDIST_WORKER_LINE.sub("", failure, count=1)
            case["outcome"] = "xfailed"
            case["message"] = f"expected failure: {report.wasxfail}\n{failure}"[-MESSAGE_LIMIT:].rstrip()
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
    def finished_cases(self) -> list[CaseRecord]:
        finished = (c for c in self.cases.values() if c["outcome"] != UNFINISHED)
        ordered = sorted(finished, key=lambda c: str(c["nodeid"]))
        return [CaseRecord(**{key: value for key, value in c.items() if key != "acceptance"}) for c in ordered]

    def failure_groups(self) -> list[GroupRecord]:
        """The run's failure groups: computed once when the run has ended (the plugin's shrinking and the final
        report share them), else from the cases finished so far."""
        if self.final_groups is not None:
            return self.final_groups
        return failure_groups(self.finished_cases(), self.header)

    def end(self) -> list[GroupRecord]:
        """The run has ended: its failure groups are final."""
        self.final_groups = failure_groups(self.finished_cases(), self.header)
        return self.final_groups

    def results(self, status: str, exit_status: int | None) -> Results:
        acceptance = next((c["acceptance"] for c in self.cases.values() if c.get("acceptance")), None)
        finished = None if status == "running" else datetime.now(UTC).isoformat(timespec="seconds")
        cases = self.finished_cases()
        return Results(
            schema=SCHEMA,
            run=RunHeader(**self.header, finished=finished, status=status, exit_status=exit_status),
            cases=cases,
            groups=[GroupRecord(**group, minimal=self.minimal.get(group["group"])) for group in self.failure_groups()],
            known=known_groups(cases),
            acceptance=acceptance,
            mutants=None,
        )

    def write(self, status: str, exit_status: int | None, html: bool = True) -> Path:
        from harness.report.render import write_report, write_results_json  # pandas and jinja2 load only here

        self.last_partial = time.monotonic()
        results = self.results(status, exit_status)
        if html:
            write_reproducers(results, self.run_dir)
            return write_report(results, self.run_dir)
        return write_results_json(results, self.run_dir)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        status = {pytest.ExitCode.INTERRUPTED: "interrupted", pytest.ExitCode.INTERNAL_ERROR: "crashed"}
        if self.final_groups is None:
            self.end()
        path = self.write(status.get(exitstatus, "complete"), int(exitstatus))
        self.config.stash[REPORT_PATH] = path

    def pytest_terminal_summary(self, terminalreporter) -> None:  # noqa: ANN001 - TerminalReporter
        path = self.config.stash.get(REPORT_PATH, None)
        if path is None:
            return
        from harness.report.judgement import judgement_text

        terminalreporter.write_sep("-", "mtp-harness: what this run judged, per suite")
        terminalreporter.write_line(judgement_text(self.finished_cases(), self.header))
        terminalreporter.write_sep("-", f"mtp-harness report: {path}")


REPORT_PATH = pytest.StashKey[Path]()


def pytest_run_header(config: pytest.Config, options: RunOptions, run_id: str) -> RunHeader:
    """The header of a pytest run: its options, and the command that replays it (its test selection with the
    options written back, harness/contract/run_options.py pytest_arguments)."""
    selection = without_run_options([str(a) for a in config.invocation_params.args])
    command = shlex.join([sys.executable, "-m", "pytest", *selection, *pytest_arguments(options)])
    workers = int(getattr(config.option, "numprocesses", 0) or 0)
    header = run_header(run_id, options, command, workers)
    if options.min_judged:
        header["min_judged"] = dict(options.min_judged)
    engine = engine_of_decoder(options.decoder, options.engine.version)
    if engine is not None:  # an out-of-process engine: which build of it ran
        flavour = flavour_of(options.device)
        source_build = engine.ability(SourceBuild)
        build = source_build.record(options.engine) if source_build is not None else None
        if build is not None:  # built from source here: its version, patches (SHA-256) and build time
            patches = ", ".join(f"{p['name']} {p['sha256'][:12]}" for p in build["build"]["patches"])
            header["engine"] = f"{engine.name} {build['version']} ({flavour}; built from source: {patches})"
            header["engine_build"] = build
        else:
            installed = engine.environment.installed_version(flavour, options.engine.version)
            header["engine"] = f"{engine.name} {installed or 'not installed'} ({flavour})"
        if options.engine.runner is not None:
            header["engine_runner"] = options.engine.runner  # the model runner the engine ran (--engine-runner)
    return header
