"""A failure group's minimal case: its smallest greedy case shrunk (harness/shrink.py) on the run's own
decoder and model, then run once more for the report's timeline and the reproducer script."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from harness.api import Decoder, DecodeRequest, DecodeResult
from harness.divergence import first_divergence
from harness.models import ModelBundle
from harness.shrink import GreedyCase, shrink
from harness.target_decoder import TargetOnlyDecoder
from harness.teacher_forcing import target_forward


class GreedyOracle:
    """Builds a case's request (forced drafts = the target's runner-up at the forced positions) and its
    target-only reference, and runs the decoder on it alone (a batch of one)."""

    def __init__(self, decoder: Decoder, bundle: ModelBundle) -> None:
        self.decoder, self.bundle, self.target = decoder, bundle, TargetOnlyDecoder(bundle)
        self._references: dict[tuple, tuple[tuple[int, ...], list[int]]] = {}

    def reference(self, case: GreedyCase) -> tuple[tuple[int, ...], list[int]]:
        """Target-only greedy tokens and the runner-up at each (cached: variants share prompt and length)."""
        key = (case.prompt_ids, case.max_new_tokens, case.eos_token_ids)
        if key not in self._references:
            plain = DecodeRequest(case.prompt_ids, case.max_new_tokens, eos_token_ids=case.eos_token_ids)
            [reference] = self.target.decode([plain])
            sequence = torch.tensor([case.prompt_ids + reference.token_ids], device=self.bundle.device)
            with torch.no_grad():
                _, logits = target_forward(self.bundle.target, sequence)
            chosen = logits[0, len(case.prompt_ids) - 1 : -1]  # the logits that chose each generated token
            self._references[key] = (reference.token_ids, chosen.topk(2, dim=-1).indices[:, 1].tolist())
        return self._references[key]

    def request_and_reference(self, case: GreedyCase) -> tuple[DecodeRequest, tuple[int, ...]]:
        tokens, runner_up = self.reference(case)
        forced = {p: runner_up[p] for p in case.forced_positions if p < len(runner_up)}
        forced |= {p: tokens[p] for p in case.accepted_positions if p < len(tokens)}
        request = DecodeRequest(
            case.prompt_ids,
            case.max_new_tokens,
            num_draft_tokens=case.num_draft_tokens,
            eos_token_ids=case.eos_token_ids,
            forced_drafts=forced,
        )
        return request, tokens

    def run(self, case: GreedyCase) -> tuple[DecodeRequest, tuple[int, ...], DecodeResult]:
        request, reference = self.request_and_reference(case)
        [result] = self.decoder.decode([request])
        return request, reference, result

    def divergence_of(self, case: GreedyCase) -> int | None:
        """Where the decoder's tokens first differ from the reference's; None when they do not (or when the
        decoder refuses or crashes on the variant: that is not the failure being shrunk)."""
        try:
            _, reference, result = self.run(case)
        except Exception:
            return None
        return first_divergence(reference, result.token_ids)


def minimal_case(oracle: GreedyOracle, case: GreedyCase, budget_s: float) -> dict[str, Any] | None:
    """Shrink `case` (if it still fails alone) and describe the minimal case: request, tokens, passes."""
    if oracle.divergence_of(case) is None:
        return {"original": case.to_dict(), "reproduced": False}
    shrunk = shrink(case, oracle.divergence_of, budget_s)
    request, reference, result = oracle.run(shrunk.minimal)
    decode = oracle.bundle.tokenizer.decode
    return {
        **shrunk.to_dict(),
        "reproduced": True,
        "batch_size": 1,
        "forced_drafts": {str(p): t for p, t in request.forced_drafts.items()},
        "reference_tokens": [{"id": t, "text": decode([t])} for t in reference],
        "actual_tokens": [{"id": t, "text": decode([t])} for t in result.token_ids],
        "divergence_index": first_divergence(reference, result.token_ids),
        "passes": [
            {"start": s.start, "drafts": list(s.drafts), "accepted": s.accepted, "emitted": list(s.emitted)}
            for s in result.steps
        ],
    }


def minimal_cases(
    groups: list[dict[str, Any]],
    cases_by_id: dict[str, dict[str, Any]],
    oracle_factory: Callable[[], GreedyOracle],
    budget_s: float,
) -> dict[int, dict[str, Any]]:
    """group number -> its minimal case, for the groups whose smallest case is a greedy divergence with its
    request on record; each group gets an equal share of what is left of the budget."""
    started, oracle, found = time.monotonic(), None, {}
    shrinkable = [
        (group, case)
        for group in groups
        if (case := GreedyCase.from_divergence(cases_by_id[group["smallest"]].get("divergence") or {})) is not None
    ]
    for done, (group, case) in enumerate(shrinkable):
        left = budget_s - (time.monotonic() - started)
        if left <= 0:
            break
        oracle = oracle or oracle_factory()
        found[group["group"]] = minimal_case(oracle, case, left / (len(shrinkable) - done))
    mark_shared_minimal_cases(found)
    return found


def mark_shared_minimal_cases(found: dict[int, dict[str, Any]]) -> None:
    """Groups (told apart by the test that saw them) whose minimal cases coincide share one cause: each later
    one names the first (`same_as_group`)."""
    first_with: dict[str, int] = {}
    for number in sorted(found):
        if found[number].get("reproduced"):
            key = repr(found[number]["minimal"])
            found[number]["same_as_group"] = first_with.get(key)
            first_with.setdefault(key, number)
