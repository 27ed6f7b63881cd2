"""Forced drafts and verification steps for transformers' assisted-generation loop (`_assisted_decoding`).

transformers' loop asks a candidate generator for drafts (`get_candidates`), verifies them, and reports the
outcome back to it (`update_candidate_strategy(input_ids, scores, num_matches)`). `instrument_generation`
wraps the candidate generator that `generate` builds for one request:

- forced drafts: a logits processor appended to the generator's own processors (never the target's) turns
  the draft logits at a forced output position into -inf everywhere but the forced token. The drafter then
  proposes that token, its candidate logits make q one-hot on it, and a drafter that chains its drafts
  (MTP depth j+1 reads draft j; a draft model's next step reads its last token) continues from it.
- steps: each `update_candidate_strategy` call is one verification pass, with the drafts the generator
  returned and transformers' own accepted count `num_matches`: the drafts it committed, after its EOS and
  max-length truncation of the pass.

Works with transformers 5.24 and 5.25 (the project's pin); `check_transformers_loop` names what is missing
when a version changes these hooks.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import torch
import transformers
from transformers import LogitsProcessor, LogitsProcessorList, PreTrainedModel

from harness.contract.decoder import VerifyStep
from harness.contract.errors import HarnessError


class TransformersLoopChanged(HarnessError):
    """The installed transformers no longer has the assisted-generation hooks the subject wraps."""


class ForcedDraftsProcessor(LogitsProcessor):
    """Logits of a draft for output position `len(ids) - prompt_length`: one-hot on the forced token there.

    Forcing through the logits (-inf except the forced token) gives both the token (argmax and multinomial
    pick it) and q = softmax(logits) one-hot on it, after any temperature / top-k / top-p processor."""

    def __init__(self, prompt_length: int, forced: Mapping[int, int]) -> None:
        self.prompt_length = prompt_length
        self.forced = dict(forced)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        token = self.forced.get(input_ids.shape[1] - self.prompt_length)
        if token is None:
            return scores
        forced = torch.full_like(scores, float("-inf"))
        forced[:, token] = 0.0
        return forced


@dataclass
class PassRecorder:
    """The verification passes of one request, from what transformers' loop verified."""

    prompt_length: int
    steps: list[VerifyStep] = field(default_factory=list)
    _pending: tuple[int, tuple[int, ...]] | None = None

    def proposed(self, input_ids: torch.Tensor, candidates: torch.Tensor) -> None:
        committed = input_ids.shape[1]
        self._pending = (committed, tuple(candidates[0, committed:].tolist()))

    def verified(self, input_ids: torch.Tensor, num_matches: int) -> None:
        if self._pending is None:
            raise TransformersLoopChanged("transformers verified a pass it never asked the candidate generator for")
        committed, drafts = self._pending
        self._pending = None
        emitted = tuple(input_ids[0, committed:].tolist())
        self.steps.append(VerifyStep(committed - self.prompt_length, drafts, int(num_matches), emitted))


REQUIRED_HOOKS = ("_get_candidate_generator",)
GENERATOR_HOOKS = ("get_candidates", "update_candidate_strategy", "logits_processor")


def check_transformers_loop(model: PreTrainedModel) -> None:
    """Raise, naming the transformers version, when `model` lacks the hooks `instrument_generation` wraps."""
    missing = [name for name in REQUIRED_HOOKS if not hasattr(model, name)]
    if missing:
        raise TransformersLoopChanged(
            f"transformers {transformers.__version__}: {type(model).__name__} has no {', '.join(missing)}; the "
            "transformers subjects wrap it to force drafts and record verification passes (tested with 5.24)"
        )


def _instrument_generator(generator: object, recorder: PassRecorder, forcing: ForcedDraftsProcessor) -> None:
    missing = [name for name in GENERATOR_HOOKS if not hasattr(generator, name)]
    if missing:
        raise TransformersLoopChanged(
            f"transformers {transformers.__version__}: {type(generator).__name__} has no {', '.join(missing)}; "
            "the transformers subjects wrap them (tested with 5.24)"
        )
    get_candidates = generator.get_candidates
    update_candidate_strategy = generator.update_candidate_strategy

    def forced_candidates(input_ids: torch.LongTensor, *args: object, **kwargs: object) -> tuple:
        own = generator.logits_processor
        generator.logits_processor = LogitsProcessorList([*(own or []), forcing])  # a copy: never the target's
        try:
            candidates, logits = get_candidates(input_ids, *args, **kwargs)
        finally:
            generator.logits_processor = own
        recorder.proposed(input_ids, candidates)
        return candidates, logits

    def recorded_update(input_ids: torch.LongTensor, scores: torch.Tensor, num_matches: int) -> object:
        recorder.verified(input_ids, num_matches)
        return update_candidate_strategy(input_ids, scores, num_matches)

    generator.get_candidates = forced_candidates
    generator.update_candidate_strategy = recorded_update


@contextlib.contextmanager
def instrument_generation(
    model: PreTrainedModel, prompt_length: int, forced: Mapping[int, int]
) -> Iterator[PassRecorder]:
    """While active, every candidate generator `model.generate` builds forces `forced` (output position ->
    token) and records its passes into the yielded recorder (one request per `generate` call)."""
    check_transformers_loop(model)
    recorder = PassRecorder(prompt_length)
    forcing = ForcedDraftsProcessor(prompt_length, forced)
    build = model._get_candidate_generator
    own_attribute = "_get_candidate_generator" in vars(model)

    def instrumented(*args: object, **kwargs: object) -> object:
        generator = build(*args, **kwargs)
        _instrument_generator(generator, recorder, forcing)
        return generator

    model._get_candidate_generator = instrumented
    try:
        yield recorder
    finally:
        if own_attribute:
            model._get_candidate_generator = build
        else:
            del model._get_candidate_generator  # the class's own method again
