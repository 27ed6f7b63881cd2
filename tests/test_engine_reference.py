"""The engine as its own reference (harness/checks/engine_reference.py), on an engine whose truth is known: the
harness's own float64 target behind the ScoringEngine interface (greedy decoding, and log-probabilities of given
sequences as vLLM's prompt logprobs give them). Built from the engine's outputs alone, the references, runner-ups,
near-tie gaps and top tokens must be the harness's own."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest
import torch

from harness.checks.engine_reference import EngineReference, EngineReferenceError, runner_up_of
from harness.checks.references import HarnessReference, target_greedy_references
from harness.contract.decoder import DecodeRequest, DecodeResult
from harness.decoding.target_decoder import TargetOnlyDecoder
from harness.models.card import load_card
from harness.models.loading import ModelBundle
from harness.models.prompts import load_prompts
from harness.models.teacher_forcing import target_forward

MODEL = "tiny-deepseek-v3"


class ModelAsEngine:
    """The harness's float64 target as a scoring engine: what vLLM without speculation gives, computed exactly."""

    name = "float64-target"

    def __init__(self, bundle: ModelBundle) -> None:
        self.bundle = bundle
        self.scored: list[int] = []  # lengths of the sequences scored

    def decode(self, requests: Sequence[DecodeRequest]) -> list[DecodeResult]:
        return TargetOnlyDecoder(self.bundle).decode(requests)

    def prompt_logprobs(self, prompts: Sequence[Sequence[int]], top: int) -> list[list[dict[int, float] | None]]:
        rows = []
        for prompt in prompts:
            self.scored.append(len(prompt))
            with torch.no_grad():
                _, logits = target_forward(self.bundle.target, torch.tensor([list(prompt)]))
            logprobs = torch.log_softmax(logits[0].double(), dim=-1)
            row: list[dict[int, float] | None] = [None]
            for j in range(1, len(prompt)):
                best = logprobs[j - 1].topk(top).indices.tolist()
                row.append({t: float(logprobs[j - 1, t]) for t in {*best, prompt[j]}})
            rows.append(row)
        return rows


@pytest.fixture(scope="module")
def bundle(fixture_bundle):
    return fixture_bundle(MODEL)


@pytest.fixture(scope="module")
def engine_reference(bundle):
    return EngineReference(ModelAsEngine(bundle), load_card(bundle.path, dtype="float64"))


def test_the_engines_references_and_runner_ups_are_the_harness_references_of_the_same_model(bundle, engine_reference):
    prompts = load_prompts()[:8]
    ours = target_greedy_references(bundle, bundle, prompts)
    theirs = engine_reference.greedy(prompts)
    assert theirs == ours
    assert any(len(r.tokens) > 1 for r in theirs.values())


def test_a_near_tie_gap_from_the_engines_logprobs_is_the_logit_gap(bundle, engine_reference):
    """The decoder's token at a divergence is judged by the gap between the engine's best and its own log-probability
    there, which is the logit gap: within a tolerance just above it a near-tie, just below a failure."""
    prompt = load_prompts()[0]
    [reference] = target_greedy_references(bundle, bundle, [prompt]).values()
    at = 2
    actual = [*reference.tokens[:at], reference.runner_up[at]]
    request = reference.request(max_new_tokens=at + 1)
    with torch.no_grad():
        _, logits = target_forward(bundle.target, torch.tensor([[*reference.prompt_ids, *reference.tokens[:at]]]))
    gap = float(logits[0, -1].max() - logits[0, -1, reference.runner_up[at]])
    harness = HarnessReference(bundle, bundle)
    for tolerance, near_tie in ((gap * 1.0001, True), (gap * 0.9999, False)):
        judged = engine_reference.check(request, reference.tokens[: at + 1], actual, tolerance)
        assert (judged.failure is None) == near_tie and len(judged.near_ties) == int(near_tie)
        shown = judged.near_ties[0] if near_tie else judged.failure
        assert shown["token_gap"] == pytest.approx(gap, rel=1e-9)
        assert harness.check(request, reference.tokens[: at + 1], actual, tolerance).failure == judged.failure


def test_a_divergence_in_float32_fails_without_asking_the_engine_for_a_gap(bundle):
    engine = ModelAsEngine(bundle)
    reference = EngineReference(engine, replace(load_card(bundle.path), dtype=torch.float32))
    request = DecodeRequest((1, 2, 3), 3)
    judged = reference.check(request, (4, 5, 6), (4, 7, 6))
    assert judged.failure is not None and judged.failure["index"] == 1 and not judged.failure["near_tie"]
    assert engine.scored == []


def test_the_engines_top_tokens_are_the_precise_models(bundle, engine_reference):
    prefix = load_prompts()[1].encode(bundle.tokenizer)
    ours = HarnessReference(bundle, bundle).top_tokens(prefix, 5)
    theirs = engine_reference.top_tokens(prefix, 5)
    assert [t for t, _ in theirs] == [t for t, _ in ours]
    assert [p for _, p in theirs] == pytest.approx([p for _, p in ours], rel=1e-12)


def test_the_runner_up_is_the_best_other_token_and_ties_take_the_lowest_id():
    assert runner_up_of({5: -0.1, 9: -2.0, 3: -2.0}, 5, "here") == 3
    assert runner_up_of({5: -3.0, 9: -0.5}, 5, "here") == 9
    with pytest.raises(EngineReferenceError, match="at here name no token but 5"):
        runner_up_of({5: -0.1}, 5, "here")
