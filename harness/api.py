"""The public API: what a decoder under test receives and returns, and the model it is handed.

This is the stable import path for engine adapters (`from harness.api import DecodeRequest, ...`); the
modules behind it (harness.contract, harness.models, harness.decoding) are internal and may move.

- The decoder contract (harness/contract/decoder.py): `SamplingConfig`, `DecodeRequest`, `VerifyStep`,
  `DecodeResult`, the `Decoder` protocol, `PassSnapshot` for the inspection hook, `InvalidRequest`.
- The model a decoder factory gets: `ModelBundle`, and `load_bundle` to load one yourself.
- The harness's own decoders, to wrap or compare against: `MTPDecoder`, `TargetOnlyDecoder`.

A factory `factory(bundle, device, dtype) -> Decoder` is what `--decoder your.module:factory` and the
`mtp_harness.decoders` entry points name.
"""

from harness.contract.decoder import (
    GREEDY,
    MAX_DRAFT_TOKENS,
    CacheLayerView,
    Decoder,
    DecodeRequest,
    DecodeResult,
    DraftMode,
    FinishReason,
    InvalidRequest,
    PassObserver,
    PassSnapshot,
    SamplingConfig,
    VerifyStep,
)
from harness.contract.errors import HarnessError
from harness.decoding.mtp_decoder import MTPDecoder
from harness.decoding.target_decoder import TargetOnlyDecoder
from harness.models.loading import ModelBundle, load_bundle

__all__ = [
    "GREEDY",
    "MAX_DRAFT_TOKENS",
    "CacheLayerView",
    "DecodeRequest",
    "DecodeResult",
    "Decoder",
    "DraftMode",
    "FinishReason",
    "HarnessError",
    "InvalidRequest",
    "MTPDecoder",
    "ModelBundle",
    "PassObserver",
    "PassSnapshot",
    "SamplingConfig",
    "TargetOnlyDecoder",
    "VerifyStep",
    "load_bundle",
]
