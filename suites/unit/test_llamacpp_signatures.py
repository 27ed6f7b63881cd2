"""The llama.cpp findings' signatures explain their own failures and nothing else (a changed token, an early stop
away from the context end, a wholly wrong drafter): a second bug in a watched test stays a failure."""

from __future__ import annotations

from types import SimpleNamespace

from harness.subjects.engines.findings import FailedCase
from harness.subjects.engines.llamacpp.signatures import cut_short_at_the_context_end, only_the_drafts_differ

MODEL = SimpleNamespace(max_context=256)


def case(**records):
    return FailedCase("suites/x.py::t", "AssertionError", records, ("slug",), lambda: MODEL)


def divergence(prompt_length, index, actual, k=2):
    return {"index": index, "actual_token": actual, "num_draft_tokens": k, "prompt_ids": [1] * prompt_length}


def test_an_output_that_ends_early_at_the_context_end_is_the_dropped_tokens_finding():
    assert cut_short_at_the_context_end(case(divergence=divergence(232, 23, None)))
    assert not cut_short_at_the_context_end(case(divergence=divergence(100, 23, None)))  # far from the end
    assert not cut_short_at_the_context_end(case(divergence=divergence(232, 23, 42)))  # a changed token


def test_a_speculative_sample_cut_short_at_the_context_end_is_the_dropped_tokens_finding():
    request = {"prompt_ids": [1] * 232, "num_draft_tokens": 3}
    without = list(range(24))
    assert cut_short_at_the_context_end(
        case(speculation={"request": request, "without": without, "speculative": without[:23]})
    )
    changed = [*without[:22], 99]
    assert not cut_short_at_the_context_end(
        case(speculation={"request": request, "without": without, "speculative": changed})
    )
    early = {"prompt_ids": [1] * 100, "num_draft_tokens": 3}
    assert not cut_short_at_the_context_end(
        case(speculation={"request": early, "without": without, "speculative": without[:23]})
    )


def steps(tokens, drafts):
    return [
        {"start": i, "drafts": [d], "accepted": 0, "emitted": [t]}
        for i, (t, d) in enumerate(zip(tokens, drafts, strict=True))
    ]


def test_two_decodes_that_differ_in_their_drafts_only_are_the_stale_hidden_state_finding():
    same = {
        "prompt_id": "p",
        "num_draft_tokens": 1,
        "steps": steps([5, 6], [1, 2]),
        "other_steps": steps([5, 6], [1, 3]),
    }
    other = {**same, "other_steps": steps([5, 7], [1, 2])}
    assert only_the_drafts_differ(case(passes=same))
    assert not only_the_drafts_differ(case(passes=other))
    assert only_the_drafts_differ(case(isolation={"alone": [1, 2], "in_batch": [1, 2]}))
    assert not only_the_drafts_differ(case(isolation={"alone": [1, 2], "in_batch": [1, 3]}))


def test_draft_conformance_is_explained_only_while_most_passes_conform():
    mismatches = [{"request": 0, "start": i, "drafts": [1], "expected": [2]} for i in range(10)]
    assert only_the_drafts_differ(case(conformance={"passes": 400, "mismatches": mismatches}))
    assert not only_the_drafts_differ(case(conformance={"passes": 20, "mismatches": mismatches}))
