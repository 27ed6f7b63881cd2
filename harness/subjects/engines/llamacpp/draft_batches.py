"""Which of a request's passes llama.cpp's MTP drafter drafted, and how far each server iteration's draft decode
reached: what its drafts-past-the-slot's-limit finding acts on (docs/findings/llamacpp-draft-mtp-drafts-past-the-
slots-limit.md).

One server iteration (`update_slots`) drafts for every slot that drafts in it in one batch, then verifies them
(tools/server/server-context.cpp pre_decode, post_decode): the instrumented build numbers the iterations
(DecodeResult.engine_steps). A pass starting at output position `start` is drafted when

    start >= 1 (the first token comes from the prefill), the slot is not replaying a restored rejection (a hybrid
    model's pass after a rejection replays the kept tokens: spec_draft is not empty), and draft_room >= 1
    (n_draft_max = min(n_ctx - n_tokens - 2, n_remaining - 1), server-context.cpp:534-552)

and its draft decode feeds draft step i at position n_tokens + i for i < k, whatever n_draft_max
(common/speculative.cpp:1765), with n_tokens = prompt length + start - 1 (the sampled token not yet counted). So the
iteration's draft decode reaches

    reach(iteration) = max over its drafted passes of (prompt length + start - 1 + k - 1)     (-1: nothing drafted)

and where reach >= n_ctx a step finds no memory cell: the batched decode fails and every slot drafting in that
iteration keeps fewer than k = n_min drafts, which are dropped (common/speculative.cpp:1714-1718, :1812).
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.contract.decoder import DecodeRequest, DecodeResult, VerifyStep
from harness.subjects.engines.llamacpp.environment import draft_room

NOTHING_DRAFTED = -1


def drafted_passes(
    steps: Sequence[VerifyStep], prompt_length: int, max_new_tokens: int, context: int, hybrid: bool
) -> list[bool]:
    """Whether the drafter drafted for each pass (above): start >= 1, not a hybrid's replay, room for a draft."""
    drafted = []
    for index, step in enumerate(steps):
        previous = steps[index - 1] if index else None
        replay = hybrid and previous is not None and previous.accepted < len(previous.drafts)
        room = draft_room(context, prompt_length, step.start, max_new_tokens)
        drafted.append(step.start >= 1 and not replay and room >= 1)
    return drafted


def draft_reach(prompt_length: int, start: int, k: int) -> int:
    """The last position a pass's draft decode feeds: n_tokens + k - 1, n_tokens = prompt length + start - 1."""
    return prompt_length + start - 1 + k - 1


def reach_per_iteration(
    requests: Sequence[DecodeRequest], results: Sequence[DecodeResult], context: int, hybrid: bool
) -> dict[int, int]:
    """Server iteration -> the furthest position its draft decode fed (NOTHING_DRAFTED where nothing was drafted)."""
    reach: dict[int, int] = {}
    for request, result in zip(requests, results, strict=True):
        length = len(request.prompt_ids)
        drafted = drafted_passes(result.steps, length, request.max_new_tokens, context, hybrid)
        for step, iteration, drafts in zip(result.steps, result.engine_steps, drafted, strict=True):
            here = draft_reach(length, step.start, request.num_draft_tokens) if drafts else NOTHING_DRAFTED
            reach[iteration] = max(reach.get(iteration, NOTHING_DRAFTED), here)
    return reach
