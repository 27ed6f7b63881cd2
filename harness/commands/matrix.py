"""`mtp-harness matrix`: which releases of an engine are safe with MTP. For each release given: install its environment
when missing (every install first, so a release that does not exist, does not install or has no MTP stops the
command with one line before anything long runs); run every finding's standalone reproducer (its folder's reproducer.py,
the engine alone) against it; run the suites on it as shipped (`mtp-harness run --engine-version`), the findings
watching where their reproducers reproduced them; then write versions.json and its page (index.html) in
reports/matrix-<time>/, again after each release, so a run stopped half-way keeps what it measured.

`--record` writes the reproducers' verdicts into each finding's folder's `versions.json`: what every later
run reads to decide which releases a finding watches."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.contract.budget import BUDGETS
from harness.contract.errors import HarnessError
from harness.contract.paths import REPO_ROOT, REPORTS, resolve_model_path
from harness.contract.run_options import declare_options, option_named
from harness.contract.suites import parse_suites
from harness.subjects.engines import finding_versions
from harness.subjects.engines.environments import (
    ENGINE_INFO,
    VERSION_PATTERN,
    default_flavour,
    directory_size,
    install,
    mtp_problem,
)
from harness.subjects.engines.findings import FINDINGS_DIR, Finding
from harness.subjects.engines.reproducer_verdict import reproducer_verdict

if TYPE_CHECKING:
    from harness.subjects.engines.engine import Engine

HELP = "which engine releases are safe with MTP: the suites and every finding's reproducer on each release"
DESCRIPTION = (
    "Install each release of the engine where missing, run every finding's reproducer and the suites on it as shipped, "
    "and write versions.json and its page in reports/matrix-<time>/."
)

REPRODUCER_TIMEOUT_S = 900


@dataclass(frozen=True)
class MatrixPlan:
    """What a matrix command measures, checked at the door."""

    engine: Engine
    decoder: str
    model: str
    versions: tuple[str, ...]
    suite: str
    budget: str
    runner: str | None
    flavour: str
    workers: int
    max_failures: int  # a release's run stops after this many failures no finding explains (pytest --maxfail)


def parse_versions(text: str) -> tuple[str, ...]:
    """--versions: releases joined by commas, each a release number, none twice."""
    versions = tuple(part.strip() for part in text.split(","))
    for version in versions:
        if not VERSION_PATTERN.fullmatch(version):
            raise HarnessError(f"--versions: {version!r} is not a release number (like 0.31.0)")
    twice = sorted({version for version in versions if versions.count(version) > 1})
    if twice:
        raise HarnessError(f"--versions: {', '.join(twice)} given twice")
    return versions


def plan(args: argparse.Namespace) -> MatrixPlan:
    """The door: the decoder is an engine's speculative decoder, the releases are release numbers, the model directory,
    suites, budget and runner exist. Raises HarnessError (one line)."""
    from harness.contract.run_options import Reference
    from harness.door.checks import checked_model
    from harness.subjects.engines.abilities import ModelRunners, SourceBuild
    from harness.subjects.engines.registry import engine_of_decoder

    engine = engine_of_decoder(args.decoder, any_release=True)
    if engine is None or not engine.decoders[args.decoder]:
        raise HarnessError(
            f"--decoder {args.decoder}: not an engine's MTP decoder (vllm-mtp, llamacpp-mtp, transformers-mtp)"
        )
    versions = parse_versions(args.versions)
    suite = ",".join(parse_suites(args.suite))
    if args.budget not in BUDGETS:
        raise HarnessError(f"--budget {args.budget}: choose {', '.join(sorted(BUDGETS))}")
    flavour = args.flavour or default_flavour(engine.environment)
    runners, build = engine.ability(ModelRunners), engine.ability(SourceBuild)
    runner = args.runner or (build.release_runner if build else runners.picked.get(flavour) if runners else None)
    if runner is not None and (runners is None or runner not in runners.runners):
        raise HarnessError(
            f"--runner {runner}: {engine.name} has the runners {', '.join(runners.runners if runners else ())}"
        )
    if build is not None and runner == build.runner:
        raise HarnessError(f"--runner {runner}: built from the pinned release's source only, not across releases")
    try:
        checked_model(args.model, Reference.HARNESS, engine)
    except HarnessError as error:
        raise HarnessError(f"--model {args.model}: {error}") from None
    if args.max_failures < 1:
        raise HarnessError(f"--max-failures {args.max_failures}: at least 1")
    if args.record and REPO_ROOT is None:
        raise HarnessError("--record writes into the clone's finding folders; this harness is installed, not a clone")
    return MatrixPlan(
        engine, args.decoder, args.model, versions, suite, args.budget, runner, flavour, args.workers, args.max_failures
    )


def install_all(p: MatrixPlan, log: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    """Every release installed (kept where it is) and probed for MTP; release -> its engine.json, with
    `model_problem`: why the release cannot serve the model with the decoder, asked of the release as the door asks it
    (its suites are then not run), else "". Raises HarnessError naming the first release that does not exist, does not
    install or has no MTP."""
    from harness.door.checks import release_model_problem

    environment = p.engine.environment
    installed = {}
    for version in p.versions:
        python = install(environment, p.flavour, log=log, version=version)
        problem = mtp_problem(environment, p.flavour, version)
        if problem:
            raise HarnessError(problem)
        info = json.loads((python.parent.parent / ENGINE_INFO).read_text())
        model_problem = release_model_problem(p.engine, p.decoder, p.flavour, version, p.model)
        if model_problem:
            log(f"{version}: {model_problem}")
        installed[version] = {**info, "python": str(python), "model_problem": model_problem}
    return installed


def reproduce(python: str, finding: Finding, arguments: tuple[str, ...]) -> dict[str, Any]:
    """One finding's reproducer against one release: its verdict (finding_versions.VERDICTS), exit code, seconds and
    the line it said it with (or why it could not run)."""
    script = finding.reproducer
    if script is None:
        return {"verdict": finding_versions.COULD_NOT_RUN, "exit_code": None, "line": "no reproducer.py in its folder"}
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    started = time.monotonic()
    try:
        done = subprocess.run(
            [python, str(script), *arguments],
            capture_output=True,
            text=True,
            timeout=REPRODUCER_TIMEOUT_S,
            env=env,
            cwd=script.parent,
            check=False,
        )
    except subprocess.TimeoutExpired:
        timed_out = f"timed out after {REPRODUCER_TIMEOUT_S} s"
        return {"verdict": finding_versions.COULD_NOT_RUN, "exit_code": None, "line": timed_out}
    except OSError as error:  # the script or the release's Python could not be started
        return {
            "verdict": finding_versions.COULD_NOT_RUN,
            "exit_code": None,
            "line": f"{type(error).__name__}: {error}",
        }
    verdict = reproducer_verdict(done.returncode, done.stdout, done.stderr)
    return {**verdict, "seconds": round(time.monotonic() - started, 1)}


def applicable(p: MatrixPlan) -> list[Finding]:
    """The findings a matrix can measure: shown on its flavour and runner. Another's reproducer would say `not
    reproduced` where its record never claimed the bug, and recording that would stop it watching the release."""
    return [f for f in p.engine.findings if p.flavour in f.flavours and (not f.runners or p.runner in f.runners)]


def reproduce_all(p: MatrixPlan, python: str) -> dict[str, dict[str, Any]]:
    """The applicable findings' reproducers on one release, -n at once; slug -> its result."""
    from harness.subjects.engines.abilities import FindingReproducers

    reproducers = p.engine.ability(FindingReproducers)
    if REPO_ROOT is None or reproducers is None:
        return {}
    arguments = reproducers.arguments(p.runner, resolve_model_path(p.model))
    findings = applicable(p)
    with ThreadPoolExecutor(max_workers=max(1, p.workers)) as pool:
        results = pool.map(lambda finding: reproduce(python, finding, arguments), findings)
        return {finding.slug: result for finding, result in zip(findings, results, strict=True)}


def run_suites(p: MatrixPlan, version: str, directory: Path, verdicts_file: Path) -> dict[str, Any]:
    """`mtp-harness run` on one release, its findings watching where the matrix's reproducers found them; its exit
    code, seconds, judgement per suite, new failures and report (relative to the matrix's folder)."""
    from harness.report.judgement import judgement_records
    from harness.report.versions import new_failures, watched_cases_run

    command = [sys.executable, "-m", "harness.commands.cli", "run", "--decoder", p.decoder, "--model", p.model]
    command += ["--engine-version", version, "--suite", p.suite, "--budget", p.budget, "-n", str(p.workers)]
    command += ["--report-dir", str(directory)] + (["--engine-runner", p.runner] if p.runner else [])
    command += ["--", f"--maxfail={p.max_failures}"]
    env = {**os.environ, finding_versions.VARIABLE: str(verdicts_file)}
    directory.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with (directory / "run.log").open("w") as log:
        code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env, check=False).returncode
    seconds = round(time.monotonic() - started, 1)
    record: dict[str, Any] = {
        "command": shlex.join(["mtp-harness", *command[3:]]),
        "exit_code": code,
        "seconds": seconds,
    }
    runs = sorted(directory.glob("*/results.json"))
    if not runs:
        tail = (directory / "run.log").read_text().strip().splitlines()[-1:] or ["no output"]
        return {**record, "suites": [], "new_failures": [], "error": tail[0]}
    results = json.loads(runs[-1].read_text())
    report = runs[-1].parent / "index.html"
    suites = judgement_records(results["cases"], results["run"])
    failed = sum(suite["failed"] for suite in suites)  # errors included, as the judgement counts them
    return {
        **record,
        # a release that fails this much is unsafe whatever the rest says: its run stopped there
        "stopped_after_failures": p.max_failures if failed >= p.max_failures else None,
        "suites": suites,
        "new_failures": new_failures(results.get("groups") or []),
        "watched_run": watched_cases_run(p.engine.findings, resolve_model_path(p.model).name, results["cases"]),
        "report": str(report.relative_to(directory.parent)) if report.is_file() else None,
    }


def matrix_record(p: MatrixPlan, header: dict[str, Any], columns: list[dict[str, Any]], watched: dict) -> dict:
    """versions.json: the header, a column per release, a row per finding."""
    from harness.report.versions import SCHEMA, column_totals, finding_rows

    for column in columns:
        run = column.get("run")
        column["totals"] = column_totals(run["suites"]) if run and run["suites"] else None
    rows = finding_rows(p.engine.findings, columns, watched)
    return {"schema": SCHEMA, "matrix": header, "versions": columns, "findings": rows, "findings_url": findings_url()}


def findings_url() -> str:
    return f"{REPO_ROOT / FINDINGS_DIR}/" if REPO_ROOT is not None else ""


def write_matrix(record: dict[str, Any], directory: Path) -> None:
    from harness.report.versions import render_versions_page, versions_markdown

    (directory / "versions.json").write_text(json.dumps(record, indent=2) + "\n")
    (directory / "index.html").write_text(render_versions_page(record))
    (directory / "versions.md").write_text(versions_markdown(record))


def main(args: argparse.Namespace) -> int:
    from harness.report.run_header import git_commit

    log = lambda line: print(f"mtp-harness matrix: {line}", flush=True)  # noqa: E731
    try:
        p = plan(args)
    except HarnessError as error:
        print(f"mtp-harness matrix: {error}", file=sys.stderr)
        return 2
    try:
        installed = install_all(p, log)
    except HarnessError as error:
        lines = [line for line in str(error).splitlines() if line.strip()] or ["install failed"]
        said = lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1].strip()}"  # the command, then pip's words
        print(f"mtp-harness matrix: {said}", file=sys.stderr)
        return 1
    directory = args.report_dir / time.strftime("matrix-%Y%m%d-%H%M%S")
    directory.mkdir(parents=True)
    header = {
        "decoder": p.decoder,
        "model": p.model,
        "suite": p.suite,
        "budget": p.budget,
        "runner": p.runner,
        "flavour": p.flavour,
        "versions": list(p.versions),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "finished": None,
        "git_commit": git_commit(),
        "command": shlex.join(["mtp-harness", *sys.argv[1:]]),
    }
    columns = [
        {
            "version": v,
            "install": _install_record(installed[v]),
            "mtp_problem": installed[v].get("model_problem") or None,
            "reproducers": {},
            "run": None,
        }
        for v in p.versions
    ]
    measured: dict[str, dict[str, str]] = {}
    verdicts_file = directory / "finding-versions.json"
    for column in columns:
        version = column["version"]
        log(f"{version}: every finding's reproducer")
        column["reproducers"] = reproduce_all(p, installed[version]["python"])
        for slug, result in column["reproducers"].items():
            measured.setdefault(slug, {})[version] = result["verdict"]
            log(f"{version}: {slug}: {result['verdict']} ({result['line']})")
    recorded = {f.slug: finding_versions.read_measured(f.slug, f.folder) for f in p.engine.findings}
    verdicts = finding_versions.merged(recorded, measured)
    finding_versions.write_verdicts(verdicts, verdicts_file, header["started"], header["git_commit"])
    watched = {
        f.slug: finding_versions.watched_versions(f.slug, f.found_in, verdicts.get(f.slug, {}))
        for f in p.engine.findings
    }
    write_matrix(matrix_record(p, header, columns, watched), directory)  # the verdicts kept before the long runs
    for column in columns:
        if column["mtp_problem"]:
            log(f"{column['version']}: the suites not run: {column['mtp_problem']}")
            continue
        log(f"{column['version']}: the suites {p.suite} at budget {p.budget}")
        column["run"] = run_suites(p, column["version"], directory / column["version"], verdicts_file)
        log(f"{column['version']}: exit {column['run']['exit_code']} in {column['run']['seconds']} s")
        write_matrix(matrix_record(p, header, columns, watched), directory)
    header["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    record = matrix_record(p, header, columns, watched)
    write_matrix(record, directory)
    if args.record:
        for finding in p.engine.findings:
            if finding.folder is not None and finding.slug in verdicts:
                by_version = verdicts[finding.slug]
                finding_versions.write_finding_verdicts(
                    finding.folder, finding.slug, by_version, header["started"], header["git_commit"]
                )
        log("recorded the reproducers' verdicts in each finding's versions.json")
    print(matrix_text(record))
    log(f"versions.json and the page: {directory / 'index.html'}")
    return 0


def _install_record(info: dict[str, Any]) -> dict[str, Any]:
    """A release's environment: install time, size (measured now for an install older than its record of it)."""
    home = Path(info["python"]).parent.parent
    size = info.get("size_bytes") or directory_size(home)
    return {"seconds": info.get("install_seconds"), "size_bytes": size, "home": str(home)}


def matrix_text(record: dict[str, Any]) -> str:
    """The matrix as the terminal prints it: a line per release, a line per finding."""
    from harness.report.versions import disagreements

    lines = []
    for column in record["versions"]:
        totals = column.get("totals") or {}
        cells = ", ".join(f"{key} {value}" for key, value in totals.items())
        new = len((column.get("run") or {}).get("new_failures") or [])
        stopped = (column.get("run") or {}).get("stopped_after_failures")
        where = f"; STOPPED after {stopped} failures no finding explains" if stopped else ""
        lines.append(f"{column['version']}: {cells or 'not run'}; {new} new failure group(s){where}")
    for row in record["findings"]:
        by_version = "; ".join(
            f"{version} {cell['reproducer'] or '-'}/{cell['expected_failures']}"
            for version, cell in row["cells"].items()
        )
        lines.append(f"{row['slug']}: {by_version}")
    for slug, version in disagreements(record["findings"]):
        lines.append(f"DISAGREE: {slug} on {version}: the suites contradict its reproducer")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--decoder", required=True, help="an engine's MTP decoder (vllm-mtp, llamacpp-mtp)")
    parser.add_argument("--versions", required=True, help="the engine's releases, joined by commas (0.31.0,0.32.0)")
    smoke = replace(option_named("budget"), default="smoke")  # a release's suites at the smoke budget by default
    declare_options(parser.add_argument, lambda row: [row.cli_flag], (option_named("model"), smoke))
    parser.add_argument("--suite", default="greedy", help="the suites run on each release (default: greedy)")
    parser.add_argument(
        "--runner", default=None, help="the engine's runner on every release (default: vLLM v1 on CPU; llama.cpp wheel)"
    )
    parser.add_argument("--flavour", choices=["cpu", "cuda"], default=None, help="the engines' flavour")
    parser.add_argument("-n", "--workers", type=int, default=2, help="pytest-xdist workers and reproducers at once")
    parser.add_argument(
        "--max-failures",
        type=int,
        default=50,
        help="a release's run stops after this many failures no finding explains (an engine that fails every request "
        "would otherwise restart for each case); the page says where it stopped (default 50)",
    )
    parser.add_argument("--report-dir", type=Path, default=REPORTS, help="where matrix-<time>/ goes")
    parser.add_argument(
        "--record",
        action="store_true",
        help="write the reproducers' verdicts into each finding's folder's `versions.json` (which releases each "
        "finding watches in every later run)",
    )
