"""A checkpoint without its weights: config, tokenizer and generation settings, for a run whose reference is the
engine itself (`--reference engine`). The harness process then reads no weight file; the engine process serves the
checkpoint. A `ModelCard` stands where a `ModelBundle` does for everything that needs no weights (names, vocabulary,
context, EOS ids, tokenization); asking it for the target or the MTP depths raises `WeightsNotLoaded`, which the
plugin reports as a skip naming the check that needs weights (harness/plugin/cases.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import PretrainedConfig, PreTrainedTokenizerBase

from harness.contract.errors import CheckpointError, WeightsNotLoaded
from harness.contract.paths import resolve_model_path
from harness.models.loading import CheckpointFacts, checkpoint_is_hybrid, load_config, load_tokenizer, parse_dtype

GENERATION_CONFIG = "generation_config.json"


@dataclass(frozen=True)
class ModelCard(CheckpointFacts):
    """A model directory's config and tokenizer, no weights: what a run with the engine as its reference holds."""

    path: Path
    tokenizer: PreTrainedTokenizerBase
    config: PretrainedConfig
    device: torch.device
    dtype: torch.dtype
    eos_token_ids: tuple[int, ...]

    has_weights = False

    @property
    def is_hybrid(self) -> bool:
        return checkpoint_is_hybrid(self.path)

    @property
    def target(self) -> object:
        raise self.no_weights("the target model")

    @property
    def depths(self) -> object:
        raise self.no_weights("the MTP depths")

    def new_target_cache(self) -> object:
        raise self.no_weights("the target model")

    def with_depths(self, count: int | None) -> ModelCard:
        raise self.no_weights("the MTP depths")

    def no_weights(self, what: str) -> WeightsNotLoaded:
        return WeightsNotLoaded(f"{what} of {self.name} (this run loads no weights: --reference engine)")


def load_card(path: str | Path, device: str | torch.device = "cpu", dtype: str | torch.dtype = "float32") -> ModelCard:
    """A model directory's config, tokenizer and EOS ids (generation_config.json, else config.json), reading no
    weight file."""
    directory = Path(path)
    config = load_config(directory)
    tokenizer = load_tokenizer(directory, config)
    return ModelCard(directory, tokenizer, config, torch.device(device), parse_dtype(dtype), eos_ids(directory, config))


def eos_ids(directory: Path, config: PretrainedConfig) -> tuple[int, ...]:
    """The EOS ids a target-only generation stops at: generation_config.json's eos_token_id, else the config's
    (what transformers' generation_config of the loaded model holds)."""
    eos = None
    generation = directory / GENERATION_CONFIG
    if generation.is_file():
        try:
            eos = json.loads(generation.read_text()).get("eos_token_id")
        except json.JSONDecodeError as error:
            raise CheckpointError(f"{generation}: invalid JSON: {error}") from error
    if eos is None:
        eos = config.eos_token_id
    if eos is None:
        return ()
    return tuple(int(e) for e in eos) if isinstance(eos, list | tuple) else (int(eos),)


_CARDS: dict[tuple[str, str, str], ModelCard] = {}


def card_for(model: str, device: str, dtype: str) -> ModelCard:
    """A model's card once per process; `model` is a directory or the name of a bundled fixture."""
    key = (str(resolve_model_path(model).resolve()), device, dtype)
    if key not in _CARDS:
        _CARDS[key] = load_card(key[0], device, dtype)
    return _CARDS[key]


def model_of_run(model: str, device: str, dtype: str, weights: bool) -> CheckpointFacts:
    """The model a run holds: its bundle (bundle_for), or its card where the engine alone reads the weights
    (--reference engine)."""
    if not weights:
        return card_for(model, device, dtype)
    from harness.models.loading import bundle_for

    return bundle_for(model, device, dtype)
