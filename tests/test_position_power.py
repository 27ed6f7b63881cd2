"""The whole-sequence (PIT) case against a bias confined to one output position, by simulation on the
fixture's own target conditionals (harness/stats/position_power.py): at the `ci` budget's N and the suite's
per-test alpha, a total-variation shift of 0.1 at one position in 48 is caught with power >= 0.99 (200 runs
per position and shape), and nothing is caught without a shift."""

from __future__ import annotations

import pytest
import torch

from harness.checks.sampling_cases import PIT_LENGTH
from harness.mutation.power_table import fixture_case_laws
from harness.stats.position_power import flattened, simulate_power, toward_head
from harness.stats.sequence import probability_ordered_pit

pytestmark = pytest.mark.xdist_group("position-power")
RUNS = 200
SEED = 20261130
POSITIONS = (5, PIT_LENGTH - 1)  # a position after the first passes, the last token


@pytest.fixture(scope="module")
def ci_case():
    """The target's conditionals at POSITIONS along the ci budget's n target-sampled continuations, the
    log-likelihood variance per position, the per-test alpha (harness/mutation/power_table.py, fixture_case_laws)."""
    return fixture_case_laws("ci", POSITIONS, SEED)


@pytest.mark.parametrize("shape", ["head", "flatten"])
@pytest.mark.parametrize("index", range(len(POSITIONS)), ids=[f"position{t}" for t in POSITIONS])
def test_a_shift_of_tv_0_1_at_one_position_is_caught_with_power_0_99(ci_case, shape, index, record_property):
    laws, variance, alpha = ci_case
    position = POSITIONS[index]
    other = float(variance.sum() - variance[position])
    power = simulate_power(laws[:, index], other, PIT_LENGTH, shape, 0.1, alpha, RUNS, SEED + position)
    record_property("power", f"{power.any:.3f} over {RUNS} runs, n = {laws.shape[0]}: {power.by_statistic}")
    assert power.delta == pytest.approx(0.1, abs=1e-6), "the shift is not the mean TV it claims"
    assert power.any >= 0.99, power


def test_without_a_shift_nothing_is_caught(ci_case):
    laws, variance, alpha = ci_case
    power = simulate_power(laws[:, 1], float(variance.sum()), PIT_LENGTH, "head", 0.0, alpha, RUNS, SEED)
    assert power.delta == 0.0 and power.any == 0.0, power


def test_the_shapes_move_exactly_delta_of_mass():
    generator = torch.Generator().manual_seed(1)
    probs = torch.softmax(torch.randn(64, 50, generator=generator, dtype=torch.float64) * 2, dim=-1)
    for shape in (toward_head, flattened):
        shifted = shape(probs, 0.1)
        assert torch.allclose(shifted.sum(-1), torch.ones(64, dtype=torch.float64))
        assert (shifted >= 0).all()
        assert torch.allclose(0.5 * (shifted - probs).abs().sum(-1), torch.full((64,), 0.1, dtype=torch.float64))
    head = toward_head(probs, 0.1)
    assert torch.equal(head.argmax(-1), probs.argmax(-1))
    assert torch.allclose(head.max(-1).values, probs.max(-1).values + 0.1)


def test_probability_ordered_pit_moves_toward_0_for_a_head_bias_and_toward_1_for_a_tail_bias():
    generator = torch.Generator().manual_seed(2)
    probs = torch.softmax(torch.randn(20000, 30, generator=generator, dtype=torch.float64) * 1.5, dim=-1)
    uniforms = torch.rand(20000, generator=generator, dtype=torch.float64)

    def mean_u(law):
        tokens = torch.multinomial(law, 1, generator=generator).squeeze(-1)
        return probability_ordered_pit(probs, tokens, uniforms).mean().item()

    assert abs(mean_u(probs) - 0.5) < 0.01  # correct: U(0, 1)
    assert mean_u(toward_head(probs, 0.1)) < 0.47
    assert mean_u(flattened(probs, 0.1)) > 0.53
