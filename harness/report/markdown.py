"""Markdown tables of measured figures, made from runs' results.json, for docs/measurements/: what a run
counted per suite, the greedy coverage, the engine suite's configurations and their evidence, the mutation table
and the efficiency table. Each table is headed by where its figures come
from (the date, the commit and the command of the runs), so a figure in the docs is pasted, never retyped.

    mtp-harness summarize reports/<run-id> [reports/<run-id> ...]   (or a --report-dir: its latest run)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from harness.contract.records import Results, RunHeader
from harness.contract.run_options import DEFAULT_CONFIGURATION, Reference, RunOptions
from harness.report.coverage import greedy_coverage
from harness.report.engine_evidence import required_counters
from harness.report.judgement import judge_run, judgement_records, run_verdict


def load_results(path: Path) -> Results:
    """A results.json file, a run directory (its results.json), or a --report-dir (its latest run: run ids
    start with the time they started)."""
    file = path / "results.json" if path.is_dir() else path
    if path.is_dir() and not file.exists():
        runs = sorted(run / "results.json" for run in path.iterdir() if (run / "results.json").is_file())
        file = runs[-1] if runs else file
    return json.loads(file.read_text())


def provenance(runs: Sequence[Results]) -> str:
    """One line per run: when it started, the commit, and the command that replays it."""
    lines = []
    for results in runs:
        run = results["run"]
        commit = run.get("git_commit") or f"mtp-harness {run.get('mtp_harness', '?')}"
        status = run.get("status", "?")
        lines.append(f"- {run['started'][:10]}, commit `{commit[:10]}`, {status}: `{run['command']}`")
    return "\n".join(lines)


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    def cell(value: object) -> str:
        return "" if value is None else str(value).replace("|", "\\|")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)


def engine_words(run: RunHeader) -> str:
    """How the run's engine ran: its build, as shipped or beneath how many findings' fixes, runner, configuration,
    reference."""
    engine = run.get("engine", "")
    options = RunOptions.from_record(run.get("options") or {})
    if engine and options.engine.fixes:  # the slugs are in the provenance line's command (--engine-fixes)
        engine += f", beneath {len(options.engine.fixes)} findings' fixes"
    elif engine:
        engine += ", as shipped"
    if run.get("engine_runner"):
        engine += f", runner {run['engine_runner']}"
    if options.engine.configuration != DEFAULT_CONFIGURATION:
        engine += f", configuration {options.engine.configuration}"
    if options.reference is Reference.ENGINE:
        engine += ", its own reference"
    return engine


def counts_table(runs: Sequence[Results]) -> str:
    """What each run judged per suite (harness/report/judgement.py): `judged` counts the cases that ran their check
    and were not an expected failure; the expected failures by finding and the cases not judged by reason beside."""
    rows = []
    for results in runs:
        run = results["run"]
        model = Path(str(run["model"])).name
        for j in sorted(judge_run(results["cases"], run), key=lambda j: j.suite):
            known = "; ".join(f"{slug} {count}" for slug, count in j.expected_failures.items())
            skipped = "; ".join(f"{count}: {reason}" for reason, count in j.not_judged.items())
            rows.append([run["decoder"], model, engine_words(run), j.suite, j.cases, j.judged, j.passed, j.failed])
            rows[-1] += [j.near_ties, j.xfailed, known, j.skipped, skipped, j.verdict]
    header = ["decoder", "model", "engine", "suite", "cases", "judged", "passed", "failed", "near-ties"]
    return table([*header, "xfailed", "expected failures (finding: cases)", "skipped", "not judged", "verdict"], rows)


def judgement_json(paths: Sequence[Path]) -> str:
    """`mtp-harness summarize --json`: per run, its header's where-from, its verdict and exit status (run_verdict, as
    `mtp-harness run` gives them) and each suite's judgement."""
    return json.dumps(judgement_document(paths), indent=2) + "\n"


def judgement_document(paths: Sequence[Path]) -> list[dict]:
    """What `summarize --json` prints, as data."""
    runs = [load_results(path) for path in paths]
    return [
        {
            "run_id": results["run"].get("run_id"),
            "started": results["run"]["started"],
            "git_commit": results["run"].get("git_commit"),
            "decoder": results["run"]["decoder"],
            "model": results["run"]["model"],
            "engine": engine_words(results["run"]),
            "command": results["run"]["command"],
            **dict(zip(("verdict", "exit_status"), verdict_of(results), strict=True)),
            "suites": judgement_records(results["cases"], results["run"]),
        }
        for results in runs
    ]


def verdict_of(results: Results) -> tuple[str, int]:
    """A run's verdict and exit status: pytest's own status where the run recorded it, then its suites'."""
    run = results["run"]
    return run_verdict(judge_run(results["cases"], run), run.get("exit_status") or 0)


def coverage_table(runs: Sequence[Results]) -> str | None:
    """Per run with greedy checks: the output positions compared with target-only greedy decoding."""
    rows = []
    for results in runs:
        coverage = greedy_coverage(results["cases"])
        if coverage is None:
            continue
        run = results["run"]
        share = "" if coverage.share is None else f"{coverage.share:.1%}"
        model = Path(str(run["model"])).name
        row = [run["decoder"], model, run.get("dtype", ""), coverage.cases, coverage.positions, coverage.checked]
        rows.append([*row, share, coverage.near_ties])
    if not rows:
        return None
    header = ["decoder", "model", "dtype", "greedy checks", "output positions", "checked", "share", "near-ties"]
    return table(header, rows)


def engine_configs_table(runs: Sequence[Results]) -> str | None:
    """The engine suite's checks of each run: configuration, outcome, and the counters that show it happened."""
    rows = []
    for results in runs:
        model = Path(str(results["run"]["model"])).name
        for case in results["cases"]:
            record = case.get("configuration_evidence")
            if not record:
                continue
            name = case["case"].split("::")[-1].removeprefix("test_")
            shown = required_counters(record)
            rows.append([results["run"]["decoder"], model, name, record["configuration"], case["outcome"], shown])
    if not rows:
        return None
    return table(["decoder", "model", "check", "configuration", "outcome", "evidence (the engine's counters)"], rows)


def mutants_table(results: Results) -> str | None:
    """The mutation catalogue's table: every decoder against every suite, and the score."""
    mutants = results.get("mutants")
    if not mutants:
        return None
    suites = mutants["suites"]
    rows = []
    if mutants["correct_decoder"]:
        rows.append(["mtp (correct)", *(mutants["correct_decoder"][s] for s in suites), "pass everything", ""])
    for row in mutants["rows"]:
        cells = [row["cells"][s] for s in suites]
        rows.append([row["mutant"], *cells, row["expected"], f"{row['elapsed_s']:.0f}"])
    score = (
        f"\n\n[{mutants['mode']}] mutation score {mutants['caught']}/{mutants['scored']}; correct decoder passes "
        f"everything: {mutants['correct_passes']}; controls as expected: {mutants['controls_pass']}; "
        f"{mutants['elapsed_s']:.0f} s wall"
    )
    return table(["decoder", *suites, "expected", "s"], rows) + score


def efficiency_table(results: Results) -> str | None:
    """Samples (or sequences) to the sampling suite's first rejection of each mutant, against ideal tests."""
    rows = (results.get("mutants") or {}).get("efficiency")
    if not rows:
        return None
    header = [
        "mutant",
        "case",
        "first rejection (streams)",
        "median",
        "ideal LR N",
        "ideal chi-square N",
        "ratio",
        "TV",
    ]
    body = []
    for row in rows:
        if "error" in row:
            body.append([row["mutant"], row["case"], row["error"], "", "", "", "", ""])
            continue
        streams = ", ".join("none" if s is None else str(s) for s in row.get("streams", []))
        body.append(
            [
                row["mutant"],
                row["case"],
                streams,
                row.get("first_rejection_n"),
                row.get("ideal_lr_n"),
                row.get("ideal_chi2_n"),
                _rounded(row.get("ratio")),
                _rounded(row.get("tv")),
            ]
        )
    return table(header, body)


def _rounded(value: object) -> object:
    return f"{value:.3g}" if isinstance(value, float) else value


def summary(paths: Sequence[Path]) -> str:
    """The markdown block for docs/measurements/: provenance, counts, and the mutation tables when present."""
    runs = [load_results(path) for path in paths]
    parts = [provenance(runs), counts_table(runs)]
    parts += [part for part in (coverage_table(runs), engine_configs_table(runs)) if part]
    for results in runs:
        parts += [part for part in (mutants_table(results), efficiency_table(results)) if part]
    return "\n\n".join(parts) + "\n"
