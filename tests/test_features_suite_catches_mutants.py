"""The features suite is not vacuous: run on each request-feature mutant it fails, in the check aimed at it, and the
correct decoder passes the same selection."""

from __future__ import annotations

import pytest

from harness.contract.paths import SUITES_DIR

pytest_plugins = ["pytester"]

# (mutant, the test file aimed at it, a -k selection holding a catching case, what the failure says)
CATCHES = (
    ("penalty-counts-rejected-drafts", "test_feature_greedy.py", "frequency-presence-negative and k3", "DIVERGENCE"),
    ("stop-checked-per-pass", "test_stop_sequences.py", "sequence and mid-run", "expected the output to end there"),
    ("stop-checked-per-pass", "test_stop_sequences.py", "string and mid-run", "expected the output to end there"),
    ("logprob-of-the-draft", "test_logprobs.py", "k1", "logprob of token"),
    ("min-tokens-ignored-inside-a-run", "test_feature_greedy.py", "min-tokens-unmet", "DIVERGENCE"),
    ("grammar-skips-the-correction", "test_feature_greedy.py", "grammar-regex and reject", "DIVERGENCE"),
    ("grammar-skips-the-correction", "test_feature_laws.py", "grammar-regex", "do not follow the law"),
    ("samples-share-the-seed", "test_feature_laws.py", "n-2", "do not follow the law"),
)
IDS = [f"{mutant}-{file.removesuffix('.py')}-{selection.replace(' ', '-')}" for mutant, file, selection, _ in CATCHES]
FEATURE_MUTANTS = {mutant for mutant, *_ in CATCHES}


def run_features(pytester, decoder: str, file: str, selection: str, *extra: str):
    return pytester.runpytest_inprocess(
        str(SUITES_DIR / "features" / file),
        "-m",
        "features",
        "-k",
        selection,
        f"--harness-decoder={decoder}",
        "-q",
        "-p",
        "no:cacheprovider",
        *extra,
    )


@pytest.mark.parametrize(("mutant", "file", "selection", "message"), CATCHES, ids=IDS)
def test_the_features_suite_fails_on_the_mutant(pytester, mutant, file, selection, message):
    result = run_features(pytester, f"mutant:{mutant}", file, selection, "-x")
    assert result.parseoutcomes().get("failed", 0) == 1, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines([f"*{message}*"])


@pytest.mark.parametrize(("mutant", "file", "selection", "message"), CATCHES, ids=IDS)
def test_the_correct_decoder_passes_the_selection_that_catches_the_mutant(pytester, mutant, file, selection, message):
    result = run_features(pytester, "mtp", file, selection)
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("passed", 0) > 0, result.stdout.str()[-2000:]
