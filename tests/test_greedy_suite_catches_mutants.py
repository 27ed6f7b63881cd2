"""The greedy suite is not vacuous: run on each greedy-visible mutant it fails, naming the divergence."""

from __future__ import annotations

import pytest

from harness.contract.paths import SUITES_DIR

pytest_plugins = ["pytester"]

GREEDY_MUTANTS = [
    "commit-heads-unverified",
    "stale-drafts-after-reject",
    "no-target-rollback",
    "eos-ignored",
    "max-tokens-overshoot",
]


@pytest.mark.parametrize("mutant", GREEDY_MUTANTS)
def test_the_greedy_suite_fails_on_the_mutant(pytester, mutant):
    result = pytester.runpytest_inprocess(
        str(SUITES_DIR / "greedy"),
        "-m",
        "greedy",
        f"--harness-decoder=mutant:{mutant}",
        "-x",
        "-q",
        "-p",
        "no:cacheprovider",
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 1, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(["*DIVERGENCE at generated index*"])
    assert "Error" not in result.stdout.str(), "the mutant crashed instead of being caught"
