"""Check 6: per-request randomness. In sampling mode a request's output (tokens and steps) does not change
when other requests join its batch, or when it is decoded alone with the same seed."""

from __future__ import annotations

import pytest

from harness.contract.decoder import DecodeRequest, DecodeResult, SamplingConfig
from harness.contract.records import (
    IsolationRecord,
    attach_record,
    hidden_pairing_records,
    request_record,
    step_records,
)
from harness.contract.seeds import session_shifted

pytestmark = pytest.mark.invariants


@pytest.mark.parametrize("draft_mode", ["greedy", "sample"])
@pytest.mark.parametrize("k", [1, 2, 3, 4], ids=lambda k: f"k{k}")
def test_a_sampled_request_is_independent_of_its_batch(
    decoder, bundle, invariant_prompts, require, record_property, harness_seed, k, draft_mode
):
    require(num_draft_tokens=k, draft_mode=draft_mode)
    sampling = SamplingConfig(temperature=1.0, top_p=0.95)
    requests = [
        DecodeRequest(
            tuple(p.encode(bundle.tokenizer)),
            16,
            sampling=sampling,
            seed=session_shifted(p.seed, harness_seed),
            num_draft_tokens=k,
            draft_mode=draft_mode,
            eos_token_ids=bundle.eos_token_ids,
        )
        for p in invariant_prompts
    ]
    together = decoder.decode(requests)
    half = decoder.decode(requests[::2])
    for index, request in enumerate(requests[:4]):
        [alone] = decoder.decode([request])
        if alone != together[index]:
            record_isolation(record_property, request, alone, together[index])
        assert alone == together[index], (
            f"request {index} alone: {alone.token_ids}, in the batch: {together[index].token_ids}"
        )
    for index, (request, result) in enumerate(zip(requests[::2], half, strict=True)):
        if result != together[2 * index]:
            record_isolation(record_property, request, result, together[2 * index])
    assert half == together[::2], "results changed when half of the batch left"
    assert len({r.token_ids for r in together}) > 1


def record_isolation(record_property, request: DecodeRequest, alone: DecodeResult, in_batch: DecodeResult) -> None:
    """The request whose output changed with its batch, both outputs (what a finding's signature reads)."""
    record = IsolationRecord(
        request=request_record(request),
        alone=list(alone.token_ids),
        in_batch=list(in_batch.token_ids),
        alone_steps=step_records(alone.steps),
        in_batch_steps=step_records(in_batch.steps),
    )
    if alone.hidden_pairings or in_batch.hidden_pairings:
        record["alone_hidden_pairings"] = hidden_pairing_records(alone.hidden_pairings)
        record["in_batch_hidden_pairings"] = hidden_pairing_records(in_batch.hidden_pairings)
    attach_record(record_property, "isolation", record)
