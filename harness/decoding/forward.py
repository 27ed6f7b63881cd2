"""One incremental forward pass of the target, or of one MTP depth, over slot caches.

Shapes: B rows, Q query tokens per row (right-padded; `valid` marks real ones), H hidden, V vocab.
"""

from __future__ import annotations

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
    Rows with the same prompt (the same tokens and length) are computed once: the pass runs on the first row of each
    distinct prompt, then every row takes that row's cache, recurrent state and hidden states (a law case decodes
    thousands of requests of one prompt). A row's attention and recurrence read only its own row, so each row holds
    what the whole batch's pass gives it: bit for bit on attention-only models, and on a hybrid within the rounding
    that the batch around a row already moves (suites/unit/test_prefill.py)."""
    lengths = valid.sum(dim=1)
    _, row_of = torch.unique(torch.cat([token_ids, lengths[:, None]], dim=1), dim=0, return_inverse=True)
    distinct = int(row_of.max()) + 1 if len(row_of) else 0
    if distinct == len(token_ids):
        return _target_hidden(bundle, slots, token_ids, positions, valid)[0]
    rows = torch.arange(len(token_ids), device=token_ids.device)
    first = torch.full((distinct,), len(token_ids), device=token_ids.device).scatter_reduce(
        0, row_of, rows, reduce="amin"
    )
    slots.select_rows(first)
    hidden = _target_hidden(bundle, slots, token_ids[first], positions[first], valid[first])[0]
    slots.select_rows(row_of)
    return hidden[row_of]


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
