"""The command line: `mtp-harness run` builds the pytest command; `mtp-harness bench` measures and reports."""

from __future__ import annotations

import json

import pytest

from harness.commands.cli import build_parser, main
from harness.commands.run import pytest_command
from harness.contract.records import SCHEMA
from harness.contract.run_options import RunOptions, given_options


def test_run_builds_a_reproducible_pytest_command(tmp_path):
    args = build_parser().parse_args(
        ["run", "--suite", "greedy", "--decoder", "target", "--dtype", "float32", "-n", "2", "--", "-x"]
    )
    command = pytest_command(args, given_options(args), tmp_path / "junit.xml")
    assert command[command.index("-m", 3) + 1] == "greedy"
    assert command[command.index("-c") + 1].endswith(("pyproject.toml", "suites.ini")), "the suites' own settings"
    assert "--harness-decoder=target" in command and "--harness-dtype=float32" in command
    assert command[-6:] == [
        "2", "--dist", "loadgroup", "--no-loadscope-reorder", f"--junitxml={tmp_path / 'junit.xml'}", "-x"
    ]  # fmt: skip


def test_run_takes_several_suites_joined_by_commas_and_names_an_unknown_one(tmp_path, capsys):
    args = build_parser().parse_args(["run", "--suite", "engine,greedy"])
    command = pytest_command(args, given_options(args), tmp_path / "junit.xml")
    assert command[command.index("-m", 3) + 1] == "greedy or engine"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--suite", "greedy,enigne"])
    assert "unknown suite 'enigne'. Did you mean engine? Known: greedy, invariants" in capsys.readouterr().err


def test_bench_reports_throughput_acceptance_and_head_cost_as_json(capsys):
    assert main(["bench", "--requests", "16", "--transformers-requests", "2", "--dtype", "float64", "--json"]) == 0
    [result] = json.loads(capsys.readouterr().out)
    assert result["dtype"] == "float64" and result["mtp_requests"] == 16 and result["k"] == 2
    assert result["mtp_samples_per_second"] > 0 and result["transformers_samples_per_second"] > 0
    assert result["speedup"] == result["mtp_samples_per_second"] / result["transformers_samples_per_second"]
    assert 1.0 <= result["tokens_per_pass"] <= 3.0 and 0.0 <= result["accepted_drafts_per_pass"] <= 2.0
    assert result["head_cost_vs_verify_pass"] > 0


def test_the_catalogue_table_scores_caught_mutants_and_requires_the_controls_to_pass(tmp_path):
    from harness.mutation.catalogue import catalogue_table, format_table, run_catalogue

    decoders = ["mtp", "mutant:commit-heads-unverified", "mutant:no-bonus"]
    selection = ["-k", "natural_drafts_reproduce"]  # a slice of the greedy suite keeps this test short
    runs = run_catalogue(decoders, ["greedy"], tmp_path, RunOptions(), workers=2, selection=selection)
    table = catalogue_table(runs, ["greedy"], 1.0)
    assert table["correct_decoder"] == {"greedy": "passed"} and table["correct_passes"]
    rows = {row["mutant"]: row for row in table["rows"]}
    assert rows["commit-heads-unverified"]["cells"] == {"greedy": "caught"}
    assert rows["no-bonus"]["cells"] == {"greedy": "not caught"} and rows["no-bonus"]["expected"] == "exact"
    assert table["score"] == 1.0 and table["scored"] == 1 and table["controls_pass"]
    assert "mutation score 1/1 = 100%" in format_table(table)
    assert "test_natural_drafts" in rows["commit-heads-unverified"]["first_failure"]["greedy"]


def test_the_nightly_job_runs_suites_then_catalogue_at_its_budget_and_merges_the_reports(tmp_path):
    from harness.commands.nightly import catalogue_arguments, merge_catalogue, suites_command
    from harness.report.render import write_report

    command = suites_command("smoke", "mtp", "tiny-mimo", "cpu", "float32", 2, tmp_path / "run")
    assert "--harness-budget=smoke" in command and "--harness-dtype=float32" in command
    assert "--harness-slow" in command, "the nightly runs slow tests too"
    assert command[command.index("-m", 3) + 1] == "greedy or invariants or sampling or features or engine or gpu"
    smoke = catalogue_arguments("smoke", "tiny-mimo", "cpu", "float32", 2, tmp_path / "cat")
    assert smoke.count("--mutant") == 4 and "--full-table" not in smoke and "--budget=smoke" in smoke
    full = catalogue_arguments("full", "tiny-mimo", "cuda", "bfloat16", 2, tmp_path / "cat")
    assert "--mutant" not in full and "--full-table" in full and "--efficiency" in full
    run = {
        "run_id": "r",
        "started": "2026-11-29T00:00:00",
        "finished": None,
        "status": "complete",
        "exit_status": 0,
        "session_seed": 1,
        "decoder": "mtp",
        "model": "m",
        "device": "cpu",
        "dtype": "float32",
        "git_commit": None,
        "torch": "2",
        "transformers": "5",
        "python": "3.11",
        "command": "c",
        "workers": 0,
    }
    write_report(
        {"schema": SCHEMA, "run": run, "cases": [], "groups": [], "acceptance": None, "mutants": None}, tmp_path / "run"
    )
    table = {
        "mode": "first catch",
        "suites": ["greedy"],
        "rows": [],
        "score": 1.0,
        "correct_decoder": {},
        "correct_passes": True,
        "elapsed_s": 1.0,
        "efficiency": None,
    }
    write_report(
        {"schema": SCHEMA, "run": run, "cases": [], "groups": [], "acceptance": None, "mutants": table},
        tmp_path / "cat",
    )
    alarms = {"runs": 3, "seeds": [1, 2, 3], "rejecting": [{"seed": 2, "exit_status": 1}], "family_alpha": 1e-3}
    merge_catalogue(tmp_path / "run", tmp_path / "cat", alarms)
    merged = json.loads((tmp_path / "run" / "results.json").read_text())
    assert merged["mutants"]["mode"] == "first catch" and merged["false_alarms"]["rejecting"][0]["seed"] == 2
    page = (tmp_path / "run" / "index.html").read_text()
    assert "<strong>1</strong> run(s)" in page and "seeds 2" in page


def test_the_nightly_counts_seeded_sampling_runs_that_reject(monkeypatch):
    import harness.commands.nightly as nightly

    commands = []

    class Finished:
        def __init__(self, command, **_):
            commands.append(command)
            self.code = 1 if "--harness-seed=20261131" in command else 0

        def wait(self):
            return self.code

    monkeypatch.setattr(nightly.subprocess, "Popen", Finished)
    alarms = nightly.false_alarm_runs("smoke", "tiny-deepseek-v3", "cpu", "float32", 1)
    assert alarms["runs"] == 2 and [c for c in commands if "--harness-decoder=mtp" in c] == commands
    assert alarms["rejecting"] == [{"seed": 20261131, "exit_status": 1}]


def test_run_with_the_mutants_suite_hands_the_catalogue_every_option_it_reads(monkeypatch):
    import harness.commands.cli as cli
    import harness.commands.mutants as catalogue_command

    received = {}
    monkeypatch.setattr(catalogue_command, "main", lambda args: received.setdefault("args", args) and 0)
    cli.main(["run", "--suite", "mutants", "-n", "3", "--dtype", "float32", "--budget", "smoke"])
    args = received["args"]
    wanted = ("mutant", "suite", "workers", "model", "device", "dtype", "seed", "report_dir", "efficiency")
    assert all(hasattr(args, name) for name in (*wanted, "json", "budget", "full_table"))
    assert (args.workers, args.dtype, args.budget, args.full_table) == (3, "float32", "smoke", False)
    parsed = cli.build_parser().parse_args(["mutants"])
    assert set(vars(parsed)) - {"command"} <= set(vars(args)), "run --suite mutants must set every mutants option"


def test_the_run_verdict_names_a_suite_that_judged_nothing(tmp_path):
    from harness.commands.run import not_judged_suites

    def case(suite: str, outcome: str, message: str = "") -> dict:
        return {"nodeid": f"suites/{suite}/test_a.py::t", "suite": suite, "outcome": outcome, "message": message}

    results = tmp_path / "results.json"
    cases = [case("greedy", "passed"), case("sampling", "xfailed"), case("engine", "skipped"), case("x", "failed")]
    cases.append(case("features", "skipped", "not applicable: decoder 'x' serves no feature"))
    results.write_text(json.dumps({"run": {"command": ""}, "cases": cases}))
    unjudged = [("engine", "NOT JUDGED"), ("sampling", "NOT JUDGED")]
    assert not_judged_suites(results) == unjudged, "not applicable: left out of the default selection"
    asked = not_judged_suites(results, asked=("features",))
    assert asked == [*unjudged, ("features", "not applicable")], "asked by name"
    results.write_text(json.dumps({"run": {"command": "", "min_judged": {"greedy": 2}}, "cases": cases}))
    assert ("greedy", "TOO FEW JUDGED") in not_judged_suites(results), "the verdict each suite had"
    assert not_judged_suites(tmp_path / "missing.json") == [], "a run that wrote no results names no suite"


@pytest.mark.parametrize(
    ("words", "named"),
    [
        ([], ()),
        (["--suite", "all"], ()),
        (["--suite", "engine"], ("engine",)),
        (["--suite", "greedy,engine"], ("greedy", "engine")),
    ],
)
def test_only_suites_named_on_the_command_line_count_when_not_applicable(words, named):
    """The default selection reaches `main` expanded (argparse reads a default through the option's type): it names no
    suite, so a suite not applicable to the decoder stays out of the verdict (the default run prints no NOT JUDGED)."""
    from harness.commands.run import named_suites

    assert named_suites(build_parser().parse_args(["run", *words]).suite) == named


def test_a_run_in_which_a_suite_judged_nothing_exits_with_its_own_status(tmp_path, monkeypatch, capsys):
    """pytest's status was 0 (every case of the suite was an expected failure): `mtp-harness run` exits 6."""
    import subprocess

    import harness.commands.run as run

    class Pytest:  # the child pytest: its recorder writes results.json where the command asked
        def __init__(self, command, env):
            directory = tmp_path / "reports" / "r"
            directory.mkdir(parents=True)
            cases = [{"nodeid": "suites/sampling/test_a.py::t", "suite": "sampling", "outcome": "xfailed"}]
            (directory / "results.json").write_text(json.dumps({"run": {"command": ""}, "cases": cases}))

        def wait(self):
            return 0

    monkeypatch.setattr(run.time, "strftime", lambda pattern: "r")
    monkeypatch.setattr(subprocess, "Popen", Pytest)
    assert main(["run", "--suite", "sampling", "--report-dir", str(tmp_path / "reports"), "-n", "0"]) == 6
    assert "NOT JUDGED: sampling (NOT JUDGED)" in capsys.readouterr().out
