"""Shrinking on a known failure region: the search reaches the smallest failing case by single steps,
deterministically, and stops at its time budget with the best case so far."""

from __future__ import annotations

import pytest

from harness.shrink import GreedyCase, shrink, smaller_variants

START = GreedyCase(prompt_ids=tuple(range(10, 18)), max_new_tokens=10, num_draft_tokens=4, forced_positions=(1, 3, 5))


def divergence_of(case: GreedyCase) -> int | None:
    """Fails (diverging at index 3) exactly when k >= 2, a draft is forced at 3 and 4 tokens are generated."""
    fails = case.num_draft_tokens >= 2 and 3 in case.forced_positions and case.max_new_tokens >= 4
    return 3 if fails else None


def test_shrinking_reaches_the_smallest_failing_case():
    shrunk = shrink(START, divergence_of, budget_s=60)
    assert shrunk.finished
    assert shrunk.minimal == GreedyCase(prompt_ids=(17,), max_new_tokens=4, num_draft_tokens=2, forced_positions=(3,))
    assert shrunk.minimal.size() < START.size()
    assert all(divergence_of(variant) is None for variant in smaller_variants(shrunk.minimal, 3)), "a local minimum"


def test_shrinking_is_deterministic():
    first, second = shrink(START, divergence_of, 60), shrink(START, divergence_of, 60)
    assert (first.minimal, first.tried, first.steps) == (second.minimal, second.tried, second.steps)


def test_the_first_move_cuts_the_output_after_the_divergence():
    assert next(smaller_variants(START, divergence=3)) == GreedyCase(START.prompt_ids, 4, 4, (1, 3))


def test_a_spent_budget_returns_the_case_so_far_unfinished():
    shrunk = shrink(START, divergence_of, budget_s=0.0)
    assert not shrunk.finished and shrunk.minimal == START and shrunk.tried == 0


def test_a_passing_case_cannot_be_shrunk():
    with pytest.raises(ValueError, match="does not fail"):
        shrink(GreedyCase((1,), 4, 1), divergence_of, 60)


def test_a_case_is_read_back_from_its_divergence_record():
    record = {"prompt_ids": [5, 6], "max_new_tokens": 8, "num_draft_tokens": 2, "forced_drafts": {"4": 9, "1": 3}}
    assert GreedyCase.from_divergence(record) == GreedyCase((5, 6), 8, 2, (1, 4))
    assert GreedyCase.from_divergence({"num_draft_tokens": 2}) is None  # a record without its request
