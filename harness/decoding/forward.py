"""One incremental forward pass of the target, or of one MTP depth, over slot caches.

Shapes: B rows, Q query tokens per row (right-padded; `valid` marks real ones), H hidden, V vocab.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from harness.decoding.slots import SlotCache
from harness.models.loading import ModelBundle
from harness.models.mtp_depth import rotary_embeddings
from harness.models.target_hidden import run_target_decoder


def target_pass(
    bundle: ModelBundle, slots: SlotCache, token_ids: torch.Tensor, positions: torch.Tensor, valid: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Feed token_ids [B, Q] at positions [B, Q] -> (h^0 the MTP depths read [B, Q, H], logits [B, Q, V])."""
    hidden, normed = _target_hidden(bundle, slots, token_ids, positions, valid)
    return hidden, bundle.target.get_output_embeddings()(normed)


def prefill(
    bundle: ModelBundle, slots: SlotCache, token_ids: torch.Tensor, positions: torch.Tensor, valid: torch.Tensor
) -> torch.Tensor:
    """The prompts' pass into empty `slots` (B rows) -> h^0 [B, P, H]; no logits (nothing reads a prompt token's).
    Each distinct prompt is computed once (once_per_distinct_row: a law case decodes thousands of requests of one
    prompt)."""
    return once_per_distinct_row(
        slots, lambda *inputs: _target_hidden(bundle, slots, *inputs)[0], token_ids, positions, valid
    )


def once_per_distinct_row(
    slots: SlotCache, forward: Callable[..., torch.Tensor], *inputs: torch.Tensor
) -> torch.Tensor:
    """forward(*inputs) -> [B, ...], a pass that appends to `slots`; while `slots` holds nothing (a batch's first
    pass), rows whose inputs are equal in every tensor are computed once: the pass runs on the first row of each
    distinct row, then every row takes that row's cache slots, recurrent state and outputs. A row's attention and
    recurrence read only its own row and its own cache, so with empty caches equal inputs give equal outputs, and each
    row holds what the whole batch's pass gives it: on CPU bit for bit on attention-only models, and on a hybrid
    within the rounding that the batch around a row already moves (tests/test_prefill.py; on an accelerator a
    batch of another height may take another matrix kernel, as any batch of another composition does).
    Rows are grouped by their integer inputs (token ids, positions, valid flags); a floating input (hidden states)
    is then compared row by row with its group's first row, without a copy, and any difference runs the batch
    unshared."""
    if slots.num_slots or not inputs or len(inputs[0]) < 2:
        return forward(*inputs)
    rows = len(inputs[0])
    exact = [tensor.reshape(rows, -1).long() for tensor in inputs if not tensor.is_floating_point()]
    if not exact:
        return forward(*inputs)
    _, row_of = torch.unique(torch.cat(exact, dim=1), dim=0, return_inverse=True)
    distinct = int(row_of.max()) + 1
    if distinct == rows:
        return forward(*inputs)
    first = torch.full((distinct,), rows, device=row_of.device).scatter_reduce(
        0, row_of, torch.arange(rows, device=row_of.device), reduce="amin"
    )
    source = first[row_of].tolist()
    for tensor in (tensor for tensor in inputs if tensor.is_floating_point()):
        if not all(torch.equal(tensor[row], tensor[other]) for row, other in enumerate(source) if row != other):
            return forward(*inputs)
    slots.select_rows(first)
    outputs = forward(*(tensor[first] for tensor in inputs))
    slots.select_rows(row_of)
    return outputs[row_of]


def _target_hidden(
    bundle: ModelBundle, slots: SlotCache, token_ids: torch.Tensor, positions: torch.Tensor, valid: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The target's layers over token_ids [B, Q] -> (h^0 [B, Q, H], the final norm's output [B, Q, H])."""
    mask = slots.attention_mask(positions, valid, bundle.dtype)
    hidden, normed = run_target_decoder(
        bundle.target,
        input_ids=token_ids,
        attention_mask=mask,
        position_ids=positions,
        cache=slots.cache,
        use_cache=True,
    )
    slots.appended(positions, valid)
    return hidden, normed


def depth_pass(
    bundle: ModelBundle,
    depth_index: int,
    slots: SlotCache,
    token_ids: torch.Tensor,
    hidden: torch.Tensor,
    positions: torch.Tensor,
    valid: torch.Tensor,
) -> torch.Tensor:
    """MTP depth `depth_index` (0-based) over (token t_{i+d}, hidden h^{d-1}_i) pairs at positions i + d
    -> its output h^d [B, Q, H] (logits: `bundle.depths[depth_index].head(h^d)`, where needed)."""
    depth = bundle.depths[depth_index]
    mask = slots.attention_mask(positions, valid, bundle.dtype)
    position_embeddings = rotary_embeddings(bundle.target, hidden, positions, depth.layer_type)
    out_hidden = depth(token_ids, hidden, position_embeddings, mask, positions, cache=slots.cache)
    slots.appended(positions, valid)
    return out_hidden
