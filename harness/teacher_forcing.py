"""Whole-sequence forward passes of the target and its MTP depths, without caches (teacher forcing).

Used to train the fixtures and to compute, from scratch, what a decoder's incremental state must equal.
Shapes: B batch, T tokens, H hidden, V vocab.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import PreTrainedModel

from harness.mtp_depth import rotary_embeddings


def causal_mask(length: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Additive causal mask [1, 1, length, length]: 0 on and below the diagonal, dtype-min above."""
    blocked = torch.ones(length, length, dtype=torch.bool, device=device).triu(1)
    mask = torch.zeros(length, length, dtype=dtype, device=device).masked_fill(blocked, torch.finfo(dtype).min)
    return mask[None, None]


def target_forward(target: PreTrainedModel, token_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """token_ids [B, T] -> (final-normed hidden [B, T, H], logits [B, T, V])."""
    hidden = target.get_decoder()(input_ids=token_ids, use_cache=False).last_hidden_state
    return hidden, target.get_output_embeddings()(hidden)


def mtp_forward(
    target: PreTrainedModel, depths: nn.ModuleList, token_ids: torch.Tensor, hidden: torch.Tensor
) -> list[torch.Tensor]:
    """Teacher-forced logits of every MTP depth over a token sequence.

    Depth d (1-based) at index i reads t_{i+d} and h^{d-1}_i and predicts t_{i+d+1}, so its output
    covers indices 0..T-d-1: logits [B, T-d, V], where index T-d-1 predicts a token beyond the sequence.
    hidden: the target's final-normed hidden states [B, T, H] (h^0).
    """
    length = token_ids.shape[1]
    all_logits = []
    carried = hidden
    for d, depth in enumerate(depths, start=1):
        span = length - d
        if span < 1:
            break
        tokens = token_ids[:, d:]
        carried = carried[:, :span]
        position_ids = (torch.arange(span, device=token_ids.device) + d)[None].expand(token_ids.shape[0], -1)
        position_embeddings = rotary_embeddings(target, carried, position_ids, depth.layer_type)
        mask = causal_mask(span, carried.dtype, carried.device)
        carried = depth(tokens, carried, position_embeddings, mask, position_ids)
        all_logits.append(depth.head(carried))
    return all_logits
