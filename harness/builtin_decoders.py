"""The built-in decoders, registered by name (imported by harness.registry on first lookup)."""

from __future__ import annotations

import torch

from harness.api import Decoder
from harness.engines.vllm_subject import VLLMDecoder
from harness.external import TransformersAssistedDecoder, TransformersMTPDecoder
from harness.models import ModelBundle
from harness.mtp_decoder import MTPDecoder
from harness.registry import register_decoder
from harness.target_decoder import TargetOnlyDecoder


@register_decoder("target")
def target(bundle: ModelBundle, device: torch.device, dtype: torch.dtype) -> Decoder:
    return TargetOnlyDecoder(bundle)


@register_decoder("mtp")
def mtp(bundle: ModelBundle, device: torch.device, dtype: torch.dtype) -> Decoder:
    return MTPDecoder(bundle)


@register_decoder("transformers-mtp")
def transformers_mtp(bundle: ModelBundle, device: torch.device, dtype: torch.dtype) -> Decoder:
    return TransformersMTPDecoder(bundle)


@register_decoder("transformers-assisted")
def transformers_assisted(bundle: ModelBundle, device: torch.device, dtype: torch.dtype) -> Decoder:
    return TransformersAssistedDecoder(bundle)


@register_decoder("vllm-mtp")
def vllm_mtp(bundle: ModelBundle, device: torch.device, dtype: torch.dtype) -> Decoder:
    return VLLMDecoder(bundle, speculative=True)


@register_decoder("vllm")
def vllm(bundle: ModelBundle, device: torch.device, dtype: torch.dtype) -> Decoder:
    return VLLMDecoder(bundle, speculative=False)


# vLLM has no float64 path: runs without --dtype use float32 on CPU (bf16 on CUDA, as for every decoder)
vllm_mtp.default_dtypes = vllm.default_dtypes = {"cpu": "float32", "cuda": "bfloat16"}

# the mutant catalogue registers itself as mutant:<name>
import harness.mutants  # noqa: E402, F401
