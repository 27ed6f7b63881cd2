"""Stop sequences where speculation makes them hard: ending inside a run of accepted drafts (the tokens the pass
accepted after it must be dropped) and starting in one pass and ending in the next. The drafts are forced to the
output's own tokens, so every pass accepts all of them and the decoder's passes are known before the stop is
placed; the stop sequence is then the pair of tokens that puts its end where the scenario needs it."""

from __future__ import annotations

import pytest

from harness.checks.feature_cases import stop_position
from harness.checks.feature_grid import stop_cases

pytestmark = pytest.mark.features

CASES = {case.id: case for case in stop_cases()}


def place_stop(scenario, steps, output):
    """The output position the stop sequence ends at: the first that the scenario allows in these passes and whose
    two-token stop does not occur earlier in the output (None: no such position)."""
    for step in steps:
        emitted = len(step.emitted)
        if scenario == "mid-run":  # an accepted draft with more accepted tokens after it in the same pass
            candidates = [step.start + index for index in range(1, min(step.accepted, emitted - 1))]
            candidates += [step.start] if step.accepted >= 1 and emitted >= 2 and step.start >= 1 else []
        else:  # the first token of a pass that follows another: the stop's first token ends the previous pass
            candidates = [step.start] if step.start >= 1 else []
        for end in sorted(candidates):
            stop = (output[end - 1], output[end])
            earlier = any(tuple(output[i - 1 : i + 1]) == stop for i in range(1, end))
            if not earlier:
                return end
    return None


@pytest.mark.parametrize("case_id", list(CASES))
def test_stop_sequence_ends_the_output_where_it_completes(
    case_id, decoder, bundle, feature_truth, require, require_features
):
    case = CASES[case_id]
    require_features("stop_sequences")
    require("forced_drafts", "steps", num_draft_tokens=case.k)
    output = feature_truth.plain_output(case.prompt_id)
    forced = dict(enumerate(output))
    [free] = decoder.decode([feature_truth.request(case.prompt_id, num_draft_tokens=case.k, forced_drafts=forced)])
    assert free.token_ids == output, "the decoder's output with its drafts forced to the target's own tokens differs"
    end = place_stop(case.scenario, free.steps, output)
    assert end is not None, f"no pass of {free.steps} gives a {case.scenario} stop position"
    stop = (output[end - 1], output[end])
    request = feature_truth.request(
        case.prompt_id, num_draft_tokens=case.k, forced_drafts=forced, stop_sequences=(stop,)
    )
    assert stop_position(request, output) == end
    [result] = decoder.decode([request])
    assert result.token_ids == output[: end + 1], (
        f"stop {stop} completes at output position {end} ({case.scenario}): expected the output to end there, got "
        f"{len(result.token_ids)} tokens {result.token_ids}; passes {result.steps}"
    )
    assert result.finish_reason == "stop", f"finish reason {result.finish_reason!r}, expected 'stop'"
    ending = next(step for step in result.steps if step.start <= end < step.start + len(step.emitted))
    if case.scenario == "mid-run":
        assert end - ending.start < ending.accepted, f"the stop's last token was not an accepted draft: {ending}"
    else:
        assert ending.start == end, f"the stop did not span two passes: {result.steps}"
