"""The whole-sequence cases catch errors confined to a few output positions: each position-confined mutant
(harness/subjects/mutant_decoders.py) is rejected by a per-position test at an output position >= 5 (the last token, the
first token of a KV block) of a PIT case, where the pooled tests alone would dilute it 48-fold; the same
case passes on the correct decoder."""

from __future__ import annotations

import json
import re

import pytest

from harness.contract.paths import SUITES_DIR

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.xdist_group("position-mutants")

SUITE = SUITES_DIR / "sampling" / "test_target_distribution.py"
CATCHING_CASE = {  # the whole-sequence case with k = 4 greedy drafts: 45-55% of its passes reach max_new_tokens
    "truncation-commits-unverified-drafts": "pit-T1.0-k4-greedy-natural-03",
    "truncated-run-ends-in-a-correction": "pit-T1.0-k4-greedy-natural-03",
    "block-start-residual-from-p": "pit-T1.0-k4-greedy-natural-03",
}
# the last-token mutants are far above the ci resolution: sequences sized for a one-position TV of 0.2 (N/4)
# catch them; the block-start one needs the ci budget's N
SAMPLING_TV = {"block-start-residual-from-p": None}


def _run(pytester, decoder, case, sampling_tv=0.1):
    node = f"{SUITE}::test_samples_follow_the_target_law[{case}]"
    report = pytester.path / "report"
    options = [f"--harness-sampling-tv={sampling_tv}"] if sampling_tv else []
    result = pytester.runpytest_inprocess(
        node, "-m", "sampling", f"--harness-decoder={decoder}", "-q", f"--harness-report={report}", *options
    )
    return result, json.loads((report / "results.json").read_text())


@pytest.mark.parametrize("mutant", CATCHING_CASE)
def test_a_per_position_test_catches_the_mutant_beyond_position_5(pytester, mutant):
    result, results = _run(pytester, f"mutant:{mutant}", CATCHING_CASE[mutant], SAMPLING_TV.get(mutant, 0.1))
    assert result.parseoutcomes().get("failed", 0) == 1, result.stdout.str()[-2000:]
    [case] = [c for c in results["cases"] if c.get("sampling")]
    sampling = case["sampling"]
    alpha = sampling["family_alpha"]
    rejected = [at["position"] for at in sampling["positions"] if min(at["ks_holm"], at["z_holm"]) <= alpha]
    assert rejected and min(rejected) >= 5, f"per-position rejections at {rejected}"
    assert re.search(r"at output position (\d+)", results["groups"][0]["signature"]), results["groups"][0]


def test_the_case_passes_on_the_correct_decoder(pytester):
    for sampling_tv in (0.1, None):
        result, _ = _run(pytester, "mtp", "pit-T1.0-k4-greedy-natural-03", sampling_tv)
        assert result.parseoutcomes().get("passed", 0) == 1, result.stdout.str()[-2000:]
