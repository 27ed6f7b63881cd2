"""Greedy MTP-assisted decoding must reproduce target-only greedy decoding token for token, with the
decoder's own (natural) drafts, alone and in mixed batches."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.greedy

K_VALUES = [1, 2, 3, 4]


@pytest.mark.parametrize("k", K_VALUES, ids=[f"k{k}" for k in K_VALUES])
def test_natural_drafts_reproduce_the_reference(decoder, reference, check_tokens, require, k):
    require(num_draft_tokens=k)
    request = reference.request(num_draft_tokens=k)
    [result] = decoder.decode([request])
    check_tokens(reference, result, request=request)


@pytest.mark.parametrize("k", K_VALUES, ids=[f"k{k}" for k in K_VALUES])
def test_a_batch_of_mixed_prompts_equals_each_prompt_alone(decoder, greedy_references, check_tokens, require, k):
    require(num_draft_tokens=k)
    references = list(greedy_references.values())
    requests = [r.request(num_draft_tokens=k) for r in references]
    assert len({len(r.prompt_ids) for r in requests}) > 1, "the batch must mix prompt lengths"
    batched = decoder.decode(requests)
    assert len(batched) == len(requests)
    for reference, request, result in zip(references, requests, batched, strict=True):
        check_tokens(reference, result, request=request)
    for request, together in zip(requests[:6], batched, strict=False):
        [alone] = decoder.decode([request])
        assert alone == together, f"decoded alone, {request.prompt_ids[:5]}... gives {alone}, in the batch {together}"
