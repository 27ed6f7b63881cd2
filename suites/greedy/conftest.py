"""Greedy suites: the target-only reference, computed once per session, and the token comparison."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
import torch

from harness.checks.batches import batch_members
from harness.checks.divergence import Divergence, NearTieWarning, check_against_target
from harness.contract.decoder import DecodeRequest, DecodeResult
from harness.contract.records import DivergenceRecord, GreedyCheckRecord, PassesRecord, attach_record, step_records
from harness.decoding.target_decoder import TargetOnlyDecoder
from harness.models.loading import ModelBundle, bundle_for
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


@pytest.fixture(scope="session")
def rescoring_bundle(pytestconfig: pytest.Config, bundle: ModelBundle) -> ModelBundle:
    """The precise model near-ties are judged by: float64 on CPU, float32 on CUDA (the run's bundle if it is)."""
    precise = torch.float32 if bundle.device.type == "cuda" else torch.float64
    if bundle.dtype == precise:
        return bundle
    return bundle_for(pytestconfig.getoption("--model"), str(bundle.device), str(precise).removeprefix("torch."))


@pytest.fixture(scope="session")
def greedy_references(
    bundle: ModelBundle, rescoring_bundle: ModelBundle, prompts: list[Prompt]
) -> dict[str, GreedyReference]:
    """Target-only greedy output of every prompt fixture (the run's dtype), re-scored for the runner-up."""
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
                eos,
            )
    return references


@pytest.fixture
def reference(greedy_references: dict[str, GreedyReference], prompt: Prompt) -> GreedyReference:
    return greedy_references[prompt.id]


@pytest.fixture(scope="session")
def greedy_batch(bundle: ModelBundle, greedy_references: dict[str, GreedyReference]):
    """greedy_batch(batch, k) -> the references of `batch` (harness/checks/batches.py), in fixture order."""

    def members(batch: str, k: int) -> list[GreedyReference]:
        references = list(greedy_references.values())
        return batch_members(references, batch, k, bundle.max_context, reference_lengths)

    return members


def reference_lengths(reference: GreedyReference) -> tuple[int, int]:
    return len(reference.prompt_ids), reference.prompt.max_new_tokens


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
        "steps": step_records(result.steps),
    }


@pytest.fixture
def check_tokens(bundle: ModelBundle, rescoring_bundle: ModelBundle, record_property):
    """check(reference, result, expected=None, request=None): the decoder's tokens must equal the target-only
    reference's (harness/checks/divergence.py check_against_target). A bf16/fp16 near-tie (the decoder's token
    within the dtype's tolerance of the precise best) is recorded and warned, and the check goes on against the
    reference continued from the decoder's own prefix; a divergence fails. Returns the near-ties. Records how
    many output positions were checked (`greedy_check`), and the failing divergence, else the first near-tie."""

    def check(
        reference: GreedyReference,
        result: DecodeResult,
        expected: tuple[int, ...] | None = None,
        request: DecodeRequest | None = None,
    ) -> tuple[Divergence, ...]:
        expected = reference.tokens if expected is None else expected
        request = request or reference.request()
        outcome = check_against_target(bundle, rescoring_bundle, request, expected, result.token_ids)
        attach_record(
            record_property,
            "greedy_check",
            GreedyCheckRecord(
                positions=len(result.token_ids),
                checked=outcome.checked,
                near_ties=[divergence.index for divergence in outcome.near_ties],
            ),
        )
        for divergence in outcome.near_ties:
            warnings.warn(NearTieWarning(f"prompt {reference.prompt.id}: {divergence.describe()}"), stacklevel=2)
        shown = outcome.failure or (outcome.near_ties[0] if outcome.near_ties else None)
        if shown is not None:
            record = divergence_record(shown, reference, outcome.reference, result, request, rescoring_bundle)
            attach_record(record_property, "divergence", record)
        if outcome.failure is not None:
            pytest.fail(f"prompt {reference.prompt.id}: {outcome.failure.describe()}", pytrace=False)
        return outcome.near_ties

    return check


@pytest.fixture
def passes_on_failure(record_property):
    """with passes_on_failure(reference, request, result, expected=..., other=...): a check inside that fails
    attaches the request's verification passes (a `passes` record: what a finding's signature reads) before
    the failure goes on. expected: (start, emitted) per pass as a schedule implies them; other: (what, result)
    of a second decode of the same request that the check compares with."""

    @contextmanager
    def recording(
        reference: GreedyReference,
        request: DecodeRequest,
        result: DecodeResult,
        expected: Sequence[tuple[int, int]] | None = None,
        other: tuple[str, DecodeResult] | None = None,
    ) -> Iterator[None]:
        try:
            yield
        except (AssertionError, pytest.fail.Exception):
            record = PassesRecord(
                prompt_id=reference.prompt.id,
                num_draft_tokens=request.num_draft_tokens,
                forced_drafts={str(p): t for p, t in request.forced_drafts.items()},
                expected=[list(pair) for pair in expected] if expected is not None else None,
                steps=step_records(result.steps),
                other_steps=step_records(other[1].steps) if other else None,
                other=other[0] if other else None,
            )
            attach_record(record_property, "passes", record)
            raise

    return recording
