"""Check 7, for decoders that cannot be inspected too: in greedy draft mode a draft is a deterministic
function of the committed prefix, so every pass's drafts must equal the drafts the harness's own proposer
makes from the same prefix. A polluted MTP cache or a stale hidden state leaves greedy output intact and
only lowers acceptance; this is the check that exposes it. Per-depth acceptance is recorded beside the
harness's own on the same prompts."""

from __future__ import annotations

import json

import pytest

from harness.contract.decoder import DecodeRequest, drafter, drafter_depths
from harness.contract.records import (
    ConformanceMismatchRecord,
    ConformanceRecord,
    ConformanceRequestRecord,
    attach_record,
    step_records,
)
from harness.decoding.mtp_decoder import MTPDecoder

pytestmark = pytest.mark.invariants


def proposed_drafts(requests, results):
    """(committed ids, drafts, request index, pass start) of every pass that drafted, from the verification
    steps."""
    passes = []
    for index, (request, result) in enumerate(zip(requests, results, strict=True)):
        for step in result.steps:
            if step.drafts:
                passes.append((request.prompt_ids + result.token_ids[: step.start], step.drafts, index, step.start))
    return passes


def conformance_record(k, prompts, requests, results, passes, expected) -> ConformanceRecord:
    """The passes whose drafts the committed prefix does not give, with their requests (what a finding's
    signature reads)."""
    mismatched = [
        (index, start, drafts, ours)
        for (_, drafts, index, start), ours in zip(passes, expected, strict=True)
        if drafts != ours
    ]
    involved = sorted({index for index, *_ in mismatched})
    position = {index: i for i, index in enumerate(involved)}
    return ConformanceRecord(
        num_draft_tokens=k,
        passes=len(passes),
        mismatches=[
            ConformanceMismatchRecord(request=position[index], start=start, drafts=list(drafts), expected=list(ours))
            for index, start, drafts, ours in mismatched
        ],
        requests=[
            ConformanceRequestRecord(
                prompt_id=prompts[index].id,
                prompt_ids=list(requests[index].prompt_ids),
                token_ids=list(results[index].token_ids),
                steps=step_records(results[index].steps),
            )
            for index in involved
        ],
    )


def harness_drafts(bundle, passes, chunk=32):
    """The harness proposer's drafts for each prefix: the first pass of a fresh decode of that prefix
    (decoded in batches of similar prefix length, to keep padding small). `bundle` holds the MTP depths the
    decoder under test drafts with."""
    order = sorted(range(len(passes)), key=lambda i: len(passes[i][0]))
    drafts = [None] * len(passes)
    decoder = MTPDecoder(bundle)
    for start in range(0, len(order), chunk):
        indices = order[start : start + chunk]
        requests = [DecodeRequest(passes[i][0], 1, num_draft_tokens=len(passes[i][1])) for i in indices]
        for i, result in zip(indices, decoder.decode(requests), strict=True):
            drafts[i] = result.steps[0].drafts
    return drafts


def acceptance_per_depth(passes, committed_after):
    """Per draft index j: P(draft j accepted | drafts 0..j-1 accepted), from the committed continuation."""
    offered, accepted = {}, {}
    for (prefix, drafts), continuation in zip(passes, committed_after, strict=True):
        for j, draft in enumerate(drafts):
            if len(prefix) + j >= len(continuation):
                break
            offered[j] = offered.get(j, 0) + 1
            if continuation[len(prefix) + j] != draft:
                break
            accepted[j] = accepted.get(j, 0) + 1
    return {j + 1: round(accepted.get(j, 0) / n, 3) for j, n in sorted(offered.items())}


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
    passes = proposed_drafts(requests, results)
    assert passes, "no drafts were proposed"
    proposer = bundle.with_depths(drafter_depths(decoder))  # the depths the decoder drafts with, the last reused
    expected = harness_drafts(proposer, [(prefix, drafts) for prefix, drafts, *_ in passes])
    finals = {r.prompt_ids: r.prompt_ids + res.token_ids for r, res in zip(requests, results, strict=True)}
    continuation = [next(full for p, full in finals.items() if prefix[: len(p)] == p) for prefix, *_ in passes]
    subject = acceptance_per_depth([(prefix, drafts) for prefix, drafts, *_ in passes], continuation)
    reference = acceptance_per_depth(list(zip([p for p, *_ in passes], expected, strict=True)), continuation)
    record_property("acceptance_per_depth", json.dumps({"decoder": subject, "harness proposer": reference}))
    mismatched = [
        (len(prefix), drafts, ours)
        for (prefix, drafts, *_), ours in zip(passes, expected, strict=True)
        if drafts != ours
    ]
    if mismatched:
        attach_record(
            record_property, "conformance", conformance_record(k, prompts, requests, results, passes, expected)
        )
    assert not mismatched, (
        f"{len(mismatched)} of {len(passes)} passes proposed drafts the committed prefix does not give; first: at "
        f"committed length {mismatched[0][0]} drafts {mismatched[0][1]}, expected {mismatched[0][2]}. Acceptance per "
        f"depth: decoder {subject}, harness proposer {reference}"
    )
