"""Whole-sequence forward passes of the target and its MTP depths, without caches (teacher forcing).

Used to train the fixtures and to compute, from scratch, what a decoder's incremental state must equal.
Shapes: B batch, T tokens, H hidden, V vocab.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.cache_utils import Cache

from harness.models.mtp_depth import rotary_embeddings
from harness.models.target_hidden import run_target_decoder


def causal_mask(length: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Additive causal mask [1, 1, length, length]: 0 on and below the diagonal, dtype-min above."""
    blocked = torch.ones(length, length, dtype=torch.bool, device=device).triu(1)
    mask = torch.zeros(length, length, dtype=dtype, device=device).masked_fill(blocked, torch.finfo(dtype).min)
    return mask[None, None]


def target_forward(target: PreTrainedModel, token_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """token_ids [B, T] -> (h^0 the MTP depths read [B, T, H], logits [B, T, V]) (harness/models/target_hidden.py)."""
    hidden, normed = run_target_decoder(target, input_ids=token_ids, use_cache=False)
    return hidden, target.get_output_embeddings()(normed)


def mtp_hidden_states(
    target: PreTrainedModel,
    depths: nn.ModuleList,
    token_ids: torch.Tensor,
    hidden: torch.Tensor,
    caches: Sequence[Cache] | None = None,
) -> list[torch.Tensor]:
    """Teacher-forced outputs h^d of every MTP depth over a token sequence.

    Depth d (1-based) at index i reads t_{i+d} and h^{d-1}_i at position i + d and predicts t_{i+d+1}; it
    covers the indices where both exist: min(len(h^{d-1}), T - d). hidden: h^0 [B, n, H], the target's
    hidden states as the depths read them (harness/models/target_hidden.py). caches: one per depth, to keep each
    depth's KV (depth d writes layer d-1).
    """
    length = token_ids.shape[1]
    outputs = []
    carried = hidden
    for d, depth in enumerate(depths, start=1):
        span = min(carried.shape[1], length - d)
        if span < 1:
            break
        carried = carried[:, :span]
        position_ids = (torch.arange(span, device=token_ids.device) + d)[None].expand(token_ids.shape[0], -1)
        position_embeddings = rotary_embeddings(target, carried, position_ids, depth.layer_type)
        mask = causal_mask(span, carried.dtype, carried.device)
        cache = caches[d - 1] if caches is not None else None
        carried = depth(token_ids[:, d : d + span], carried, position_embeddings, mask, position_ids, cache=cache)
        outputs.append(carried)
    return outputs


def mtp_forward(
    target: PreTrainedModel, depths: nn.ModuleList, token_ids: torch.Tensor, hidden: torch.Tensor
) -> list[torch.Tensor]:
    """Teacher-forced logits of every MTP depth: logits [B, T-d, V] for depth d, where the last index
    predicts a token beyond the sequence (hidden: h^0 over all T tokens)."""
    return [
        depth.head(h) for depth, h in zip(depths, mtp_hidden_states(target, depths, token_ids, hidden), strict=False)
    ]
