"""vllm-cpu-hybrid-mtp-with-prefix-caching-calls-a-triton-kernel: on CPU, a hybrid model (Qwen3-Next) served with MTP
and prefix caching (vLLM's default) kills the engine at its first step: Model Runner V1 moves the recurrent state
between blocks with Triton kernels, and the CPU build has no Triton (`TypeError: 'function' object is not
subscriptable`).

Its record (FINDING: where it was found, the tests it fails, its signature in words) and its signature, the predicate
`mamba_align_kernel_called_without_triton`. Beside it: its fix (fix.py) and its standalone reproducer (reproducer.py);
its write-up is docs/findings/vllm-cpu-hybrid-mtp-with-prefix-caching-calls-a-triton-kernel.md."""

from __future__ import annotations

from harness.subjects.engines.findings import FailedCase, Finding
from harness.subjects.engines.vllm.findings.common import FOUND_IN, V1_ONLY

NOT_A_KERNEL = "'function' object is not subscriptable"
ALIGN_KERNELS = ("precopy_mamba_align_fused_kernel", "postprocess_mamba_fused_kernel")


def mamba_align_kernel_called_without_triton(case: FailedCase) -> bool:
    """The engine died launching one of the align mode's fused Triton kernels (vllm/v1/worker/mamba_utils.py), which
    vLLM's Triton placeholder left a plain function: `TypeError: 'function' object is not subscriptable` at
    `<kernel>[grid](...)`. The error arrives as the text of the decode call's EngineError."""
    return NOT_A_KERNEL in case.message and any(kernel in case.message for kernel in ALIGN_KERNELS)


FINDING = Finding(
    slug="vllm-cpu-hybrid-mtp-with-prefix-caching-calls-a-triton-kernel",
    title="on CPU, a hybrid model (Qwen3-Next) served with MTP and prefix caching (vLLM's default) kills the engine "
    "at its first step: Model Runner V1 moves the recurrent state between blocks with Triton kernels, and the CPU "
    "build has no Triton (`TypeError: 'function' object is not subscriptable`)",
    engine="vllm",
    decoders=("vllm-mtp",),  # without speculation the align mode's scalar copies run and vLLM decodes (measured)
    found_in=FOUND_IN,
    runners=V1_ONLY,
    flavours=("cpu",),  # CUDA has Triton
    # every case on the hybrid fixture: every engine starts with prefix caching on (vLLM's default, and every
    # configuration the harness runs but none turns it off)
    failing={"tiny-qwen3-next-hd64": ("*",)},
    signature="the engine's error is `TypeError: 'function' object is not subscriptable` at the launch of one of "
    "mamba_utils.py's align-mode fused kernels (precopy_mamba_align_fused_kernel, postprocess_mamba_fused_kernel), "
    "in the decode call's EngineError",
    explains=mamba_align_kernel_called_without_triton,
)
