"""Divergence classification and forced-rejection schedules (pure functions)."""

from __future__ import annotations

import pytest
import torch

from harness.checks.divergence import NEAR_TIE_TOLERANCE, classify, first_divergence
from harness.checks.schedules import expected_steps, forced_drafts, scheduled_rejections


def decode(ids):
    return "|".join(map(str, ids))


def test_first_divergence_counts_a_length_difference():
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 2, 3], [1, 5, 3]) == 1
    assert first_divergence([1, 2, 3], [1, 2]) == 2


def test_any_divergence_fails_in_float64_and_float32():
    for dtype in (torch.float64, torch.float32):
        divergence = classify([1, 2, 3], [1, 4, 3], [5.0, 1e-9, 5.0], dtype, decode)
        assert divergence is not None and not divergence.near_tie and divergence.index == 1


def test_a_bf16_divergence_at_a_small_margin_is_a_near_tie_and_a_large_one_is_not():
    small = NEAR_TIE_TOLERANCE[torch.bfloat16] / 2
    assert classify([1, 2], [1, 4], [3.0, small], torch.bfloat16, decode).near_tie
    assert not classify([1, 2], [1, 4], [3.0, 2.0], torch.bfloat16, decode).near_tie


def test_the_record_names_position_tokens_text_and_margin():
    divergence = classify([7, 8, 9], [7, 8, 6], [1.0, 1.0, 0.5], torch.float64, decode, prompt_ids=[1, 2])
    text = divergence.describe()
    assert "DIVERGENCE at generated index 2: expected token 9 ('9'), got 6 ('6')" in text
    assert "margin there 0.5" in text and "1|2|7|8" in text


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
