"""`mtp-harness bench --job runners`: V2's case seconds against V1's, summed over the cases both runs timed (the cases
share their decodes: the median case decoded nothing)."""

from __future__ import annotations

from harness.commands.bench_runners import RUNNER_RATIO_GOAL, RunnerComparison, RunTiming


def timing(runner: str, seconds: dict[str, float], exit_code: int = 0) -> RunTiming:
    return RunTiming(runner, ["mtp-harness", "run"], 10.0, exit_code, seconds)


def test_the_ratio_is_of_the_case_seconds_summed_over_the_cases_both_runners_timed():
    v1 = timing("v1", {"a": 1.0, "b": 0.01, "c": 0.01, "only-v1": 9.0})  # "a" decoded the batch the others cut from
    v2 = timing("v2", {"a": 2.48, "b": 0.01, "c": 0.01, "only-v2": 0.0})
    comparison = RunnerComparison("tiny-mimo", v1, v2)
    assert comparison.common == ["a", "b", "c"]
    assert (comparison.median(v1), comparison.median(v2)) == (0.01, 0.01), "the median case decoded nothing"
    assert abs(comparison.ratio - 2.5 / 1.02) < 1e-12
    assert "V2/V1 2.45x (goal at most 3x: within)" in comparison.summary()
    slow = RunnerComparison("tiny-mimo", v1, timing("v2", {"a": 3.0, "b": 0.1, "c": 0.1}))
    assert slow.ratio > RUNNER_RATIO_GOAL and "over)" in slow.summary()


def test_runs_with_no_case_in_common_have_no_finite_ratio():
    comparison = RunnerComparison("tiny-mimo", timing("v1", {}, exit_code=2), timing("v2", {"a": 1.0}))
    assert comparison.common == [] and comparison.ratio == float("inf")
    assert comparison.to_dict()["exit_codes"] == {"v1": 2, "v2": 0}
