"""Rejections forced where the suite chooses: every position forced, to the reference's own token (so it
is accepted) or to the target's runner-up (so it must be rejected). The decoder must still reproduce
the reference, and its verification passes must show each forced rejection where it was forced."""

from __future__ import annotations

import pytest
from hypothesis import given, seed
from hypothesis import strategies as st

from harness.checks.batches import MIXED, SEPARATED, own_batch
from harness.checks.schedules import SCHEDULES, expected_steps, forced_drafts, scheduled_rejections
from harness.contract.decoder import draft_cap, drafts_from, undrafted_after_rejection, with_budget_cuts
from harness.contract.seeds import DEFAULT_SEED

pytestmark = pytest.mark.greedy

K_VALUES = [1, 2, 3, 4]


def forced_rejections(request, tokens):
    """The output positions whose forced draft is not the token the output holds there: the drafts a correct
    decoder rejects. Without a near-tie they are the schedule's own; after one, the output follows the reference
    continued from the decoder's prefix (check_tokens), and the same forced drafts are judged against it."""
    return {p for p, token in request.forced_drafts.items() if p < len(tokens) and token != tokens[p]}


def check_forced_passes(reference, result, request, k, first=0, room=None, undrafted=False, cap=None):
    """Each pass starts where the forced drafts say, and rejects exactly at the forced position (a decoder that
    drafts from position `first` on makes single-token passes without drafts before it). `room`: output
    positions the request can reach (before the context end or max_new_tokens); a pass whose k drafts and
    bonus token would reach it may draft fewer (drafts past the end are wasted, as transformers' draft model
    knows), so a forced position there may go unproposed. `undrafted`: the decoder emits the position after a
    rejection without drafts, `cap`: pass start -> the most drafts it proposes there (harness/checks/schedules.py)."""
    rejections = forced_rejections(request, result.token_ids)
    expected = expected_steps(len(result.token_ids), k, rejections, first, undrafted, cap)
    steps = list(result.steps)
    forced_to = max(request.forced_drafts, default=-1) + 1
    if len(result.token_ids) > forced_to:  # after a near-tie the output can outrun the forced drafts: not predicted
        expected = [e for e in expected if e.start + e.emitted <= forced_to]
        steps = [s for s in steps if s.start + len(s.emitted) <= forced_to]
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
            cut = dict(result.budget_cut_drafts).get(step.start) == len(step.drafts)  # the scheduler's budget
            assert at_output_end or cut, (
                f"pass at {step.start} proposed {len(step.drafts)} drafts: the forced draft at position "
                f"{plan.rejected_at} (index {index}) was never proposed"
            )
            continue
        assert step.drafts[index] == request.forced_drafts[plan.rejected_at], (
            f"pass at {step.start}: draft {index} is {step.drafts[index]}, not the forced token"
        )
        assert step.accepted == index, (
            f"pass at {step.start}: the forced draft at position {plan.rejected_at} (index {index}) was not "
            f"rejected: {step.accepted} drafts accepted"
        )


def context_room(bundle, reference):
    """Output positions the request can reach: up to the model's context end or max_new_tokens."""
    return min(bundle.max_context - len(reference.prompt_ids), reference.prompt.max_new_tokens)


def run_forced(decoder, bundle, reference, check_tokens, passes_on_failure, k, rejections):
    request = reference.request(
        num_draft_tokens=k, forced_drafts=forced_drafts(reference.tokens, reference.runner_up, rejections)
    )
    [result] = decoder.decode([request])
    check_schedule(decoder, bundle, reference, check_tokens, passes_on_failure, request, result, k)


def check_schedule(decoder, bundle, reference, check_tokens, passes_on_failure, request, result, k):
    """The reference's tokens, then the passes the forced drafts imply (recorded if they break)."""
    check_tokens(reference, result, request=request)
    room = context_room(bundle, reference)
    first, undrafted = drafts_from(decoder), undrafted_after_rejection(decoder)
    # the engine's documented cap near the ends, and the passes whose drafts its scheduler cut to the step's budget
    cap = with_budget_cuts(draft_cap(decoder, request), result, k)
    rejections = forced_rejections(request, result.token_ids)
    plan = expected_steps(len(result.token_ids), k, rejections, first, undrafted, cap)
    with passes_on_failure(reference, request, result, expected=[(e.start, e.emitted) for e in plan]):
        check_forced_passes(reference, result, request, k, first, room, undrafted, cap)


@pytest.fixture(scope="session")
def forced_batches(decoder, greedy_batch):
    """decode(k, schedule, batch) -> {prompt id: (result, rejections)}: the prompts of `batch`
    (harness/checks/batches.py) with that schedule, decoded as one batch, once per session (batch == alone is
    the identity suite's business); a decoder error is re-raised for every case of the batch."""
    cache = {}

    def decode(k, schedule, batch):
        key = (k, schedule, batch)
        if key not in cache:
            references = greedy_batch(batch, k)
            first = drafts_from(decoder)
            rejections = [scheduled_rejections(schedule, len(r.tokens), k, first) for r in references]
            requests = [
                r.request(num_draft_tokens=k, forced_drafts=forced_drafts(r.tokens, r.runner_up, rejected))
                for r, rejected in zip(references, rejections, strict=True)
            ]
            try:
                results = decoder.decode(requests)
            except Exception as error:  # reported on every case of the batch
                cache[key] = error
            else:
                cache[key] = {
                    r.prompt.id: (result, rejected)
                    for r, result, rejected in zip(references, results, rejections, strict=True)
                }
        if isinstance(cache[key], Exception):
            raise cache[key]
        return cache[key]

    return decode


@pytest.mark.parametrize("batch", [MIXED, SEPARATED])
@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("k", K_VALUES, ids=[f"k{k}" for k in K_VALUES])
def test_forced_rejections_keep_the_reference(
    decoder, bundle, reference, forced_batches, check_tokens, passes_on_failure, require, schedule, k, batch
):
    """Every prompt with the schedule, in the mixed batch and in its own batch (clear of the context end, or
    at it): harness/checks/batches.py."""
    require("forced_drafts", "steps", num_draft_tokens=k)
    if batch == SEPARATED:
        batch = own_batch(len(reference.prompt_ids), reference.prompt.max_new_tokens, k, bundle.max_context)
    result, rejections = forced_batches(k, schedule, batch)[reference.prompt.id]
    request = reference.request(
        num_draft_tokens=k, forced_drafts=forced_drafts(reference.tokens, reference.runner_up, rejections)
    )
    check_schedule(decoder, bundle, reference, check_tokens, passes_on_failure, request, result, k)


@pytest.mark.parametrize("k", K_VALUES, ids=[f"k{k}" for k in K_VALUES])
def test_rejections_at_random_positions_keep_the_reference(
    decoder, bundle, greedy_references, check_tokens, passes_on_failure, require, harness_seed, test_seed, k
):
    require("forced_drafts", "steps", num_draft_tokens=k)
    references = list(greedy_references.values())

    @given(index=st.integers(0, len(references) - 1), data=st.data())
    def case(index, data):
        reference = references[index]
        first = drafts_from(decoder)
        rejections = data.draw(st.sets(st.integers(first, len(reference.tokens) - 1)), label="rejections")
        run_forced(decoder, bundle, reference, check_tokens, passes_on_failure, k, rejections)

    if harness_seed != DEFAULT_SEED:  # the default session seed keeps the derandomized draws it always made
        case = seed(test_seed)(case)
    case()
