"""The decoders of transformers releases out of process: the in-process subjects' MTP and assisted generation
(harness/subjects/engines/transformers/generation.py) run by another release in its own environment (server.py), one
engine process per k and draft mode, with the capabilities the in-process subjects declare."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.contract.dtypes import DTYPE_NAMES
from harness.subjects.engines.decoder import EngineDecoder
from harness.subjects.engines.transformers.generation import (
    SAMPLED_DRAFTS_ONLY,
    TransformersAssistedDecoder,
    TransformersMTPDecoder,
    mtp_serves,
)

if TYPE_CHECKING:
    from harness.contract.run_options import EngineOptions
    from harness.models.loading import ModelBundle
    from harness.subjects.engines.engine import Engine

MTP, ASSISTED = "mtp", "assisted"


class TransformersReleaseDecoder(EngineDecoder):
    """One transformers release's generation with drafts (`method`: its native MTP, or assisted generation with a
    layer-skip draft) on `bundle`'s checkpoint, loaded there as the harness loads it, in the bundle's dtype."""

    method = MTP
    speculative_serves = SAMPLED_DRAFTS_ONLY

    def server_config(self, k: int, draft_mode: str) -> dict[str, object]:
        return {
            "model": str(self.bundle.path.resolve()),
            "device": str(self.bundle.device),
            "dtype": DTYPE_NAMES[str(self.bundle.dtype).removeprefix("torch.")],
            "method": self.method,
            "num_draft_tokens": k,
            "draft_mode": draft_mode,
        }


class TransformersReleaseMTPDecoder(TransformersReleaseDecoder):
    """`transformers-mtp` of another release: one draft per MTP depth in use (k = 1 .. the checkpoint's depths); its
    prefill pass samples output token 0 without drafts. What the release cannot serve is refused at the door, asked
    of the release itself (ReleaseModelNeeds: model_probe.py), and again by its server."""

    subject_name = "transformers-mtp"
    drafts_from = 1
    # the request features the in-process subject passes on to generate(), by the same code (generation.py)
    engine_features = TransformersMTPDecoder.features
    why_no_feature = TransformersMTPDecoder.why_unsupported
    logprobs_dtype = TransformersMTPDecoder.logprobs_dtype

    def __init__(self, engine: Engine, bundle: ModelBundle, speculative: bool, options: EngineOptions) -> None:
        super().__init__(engine, bundle, speculative, options)
        self.serves = mtp_serves(bundle.layout.num_depths)


class TransformersReleaseAssistedDecoder(TransformersReleaseDecoder):
    """`transformers-assisted` of another release: num_draft_tokens drafts per pass from the layer-skip draft."""

    subject_name = "transformers-assisted"
    method = ASSISTED
    drafts_from = 0
    drafter = TransformersAssistedDecoder.drafter
    engine_features = TransformersAssistedDecoder.features
    why_no_feature = TransformersAssistedDecoder.why_unsupported
    logprobs_dtype = TransformersAssistedDecoder.logprobs_dtype
