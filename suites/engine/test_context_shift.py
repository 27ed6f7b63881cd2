"""Context shift (llama.cpp): when a slot's context is full, the older half of it is discarded and the rest shifted
to new positions, in the target's cache and the MTP context's alike, and generation goes on. The output then no
longer follows the target-only reference of the whole prompt, so the engine is its own reference: with draft-mtp it
must give the greedy tokens it gives without speculation under the same shifts."""

from __future__ import annotations

import pytest

from harness.contract.decoder import DecodeRequest
from harness.contract.records import PassesRecord, attach_record, step_records

pytestmark = pytest.mark.engine

NEW_TOKENS, REQUESTS = 120, 4  # past the end of a fixture's context: at least one shift each


@pytest.mark.usefixtures("speculative_engine")
def test_speculation_under_context_shift_gives_the_tokens_of_the_same_engine_without_speculation(
    engine_k, configured, bundle, prompts, shown, record_property
):
    decoder = configured("context-shift")
    prompt_tokens = bundle.max_context - NEW_TOKENS // 2
    text = [token for p in prompts for token in p.encode(bundle.tokenizer)]
    requests = [
        DecodeRequest(
            tuple(text[i * prompt_tokens : (i + 1) * prompt_tokens]),
            NEW_TOKENS,
            num_draft_tokens=engine_k,
            eos_token_ids=bundle.eos_token_ids,
        )
        for i in range(REQUESTS)
    ]
    speculative = decoder.decode(requests)
    shown(decoder)
    plain = decoder.without_speculation()
    try:
        without = plain.decode(requests)
        assert plain.take_evidence().get("context_shifts", 0) > 0, "the engine without speculation did not shift"
    finally:
        plain.close()
    differ = [i for i, (a, b) in enumerate(zip(speculative, without, strict=True)) if a.token_ids != b.token_ids]
    if differ:
        first = differ[0]
        record = PassesRecord(
            prompt_id=f"shift-{first}",
            num_draft_tokens=engine_k,
            forced_drafts={},
            expected=None,
            steps=step_records(speculative[first].steps),
            other_steps=step_records(without[first].steps),
            other="without speculation",
        )
        attach_record(record_property, "passes", record)
    assert not differ, (
        f"{len(differ)} of {len(requests)} requests gave other tokens with draft-mtp than without under context "
        f"shift; request {differ[0]}: {list(speculative[differ[0]].token_ids)} against "
        f"{list(without[differ[0]].token_ids)}"
    )
