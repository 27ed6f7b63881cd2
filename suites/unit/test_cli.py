"""The command line: `mtp-harness run` builds the pytest command; `mtp-harness bench` measures and reports."""

from __future__ import annotations

import json

from harness.cli import build_parser, main, pytest_command


def test_run_builds_a_reproducible_pytest_command(tmp_path):
    args = build_parser().parse_args(
        ["run", "--suite", "greedy", "--decoder", "target", "--dtype", "float32", "-n", "2", "--", "-x"]
    )
    command = pytest_command(args, tmp_path / "junit.xml")
    assert command[4:6] == ["-m", "greedy"]
    assert "--decoder=target" in command and "--dtype=float32" in command
    assert command[-5:] == ["2", "--dist", "loadgroup", f"--junitxml={tmp_path / 'junit.xml'}", "-x"]


def test_bench_reports_throughput_acceptance_and_head_cost_as_json(capsys):
    assert main(["bench", "--requests", "16", "--transformers-requests", "2", "--dtype", "float64", "--json"]) == 0
    [result] = json.loads(capsys.readouterr().out)
    assert result["dtype"] == "float64" and result["mtp_requests"] == 16 and result["k"] == 2
    assert result["mtp_samples_per_second"] > 0 and result["transformers_samples_per_second"] > 0
    assert result["speedup"] == result["mtp_samples_per_second"] / result["transformers_samples_per_second"]
    assert 1.0 <= result["tokens_per_pass"] <= 3.0 and 0.0 <= result["accepted_drafts_per_pass"] <= 2.0
    assert result["head_cost_vs_verify_pass"] > 0
