"""Fix of vllm-cpu-hybrid-mtp-with-prefix-caching-calls-a-triton-kernel.

With prefix caching on, a hybrid model's recurrent state is cached per block ("align" mode,
`cache_config.mamba_cache_mode`), and with speculative decoding Model Runner V1 moves it between blocks before and
after each step with two fused Triton kernels (`MambaBuffers.create(with_postprocess_align=speculative and hybrid)`,
vllm/v1/worker/gpu_model_runner.py:1027-1029; `run_fused_precopy`, vllm/v1/worker/mamba_utils.py:1226;
`postprocess_mamba_align_gpu`, gpu_model_runner.py:1569), on every platform. vLLM's CPU build has no Triton backend
and leaves `@triton.jit` functions plain functions, so the first launch raises. The fix is the rule vLLM's CPU
platform already applies to MLA, whose CPU kernels cannot serve prefix caching either (`CpuPlatform.
check_and_update_config`, vllm/platforms/cpu.py:517-527), taken where vLLM settles a hybrid's cache mode
(`MambaModelConfig.verify_and_update_config`, vllm/model_executor/models/config.py:672-709, which every hybrid's
config hook calls), before the block sizes are derived from it: on CPU, for a hybrid model with speculative
decoding, prefix caching off, so the recurrent state is kept per request (mamba_cache_mode "none") and no Triton
kernel runs.
"""

from collections.abc import Callable
from types import ModuleType

MODEL_CONFIG_MODULE = "vllm.model_executor.models.config"


def patch_model_config(module: ModuleType) -> None:
    mamba = module.MambaModelConfig
    verify_and_update_config: Callable = mamba.verify_and_update_config.__func__

    def verify_and_update_config_without_align_mode_on_cpu(cls, vllm_config) -> None:  # noqa: ANN001
        from vllm.platforms import current_platform

        if current_platform.is_cpu() and vllm_config.speculative_config is not None:
            vllm_config.cache_config.enable_prefix_caching = False
        verify_and_update_config(cls, vllm_config)

    mamba.verify_and_update_config = classmethod(verify_and_update_config_without_align_mode_on_cpu)


PATCHES = {MODEL_CONFIG_MODULE: patch_model_config}
