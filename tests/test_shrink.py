"""Shrinking on a known failure region: the search reaches the smallest failing case by single steps,
deterministically, and stops at its time budget with the best case so far."""

from __future__ import annotations

import pytest

from harness.triage.shrink import RequestCase, shrink, smaller_variants

START = RequestCase(prompt_ids=tuple(range(10, 18)), max_new_tokens=10, num_draft_tokens=4, forced_positions=(1, 3, 5))


def divergence_of(case: RequestCase) -> int | None:
    """Fails (diverging at index 3) exactly when k >= 2, a draft is forced at 3 and 4 tokens are generated."""
    fails = case.num_draft_tokens >= 2 and 3 in case.forced_positions and case.max_new_tokens >= 4
    return 3 if fails else None


def test_shrinking_reaches_the_smallest_failing_case():
    shrunk = shrink(START, divergence_of, budget_s=60)
    assert shrunk.finished
    assert shrunk.minimal == RequestCase(prompt_ids=(17,), max_new_tokens=4, num_draft_tokens=2, forced_positions=(3,))
    assert shrunk.minimal.size() < START.size()
    assert all(divergence_of(variant) is None for variant in smaller_variants(shrunk.minimal, 3)), "a local minimum"


def test_shrinking_is_deterministic():
    first, second = shrink(START, divergence_of, 60), shrink(START, divergence_of, 60)
    assert (first.minimal, first.tried, first.steps) == (second.minimal, second.tried, second.steps)


def test_the_first_move_cuts_the_output_after_the_divergence():
    assert next(smaller_variants(START, divergence=3)) == RequestCase(START.prompt_ids, 4, 4, (1, 3))


def test_a_spent_budget_returns_the_case_so_far_unfinished():
    shrunk = shrink(START, divergence_of, budget_s=0.0)
    assert not shrunk.finished and shrunk.minimal == START and shrunk.tried == 0


def test_a_passing_case_cannot_be_shrunk():
    with pytest.raises(ValueError, match="does not fail"):
        shrink(RequestCase((1,), 4, 1), divergence_of, 60)


def test_a_case_is_read_back_from_its_divergence_record():
    record = {"prompt_ids": [5, 6], "max_new_tokens": 8, "num_draft_tokens": 2, "forced_drafts": {"4": 9, "1": 3}}
    assert RequestCase.from_divergence(record) == RequestCase((5, 6), 8, 2, (1, 4))
    assert RequestCase.from_divergence({"num_draft_tokens": 2}) is None  # a record without its request


def test_an_invariant_case_keeps_its_sampling_and_drops_fixed_drafts_one_at_a_time():
    record = {
        "prompt_ids": [4, 5, 6],
        "max_new_tokens": 6,
        "num_draft_tokens": 2,
        "forced_drafts": {"0": 11, "3": 12},
        "temperature": 0.8,
        "top_k": 40,
        "top_p": 0.95,
        "seed": 7,
        "draft_mode": "sample",
    }
    case = RequestCase.from_request(record)
    assert case.fixed_drafts == ((0, 11), (3, 12)) and (case.temperature, case.seed, case.draft_mode) == (
        0.8,
        7,
        "sample",
    )
    variants = list(smaller_variants(case, divergence=case.max_new_tokens))
    assert variants[0].fixed_drafts == ((0, 11),) and variants[1].fixed_drafts == ((3, 12),)
    assert all(v.temperature == 0.8 and v.seed == 7 for v in variants)
