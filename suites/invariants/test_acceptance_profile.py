"""Every verification pass accounts for the tokens it committed, and the run's acceptance profile (accepted
drafts per pass, per-depth acceptance, head cost, head fidelity) is recorded for the report."""

from __future__ import annotations

import pytest

from harness.checks.acceptance_profile import head_fidelity, pass_statistics
from harness.commands.bench_decoder import head_cost_ratio
from harness.contract.decoder import DecodeRequest
from harness.contract.passes import pass_contract_problem, pass_problem
from harness.contract.records import UnjudgedRecord, attach_record

pytestmark = pytest.mark.invariants

PROFILE_K = 2


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
    for request, result in zip(requests, results, strict=True):  # checked at entry; here for a decoder built elsewhere
        problem = pass_contract_problem(result) or pass_problem(request, result)
        assert problem is None, problem
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
