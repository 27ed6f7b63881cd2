"""Check 7, for decoders that cannot be inspected too: in greedy draft mode a draft is a deterministic
function of the committed prefix, so every pass's drafts must equal the drafts the harness's own proposer
makes from the same prefix. A polluted MTP cache or a stale hidden state leaves greedy output intact and
only lowers acceptance; this is the check that exposes it. Per-depth acceptance is recorded beside the
harness's own on the same prompts.

Each k runs on two batches that hold every prompt between them (harness/checks/batches.py): the prompts clear of the
context end, and those at it. A bug confined to a batch holding a request at the context end (vLLM switches its
drafter off for the whole batch there: docs/findings/vllm-drafter-skipped-for-the-whole-batch-near-max-model-len.md)
then leaves the drafts of the batch clear of it judged, pass by pass. What mixing the two does to a request is the
greedy suite's batch-against-alone check."""

from __future__ import annotations

import json

import pytest

from harness.checks.batches import SEPARATED_BATCHES, batch_members
from harness.checks.conformance import check_conformance
from harness.contract.decoder import DecodeRequest, drafter, drafter_depths
from harness.contract.records import attach_record

pytestmark = pytest.mark.invariants


@pytest.mark.parametrize("batch", SEPARATED_BATCHES)
@pytest.mark.parametrize("k", [1, 2, 3], ids=lambda k: f"k{k}")
def test_greedy_drafts_equal_the_harness_proposers(decoder, bundle, prompts, require, record_property, k, batch):
    require("steps", num_draft_tokens=k)
    if drafter(decoder) != "mtp":
        pytest.skip(
            f"decoder {decoder.name!r} drafts with {drafter(decoder)}, not the checkpoint's MTP depths the "
            "harness proposer runs"
        )
    encoded = [(p, tuple(p.encode(bundle.tokenizer))) for p in prompts]
    members = batch_members(encoded, batch, k, bundle.max_context, lambda item: (len(item[1]), item[0].max_new_tokens))
    if not members:
        pytest.skip(f"no prompt fixture is in the {batch!r} batch at k = {k}")
    prompts = [p for p, _ in members]
    requests = [
        DecodeRequest(prompt_ids, p.max_new_tokens, num_draft_tokens=k, eos_token_ids=bundle.eos_token_ids)
        for p, prompt_ids in members
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
