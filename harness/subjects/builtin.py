"""The built-in decoders by name. harness.subjects.registry looks them up here; this module imports nothing of the
registry (registration flows one way: registry -> built-ins, registry -> mutants)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from harness.contract.decoder import Decoder
from harness.decoding.mtp_decoder import MTPDecoder
from harness.decoding.target_decoder import TargetOnlyDecoder
from harness.models.loading import ModelBundle
from harness.subjects.engines.configurations import DEFAULT
from harness.subjects.engines.llamacpp_subject import LlamaCppDecoder
from harness.subjects.engines.vllm_subject import VLLMDecoder
from harness.subjects.transformers.decoders import TransformersAssistedDecoder, TransformersMTPDecoder


def target(bundle: ModelBundle, device: torch.device, dtype: torch.dtype) -> Decoder:
    return TargetOnlyDecoder(bundle)


def mtp(bundle: ModelBundle, device: torch.device, dtype: torch.dtype) -> Decoder:
    return MTPDecoder(bundle)


def transformers_mtp(bundle: ModelBundle, device: torch.device, dtype: torch.dtype) -> Decoder:
    return TransformersMTPDecoder(bundle)


def transformers_assisted(bundle: ModelBundle, device: torch.device, dtype: torch.dtype) -> Decoder:
    return TransformersAssistedDecoder(bundle)


def vllm_mtp(
    bundle: ModelBundle,
    device: torch.device,
    dtype: torch.dtype,
    engine_fixes: Sequence[str] = (),
    engine_config: str = DEFAULT,
    engine_args: Mapping[str, object] | None = None,
) -> Decoder:
    return VLLMDecoder(bundle, True, engine_fixes, engine_config, engine_args)


def vllm(
    bundle: ModelBundle,
    device: torch.device,
    dtype: torch.dtype,
    engine_fixes: Sequence[str] = (),
    engine_config: str = DEFAULT,
    engine_args: Mapping[str, object] | None = None,
) -> Decoder:
    return VLLMDecoder(bundle, False, engine_fixes, engine_config, engine_args)


def llamacpp_mtp(
    bundle: ModelBundle, device: torch.device, dtype: torch.dtype, engine_config: str = DEFAULT
) -> Decoder:
    return LlamaCppDecoder(bundle, speculative=True, engine_config=engine_config)


def llamacpp(bundle: ModelBundle, device: torch.device, dtype: torch.dtype, engine_config: str = DEFAULT) -> Decoder:
    return LlamaCppDecoder(bundle, speculative=False, engine_config=engine_config)


# vLLM has no float64 path: runs without --dtype use float32 on CPU (bf16 on CUDA, as for every decoder)
vllm_mtp.default_dtypes = vllm.default_dtypes = {"cpu": "float32", "cuda": "bfloat16"}
# llama.cpp serves the GGUF's float32 weights on CPU
llamacpp_mtp.default_dtypes = llamacpp.default_dtypes = {"cpu": "float32"}

BUILTIN_DECODERS = {
    "target": target,
    "mtp": mtp,
    "transformers-mtp": transformers_mtp,
    "transformers-assisted": transformers_assisted,
    "vllm-mtp": vllm_mtp,
    "vllm": vllm,
    "llamacpp-mtp": llamacpp_mtp,
    "llamacpp": llamacpp,
}
