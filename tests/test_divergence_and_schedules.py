"""Divergence classification and forced-rejection schedules (pure functions)."""

from __future__ import annotations

import pytest
import torch

from harness.checks.divergence import NEAR_TIE_TOLERANCE, check_greedy, describe_divergence, first_divergence
from harness.checks.schedules import expected_steps, forced_drafts, scheduled_rejections


def decode(ids):
    return "|".join(map(str, ids))


def test_first_divergence_counts_a_length_difference():
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 2, 3], [1, 5, 3]) == 1
    assert first_divergence([1, 2, 3], [1, 2]) == 2


VOCAB = 16


def logits_with(best: int, gaps: dict[int, float]) -> torch.Tensor:
    """Precise logits [V]: `best` at 10, the tokens of `gaps` that far below it, every other token at 0."""
    logits = torch.zeros(VOCAB, dtype=torch.float64)
    logits[best] = 10.0
    for token, gap in gaps.items():
        logits[token] = 10.0 - gap
    return logits


def checked(expected, actual, dtype, gaps_at=None, continuations=None, tolerance=None):
    """check_greedy over prompt [1, 2] with precise logits `gaps_at[len(prefix)]` (default: the reference's token
    best by far) and continuations[prefix] after a near-tie."""
    gaps_at = gaps_at or {}

    def precise(prefix):
        position = len(prefix) - 2
        return gaps_at.get(position, logits_with(expected[position] if position < len(expected) else 0, {}))

    def continuation(prefix):
        return continuations[tuple(prefix)]

    return check_greedy(expected, actual, [1, 2], dtype, decode, precise, continuation, tolerance)


def test_any_divergence_fails_in_float64_and_float32():
    for dtype in (torch.float64, torch.float32):
        found = checked([1, 2, 3], [1, 4, 3], dtype, {1: logits_with(2, {4: 1e-9})})
        assert found.failure is not None and not found.failure["near_tie"] and found.failure["index"] == 1
        assert found.checked == 1 and found.near_ties == ()


def test_a_bf16_divergence_to_a_token_within_the_tolerance_of_the_precise_best_is_a_near_tie():
    small = NEAR_TIE_TOLERANCE[torch.bfloat16] / 2
    found = checked([1, 2, 3], [1, 4, 5], torch.bfloat16, {1: logits_with(2, {4: small})}, {(1, 2, 1, 4): [5]})
    assert found.failure is None and [d["index"] for d in found.near_ties] == [1]
    assert found.near_ties[0]["token_gap"] == pytest.approx(small) and found.checked == 3
    assert found.reference == (1, 4, 5), "judged after the near-tie against the reference continued from it"


def test_a_bf16_divergence_to_a_token_far_from_the_best_fails_even_where_the_top_two_are_tied():
    small = NEAR_TIE_TOLERANCE[torch.bfloat16] / 2
    tied_but_not_chosen = logits_with(2, {3: small, 4: 5.0})  # 2 and 3 tie; the decoder took 4, far below
    found = checked([1, 2, 3], [1, 4, 3], torch.bfloat16, {1: tied_but_not_chosen})
    assert found.failure is not None and found.failure["index"] == 1 and found.failure["margin"] == pytest.approx(small)


def test_after_a_near_tie_the_rest_of_the_output_is_still_checked():
    small = NEAR_TIE_TOLERANCE[torch.bfloat16] / 2
    gaps = {1: logits_with(2, {4: small}), 3: logits_with(6, {7: 3.0})}
    found = checked([1, 2, 3, 3], [1, 4, 5, 7], torch.bfloat16, gaps, {(1, 2, 1, 4): [5, 6]})
    assert found.failure is not None and found.failure["index"] == 3, "a real divergence after the near-tie fails"
    assert [d["index"] for d in found.near_ties] == [1] and found.checked == 3


def test_an_explicit_tolerance_judges_a_float32_cross_kernel_comparison():
    found = checked([1, 2], [1, 4], torch.float32, {1: logits_with(2, {4: 1e-4})}, {(1, 2, 1, 4): []}, tolerance=1e-3)
    assert found.failure is None and len(found.near_ties) == 1


def test_the_record_names_position_tokens_text_and_margin():
    found = checked([7, 8, 9], [7, 8, 6], torch.float64, {2: logits_with(9, {6: 0.5})})
    text = describe_divergence(found.failure)
    assert "DIVERGENCE at generated index 2: expected token 9 ('9'), got 6 ('6')" in text
    assert "1|2|7|8" in text


def test_expected_steps_follow_the_forced_rejections():
    steps = expected_steps(length=8, k=3, rejections={1, 6})
    assert [(s.start, s.rejected_at, s.emitted) for s in steps] == [(0, 1, 2), (2, None, 4), (6, 6, 1), (7, None, 1)]


@pytest.mark.parametrize("first", [0, 1], ids=["drafts-from-0", "drafts-from-1"])
def test_named_schedules_reject_where_they_say(first):
    def rejection_indices(name, k):
        rejections = scheduled_rejections(name, 24, k, first)
        steps = expected_steps(24, k, rejections, first)
        assert [s.start for s in steps[:first]] == list(range(first)) and all(s.emitted == 1 for s in steps[:first])
        return [s.rejected_at - s.start for s in steps if s.rejected_at is not None]

    for k in (1, 2, 3, 4):
        assert set(rejection_indices("every-position", k)) == {0}
        assert set(rejection_indices("last-draft-index", k)) == {k - 1}
        assert set(rejection_indices("first-draft-after-full-acceptance", k)) == {0}
        assert rejection_indices("first-drafted-position", k) == [0]
        assert scheduled_rejections("first-drafted-position", 24, k, first) == {first}
        assert scheduled_rejections("final-position", 24, k, first) == {23}
    assert forced_drafts([5, 6, 7], [50, 60, 70], {1}) == {0: 5, 1: 60, 2: 7}


def test_a_decoder_that_drafts_from_position_1_first_makes_an_undrafted_pass():
    steps = expected_steps(length=8, k=3, rejections={1, 6}, first=1)
    assert [(s.start, s.rejected_at, s.emitted) for s in steps] == [
        (0, None, 1),
        (1, 1, 1),
        (2, None, 4),
        (6, 6, 1),
        (7, None, 1),
    ]
