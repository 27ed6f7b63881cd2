"""The sampling suite is a real test: on each distribution-breaking mutant a case it covers rejects at the
family-wise alpha. A decoder that drops the bonus token is slower, not wrong: the same case passes."""

from __future__ import annotations

import pytest

from harness.contract.paths import SUITES_DIR
from harness.stats.multiple_testing import FAMILY_ALPHA

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
    "bf16-tail-truncation": "T1.0-nofilter-k1-forced-low-natural-02",
    "correction-leaks-past-the-filter": "T0.7-topk50-topp0.9-k2-greedy-code-01",  # rejections: its sampler draws each recovery
}


def _run(pytester, decoder, case):
    node = f"{SUITE}::test_samples_follow_the_target_law[{case}]"
    return pytester.runpytest_inprocess(node, "-m", "sampling", f"--harness-decoder={decoder}", "-q")


@pytest.mark.parametrize("mutant", CATCHING_CASE)
def test_the_sampling_suite_rejects_the_mutant(pytester, mutant):
    result = _run(pytester, f"mutant:{mutant}", CATCHING_CASE[mutant])
    assert result.parseoutcomes().get("failed", 0) == 1, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines([f"*rejected at family-wise alpha {FAMILY_ALPHA:g}*"])
    assert "Error" not in result.stdout.str(), "the mutant crashed instead of being caught"


def test_tokens_a_filter_removed_are_impossible_under_the_law(pytester):
    """The degenerate-law mutant: its law restricted to the filter's support is exact, so only the observations in
    zero-mass cells show it (p = 0, an IMPOSSIBLE cell), never dropped with their cell."""
    result = _run(pytester, "mutant:correction-leaks-past-the-filter", "T0.7-topk50-topp0.9-k2-greedy-code-01")
    assert result.parseoutcomes().get("failed", 0) == 1, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(["*chi-square p=0 *largest cell gap: impossible observed * expected 0.0*"])


def test_the_same_case_passes_on_the_correct_decoder_and_on_a_missing_bonus(pytester):
    for decoder in ("mtp", "mutant:no-bonus"):
        result = _run(pytester, decoder, "T1.0-nofilter-k1-greedy-natural-02")
        assert result.parseoutcomes().get("passed", 0) == 1, result.stdout.str()[-2000:]


def test_catch_mode_decides_each_case_from_the_part_of_the_family_computed_so_far(pytester):
    """--harness-stop-suite-on-catch (the mutation catalogue): a case is rejected when Bonferroni rejects it alone and
    passes when Holm over the cases computed so far passes it (a lower bound of the family's adjusted p-values), before
    the rest of the family is computed; the verdicts are the family's."""
    cases = ["T1.0-nofilter-k1-sample-natural-02", "T1.0-nofilter-k1-greedy-natural-02"]
    nodes = [f"{SUITE}::test_samples_follow_the_target_law[{case}]" for case in cases]
    junit = pytester.path / "junit.xml"
    common = ["-m", "sampling", "-q", "--harness-stop-suite-on-catch", f"--junitxml={junit}"]
    caught = pytester.runpytest_inprocess(*nodes, *common, "--harness-decoder=mutant:bonus-wrong-position")
    # the greedy-draft case runs first (cheapest first) and Bonferroni rejects it; the suite then stops
    caught.stdout.fnmatch_lines([f"*rejected at family-wise alpha {FAMILY_ALPHA:g} (Bonferroni over 4 p-values)*"])
    assert caught.parseoutcomes().get("failed", 0) == 1 and caught.parseoutcomes().get("skipped", 0) == 1
    passed = pytester.runpytest_inprocess(*nodes, *common, "--harness-decoder=mtp")
    assert passed.parseoutcomes().get("passed", 0) == 2, passed.stdout.str()[-2000:]
    assert "(Holm over 1 of 2 cases, a lower bound " in junit.read_text(), "the first case was not decided alone"


def test_catch_mode_runs_the_sampling_cases_cheapest_first(pytester):
    collected = pytester.runpytest_inprocess(
        SUITE, "-m", "sampling", "--collect-only", "-q", "--harness-stop-suite-on-catch"
    )
    cases = [line.split("[", 1)[1].rstrip("]") for line in collected.stdout.lines if "::test_samples_follow" in line]
    assert cases[0].endswith("k1-greedy-natural-02") and all(case.startswith("pit-") for case in cases[-3:])
    ks = [int(case.split("-k")[1][0]) for case in cases if not case.startswith("pit-")]
    assert ks == sorted(ks)
