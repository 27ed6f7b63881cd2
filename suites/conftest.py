"""What the suites share: the target-only greedy reference of every prompt fixture, computed once per session, and
the token comparison with its records (the greedy suite and the engine suite use them). The reference comes from the
harness's own copy of the checkpoint, or under --reference engine from the engine under test without speculation
(harness/checks/references.py TargetReference)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import pytest
import torch

from harness.checks.divergence import NearTieWarning, describe_divergence
from harness.checks.references import GreedyReference, HarnessReference, TargetReference
from harness.contract.decoder import DecodeRequest, DecodeResult
from harness.contract.errors import WeightsNotLoaded
from harness.contract.passes import pass_contract_problem
from harness.contract.records import (
    Divergence,
    DivergenceRecord,
    GreedyCheckRecord,
    PassesRecord,
    attach_record,
    hidden_pairing_records,
    step_fact_records,
    step_records,
)
from harness.contract.run_options import Reference, RunOptions
from harness.models.loading import ModelBundle, bundle_for
from harness.models.prompts import Prompt


@pytest.fixture(scope="session")
def rescoring_bundle(run_options: RunOptions, bundle: ModelBundle) -> ModelBundle:
    """The precise model near-ties are judged by: float64 on CPU, float32 on CUDA (the run's bundle if it is)."""
    if not bundle.has_weights:
        raise WeightsNotLoaded("the precise float64 re-scoring of the checkpoint (this run loads no weights)")
    precise = torch.float32 if bundle.device.type == "cuda" else torch.float64
    if bundle.dtype == precise:
        return bundle
    return bundle_for(run_options.model, str(bundle.device), str(precise).removeprefix("torch."))


@pytest.fixture(scope="session")
def target_reference(
    run_options: RunOptions, bundle: ModelBundle, request: pytest.FixtureRequest
) -> Iterator[TargetReference]:
    """Where the run's target-only truth comes from (--reference): the harness's own copy of the checkpoint, or the
    engine under test without speculation, same dtype and parallelism (its engines of its own, closed at the end)."""
    if run_options.reference is not Reference.ENGINE:
        yield HarnessReference(bundle, request.getfixturevalue("rescoring_bundle"))
        return
    from harness.checks.engine_reference import EngineReference

    engine = request.getfixturevalue("decoder").without_speculation()
    reference = EngineReference(engine, bundle)
    yield reference
    reference.close()


@pytest.fixture(scope="session")
def greedy_references(target_reference: TargetReference, prompts: list[Prompt]) -> dict[str, GreedyReference]:
    """Target-only greedy output of every prompt fixture (the run's dtype), with the runner-up at each position."""
    return target_reference.greedy(prompts)


TOP_TOKENS = 5


def divergence_record(
    divergence: Divergence,
    reference: GreedyReference,
    expected: tuple[int, ...],
    result: DecodeResult,
    request: DecodeRequest | None,
    target: TargetReference,
) -> DivergenceRecord:
    """Everything the report shows about one divergence: both sequences as (id, text), the target's top
    tokens at the divergent index (re-scored, or the engine's own), the forced schedule and the decoder's per-pass
    trace."""
    decode = target.decode_text
    top = target.top_tokens([*reference.prompt_ids, *expected[: divergence["index"]]], TOP_TOKENS)
    return {
        **divergence,
        "prompt_id": reference.prompt.id,
        "dtype": str(target.precise_dtype).removeprefix("torch."),
        "num_draft_tokens": request.num_draft_tokens if request else None,
        # the request itself, for shrinking and the reproducer (harness/triage/shrink.py, harness/triage/reproducer.py)
        "prompt_ids": list(request.prompt_ids) if request else None,
        "max_new_tokens": request.max_new_tokens if request else None,
        "eos_token_ids": list(request.eos_token_ids) if request else None,
        "reference_tokens": [{"id": t, "text": decode([t])} for t in expected],
        "actual_tokens": [{"id": t, "text": decode([t])} for t in result.token_ids],
        "top5": [{"id": token, "text": decode([token]), "probability": probability} for token, probability in top],
        "forced_drafts": {
            str(position): token for position, token in (request.forced_drafts if request else {}).items()
        },
        "steps": step_records(result.steps),
    }


@pytest.fixture
def check_tokens(target_reference: TargetReference, record_property):
    """check(reference, result, expected=None, request=None): the decoder's tokens must equal the target-only
    reference's (harness/checks/divergence.py check_against_target). A bf16/fp16 near-tie (the decoder's token
    within the dtype's tolerance of the precise best) is recorded and warned, and the check goes on against the
    reference continued from the decoder's own prefix; a divergence fails, and so, after right tokens, do passes that
    break the pass contract (harness/contract/passes.py). Returns the near-ties. Records how
    many output positions were checked (`greedy_check`), and the failing divergence, else the first near-tie."""

    def check(
        reference: GreedyReference,
        result: DecodeResult,
        expected: tuple[int, ...] | None = None,
        request: DecodeRequest | None = None,
    ) -> tuple[Divergence, ...]:
        expected = reference.tokens if expected is None else expected
        request = request or reference.request()
        outcome = target_reference.check(request, expected, result.token_ids)
        attach_record(
            record_property,
            "greedy_check",
            GreedyCheckRecord(
                positions=len(result.token_ids),
                checked=outcome.checked,
                near_ties=[divergence["index"] for divergence in outcome.near_ties],
            ),
        )
        for divergence in outcome.near_ties:
            warnings.warn(
                NearTieWarning(f"prompt {reference.prompt.id}: {describe_divergence(divergence)}"), stacklevel=2
            )
        shown = outcome.failure or (outcome.near_ties[0] if outcome.near_ties else None)
        if shown is not None:
            record = divergence_record(shown, reference, outcome.reference, result, request, target_reference)
            attach_record(record_property, "divergence", record)
        if outcome.failure is not None:
            pytest.fail(f"prompt {reference.prompt.id}: {describe_divergence(outcome.failure)}", pytrace=False)
        broken_passes = pass_contract_problem(result)  # the tokens are right; passes that do not add up are not
        if broken_passes is not None:
            pytest.fail(f"prompt {reference.prompt.id}: {broken_passes}", pytrace=False)
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
            if result.hidden_pairings:
                record["hidden_pairings"] = hidden_pairing_records(result.hidden_pairings)
            if other and other[1].hidden_pairings:
                record["other_hidden_pairings"] = hidden_pairing_records(other[1].hidden_pairings)
            if result.step_facts:
                record["step_facts"] = step_fact_records(result.step_facts)
            if other and other[1].step_facts:
                record["other_step_facts"] = step_fact_records(other[1].step_facts)
            attach_record(record_property, "passes", record)
            raise

    return recording
