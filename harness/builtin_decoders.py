"""The built-in decoders, registered by name (imported by harness.registry on first lookup)."""

from __future__ import annotations

import torch

from harness.api import Decoder
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


# the mutant catalogue registers itself as mutant:<name>
import harness.mutants  # noqa: E402, F401
