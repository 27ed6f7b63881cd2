"""An attention kernel whose arithmetic stays in the model's dtype, registered with transformers.

transformers' eager attention computes the softmax in float32 even for float64 inputs, which makes a
float64 forward pass depend on sequence length at the 1e-7 level (measured on tiny-deepseek-v3). The
harness claims exactness in float64, so it runs models with this kernel: eager attention with the
softmax in max(dtype, float32), i.e. float64 stays float64 and bf16/fp16 get a float32 softmax.

    weights = softmax(Q K^T * scaling + mask);  out = weights V       (GQA: K, V repeated per group)
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask

EXACT_ATTENTION = "mtp_harness_exact"


def exact_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs: object,
) -> tuple[torch.Tensor, torch.Tensor]:
    """query [B, heads, Q, D], key/value [B, kv_heads, S, D] -> (output [B, Q, heads, D], weights)."""
    groups = query.shape[1] // key.shape[1]
    if groups > 1:
        key = key.repeat_interleave(groups, dim=1)
        value = value.repeat_interleave(groups, dim=1)
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        scores = scores + attention_mask[:, :, :, : key.shape[-2]]
    weights = torch.softmax(scores, dim=-1, dtype=torch.promote_types(query.dtype, torch.float32)).to(query.dtype)
    output = torch.matmul(weights, value).transpose(1, 2).contiguous()
    return output, weights


AttentionInterface.register(EXACT_ATTENTION, exact_attention_forward)
# transformers builds the same additive float masks for it as for its own eager kernel
ALL_MASK_ATTENTION_FUNCTIONS.register(EXACT_ATTENTION, eager_mask)
