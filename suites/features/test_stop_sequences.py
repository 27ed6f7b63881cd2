"""Stop sequences and stop strings where speculation makes them hard: ending inside a run of accepted drafts (the
tokens the pass accepted after it must be dropped) and starting in one pass and ending in the next. The drafts are
forced to the output's own tokens, so every pass accepts all of them and the decoder's passes are known before the
stop is placed; the stop is then the pair of tokens, or the text across them, that puts its end where the scenario
needs it. A stop string ends inside its last token's text where that token has more than one byte."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from harness.checks.feature_cases import stop_position
from harness.checks.feature_grid import stop_cases
from harness.contract.decoder import VerifyStep
from harness.contract.records import UnjudgedRecord, attach_record

pytestmark = pytest.mark.features

CASES = {case.id: case for case in stop_cases()}


def candidate_ends(scenario: str, steps: Sequence[VerifyStep]) -> list[int]:
    """The output positions a stop may end at in these passes, in order: an accepted draft with more accepted
    tokens after it in the same pass ("mid-run"), or the first token of a pass that follows another, the stop's
    start ending the previous pass ("across-passes")."""
    ends = []
    for step in steps:
        emitted = len(step.emitted)
        if scenario == "mid-run":
            ends += [step.start + index for index in range(1, min(step.accepted, emitted - 1))]
            ends += [step.start] if step.accepted >= 1 and emitted >= 2 and step.start >= 1 else []
        elif step.start >= 1:
            ends.append(step.start)
    return sorted(ends)


def place_stop_sequence(scenario, steps, output):
    """The first allowed end whose two-token stop does not occur earlier in the output (None: no such end)."""
    for end in candidate_ends(scenario, steps):
        stop = (output[end - 1], output[end])
        if not any(tuple(output[i - 1 : i + 1]) == stop for i in range(1, end)):
            return end
    return None


def stop_string_at(output: Sequence[int], end: int, token_bytes: Sequence[bytes]) -> str | None:
    """The text across tokens end-1 and end that ends inside token `end`: the last (up to 3) bytes of end-1 and the
    first half of end's, kept only where it is printable ASCII and the output's text up to `end` is valid UTF-8 (so
    every engine's detokenized text holds these very characters)."""
    before, last = token_bytes[output[end - 1]], token_bytes[output[end]]
    if not before or not last:
        return None
    text = before[-3:] + last[: (len(last) + 1) // 2]
    try:
        b"".join(token_bytes[token] for token in output[: end + 1]).decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text.decode() if text.isascii() and text.decode().isprintable() else None


def run_with_forced_own_tokens(case_id, feature, decoder, feature_truth, require, require_features):
    """The case, its output, the decoder's passes with its drafts forced to that output, and the forced drafts."""
    case = CASES[case_id]
    require_features(feature)
    require("forced_drafts", "steps", num_draft_tokens=case.k)
    output = feature_truth.plain_output(case.prompt_id)
    forced = dict(enumerate(output))
    [free] = decoder.decode([feature_truth.request(case.prompt_id, num_draft_tokens=case.k, forced_drafts=forced)])
    assert free.token_ids == output, "the decoder's output with its drafts forced to the target's own tokens differs"
    return case, output, free.steps, forced


def check_ended_there(case, result, output, end, stop, record_property) -> None:
    assert result.token_ids == output[: end + 1], (
        f"stop {stop!r} completes at output position {end} ({case.scenario}): expected the output to end there, got "
        f"{len(result.token_ids)} tokens {result.token_ids}; passes {result.steps}"
    )
    assert result.finish_reason == "stop", f"finish reason {result.finish_reason!r}, expected 'stop'"
    ending = next(step for step in result.steps if step.start <= end < step.start + len(step.emitted))
    if case.scenario == "mid-run":
        if end - ending.start >= ending.accepted:
            # the output is right, but the decoder emitted the stop's last token itself, not as an accepted draft
            # (transformers 5.15.1-5.17.0 verify a candidate that completes a stop one draft short): the case did
            # not see a stop inside an accepted run, and says so
            why = f"the decoder emitted the stop's last token itself, not as an accepted draft: {ending}"
            attach_record(
                record_property, "unjudged", UnjudgedRecord(checks=["a stop completed inside an accepted run"], why=why)
            )
    else:
        assert ending.start == end, f"the stop did not span two passes: {result.steps}"


@pytest.mark.parametrize("case_id", list(CASES))
def test_stop_sequence_ends_the_output_where_it_completes(
    case_id, decoder, bundle, feature_truth, require, require_features, record_property
):
    forced_run = run_with_forced_own_tokens(
        case_id, "stop_sequences", decoder, feature_truth, require, require_features
    )
    case, output, steps, forced = forced_run
    end = place_stop_sequence(case.scenario, steps, output)
    assert end is not None, f"no pass of {steps} gives a {case.scenario} stop position"
    stop = (output[end - 1], output[end])
    request = feature_truth.request(
        case.prompt_id, num_draft_tokens=case.k, forced_drafts=forced, stop_sequences=(stop,)
    )
    assert stop_position(bundle, request, output) == end
    [result] = decoder.decode([request])
    check_ended_there(case, result, output, end, stop, record_property)


@pytest.mark.parametrize("case_id", list(CASES))
def test_stop_string_ends_the_output_at_the_token_completing_it(
    case_id, decoder, bundle, feature_truth, require, require_features, record_property
):
    forced_run = run_with_forced_own_tokens(case_id, "stop_strings", decoder, feature_truth, require, require_features)
    case, output, steps, forced = forced_run
    table = bundle.token_bytes()
    placed = []
    for end in candidate_ends(case.scenario, steps):
        text = stop_string_at(output, end, table)
        if text is None:
            continue
        request = feature_truth.request(
            case.prompt_id, num_draft_tokens=case.k, forced_drafts=forced, stop_strings=(text,)
        )
        if stop_position(bundle, request, output) == end:  # its first occurrence ends in token `end`
            placed = [end, text, request]
            break
    assert placed, f"no pass of {steps} gives a {case.scenario} stop string in printable ASCII text"
    end, text, request = placed
    [result] = decoder.decode([request])
    check_ended_there(case, result, output, end, text, record_property)
