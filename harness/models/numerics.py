"""Float64 all the way through, where transformers hard-codes a float32 step.

DeepSeek-V3's router computes its logits in float32 whatever the model dtype (transformers 5.x,
`DeepseekV3TopkRouter`). In a float64 model that makes MoE outputs depend on the batch shape at the
1e-7 level (measured: MTP depth caches of tiny-deepseek-v3 differ by 6e-8 between a chunked and a
from-scratch computation), which hides real bugs below the float64 invariant tolerance of 1e-10.
In float64 bundles the harness therefore runs the same routing arithmetic in float64 (and likewise
Qwen3-Next's norms and router, which compute in float32).

    scores = sigmoid(h W^T);  choice = scores + bias, grouped top-k;  weights = scores[topk] (normalised) * scale
"""

from __future__ import annotations

import types

import torch
from torch import nn
from torch.nn import functional


def _deepseek_router_forward(self: nn.Module, hidden_states: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """DeepseekV3TopkRouter.forward (transformers 5.24) with the float32 casts replaced by the input dtype."""
    dtype = torch.promote_types(hidden_states.dtype, torch.float32)
    hidden_states = hidden_states.view(-1, self.hidden_dim)
    router_logits = functional.linear(hidden_states.to(dtype), self.weight.to(dtype))
    scores = router_logits.sigmoid()
    scores_for_choice = scores + self.e_score_correction_bias.to(dtype)
    group_scores = (
        scores_for_choice.view(-1, self.num_group, self.num_experts // self.num_group).topk(2, dim=-1)[0].sum(dim=-1)
    )
    group_idx = torch.topk(group_scores, k=self.topk_group, dim=-1, sorted=False)[1]
    group_mask = torch.zeros_like(group_scores)
    group_mask.scatter_(1, group_idx, 1)
    score_mask = (
        group_mask.unsqueeze(-1)
        .expand(-1, self.num_group, self.num_experts // self.num_group)
        .reshape(-1, self.num_experts)
    )
    scores_for_choice = scores_for_choice.masked_fill(~score_mask.bool(), float("-inf"))
    topk_indices = torch.topk(scores_for_choice, k=self.top_k, dim=-1, sorted=False)[1]
    topk_weights = scores.gather(1, topk_indices)
    if self.norm_topk_prob:
        topk_weights = topk_weights / (topk_weights.sum(dim=-1, keepdim=True) + 1e-20)
    return router_logits, topk_weights * self.routed_scaling_factor, topk_indices


def _qwen3_next_rms_norm_forward(self: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Qwen3NextRMSNorm (zero-centred weight) in max(dtype, float32): x / rms(x) * (1 + w)."""
    dtype = torch.promote_types(x.dtype, torch.float32)
    y = x.to(dtype)
    y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + self.eps)
    return (y * (1.0 + self.weight.to(dtype))).to(x.dtype)


def _qwen3_next_gated_norm_forward(self: nn.Module, hidden_states: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    """Qwen3NextRMSNormGated in max(dtype, float32): w * x / rms(x) * silu(gate)."""
    dtype = torch.promote_types(hidden_states.dtype, torch.float32)
    y = hidden_states.to(dtype)
    y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
    y = self.weight.to(dtype) * y * functional.silu(gate.to(dtype))
    return y.to(hidden_states.dtype)


def _softmax_topk_router_forward(self: nn.Module, hidden_states: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Qwen3NextTopKRouter: softmax over the experts in max(dtype, float32), top-k, renormalised."""
    hidden_states = hidden_states.reshape(-1, self.hidden_dim)
    router_logits = functional.linear(hidden_states, self.weight)
    probabilities = torch.softmax(router_logits, dim=-1, dtype=torch.promote_types(router_logits.dtype, torch.float32))
    top_values, top_indices = torch.topk(probabilities, self.top_k, dim=-1)
    if self.norm_topk_prob:
        top_values = top_values / top_values.sum(dim=-1, keepdim=True)
    return router_logits, top_values.to(router_logits.dtype), top_indices


# GLM-4.5 routes exactly as DeepSeek-V3 does (sigmoid scores, correction bias, grouped top-k). Qwen3-Next's
# norms and router upcast to float32 (which in a float64 model is a downcast).
FLOAT64_FORWARDS = {
    "DeepseekV3TopkRouter": _deepseek_router_forward,
    "Glm4MoeTopkRouter": _deepseek_router_forward,
    "Qwen3NextRMSNorm": _qwen3_next_rms_norm_forward,
    "Qwen3NextRMSNormGated": _qwen3_next_gated_norm_forward,
    "Qwen3NextTopKRouter": _softmax_topk_router_forward,
}


def use_float64_arithmetic(*modules: nn.Module) -> int:
    """Swap in float64 forwards for the submodules that hard-code float32; returns how many were swapped."""
    swapped = 0
    for module in modules:
        for submodule in module.modules():
            forward = FLOAT64_FORWARDS.get(type(submodule).__name__)
            if forward is not None:
                submodule.forward = types.MethodType(forward, submodule)
                swapped += 1
    return swapped
