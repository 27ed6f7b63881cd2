"""transformers' own MTP generation (`generate(..., use_mtp=True)`) pointed at a bundle's checkpoint."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import transformers
from transformers import PretrainedConfig, PreTrainedModel
from transformers.generation import candidate_generator

from harness.contract.errors import HarnessError
from harness.models.layouts import DEEPSEEK_V3, MIMO

if TYPE_CHECKING:
    from harness.models.loading import ModelBundle


class TransformersMTPUnsupported(HarnessError):
    """transformers' MtpModel cannot read this checkpoint's MTP layers."""


def transformers_mtp_problem(bundle: ModelBundle) -> str | None:
    """Why transformers' MTP generation cannot read this bundle's checkpoint, or None (mtp_generation_problem)."""
    return mtp_generation_problem(bundle.target.config, type(bundle.target), bundle.layout.name)


def mtp_generation_problem(config: PretrainedConfig, model_class: type, layout_name: str) -> str | None:
    """Why this transformers release's MTP generation cannot serve a checkpoint of this config, model class and MTP
    layout, or None; read from the release's own code, no weight loaded (model_probe.py asks it in a release's
    environment at the door).

    transformers has no weight mapping for the MiMo layout, and no MTP for stateful (hybrid) models: 5.14 to 5.24
    refuse assisted generation on them; 5.25 no longer does, but its MTP generation needs `num_mtp_layers` in the
    config, which a model family without MTP support in that release (Qwen3-Next; Mellum before 5.20) does not have.
    A release without MTPCandidateGenerator (before 5.14) has no MTP generation at all, and takes
    generate(use_mtp=True) without a word, decoding with no draft: every greedy check would pass with nothing tested
    """
    if not hasattr(candidate_generator, "MTPCandidateGenerator"):
        return (
            f"transformers {transformers.__version__} has no MTP generation (no MTPCandidateGenerator): "
            "generate(use_mtp=True) would decode without drafts; run transformers-assisted on this release"
        )
    if getattr(model_class, "_is_stateful", False):
        return (
            f"transformers {transformers.__version__} refuses MTP on stateful models: {model_class.__name__} has "
            "recurrent layers (generation/utils.py: 'assisted generation is not supported with stateful models')"
        )
    if layout_name == MIMO:
        return (
            f"transformers {transformers.__version__}: its MtpModel has no weight mapping for the MiMo layout "
            "(model.mtp_layers.*)"
        )
    if getattr(config.get_text_config(), "num_mtp_layers", None) is None:
        return (
            f"transformers {transformers.__version__} has no MTP for {model_class.__name__}: its config has no "
            "num_mtp_layers, which transformers' MTP generation reads (generation/candidate_generator.py, "
            "MTPCandidateGenerator)"
        )
    return None


def enable_transformers_mtp(bundle: ModelBundle) -> PreTrainedModel:
    """The bundle's target model, set up so that `generate(use_mtp=True)` finds its MTP weights
    (TransformersMTPUnsupported where it cannot: transformers_mtp_problem).

    transformers looks for DeepSeek-V3 MTP weights only at layer 61 (`_keys_to_ignore_on_load_unexpected`);
    a checkpoint with another layer count needs the pattern pointed at its own MTP layers."""
    problem = transformers_mtp_problem(bundle)
    if problem is not None:
        raise TransformersMTPUnsupported(problem)
    if bundle.layout.name == DEEPSEEK_V3:
        first = bundle.config.num_hidden_layers
        patterns = [rf"model\.layers\.{first + d}\..*" for d in range(bundle.layout.num_depths)]
        bundle.target._keys_to_ignore_on_load_unexpected = patterns
    return bundle.target


@contextlib.contextmanager
def mtp_depths_in_use(model: PreTrainedModel, depths: int) -> Iterator[None]:
    """While active, transformers' MTP generation loads and drafts with the first `depths` MTP depths of the
    checkpoint (its MtpModel reads `num_mtp_layers` from the config on every `generate` call)."""
    config = model.config.get_text_config()
    available = config.num_mtp_layers
    if not 1 <= depths <= available:
        raise HarnessError(f"transformers' MTP generation drafts with 1..{available} depths, not {depths}")
    config.num_mtp_layers = depths
    try:
        yield
    finally:
        config.num_mtp_layers = available
