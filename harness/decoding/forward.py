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
    return hidden, bundle.target.get_output_embeddings()(normed)


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
