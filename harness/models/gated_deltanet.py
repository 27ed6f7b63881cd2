"""Qwen3-Next's Gated DeltaNet (linear-attention) layer as the harness runs it: in the model's dtype
(float64 stays float64), recording its state after every input token so that drafts can be rolled back.

Per sequence the layer carries two states instead of a KV cache (K = linear_conv_kernel_dim):
    conv state   C_t = the last K inputs x_{t-K+1..t} of its causal depthwise convolution
                 y_t = act(sum_j w_j x_{t-K+1+j})                                   (transformers' conv1d)
    recurrent    S_t [heads, d_k, d_v], the gated delta rule (q, k L2-normalised, q scaled by d_k^-1/2):
                 S'  = exp(g_t) S_{t-1}
                 S_t = S' + k_t (beta_t (v_t - S'^T k_t))^T
                 o_t = S_t^T q_t
    with beta_t = sigmoid(b_t), g_t = -exp(A_log) softplus(a_t + dt_bias).
This is transformers' `torch_recurrent_gated_delta_rule` token by token (the chunked kernel computes the
same S_T in blocks). Both of transformers' kernels cast to float32 (modeling_qwen3_next.py, the
`.to(torch.float32)` of their inputs), so a float64 model would not be float64 there; this forward computes
in max(dtype, float32). The states after each of the T inputs go to harness/models/recurrent_state.py, which
restores each row to the state its committed tokens end at. transformers >= 5.25 also counts the tokens each
linear-attention cache layer has read (`Cache.get_seq_length()` reads it for layer 0), in the conv-state update this
forward replaces; the forward advances that count by T itself (recurrent_state.advance_token_count).
"""

from __future__ import annotations

import types

import torch
from torch import nn
from torch.nn import functional
from transformers.activations import ACT2FN

from harness.models.recurrent_state import LayerState, advance_token_count, layer_states

GATED_DELTANET_CLASSES = ("Qwen3NextGatedDeltaNet",)


def l2_normalised(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """x / sqrt(sum x^2 + eps) over the last dimension (transformers' and FLA's l2norm)."""
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def gated_delta_rule(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    initial_state: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """query/key [B, T, heads, d_k], value [B, T, heads, d_v], g/beta [B, T, heads], initial_state
    [B, heads, d_k, d_v] -> (o [B, T, heads, d_v], states [B, T + 1, heads, d_k, d_v]: S_0..S_T).
    The recurrence is in the module docstring; query and key are normalised here."""
    query = l2_normalised(query) / query.shape[-1] ** 0.5
    key = l2_normalised(key)
    state = initial_state
    states, outputs = [state], []
    for t in range(query.shape[1]):
        decayed = state * g[:, t].exp()[..., None, None]
        remembered = (decayed * key[:, t, :, :, None]).sum(dim=-2)  # S'^T k_t   [B, heads, d_v]
        delta = (value[:, t] - remembered) * beta[:, t, :, None]
        state = decayed + key[:, t, :, :, None] * delta[:, :, None, :]
        outputs.append((state * query[:, t, :, :, None]).sum(dim=-2))
        states.append(state)
    empty = value.new_zeros(value.shape[0], 0, *value.shape[2:])
    return (torch.stack(outputs, dim=1) if outputs else empty), torch.stack(states, dim=1)


def causal_conv_windows(previous: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
    """previous [B, C, K] (the conv state), inputs [B, C, T] -> windows [B, T + 1, C, K]: window i holds the
    last K inputs after i of the new ones, i.e. the conv state after i inputs (window 0 = previous)."""
    kernel = previous.shape[-1]
    return torch.cat([previous, inputs], dim=-1).unfold(-1, kernel, 1).transpose(1, 2)


def gated_deltanet_forward(
    self: nn.Module,
    hidden_states: torch.Tensor,
    cache: object | None = None,
    attention_mask: torch.Tensor | None = None,
    **kwargs: object,
) -> torch.Tensor:
    """Qwen3NextGatedDeltaNet.forward (transformers 5.24, 5.25) in max(dtype, float32), with per-token states.

    attention_mask: transformers' 2D padding mask zeroes padded inputs; the harness passes none (its rows'
    padding is right padding, discarded by restoring the state after the row's last valid input)."""
    if attention_mask is not None:
        hidden_states = hidden_states * attention_mask[:, :, None].to(hidden_states.dtype)
    batch, length, _ = hidden_states.shape
    dtype = hidden_states.dtype
    compute = torch.promote_types(dtype, torch.float32)
    query, key, value, z, b, a = self.fix_query_key_value_ordering(
        self.in_proj_qkvz(hidden_states), self.in_proj_ba(hidden_states)
    )
    mixed = torch.cat([x.reshape(batch, length, -1) for x in (query, key, value)], dim=-1).transpose(1, 2)
    stored = layer_states(cache).get(self.layer_idx) if cache is not None else None
    conv_before = (
        stored.conv
        if stored is not None
        else mixed.new_zeros(batch, mixed.shape[1], self.conv_kernel_size, dtype=compute)
    )
    windows = causal_conv_windows(conv_before.to(compute), mixed.to(compute))  # [B, T+1, C, K]
    weight = self.conv1d.weight.squeeze(1).to(compute)  # [C, K]
    convolved = (windows[:, 1:] * weight).sum(dim=-1)  # [B, T, C]
    if self.conv1d.bias is not None:
        convolved = convolved + self.conv1d.bias.to(compute)
    convolved = ACT2FN[self.activation](convolved)
    query, key, value = torch.split(convolved, [self.key_dim, self.key_dim, self.value_dim], dim=-1)
    query = query.reshape(batch, length, -1, self.head_k_dim)
    key = key.reshape(batch, length, -1, self.head_k_dim)
    value = value.reshape(batch, length, -1, self.head_v_dim)
    beta = b.to(compute).sigmoid()
    g = -self.A_log.to(compute).exp() * functional.softplus(a.to(compute) + self.dt_bias.to(compute))
    groups = self.num_v_heads // self.num_k_heads
    if groups > 1:  # each query/key head serves `groups` consecutive value heads
        query, key = query.repeat_interleave(groups, dim=2), key.repeat_interleave(groups, dim=2)
    initial = (
        stored.recurrent.to(compute)
        if stored is not None
        else value.new_zeros(batch, self.num_v_heads, self.head_k_dim, self.head_v_dim)
    )
    core, states = gated_delta_rule(query, key, value, g, beta, initial)
    if cache is not None:
        layer_states(cache)[self.layer_idx] = LayerState(windows[:, -1], states[:, -1], windows, states)
        # transformers >= 5.25 counts T more tokens read here (its update_conv_state: += seq_len), else a forward
        # continued from this cache without position ids restarts them at get_seq_length() = 0
        advance_token_count(cache, self.layer_idx, length)
    core = self.norm(core.to(dtype).reshape(-1, self.head_v_dim), z.reshape(-1, self.head_v_dim))
    return self.out_proj(core.reshape(batch, length, -1))


def install_gated_deltanet_forward(*modules: nn.Module) -> int:
    """Run every Gated DeltaNet layer in `modules` with gated_deltanet_forward; returns how many there were."""
    installed = 0
    for module in modules:
        for submodule in module.modules():
            if type(submodule).__name__ in GATED_DELTANET_CLASSES:
                submodule.forward = types.MethodType(gated_deltanet_forward, submodule)
                installed += 1
    return installed


def has_recurrent_layers(model: nn.Module) -> bool:
    """Whether `model` has layers whose state is recurrent (rolled back by restoring, not cropping)."""
    return any(type(m).__name__ in GATED_DELTANET_CLASSES for m in model.modules())
