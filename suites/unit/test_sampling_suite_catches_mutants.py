"""The sampling suite is a real test: on each distribution-breaking mutant a case it covers rejects at the
family-wise alpha. A decoder that drops the bonus token is slower, not wrong: the same case passes."""

from __future__ import annotations

import pytest

from harness.contract.paths import SUITES_DIR

pytest_plugins = ["pytester"]

SUITE = SUITES_DIR / "sampling" / "test_target_distribution.py"

# mutant -> a case that exposes it (one case: a family of 2 p-values, N from the power target)
CATCHING_CASE = {
    "residual-from-p": "T1.3-nofilter-k2-sample-natural-02",
    "accept-if-equal": "T1.0-nofilter-k1-sample-natural-02",
    "unprocessed-q": "T1.3-nofilter-k2-sample-natural-02",
    "softmax-q-for-greedy-draft": "T1.0-nofilter-k1-greedy-natural-02",
    "bonus-wrong-position": "T1.0-nofilter-k1-greedy-natural-02",
    "shared-uniform": "T1.3-nofilter-k2-greedy-natural-02",
    "typical-acceptance": "T1.0-nofilter-k1-greedy-natural-02",
    "bf16-tail-truncation": "T0.7-nofilter-k2-greedy-natural-02",
}


def _run(pytester, decoder, case):
    node = f"{SUITE}::test_samples_follow_the_target_law[{case}]"
    return pytester.runpytest_inprocess(node, "-m", "sampling", f"--harness-decoder={decoder}", "-q")


@pytest.mark.parametrize("mutant", CATCHING_CASE)
def test_the_sampling_suite_rejects_the_mutant(pytester, mutant):
    result = _run(pytester, f"mutant:{mutant}", CATCHING_CASE[mutant])
    assert result.parseoutcomes().get("failed", 0) == 1, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(["*rejected at family-wise alpha 0.001*"])
    assert "Error" not in result.stdout.str(), "the mutant crashed instead of being caught"


def test_the_same_case_passes_on_the_correct_decoder_and_on_a_missing_bonus(pytester):
    for decoder in ("mtp", "mutant:no-bonus"):
        result = _run(pytester, decoder, "T1.0-nofilter-k1-greedy-natural-02")
        assert result.parseoutcomes().get("passed", 0) == 1, result.stdout.str()[-2000:]
