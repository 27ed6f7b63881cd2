"""Fix of vllm-cpu-gdn-mtp-step-shorter-than-the-accepted-run-breaks-the-conv-state.

With speculative decoding, a gated-DeltaNet layer keeps its convolution state as a rolling buffer of
state_len = width - 1 + k inputs per request, and each step reads the window of the width - 1 inputs before its first
token at `offset = num_accepted - 1` (the tokens the request accepted at its previous step). vLLM's CPU path
(`_spec_forward`, vllm/model_executor/layers/mamba/ops/cpu/gdn_attention.py:476-582) then rolls the buffer as if every
step fed k + 1 tokens: `keep = B[:, offset + 1 : offset + 1 + (state_len - q_i)]`, `B.copy_(cat([keep, x_seq]))`
(:551-556). A request whose step is shorter than its last accepted run (q_i < num_accepted: its drafts cut at the
context end after a full acceptance) slices past the buffer, and the copy raises (`The size of tensor a (4) must match
the size of tensor b (3)`); the native kernel it takes when the batch's steps are equal refuses the same step
(`causal_conv1d_update_cpu: num_accepted_tokens must be in [1, seqlen]`, :516-531). Any shorter step with
num_accepted <= q_i < k + 1 leaves the next window misaligned. The fix keeps the window's rule and writes the buffer so
that the next step's window at any offset is the width - 1 inputs before its first token:
B[:, : width - 2 + q_i] = cat([window, x_seq])[:, 1:] (for q_i = k + 1 exactly what vLLM writes), and takes the native
kernel only for steps of k + 1 tokens, the roll it shares with the fallback. The recurrent state's update
is vLLM's, unchanged.
"""

from types import ModuleType

import torch
import torch.nn.functional as F

GDN_MODULE = "vllm.model_executor.layers.mamba.ops.cpu.gdn_attention"


def patch_gdn(module: ModuleType) -> None:
    ops = module.ops

    def spec_forward_rolling_any_step(  # vLLM's _spec_forward, its convolution's roll fixed
        layer: torch.nn.Module,
        attn_metadata_i: object,  # vLLM's GDNAttentionMetadata
        mixed_qkv_spec: torch.Tensor,
        b_spec: torch.Tensor,
        a_spec: torch.Tensor,
        conv_buf: torch.Tensor,
        ssm_state: torch.Tensor,
        width: int,
        state_len: int,
    ) -> torch.Tensor:
        num_spec_decodes = attn_metadata_i.num_spec_decodes
        spec_state_indices = attn_metadata_i.spec_state_indices_tensor
        spec_qsl = attn_metadata_i.spec_query_start_loc
        num_accepted = attn_metadata_i.num_accepted_tokens
        spec_qsl_cpu = spec_qsl[: num_spec_decodes + 1]
        seq_starts = spec_qsl_cpu[:-1]
        seq_lens = spec_qsl_cpu[1:] - spec_qsl_cpu[:-1]
        is_amx = torch.cpu._is_amx_tile_supported()
        dim = mixed_qkv_spec.size(-1)
        bias = layer.conv1d.bias
        silu = layer.activation == "silu"
        can_use_native_conv = (
            (is_amx or module.is_arm_bf16())
            and width == 4
            and num_spec_decodes > 0
            and bool(torch.all(seq_lens == seq_lens[0]).item())
            and int(seq_lens[0].item()) > 0
            and int(seq_lens[0].item()) == state_len - width + 2  # the fix: k + 1 tokens, the roll it assumes
        )
        if can_use_native_conv:
            q_i = int(seq_lens[0].item())
            conv_out = module._causal_conv1d_update_cpu(
                x=mixed_qkv_spec.view(num_spec_decodes, q_i, dim),
                conv_states=conv_buf,
                weight=layer.conv1d.weight,
                bias=bias,
                silu_activation=silu,
                conv_state_indices=spec_state_indices[:num_spec_decodes, 0].to("cpu", torch.int32).contiguous(),
                is_weight_packed=True,
                num_accepted_tokens=num_accepted[:num_spec_decodes].to("cpu", torch.int32),
            ).view_as(mixed_qkv_spec)
        else:
            w = module._unpacked_conv_weight(layer).unsqueeze(1)
            col0 = spec_state_indices[:num_spec_decodes, 0]
            num_acc_cpu = num_accepted[:num_spec_decodes]
            conv_out = torch.empty_like(mixed_qkv_spec)
            for i in range(num_spec_decodes):
                q_i = int(seq_lens[i].item())
                if q_i == 0:
                    continue
                start = int(seq_starts[i].item())
                slot0 = int(col0[i].item())
                offset = int(num_acc_cpu[i].item()) - 1
                B = conv_buf[slot0]  # (dim, state_len), vLLM's name
                x_seq = mixed_qkv_spec[start : start + q_i].transpose(0, 1).to(B.dtype)
                prior = B[:, offset : offset + (width - 1)]
                conv_in = torch.cat([prior, x_seq], dim=-1).unsqueeze(0)
                out = F.conv1d(conv_in, w, bias, groups=dim)[0]
                if silu:
                    out = F.silu(out)
                conv_out[start : start + q_i] = out.transpose(0, 1).to(conv_out.dtype)
                # the fix: the next step's window at offset j (j + 1 tokens accepted) is columns j .. j + width - 2
                rolled = conv_in[0, :, 1:].clone()  # (dim, width - 2 + q_i), at most state_len
                B[:, : rolled.size(-1)] = rolled
        query, key, value = layer.rearrange_mixed_qkv(conv_out)
        out_spec = ops.fused_sigmoid_gating_delta_rule_update_spec_cpu(
            A_log=layer.A_log,
            dt_bias=layer.dt_bias,
            q=query.squeeze(0),
            k=key.squeeze(0),
            v=value.squeeze(0),
            a=a_spec,
            b=b_spec,
            initial_state_source=ssm_state,
            spec_state_indices=spec_state_indices[:num_spec_decodes].to(torch.int32).contiguous(),
            num_accepted_tokens=num_accepted[:num_spec_decodes].to(torch.int32).contiguous(),
            cu_seqlens=spec_qsl[: num_spec_decodes + 1].to(torch.int32).contiguous(),
            use_qk_l2norm_in_kernel=True,
        )
        return out_spec

    module._spec_forward = spec_forward_rolling_any_step


PATCHES = {GDN_MODULE: patch_gdn}
