"""The greedy reference: target-only greedy decoding of a prompt, with the precise target's best token other than the
reference's own at each step (what a forced rejection forces). The greedy suite and the engine suite compare a
decoder's tokens with it (harness/checks/divergence.py).

Where the reference comes from is a `TargetReference`: the harness's own copy of the checkpoint (`HarnessReference`,
`--reference harness`: target-only greedy decoding in the run's dtype, near-ties judged by the precise float64 model)
or the engine under test without speculation (`EngineReference` in harness/checks/engine_reference.py,
`--reference engine`, for checkpoints the harness cannot load beside the engine)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from harness.checks.divergence import GreedyCheck, check_against_target
from harness.contract.decoder import DecodeRequest
from harness.decoding.target_decoder import TargetOnlyDecoder
from harness.models.loading import ModelBundle
from harness.models.prompts import Prompt
from harness.models.teacher_forcing import target_forward


@dataclass(frozen=True)
class GreedyReference:
    """Target-only greedy output for one prompt, with the precise target's best token other than the reference's
    own at each step (what a forced rejection forces)."""

    prompt: Prompt
    prompt_ids: tuple[int, ...]
    tokens: tuple[int, ...]
    runner_up: tuple[int, ...]
    eos: tuple[int, ...] = ()

    def request(self, **fields: object) -> DecodeRequest:
        fields.setdefault("max_new_tokens", self.prompt.max_new_tokens)
        return DecodeRequest(self.prompt_ids, eos_token_ids=self.eos, **fields)


def target_greedy_references(
    bundle: ModelBundle, rescoring_bundle: ModelBundle, prompts: Sequence[Prompt]
) -> dict[str, GreedyReference]:
    """Target-only greedy output of each prompt (the run's dtype), re-scored by the precise model for the runner-up,
    by prompt id."""
    eos = bundle.eos_token_ids
    requests = [DecodeRequest(tuple(p.encode(bundle.tokenizer)), p.max_new_tokens, eos_token_ids=eos) for p in prompts]
    results = TargetOnlyDecoder(bundle).decode(requests)
    references = {}
    with torch.no_grad():
        for prompt, request, result in zip(prompts, requests, results, strict=True):
            sequence = torch.tensor([request.prompt_ids + result.token_ids], device=rescoring_bundle.device)
            _, logits = target_forward(rescoring_bundle.target, sequence)
            scored = logits[0, len(request.prompt_ids) - 1 : -1]  # the logits that chose each generated token
            # the best token other than the reference's own: in bf16 the reference may have taken the precise
            # model's runner-up at a near-tie, and that token, forced, would rightly be accepted
            chosen = torch.tensor(result.token_ids, device=scored.device)[:, None]
            runner_up = scored.scatter(-1, chosen, float("-inf")).argmax(dim=-1)
            references[prompt.id] = GreedyReference(
                prompt, request.prompt_ids, result.token_ids, tuple(runner_up.tolist()), eos
            )
    return references


class TargetReference(Protocol):
    """Where a run's target-only truth comes from: the greedy references, the judgement of a decoder's tokens
    against them (near-ties included) and the target's most likely next tokens for the report."""

    dtype: torch.dtype  # the reference's dtype: the near-tie tolerance is the dtype's
    precise_dtype: torch.dtype  # the dtype near-ties, runner-ups and top tokens are judged in

    def greedy(self, prompts: Sequence[Prompt]) -> dict[str, GreedyReference]: ...

    def check(
        self,
        request: DecodeRequest,
        expected: Sequence[int],
        actual: Sequence[int],
        tolerance: float | None = None,
    ) -> GreedyCheck: ...

    def top_tokens(self, prefix: Sequence[int], count: int) -> list[tuple[int, float]]: ...

    def decode_text(self, token_ids: list[int]) -> str: ...


class HarnessReference:
    """The harness's own copy of the checkpoint: target-only greedy decoding on `bundle` (the run's dtype), near-ties
    and runner-ups judged by `rescoring` (float64 on CPU, float32 on CUDA)."""

    def __init__(self, bundle: ModelBundle, rescoring: ModelBundle) -> None:
        self.bundle, self.rescoring = bundle, rescoring
        self.dtype, self.precise_dtype = bundle.dtype, rescoring.dtype

    def greedy(self, prompts: Sequence[Prompt]) -> dict[str, GreedyReference]:
        return target_greedy_references(self.bundle, self.rescoring, prompts)

    def check(
        self, request: DecodeRequest, expected: Sequence[int], actual: Sequence[int], tolerance: float | None = None
    ) -> GreedyCheck:
        return check_against_target(self.bundle, self.rescoring, request, expected, actual, tolerance)

    def top_tokens(self, prefix: Sequence[int], count: int) -> list[tuple[int, float]]:
        """The precise model's `count` most likely tokens after `prefix`, with their probabilities."""
        rescoring = self.rescoring
        with torch.no_grad():
            _, logits = target_forward(rescoring.target, torch.tensor([list(prefix)], device=rescoring.device))
        top = torch.softmax(logits[0, -1].double(), dim=-1).topk(count)
        return [(int(i), float(v)) for v, i in zip(top.values, top.indices, strict=True)]

    def decode_text(self, token_ids: list[int]) -> str:
        return self.rescoring.tokenizer.decode(token_ids)
