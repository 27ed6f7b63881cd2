"""Check 7, for decoders that cannot be inspected too: in greedy draft mode a draft is a deterministic
function of the committed prefix, so every pass's drafts must equal the drafts the harness's own proposer
makes from the same prefix. A polluted MTP cache or a stale hidden state leaves greedy output intact and
only lowers acceptance; this is the check that exposes it. Per-depth acceptance is recorded beside the
harness's own on the same prompts."""

from __future__ import annotations

import json

import pytest

from harness.checks.conformance import check_conformance
from harness.contract.decoder import DecodeRequest, drafter, drafter_depths
from harness.contract.records import attach_record

pytestmark = pytest.mark.invariants


@pytest.mark.parametrize("k", [1, 2, 3], ids=lambda k: f"k{k}")
def test_greedy_drafts_equal_the_harness_proposers(decoder, bundle, prompts, require, record_property, k):
    require("steps", num_draft_tokens=k)
    if drafter(decoder) != "mtp":
        pytest.skip(
            f"decoder {decoder.name!r} drafts with {drafter(decoder)}, not the checkpoint's MTP depths the "
            "harness proposer runs"
        )
    requests = [
        DecodeRequest(
            tuple(p.encode(bundle.tokenizer)), p.max_new_tokens, num_draft_tokens=k, eos_token_ids=bundle.eos_token_ids
        )
        for p in prompts
    ]
    results = decoder.decode(requests)
    proposer = bundle.with_depths(drafter_depths(decoder))  # the depths the decoder drafts with, the last reused
    conformance = check_conformance(proposer, requests, results)
    assert conformance.passes, "no drafts were proposed"
    acceptance = {"decoder": conformance.subject_acceptance, "harness proposer": conformance.proposer_acceptance}
    record_property("acceptance_per_depth", json.dumps(acceptance))
    if conformance.mismatched:
        attach_record(record_property, "conformance", conformance.record(k, prompts, requests, results))
    assert not conformance.mismatched, conformance.describe()
