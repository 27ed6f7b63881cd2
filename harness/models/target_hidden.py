"""The hidden state h^0 the first MTP depth reads from the target model.

DeepSeek-V3, GLM-4.5, Qwen3-Next and Mellum feed depth 1 the target's final-normed hidden state (what the
lm_head sees). MiMo feeds it the hidden state *before* the final norm: vLLM's MiMo support, contributed by
Xiaomi, overrides MiMoModel.forward to return `hidden_states + residual` to the MTP layer and applies the
final norm only for the logits (vllm/model_executor/models/mimo.py). A target marked with
`mark_pre_norm_reader` is run so that both are available.
"""

from __future__ import annotations

import torch
from transformers import PreTrainedModel

PRE_NORM_READER = "mtp_reads_pre_norm_hidden"


def mark_pre_norm_reader(target: PreTrainedModel) -> None:
    """Declare that `target`'s MTP depths read its hidden state before the final norm (MiMo)."""
    setattr(target, PRE_NORM_READER, True)


def run_target_decoder(target: PreTrainedModel, **inputs: object) -> tuple[torch.Tensor, torch.Tensor]:
    """target.get_decoder()(**inputs) -> (h^0 for the MTP depths, final-normed hidden) [B, T, H] each."""
    decoder = target.get_decoder()
    if not getattr(target, PRE_NORM_READER, False):
        normed = decoder(**inputs).last_hidden_state
        return normed, normed
    captured: list[torch.Tensor] = []
    handle = decoder.norm.register_forward_pre_hook(lambda module, args: captured.append(args[0]))
    try:
        normed = decoder(**inputs).last_hidden_state
    finally:
        handle.remove()
    return captured[-1], normed
