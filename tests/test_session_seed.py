"""--harness-seed moves every case's randomness and replays it: two session seeds give different samples, the
same seed gives the same results.json (times and the command line aside), and the default keeps the seeds the
suites always had (harness/contract/seeds.py session_shifted)."""

from __future__ import annotations

import json

import pytest

from harness.contract.paths import SUITES_DIR
from harness.contract.seeds import DEFAULT_SEED, SEED_MODULUS, session_shifted

pytest_plugins = ["pytester"]

SELECTION = [
    str(SUITES_DIR / "sampling" / "test_target_distribution.py") + "::test_samples_follow_the_target_law",
    str(SUITES_DIR / "invariants" / "test_state_after_every_pass.py")
    + "::test_state_is_clean_after_every_pass_in_a_batch",
]
FILTER = "T1.0-nofilter-k2-greedy-code-01 or k2-sampling-sampled-drafts"


def seeded_run(pytester, tmp_path, seed: int, name: str) -> dict:
    report = tmp_path / name
    result = pytester.runpytest_inprocess(
        *SELECTION,
        "-k",
        FILTER,
        "-m",
        "sampling or invariants",
        f"--harness-seed={seed}",
        "--harness-sampling-tv=0.3",  # N for a TV shift of 0.3: a few hundred samples, enough to tell two seeds apart
        f"--harness-report={report}",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=2)
    results = json.loads((report / "results.json").read_text())
    volatile = ("run_id", "started", "finished", "command")
    run = {key: value for key, value in results["run"].items() if key not in volatile}
    cases = [{key: value for key, value in case.items() if key != "duration_s"} for case in results["cases"]]
    acceptance = {k: v for k, v in (results["acceptance"] or {}).items() if k != "head_cost_vs_verify"}
    return {**results, "run": run, "cases": cases, "acceptance": acceptance}


def sampled_cells(results: dict) -> list:
    [case] = [c for c in results["cases"] if c["sampling"]]
    return [(cell["label"], cell["observed"]) for cell in case["sampling"]["cells_table"]]


def passes_checked(results: dict) -> int:
    [case] = [c for c in results["cases"] if c["invariants"]]
    return case["invariants"]["passes"]


@pytest.mark.xdist_group("session-seed")
def test_two_session_seeds_sample_differently_and_one_replays_exactly(pytester, tmp_path):
    first = seeded_run(pytester, tmp_path, 7, "a")
    again = seeded_run(pytester, tmp_path, 7, "b")
    other = seeded_run(pytester, tmp_path, 8, "c")
    assert first["run"]["session_seed"] == 7 and other["run"]["session_seed"] == 8
    assert {**first, "run": None} == {**again, "run": None}, "the same session seed replays the run exactly"
    assert sampled_cells(first) != sampled_cells(other), "another session seed draws other samples"
    assert passes_checked(first) != passes_checked(other), "and other sampled continuations in the invariant suite"


def test_the_default_session_seed_keeps_every_case_seed_and_any_other_scrambles_them():
    assert session_shifted(12345, DEFAULT_SEED) == 12345
    first = {session_shifted(12345 + i, 7) for i in range(1000)}
    second = {session_shifted(12345 + i, 8) for i in range(1000)}
    assert len(first) == 1000 and not first & second, "neighbouring session seeds share no request seed"
    assert all(0 <= seed < SEED_MODULUS for seed in first | second)
