"""Check 6: per-request randomness. In sampling mode a request's output (tokens and steps) does not change
when other requests join its batch, or when it is decoded alone with the same seed."""

from __future__ import annotations

import pytest

from harness.contract.decoder import DecodeRequest, SamplingConfig

pytestmark = pytest.mark.invariants


@pytest.mark.parametrize("draft_mode", ["greedy", "sample"])
@pytest.mark.parametrize("k", [1, 2, 3, 4], ids=lambda k: f"k{k}")
def test_a_sampled_request_is_independent_of_its_batch(decoder, bundle, invariant_prompts, require, k, draft_mode):
    require(num_draft_tokens=k, draft_mode=draft_mode)
    sampling = SamplingConfig(temperature=1.0, top_p=0.95)
    requests = [
        DecodeRequest(
            tuple(p.encode(bundle.tokenizer)),
            16,
            sampling=sampling,
            seed=p.seed,
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
        assert alone == together[index], (
            f"request {index} alone: {alone.token_ids}, in the batch: {together[index].token_ids}"
        )
    assert half == together[::2], "results changed when half of the batch left"
    assert len({r.token_ids for r in together}) > 1
