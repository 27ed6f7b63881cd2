"""Rejections forced where the suite chooses: every position forced, to the reference's own token (so it
is accepted) or to the target's runner-up (so it must be rejected). The decoder must still reproduce
the reference, and its verification passes must show each forced rejection where it was forced."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.checks.schedules import SCHEDULES, expected_steps, forced_drafts, scheduled_rejections
from harness.contract.decoder import drafts_from

pytestmark = pytest.mark.greedy

K_VALUES = [1, 2, 3, 4]


def check_forced_passes(reference, result, k, rejections, first=0, room=None, near_tie=None):
    """Each pass starts where the schedule says, and rejects exactly at the forced position (a decoder that
    drafts from position `first` on makes single-token passes without drafts before it). `room`: output
    positions the request can reach (before the context end or max_new_tokens); a pass whose k drafts and
    bonus token would reach it may draft fewer (drafts past the end are wasted, as transformers' draft model
    knows), so a forced position there may go unproposed. `near_tie`: a bf16/fp16 near-tie divergence
    (check_tokens); only the passes that end before it are checked."""
    expected = expected_steps(len(reference.tokens), k, rejections, first)
    steps = list(result.steps)
    if near_tie is not None:
        expected = [e for e in expected if e.start + e.emitted <= near_tie.index]
        steps = [s for s in steps if s.start + len(s.emitted) <= near_tie.index]
    actual = [(s.start, len(s.emitted)) for s in steps]
    assert actual == [(e.start, e.emitted) for e in expected], (
        f"prompt {reference.prompt.id}, k={k}, rejections at {sorted(rejections)}: passes (start, emitted) "
        f"{actual} != expected {[(e.start, e.emitted) for e in expected]}"
    )
    for step, plan in zip(steps, expected, strict=True):
        if plan.rejected_at is None:
            continue
        index = plan.rejected_at - plan.start
        if index >= len(step.drafts):
            at_output_end = room is not None and plan.start + k >= room
            assert at_output_end, (
                f"pass at {step.start} proposed {len(step.drafts)} drafts: the forced draft at position "
                f"{plan.rejected_at} (index {index}) was never proposed"
            )
            continue
        assert step.drafts[index] == reference.runner_up[plan.rejected_at], (
            f"pass at {step.start}: draft {index} is {step.drafts[index]}, not the forced token"
        )
        assert step.accepted == index, (
            f"pass at {step.start}: the forced draft at position {plan.rejected_at} (index {index}) was not "
            f"rejected: {step.accepted} drafts accepted"
        )


def context_room(bundle, reference):
    """Output positions the request can reach: up to the model's context end or max_new_tokens."""
    return min(bundle.max_context - len(reference.prompt_ids), reference.prompt.max_new_tokens)


def run_forced(decoder, bundle, reference, check_tokens, k, rejections):
    request = reference.request(
        num_draft_tokens=k, forced_drafts=forced_drafts(reference.tokens, reference.runner_up, rejections)
    )
    [result] = decoder.decode([request])
    near_tie = check_tokens(reference, result, request=request)
    room = context_room(bundle, reference)
    check_forced_passes(reference, result, k, set(rejections), drafts_from(decoder), room, near_tie)


@pytest.fixture(scope="session")
def forced_batches(decoder, greedy_references):
    """decode(k, schedule) -> {prompt id: (result, rejections)}: every prompt with that schedule, decoded as
    one mixed batch, once per session (batch == alone is the identity suite's business); a decoder error is
    re-raised for every case of the batch."""
    cache = {}

    def decode(k, schedule):
        if (k, schedule) not in cache:
            references = list(greedy_references.values())
            first = drafts_from(decoder)
            rejections = [scheduled_rejections(schedule, len(r.tokens), k, first) for r in references]
            requests = [
                r.request(num_draft_tokens=k, forced_drafts=forced_drafts(r.tokens, r.runner_up, rejected))
                for r, rejected in zip(references, rejections, strict=True)
            ]
            try:
                results = decoder.decode(requests)
            except Exception as error:  # reported on every case of the batch
                cache[(k, schedule)] = error
            else:
                cache[(k, schedule)] = {
                    r.prompt.id: (result, rejected)
                    for r, result, rejected in zip(references, results, rejections, strict=True)
                }
        if isinstance(cache[(k, schedule)], Exception):
            raise cache[(k, schedule)]
        return cache[(k, schedule)]

    return decode


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("k", K_VALUES, ids=[f"k{k}" for k in K_VALUES])
def test_forced_rejections_keep_the_reference(
    decoder, bundle, reference, forced_batches, check_tokens, require, schedule, k
):
    require("forced_drafts", "steps", num_draft_tokens=k)
    result, rejections = forced_batches(k, schedule)[reference.prompt.id]
    request = reference.request(
        num_draft_tokens=k, forced_drafts=forced_drafts(reference.tokens, reference.runner_up, rejections)
    )
    near_tie = check_tokens(reference, result, request=request)
    room = context_room(bundle, reference)
    check_forced_passes(reference, result, k, set(rejections), drafts_from(decoder), room, near_tie)


@pytest.mark.parametrize("k", K_VALUES, ids=[f"k{k}" for k in K_VALUES])
def test_rejections_at_random_positions_keep_the_reference(
    decoder, bundle, greedy_references, check_tokens, require, k
):
    require("forced_drafts", "steps", num_draft_tokens=k)
    references = list(greedy_references.values())

    @given(index=st.integers(0, len(references) - 1), data=st.data())
    def case(index, data):
        reference = references[index]
        first = drafts_from(decoder)
        rejections = data.draw(st.sets(st.integers(first, len(reference.tokens) - 1)), label="rejections")
        run_forced(decoder, bundle, reference, check_tokens, k, rejections)

    case()
