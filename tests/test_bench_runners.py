"""`mtp-harness bench --job runners`: V2's median case against V1's over the cases both runs timed."""

from __future__ import annotations

from harness.commands.bench_runners import RUNNER_RATIO_GOAL, RunnerComparison, RunTiming


def timing(runner: str, seconds: dict[str, float], exit_code: int = 0) -> RunTiming:
    return RunTiming(runner, ["mtp-harness", "run"], 10.0, exit_code, seconds)


def test_the_ratio_is_of_medians_over_the_cases_both_runners_timed():
    v1 = timing("v1", {"a": 0.01, "b": 0.02, "c": 0.03, "only-v1": 9.0})
    v2 = timing("v2", {"a": 0.05, "b": 0.04, "c": 0.30, "only-v2": 0.0})
    comparison = RunnerComparison("tiny-mimo", v1, v2)
    assert comparison.common == ["a", "b", "c"]
    assert (comparison.median(v1), comparison.median(v2)) == (0.02, 0.05)
    assert abs(comparison.ratio - 2.5) < 1e-12
    assert "V2/V1 2.50x (goal at most 3x: within)" in comparison.summary()
    slow = RunnerComparison("tiny-mimo", v1, timing("v2", {"a": 0.1, "b": 0.1, "c": 0.1}))
    assert slow.ratio > RUNNER_RATIO_GOAL and "over)" in slow.summary()


def test_runs_with_no_case_in_common_have_no_finite_ratio():
    comparison = RunnerComparison("tiny-mimo", timing("v1", {}, exit_code=2), timing("v2", {"a": 1.0}))
    assert comparison.common == [] and comparison.ratio == float("inf")
    assert comparison.to_dict()["exit_codes"] == {"v1": 2, "v2": 0}
