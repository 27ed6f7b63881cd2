"""Greedy MTP-assisted decoding must reproduce target-only greedy decoding token for token, with the
decoder's own (natural) drafts, alone and in mixed batches."""

from __future__ import annotations

import pytest

from harness.checks.batches import BATCHES

pytestmark = pytest.mark.greedy

K_VALUES = [1, 2, 3, 4]


@pytest.mark.parametrize("k", K_VALUES, ids=[f"k{k}" for k in K_VALUES])
def test_natural_drafts_reproduce_the_reference(decoder, reference, check_tokens, require, k):
    require(num_draft_tokens=k)
    request = reference.request(num_draft_tokens=k)
    [result] = decoder.decode([request])
    check_tokens(reference, result, request=request)


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("k", K_VALUES, ids=[f"k{k}" for k in K_VALUES])
def test_a_batch_of_mixed_prompts_equals_each_prompt_alone(
    decoder, bundle, greedy_references, greedy_batch, check_tokens, passes_on_failure, require, k, batch
):
    require(num_draft_tokens=k)
    references = greedy_batch(batch, k)
    if not references:
        pytest.skip(f"no prompt fixture is in the {batch!r} batch at k = {k}")
    requests = [r.request(num_draft_tokens=k) for r in references]
    if batch == "mixed":
        assert len({len(r.prompt_ids) for r in requests}) > 1, "the batch must mix prompt lengths"
    batched = decoder.decode(requests)
    assert len(batched) == len(requests)
    for reference, request, result in zip(references, requests, batched, strict=True):
        check_tokens(reference, result, request=request)
    for reference, request, together in zip(references[:6], requests, batched, strict=False):
        [alone] = decoder.decode([request])
        with passes_on_failure(reference, request, together, other=("alone", alone)):
            assert alone == together, (
                f"prompt {reference.prompt.id}: decoded alone, {request.prompt_ids[:5]}... gives {alone}, in the "
                f"batch {together}"
            )
