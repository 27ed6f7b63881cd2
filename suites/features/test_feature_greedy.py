"""Greedy identity under request features, with rejections forced where the schedule says: penalties, a logit bias,
min_tokens (met and unmet), stop sequences, logprobs and structured outputs (a regex, a JSON schema, a GBNF grammar),
each on four prompts and four (schedule, k) pairs. The
decoder's output must be the target-only greedy output under the same features token for token, end for the same
reason, accept exactly the drafts that are the output's tokens, and report the target's raw logprobs at every
position; a constrained output must also satisfy its constraint."""

from __future__ import annotations

import pytest

from harness.checks.divergence import check_greedy, describe_divergence
from harness.checks.feature_cases import grammar_of, greedy_from, logprob_tolerance, processed_along
from harness.checks.feature_checks import (
    describe_mismatches,
    greedy_pass_problems,
    logprob_mismatches,
    logprobs_record,
)
from harness.checks.feature_grid import GREEDY_SETTINGS, forced_schedule, greedy_cases
from harness.contract.decoder import SamplingConfig
from harness.contract.records import FeatureOutputRecord, attach_record, step_records
from harness.decoding.grammar import grammar_problem

pytestmark = pytest.mark.features

CASES = {case.id: case for case in greedy_cases()}


@pytest.mark.parametrize("case_id", list(CASES))
def test_greedy_output_under_the_feature(
    case_id, decoder, bundle, feature_truth, require, require_features, record_property
):
    case = CASES[case_id]
    require_features(*case.features)
    schedule_forces = case.schedule != "free"
    if schedule_forces:
        require("forced_drafts", num_draft_tokens=case.k)
    else:
        require(num_draft_tokens=case.k)
    plain = feature_truth.plain_output(case.prompt_id)
    settings = GREEDY_SETTINGS[case.settings][1](plain, bundle.eos_token_ids)
    sampling = SamplingConfig(**settings.pop("sampling", {}))
    request = feature_truth.request(case.prompt_id, sampling=sampling, num_draft_tokens=case.k, **settings)
    reference = feature_truth.result(request)
    if schedule_forces:
        runner_up = feature_truth.runner_up(request, reference.token_ids)
        forced = forced_schedule(case.schedule, reference.token_ids, runner_up)
        request = feature_truth.request(
            case.prompt_id, sampling=sampling, num_draft_tokens=case.k, forced_drafts=forced, **settings
        )
    [result] = decoder.decode([request])

    outcome = check_greedy(
        reference.token_ids,
        result.token_ids,
        request.prompt_ids,
        bundle.dtype,
        bundle.tokenizer.decode,
        lambda prefix: processed_along(bundle, request, [prefix[len(request.prompt_ids) :]])[1][0, -1],
        lambda prefix: greedy_from(bundle, request, prefix[len(request.prompt_ids) :])[
            len(prefix) - len(request.prompt_ids) :
        ],
    )
    record: FeatureOutputRecord = {
        "settings": case.settings,
        "min_tokens": request.sampling.min_tokens,
        "eos_token_ids": list(request.eos_token_ids),
        "stop_sequences": [list(stop) for stop in request.stop_sequences],
        **(
            {"constraint": f"{request.structured_output.kind}: {request.structured_output.spec}"}
            if request.structured_output
            else {}
        ),
        "forced_drafts": {str(position): token for position, token in request.forced_drafts.items()},
        "expected": list(reference.token_ids),
        "actual": list(result.token_ids),
        "finish_reason": result.finish_reason,
        "expected_finish_reason": reference.finish_reason,
        "steps": step_records(result.steps),
    }
    if outcome.failure is not None:
        attach_record(record_property, "feature_output", record)
        pytest.fail(f"{case.settings}: {describe_divergence(outcome.failure)}; passes {result.steps}", pytrace=False)
    if not outcome.near_ties and result.finish_reason != reference.finish_reason:
        attach_record(record_property, "feature_output", record)
        pytest.fail(
            f"{case.settings}: finished by {result.finish_reason!r}, the target-only output by "
            f"{reference.finish_reason!r}",
            pytrace=False,
        )
    if request.structured_output is not None:
        problem = grammar_problem(grammar_of(bundle, request), result.token_ids, result.finish_reason == "eos")
        if problem:
            attach_record(record_property, "feature_output", record)
            pytest.fail(f"{case.settings}: {problem}", pytrace=False)
    problems = greedy_pass_problems(result, request.forced_drafts)
    if problems:
        attach_record(record_property, "feature_output", record)
        pytest.fail(f"{case.settings}: " + "; ".join(problems[:5]), pytrace=False)
    if request.logprobs is None:
        return
    raw, _ = processed_along(bundle, request, [result.token_ids])
    mismatches = logprob_mismatches(result, raw[0], request.logprobs, logprob_tolerance(bundle.dtype, decoder))
    if mismatches:
        attach_record(record_property, "logprobs", logprobs_record(request.seed, result, mismatches))
        pytest.fail(f"{case.settings}: {describe_mismatches(mismatches)}", pytrace=False)
