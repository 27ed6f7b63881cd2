"""The invariant suite is not vacuous: run on each state-corrupting mutant it fails, naming what broke."""

from __future__ import annotations

import pytest

from harness.contract.paths import SUITES_DIR

pytest_plugins = ["pytester"]

# mutant -> what the failure report must name
STATE_MUTANTS = {
    "no-target-rollback": "*target cache*",
    "no-mtp-rollback": "*MTP depth 2*",
    "stale-mtp-hidden": "*MTP*",
    "position-offset": "*position ids*",
}


@pytest.mark.parametrize("mutant", STATE_MUTANTS)
def test_the_invariant_checks_fail_on_the_mutant(pytester, mutant):
    result = pytester.runpytest_inprocess(
        str(SUITES_DIR / "invariants" / "test_state_after_every_pass.py"),
        "-m",
        "invariants",
        f"--harness-decoder=mutant:{mutant}",
        "-x",
        "-q",
        "-k",
        "batch and greedy and not sampling",
    )
    assert result.parseoutcomes().get("failed", 0) == 1, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(["*invariant violations over*", STATE_MUTANTS[mutant]])
    assert "Error" not in result.stdout.str(), "the mutant crashed instead of being caught"


@pytest.mark.parametrize("mutant", ["no-mtp-rollback", "stale-mtp-hidden"])
def test_draft_conformance_exposes_mtp_state_bugs_that_keep_greedy_output(pytester, mutant):
    result = pytester.runpytest_inprocess(
        str(SUITES_DIR / "invariants" / "test_draft_conformance.py"),
        "-m",
        "invariants",
        f"--harness-decoder=mutant:{mutant}",
        "-q",
        "-k",
        "k2-clear-of-context-end",
    )
    # The batch clear of the context end has rejections in every request, so both state bugs change its drafts;
    # the at-context-end batch (one long prompt) is judged by the same code and may or may not meet a rollback.
    assert result.parseoutcomes().get("failed", 0) == 1, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(["*passes proposed drafts the committed prefix does not give*"])
