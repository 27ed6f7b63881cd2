"""Fix of vllm-cpu-expand-kernel-leaves-sampling-parameters-uninitialized (vllm-project/vllm#55005).

vLLM's CPU stand-in for the `expand_kernel` Triton kernel hands the int64-only C++ kernel `_ensure_int64(output)`,
a copy whenever the output is float32 (temperature, top-p) or int32 (top-k), so the caller's buffer is never
written. The fix expands into the caller's buffer itself, in its own dtype.
"""

from types import ModuleType

import torch


def _expand_kernel_impl(
    output: torch.Tensor,
    input_val: torch.Tensor,
    cu_num_tokens: torch.Tensor,
    replace_from: float,
    replace_to: float,
    MAX_NUM_TOKENS: int | None = None,
) -> None:
    # output[t] = input_val[r] for each token t of request r (cu_num_tokens: cumulative token counts), with
    # replace_from replaced by replace_to, written into `output` in its own dtype
    counts = torch.diff(cu_num_tokens, prepend=cu_num_tokens.new_zeros(1)).long()
    values = torch.where(input_val == replace_from, torch.full_like(input_val, replace_to), input_val)
    expanded = values.repeat_interleave(counts)
    output[: expanded.numel()].copy_(expanded)


def patch(module: ModuleType) -> None:
    module._expand_kernel_impl = _expand_kernel_impl


PATCHES = {"vllm.utils.cpu_triton_utils": patch}
