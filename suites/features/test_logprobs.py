"""Logprobs under speculative sampling: every output token's reported log-probability, and its top tokens, are the
target's raw ones at that position (teacher-forced on the decoder's own output), for accepted drafts, corrections
and bonus tokens alike. Sampled requests (temperature 1), eight at a time until each kind of token has occurred (at
most MAX_REQUESTS); the case fails unless each did, so a decoder that never accepted a draft cannot hide a draft's
logprob."""

from __future__ import annotations

import pytest

from harness.checks.feature_cases import logprob_tolerance, raw_logits_of_each
from harness.checks.feature_checks import describe_mismatches, logprob_mismatches, logprobs_record, token_kinds
from harness.checks.feature_grid import logprob_cases
from harness.contract.decoder import SamplingConfig
from harness.contract.records import attach_record

pytestmark = pytest.mark.features

CASES = {case.id: case for case in logprob_cases()}
REQUESTS = 8
MAX_REQUESTS = 32
TOP = 5


@pytest.mark.parametrize("case_id", list(CASES))
def test_logprobs_are_the_targets(
    case_id, decoder, bundle, feature_truth, require, require_features, test_seed, record_property
):
    case = CASES[case_id]
    require_features("logprobs")
    require("steps", num_draft_tokens=case.k, draft_mode=case.draft_mode)
    kinds: set[str] = set()
    judged = 0
    while judged < MAX_REQUESTS and kinds != {"draft", "correction", "bonus"}:
        requests = [
            feature_truth.request(
                case.prompt_id,
                sampling=SamplingConfig(temperature=1.0),
                seed=(test_seed + i) % 2**63,
                num_draft_tokens=case.k,
                draft_mode=case.draft_mode,
                logprobs=TOP,
            )
            for i in range(judged, judged + REQUESTS)
        ]
        results = decoder.decode(requests)
        raw = raw_logits_of_each(bundle, requests[0].prompt_ids, [result.token_ids for result in results])
        for request, result, logits in zip(requests, results, raw, strict=True):
            mismatches = logprob_mismatches(result, logits, TOP, logprob_tolerance(bundle.dtype))
            if mismatches:
                attach_record(record_property, "logprobs", logprobs_record(request.seed, result, mismatches))
                pytest.fail(f"seed {request.seed}: {describe_mismatches(mismatches)}", pytrace=False)
            kinds |= set(token_kinds(result.steps).values())
        judged += REQUESTS
    missing = {"draft", "correction", "bonus"} - kinds
    assert not missing, f"no {sorted(missing)} token among {judged} outputs: the case judged none of them"
