"""How the batched checks group their requests.

"mixed" puts every prompt fixture in one batch. A request that reaches the last 2k + 1 positions of the model's
context is where an engine must trim its drafts, and a mistake there can reach the whole batch (vLLM switches
its drafter off for every request of the batch: docs/findings/vllm-drafter-skipped-for-the-whole-batch-near-
max-model-len.md). So each batched check also runs on the requests clear of the context end as one batch, and
on those at the end as another: a bug confined to the context end then leaves the rest judged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

MIXED = "mixed"
CLEAR_OF_CONTEXT_END = "clear-of-context-end"
AT_CONTEXT_END = "at-context-end"
BATCHES = (MIXED, CLEAR_OF_CONTEXT_END, AT_CONTEXT_END)
SEPARATED_BATCHES = (CLEAR_OF_CONTEXT_END, AT_CONTEXT_END)  # every prompt fixture, in two batches
SEPARATED = "separated"  # a request's own batch: CLEAR_OF_CONTEXT_END or AT_CONTEXT_END, whichever holds it

Item = TypeVar("Item")


def at_context_end(prompt_length: int, max_new_tokens: int, k: int, max_context: int) -> bool:
    """Does the request reach the last 2k + 1 positions of the context (where its drafts must be trimmed)?"""
    return prompt_length + max_new_tokens + 2 * k + 1 > max_context


def batch_members(
    items: Sequence[Item], batch: str, k: int, max_context: int, lengths: Callable[[Item], tuple[int, int]]
) -> list[Item]:
    """The items of `batch` (one of BATCHES), in their order; lengths(item) = (prompt length, max_new_tokens)."""
    if batch == MIXED:
        return list(items)
    if batch not in (CLEAR_OF_CONTEXT_END, AT_CONTEXT_END):
        raise ValueError(f"unknown batch {batch!r}; known: {', '.join(BATCHES)}")
    at_end = batch == AT_CONTEXT_END
    return [item for item in items if at_context_end(*lengths(item), k, max_context) == at_end]


def own_batch(prompt_length: int, max_new_tokens: int, k: int, max_context: int) -> str:
    """The separated batch a request belongs to."""
    return AT_CONTEXT_END if at_context_end(prompt_length, max_new_tokens, k, max_context) else CLEAR_OF_CONTEXT_END
