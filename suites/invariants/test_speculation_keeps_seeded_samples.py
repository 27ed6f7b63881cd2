"""An engine that verifies by sampling the target's own token (one random draw per emitted token, the draft
accepted only if it is that token) promises more than the target law: a seeded sampled request gives the same
tokens with speculation as without it, whatever the drafts were. Checked for every decoder that makes the promise
(a `plain_twin()`, its engine without speculation); the others draw extra randomness to accept or reject, and
their law is the sampling suite's business."""

from __future__ import annotations

import pytest

from harness.contract.decoder import DecodeRequest, SamplingConfig
from harness.contract.records import SpeculationRecord, attach_record, request_record
from harness.contract.seeds import session_shifted

pytestmark = pytest.mark.invariants

SETTINGS = {
    "t1": SamplingConfig(temperature=1.0),
    "t0.7-topk20": SamplingConfig(temperature=0.7, top_k=20),
    "t1.3-topp0.9": SamplingConfig(temperature=1.3, top_p=0.9),
}


@pytest.fixture(scope="module")
def plain(decoder):
    twin = getattr(decoder, "plain_twin", None)
    if twin is None:
        pytest.skip(
            f"decoder {decoder.name!r} does not promise the same seeded samples without speculation (its "
            "acceptance draws randomness of its own)"
        )
    plain = twin()
    yield plain
    close = getattr(plain, "close", None)
    if close is not None:
        close()


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("k", [1, 2, 3, 4], ids=lambda k: f"k{k}")
def test_a_seeded_sample_is_the_same_with_and_without_speculation(
    decoder, plain, bundle, invariant_prompts, require, record_property, harness_seed, k, setting
):
    require(num_draft_tokens=k)
    requests = [
        DecodeRequest(
            tuple(p.encode(bundle.tokenizer)),
            24,
            sampling=SETTINGS[setting],
            seed=session_shifted(p.seed + k, harness_seed),
            num_draft_tokens=k,
            eos_token_ids=bundle.eos_token_ids,
        )
        for p in invariant_prompts
    ]
    speculative = decoder.decode(requests)
    without = plain.decode(requests)
    differ = [i for i, (a, b) in enumerate(zip(speculative, without, strict=True)) if a.token_ids != b.token_ids]
    if differ:
        first = differ[0]
        record = SpeculationRecord(
            request=request_record(requests[first]),
            without=list(without[first].token_ids),
            speculative=list(speculative[first].token_ids),
        )
        attach_record(record_property, "speculation", record)
    assert not differ, (
        f"{len(differ)} of {len(requests)} seeded requests changed with speculation; request {differ[0]}: without "
        f"{without[differ[0]].token_ids}, with k = {k} {speculative[differ[0]].token_ids}"
    )
    assert len({r.token_ids for r in without}) > 1, "the requests' seeds gave one and the same output"
