"""Greedy suites: the target-only reference, computed once per session, and the token comparison."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import pytest
import torch

from harness.checks.divergence import Divergence, NearTieWarning, classify, top2_margins
from harness.contract.decoder import DecodeRequest, DecodeResult
from harness.contract.records import DivergenceRecord, attach_record
from harness.decoding.target_decoder import TargetOnlyDecoder
from harness.models.loading import ModelBundle, bundle_for
from harness.models.prompts import Prompt
from harness.models.teacher_forcing import target_forward


@dataclass(frozen=True)
class GreedyReference:
    """Target-only greedy output for one prompt, with the target's runner-up and top-2 margin at each step."""

    prompt: Prompt
    prompt_ids: tuple[int, ...]
    tokens: tuple[int, ...]
    runner_up: tuple[int, ...]
    margins: tuple[float, ...]
    eos: tuple[int, ...] = ()

    def request(self, **fields: object) -> DecodeRequest:
        fields.setdefault("max_new_tokens", self.prompt.max_new_tokens)
        return DecodeRequest(self.prompt_ids, eos_token_ids=self.eos, **fields)


@pytest.fixture(scope="session")
def rescoring_bundle(pytestconfig: pytest.Config, bundle: ModelBundle) -> ModelBundle:
    """The model the margins are scored with: float64 on CPU, float32 on CUDA (the run's bundle if it is)."""
    precise = torch.float32 if bundle.device.type == "cuda" else torch.float64
    if bundle.dtype == precise:
        return bundle
    return bundle_for(pytestconfig.getoption("--model"), str(bundle.device), str(precise).removeprefix("torch."))


@pytest.fixture(scope="session")
def greedy_references(
    bundle: ModelBundle, rescoring_bundle: ModelBundle, prompts: list[Prompt]
) -> dict[str, GreedyReference]:
    """Target-only greedy output of every prompt fixture (the run's dtype), re-scored for margins."""
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
                prompt,
                request.prompt_ids,
                result.token_ids,
                tuple(runner_up.tolist()),
                tuple(top2_margins(scored).tolist()),
                eos,
            )
    return references


@pytest.fixture
def reference(greedy_references: dict[str, GreedyReference], prompt: Prompt) -> GreedyReference:
    return greedy_references[prompt.id]


TOP_TOKENS = 5


def divergence_record(
    divergence: Divergence,
    reference: GreedyReference,
    expected: tuple[int, ...],
    result: DecodeResult,
    request: DecodeRequest | None,
    rescoring_bundle: ModelBundle,
) -> DivergenceRecord:
    """Everything the report shows about one divergence: both sequences as (id, text), the target's top
    tokens at the divergent index (re-scored), the forced schedule and the decoder's per-pass trace."""
    decode = rescoring_bundle.tokenizer.decode
    with torch.no_grad():
        prefix = torch.tensor([[*reference.prompt_ids, *expected[: divergence.index]]], device=rescoring_bundle.device)
        _, logits = target_forward(rescoring_bundle.target, prefix)
    top = torch.softmax(logits[0, -1].double(), dim=-1).topk(TOP_TOKENS)
    return {
        **divergence.to_dict(),
        "prompt_id": reference.prompt.id,
        "dtype": str(rescoring_bundle.dtype).removeprefix("torch."),
        "num_draft_tokens": request.num_draft_tokens if request else None,
        # the request itself, for shrinking and the reproducer (harness/triage/shrink.py, harness/triage/reproducer.py)
        "prompt_ids": list(request.prompt_ids) if request else None,
        "max_new_tokens": request.max_new_tokens if request else None,
        "eos_token_ids": list(request.eos_token_ids) if request else None,
        "reference_tokens": [{"id": t, "text": decode([t])} for t in expected],
        "actual_tokens": [{"id": t, "text": decode([t])} for t in result.token_ids],
        "top5": [
            {"id": int(i), "text": decode([int(i)]), "probability": float(v)}
            for v, i in zip(top.values, top.indices, strict=True)
        ],
        "forced_drafts": {
            str(position): token for position, token in (request.forced_drafts if request else {}).items()
        },
        "steps": [
            {"start": s.start, "drafts": list(s.drafts), "accepted": s.accepted, "emitted": list(s.emitted)}
            for s in result.steps
        ],
    }


@pytest.fixture
def check_tokens(bundle: ModelBundle, rescoring_bundle: ModelBundle, record_property):
    """assert that a decoder's tokens equal the reference's; a bf16/fp16 near-tie is recorded, not failed,
    and returned (what follows it may rightly differ). The divergence is recorded for the report (pass the
    request to show its k and forced schedule)."""

    def check(
        reference: GreedyReference,
        result: DecodeResult,
        expected: tuple[int, ...] | None = None,
        request: DecodeRequest | None = None,
    ) -> Divergence | None:
        expected = reference.tokens if expected is None else expected
        divergence = classify(
            expected, result.token_ids, reference.margins, bundle.dtype, bundle.tokenizer.decode, reference.prompt_ids
        )
        if divergence is None:
            return None
        record = divergence_record(divergence, reference, expected, result, request, rescoring_bundle)
        attach_record(record_property, "divergence", record)
        if divergence.near_tie:
            warnings.warn(NearTieWarning(f"prompt {reference.prompt.id}: {divergence.describe()}"), stacklevel=2)
            return divergence
        pytest.fail(f"prompt {reference.prompt.id}: {divergence.describe()}", pytrace=False)

    return check
