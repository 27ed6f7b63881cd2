"""The greedy reference: target-only greedy decoding of a prompt, with the precise target's best token other than the
reference's own at each step (what a forced rejection forces). The greedy suite and the engine suite compare a
decoder's tokens with it (harness/checks/divergence.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

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
