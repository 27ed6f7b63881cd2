"""A real `mtp-harness run` on a slice of every suite family: its output carries no warning of the harness's
own making, and its report still receives every record the tests attach."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from harness.contract.paths import REPO_ROOT

# A few cases of each family, each one requesting record_property (greedy's check_tokens, invariants'
# assert_clean and acceptance profile, draft conformance, the sampling family's check).
SLICE = " or ".join(
    [
        "(test_max_new_tokens_at_every_value and natural-01 and k1)",
        "test_every_pass_accounts_for_its_tokens",
        "(test_greedy_drafts_equal_the_harness_proposers and k1)",
        "(test_state_is_clean_for_a_request_decoded_alone and k1)",
        "(test_samples_follow_the_target_law and T0.7-nofilter-k2-greedy)",
    ]
)
HARNESS_WARNING = re.compile(r"(^|[\s/])(harness|suites)/\S+\.py:\d+: \w*Warning")


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, Path]:
    """`mtp-harness run` at the smoke budget on SLICE, with the default workers; its output and run directory."""
    reports = tmp_path_factory.mktemp("reports")
    command = [sys.executable, "-m", "harness.commands.cli", "run", "--budget", "smoke", "--report-dir", str(reports)]
    done = subprocess.run(
        [*command, "--", "-k", SLICE, "-p", "no:cacheprovider"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    (run_dir,) = reports.iterdir()
    return done, run_dir


def test_a_run_of_every_suite_family_prints_no_warning_of_the_harness(small_run):
    done, _ = small_run
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "PytestWarning" not in output, output
    assert not [line for line in output.splitlines() if HARNESS_WARNING.search(line)], output
    lines = output.splitlines()
    heading = next(i for i, line in enumerate(lines) if line.split()[:3] == ["suite", "cases", "judged"])
    verdicts = {line.split()[0]: line.split()[-1] for line in lines[heading + 1 : heading + 4]}
    assert verdicts == {"greedy": "ok", "invariants": "ok", "sampling": "ok"}, output


def test_the_report_of_that_run_still_receives_every_record(small_run):
    _, run_dir = small_run
    results = json.loads((run_dir / "results.json").read_text())
    cases = {case["case"].split("[")[0]: case for case in results["cases"]}
    assert results["acceptance"], "the acceptance profile reaches the report"
    assert cases["test_samples_follow_the_target_law"]["sampling"]["case_id"].startswith("T0.7-nofilter-k2-greedy")
    assert cases["test_state_is_clean_for_a_request_decoded_alone"]["invariants"]["passes"] > 0
    assert all(case["params"] for name, case in cases.items() if name != "test_every_pass_accounts_for_its_tokens")
    junit = {case.get("name").split("[")[0]: case for case in ElementTree.parse(run_dir / "junit.xml").iter("testcase")}
    properties = {name: {p.get("name") for p in case.iter("property")} for name, case in junit.items()}
    assert "mtp_harness.acceptance" in properties["test_every_pass_accounts_for_its_tokens"]
    assert {"sampling", "mtp_harness.sampling"} <= properties["test_samples_follow_the_target_law"]
    assert "acceptance_per_depth" in properties["test_greedy_drafts_equal_the_harness_proposers"]
    assert "mtp_harness.invariants" in properties["test_state_is_clean_for_a_request_decoded_alone"]
