"""MTP-assisted sampling under request features follows the target's law under them: the first tokens' exact law
with penalties, min_p, a logit bias and min_tokens (harness/checks/feature_laws.py). The cases' p-values are one Holm
family at FAMILY_ALPHA; N detects a TV shift of the budget's sampling TV at the family's worst level with power
POWER. The family is computed once per run, its cases shared among the pytest-xdist workers."""

from __future__ import annotations

import pytest

from harness.checks.feature_laws import case_request, law_cases, p_values_per_case, run_law_case, seed_of
from harness.checks.law_records import law_record
from harness.contract.budget import BUDGETS
from harness.contract.decoder import cannot_serve
from harness.contract.features import cannot_serve_features
from harness.contract.records import attach_record
from harness.contract.seeds import session_shifted
from harness.plugin.shared_work import SharedWork, pickle_safe
from harness.stats.multiple_testing import FAMILY_ALPHA, holm
from harness.stats.power import POWER, law_sample_size, min_detectable_tv
from harness.stats.target_law import OTHER

pytestmark = pytest.mark.features

CASES = {case.id: case for case in law_cases()}


def unserved(decoder, case) -> str | None:
    capabilities = ("forced_drafts",) if case.forced or case.eos_from_plain else ()
    return cannot_serve_features(decoder, case.features) or cannot_serve(
        decoder, *capabilities, num_draft_tokens=case.k, draft_mode=case.draft_mode
    )


class FeatureLawFamily:
    def __init__(self, pytestconfig, session, decoder, bundle, feature_truth, run_options, harness_seed):
        self.decoder, self.bundle, self.truth, self.seed = decoder, bundle, feature_truth, harness_seed
        selected = {
            item.callspec.params["case_id"]
            for item in session.items
            if item.originalname == "test_samples_follow_the_law_under_the_features"
        }
        self.selected = [
            case_id for case_id in CASES if case_id in selected and unserved(decoder, CASES[case_id]) is None
        ]
        budget = BUDGETS[run_options.budget]
        self.tv = run_options.sampling_tv or budget.sampling_tv
        self.m = p_values_per_case() * max(len(self.selected), 1)
        self.alpha = FAMILY_ALPHA / self.m  # the family's worst Holm level
        self.shared = SharedWork.of(pytestconfig, "feature-law-family")
        self.verdicts = None

    def _sampled(self, case_id):
        case = CASES[case_id]
        request = case_request(
            case,
            self.truth.prompt_ids(case.prompt_id),
            self.truth.plain_output(case.prompt_id),
            self.bundle.eos_token_ids,
        )
        try:
            seed = session_shifted(seed_of(case_id), self.seed)
            return run_law_case(self.decoder, self.bundle, request, case_id, self.n, seed, case.sample)
        except Exception as error:  # the other cases still run; this one fails with its error
            return pickle_safe(error)

    def n(self, law):
        """A law case's N: its omnibus tests over its pooled cells detect a TV shift of self.tv with power POWER
        at the family's worst Holm level (harness/stats/power.py law_sample_size)."""
        return law_sample_size({**law.cells, OTHER: law.other}, OTHER, self.tv, self.alpha)

    def verdict(self, case_id):
        if self.verdicts is None:
            outcomes = self.shared.compute_all(self.selected, self._sampled)
            raw = [
                p
                for cid in self.selected
                for p in (
                    (1.0, 1.0)
                    if isinstance(outcomes[cid], Exception)
                    else (outcomes[cid].fit.chi2_p, outcomes[cid].fit.g_p)
                )
            ]
            adjusted = iter(holm(raw))
            self.verdicts = {cid: (outcomes[cid], (next(adjusted), next(adjusted))) for cid in self.selected}
        return self.verdicts[case_id]


@pytest.fixture(scope="session")
def feature_law_family(pytestconfig, request, decoder, bundle, feature_truth, run_options, harness_seed):
    return FeatureLawFamily(pytestconfig, request.session, decoder, bundle, feature_truth, run_options, harness_seed)


@pytest.mark.parametrize("case_id", list(CASES))
def test_samples_follow_the_law_under_the_features(case_id, decoder, bundle, feature_law_family, record_property):
    reason = unserved(decoder, CASES[case_id])
    if reason:
        pytest.skip(reason)
    outcome, (chi2_adjusted, g_adjusted) = feature_law_family.verdict(case_id)
    if isinstance(outcome, Exception):
        raise outcome
    fit = outcome.fit
    alpha = FAMILY_ALPHA / feature_law_family.m
    detectable = min_detectable_tv(fit.n, max(fit.df, 1), alpha, POWER)
    record = law_record(
        case_id,
        fit,
        (fit.chi2_p, fit.g_p),
        (chi2_adjusted, g_adjusted),
        alpha,
        detectable,
        "Holm",
        bundle.tokenizer.decode,
    )
    attach_record(record_property, "sampling", record)
    detail = (
        f"N={fit.n} over {fit.cells} cells (df {fit.df}); chi-square p={fit.chi2_p:.3g} (Holm {chi2_adjusted:.3g}), "
        f"G p={fit.g_p:.3g} (Holm {g_adjusted:.3g}) at family alpha {FAMILY_ALPHA} over "
        f"{feature_law_family.m} p-values; TV from the law {fit.tv:.3g}"
    )
    assert fit.unjudgeable is None, f"unjudgeable: {fit.unjudgeable}"
    assert chi2_adjusted > FAMILY_ALPHA and g_adjusted > FAMILY_ALPHA, f"the samples do not follow the law: {detail}"
