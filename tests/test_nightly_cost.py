"""The nightly cost table (harness/commands/nightly_cost.py): sized by the sampling suite's own N."""

from __future__ import annotations

import pytest

from harness.checks.sampling_cases import LAW_LENGTH, PIT_LENGTH, case_grid
from harness.commands.nightly_cost import Deployment, cost_table, sampling_cost


def test_the_cost_counts_the_grids_cases_at_the_suites_own_n():
    grid = case_grid()
    for budget in ("smoke", "ci", "full"):
        cost = sampling_cost(budget)
        assert cost.law_cases + cost.pit_cases == len(grid)
        assert (
            cost.decoded_tokens == cost.law_cases * cost.law_n * LAW_LENGTH + cost.pit_cases * cost.pit_n * PIT_LENGTH
        )
    smoke, ci, full = (sampling_cost(b) for b in ("smoke", "ci", "full"))
    assert smoke.law_n < ci.law_n < full.law_n and smoke.pit_n < ci.pit_n < full.pit_n
    assert smoke.engines == len({(c.k, c.draft_mode) for c in grid}) + 1


def test_gpu_hours_are_the_stated_rates_times_the_gpus():
    cost = sampling_cost("ci")
    one = Deployment("one", 1, 1000.0, 2000.0, 60.0)
    seconds = cost.decoded_tokens / 1000 + cost.scored_tokens / 2000 + cost.engines * 60
    assert cost.gpu_hours(one) == pytest.approx(seconds / 3600)
    assert cost.gpu_hours(Deployment("eight", 8, 1000.0, 2000.0, 60.0)) == pytest.approx(8 * seconds / 3600)
    table = cost_table((one,))
    assert table.count("\n") == 4 and "GPU-hours, one" in table
