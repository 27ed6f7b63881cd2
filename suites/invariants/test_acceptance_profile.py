"""Every verification pass accounts for the tokens it committed, and the run's acceptance profile (accepted
drafts per pass, per-depth acceptance, head cost, head fidelity) is recorded for the report."""

from __future__ import annotations

import pytest

from harness.checks.acceptance_profile import head_fidelity, pass_statistics
from harness.commands.bench_decoder import head_cost_ratio
from harness.contract.decoder import DecodeRequest
from harness.contract.records import UnjudgedRecord, attach_record

pytestmark = pytest.mark.invariants

PROFILE_K = 2


def check_steps_account_for_tokens(request, result):
    """Passes are contiguous, accept a prefix of their drafts, and emit exactly the decoder's tokens."""
    committed = 0
    for index, step in enumerate(result.steps):
        where = f"prompt {request.prompt_ids[:4]}..., pass {index}"
        assert step.start == committed, f"{where}: starts at {step.start}, {committed} tokens were committed"
        assert len(step.drafts) <= request.num_draft_tokens, f"{where}: {len(step.drafts)} drafts > k"
        assert 0 <= step.accepted <= len(step.drafts), f"{where}: accepted {step.accepted} of {len(step.drafts)}"
        shown = min(step.accepted, len(step.emitted))
        assert step.emitted[:shown] == step.drafts[:shown], f"{where}: emitted {step.emitted} != accepted drafts"
        assert len(step.emitted) <= step.accepted + 1, f"{where}: {len(step.emitted)} tokens for {step.accepted}"
        committed += len(step.emitted)
    emitted = tuple(token for step in result.steps for token in step.emitted)
    assert emitted == result.token_ids, f"passes emitted {emitted}, the result holds {result.token_ids}"


def test_every_pass_accounts_for_its_tokens(decoder, bundle, prompts, require, record_property):
    require("steps", num_draft_tokens=PROFILE_K)
    requests = [
        DecodeRequest(
            tuple(p.encode(bundle.tokenizer)),
            p.max_new_tokens,
            num_draft_tokens=PROFILE_K,
            eos_token_ids=bundle.eos_token_ids,
        )
        for p in prompts
    ]
    results = decoder.decode(requests)
    for request, result in zip(requests, results, strict=True):
        check_steps_account_for_tokens(request, result)
    profile = {"decoder": decoder.name, **pass_statistics(results, PROFILE_K), "head_cost_vs_verify": None}
    profile["head_fidelity"] = []
    if bundle.has_weights:  # the head's cost and fidelity run the checkpoint's MTP layers in this process
        profile["head_cost_vs_verify"] = head_cost_ratio(bundle, list(requests[0].prompt_ids), 8, PROFILE_K)
        sequences = [r.prompt_ids + res.token_ids for r, res in zip(requests, results, strict=True)]
        profile["head_fidelity"] = head_fidelity(bundle, sequences)
    else:
        why = "they run the checkpoint's MTP layers; this run loads no weights (--reference engine)"
        attach_record(record_property, "unjudged", UnjudgedRecord(checks=["head cost", "head fidelity"], why=why))
    attach_record(record_property, "acceptance", profile)
    assert profile["passes"] > 0
