"""Logprobs under speculative sampling: every output token's reported log-probability, and its top tokens, are the
target's raw ones at that position (teacher-forced on the decoder's own output), for accepted drafts, corrections
and bonus tokens alike. Sampled requests (temperature 1), eight at a time until an accepted draft and a token of the
target's own (a correction or a bonus token) have occurred (at most MAX_REQUESTS). Where none of them did, the case records the kind it never judged (an `unjudged` record: the
report shows it), so a decoder that never accepted a draft does not pass for having right draft logprobs. A bonus
token is not required: a decoder may legitimately never emit one (the `no-bonus` control, which also reports an
accepted run as drafts up to the last and the last as its own token)."""

from __future__ import annotations

import pytest

from harness.checks.feature_cases import logprob_tolerance, raw_logits_of_each
from harness.checks.feature_checks import describe_mismatches, logprob_mismatches, logprobs_record, token_kinds
from harness.checks.feature_grid import logprob_cases
from harness.contract.decoder import SamplingConfig
from harness.contract.records import UnjudgedRecord, attach_record

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
    while judged < MAX_REQUESTS and not covered(kinds):
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
            mismatches = logprob_mismatches(result, logits, TOP, logprob_tolerance(bundle.dtype, decoder))
            if mismatches:
                attach_record(record_property, "logprobs", logprobs_record(request.seed, result, mismatches))
                pytest.fail(f"seed {request.seed}: {describe_mismatches(mismatches)}", pytrace=False)
            kinds |= set(token_kinds(result.steps).values())
        judged += REQUESTS
    if not covered(kinds):
        unjudged = [] if "draft" in kinds else ["logprobs of accepted drafts"]
        unjudged += [] if kinds & {"correction", "bonus"} else ["logprobs of the target's own tokens"]
        why = f"among {judged} outputs the decoder emitted only {sorted(kinds)} tokens"
        attach_record(record_property, "unjudged", UnjudgedRecord(checks=unjudged, why=why))


def covered(kinds: set[str]) -> bool:
    return "draft" in kinds and bool(kinds & {"correction", "bonus"})
