"""Power of the whole-sequence (PIT) case against a bias confined to one output position, by simulation.

A decoder that is wrong at one position j only (e.g. the last token, the first token after a KV block
boundary) draws x_ij from a biased law p' with TV(p, p') = delta and every other token from the target's
conditional given what came before. So, exactly: at every position t != j the PIT values are i.i.d. U(0, 1)
and the log-likelihood terms are martingale differences with the target's conditional variances; only
position j changes. The simulation keeps the real target conditionals p_ij of the fixture (n contexts),
redraws x_ij from p'_ij in each run, and recomputes every statistic of the case from it:

    per position j: KS of u_j, log-likelihood Z_j;   pooled: KS and binned chi-square of all u, pooled Z
(the other positions' u drawn U(0, 1), their centred log-likelihood sum drawn N(0, sum of their exact
conditional variances), a sum over tens of thousands of terms). The log-likelihood p-values are the
suite's saddlepoint ones (harness/stats/sequence.py). A run detects when any p-value <= alpha / m (Holm's
first step: its rejection set contains Bonferroni's, so this is a lower bound on the suite's power).

Bias shapes, each with a mean total variation of delta over the contexts (`shifted`):
    head:    mass moved from the least likely tokens to the most likely one (over-confident)
    flatten: p' = (1 - e) p + e / V, e = d / TV(p, uniform) (under-confident; mass to the tail)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from scipy import stats

from harness.stats.sequence import SADDLE_GRID, cumulants, log_likelihood_terms, probability_ordered_pit, z_test
from harness.stats.uniformity import PIT_BINS


def toward_head(probs: torch.Tensor, delta: float) -> torch.Tensor:
    """Move mass delta from the least likely tokens (least first) onto the most likely one."""
    ascending, order = probs.sort(dim=-1)
    before = ascending.cumsum(-1) - ascending  # mass of the tokens less likely than each
    taken = (delta - before).clamp(min=0.0).minimum(ascending)
    taken[..., -1] = 0.0  # the most likely token gives nothing
    biased = ascending - taken
    biased[..., -1] += taken.sum(-1)
    return torch.empty_like(probs).scatter_(-1, order, biased)


def flattened(probs: torch.Tensor, delta: float) -> torch.Tensor:
    """Mix with the uniform law until TV(p, p') = delta (or the uniform law itself, when it is nearer)."""
    uniform = torch.full_like(probs, 1.0 / probs.shape[-1])
    distance = 0.5 * (probs - uniform).abs().sum(-1, keepdim=True)
    weight = (delta / distance.clamp_min(1e-12)).clamp(max=1.0)
    return (1 - weight) * probs + weight * uniform


SHAPES: dict[str, Callable[[torch.Tensor, float], torch.Tensor]] = {"head": toward_head, "flatten": flattened}


def mean_tv(laws: torch.Tensor, biased: torch.Tensor) -> float:
    return float((0.5 * (biased - laws).abs().sum(-1)).mean())


def shifted(laws: torch.Tensor, shape: str, delta: float) -> torch.Tensor:
    """The shape applied with the per-context shift whose mean TV over the contexts is delta: a context that
    cannot move delta in that direction (the head shape where p_max > 1 - delta) moves what it can, and
    the others move a little more (bisection on the per-context shift)."""
    move = SHAPES[shape]
    if delta <= 0.0:
        return laws.clone()
    low, high = delta, 1.0
    if mean_tv(laws, move(laws, high)) < delta:
        raise ValueError(f"the {shape} shape cannot move a mean TV of {delta} on these laws")
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if mean_tv(laws, move(laws, middle)) < delta else (low, middle)
    return move(laws, high)


STATISTICS = (
    "position KS",
    "position log-likelihood",
    "pooled KS",
    "pooled binned chi-square",
    "pooled log-likelihood",
)


@dataclass(frozen=True)
class Power:
    shape: str
    delta: float  # the mean TV over contexts actually achieved (delta unless a context cannot move that much)
    runs: int
    alpha_per_test: float
    by_statistic: dict[str, float]  # fraction of runs in which that statistic alone rejected
    any: float  # fraction of runs in which the case rejected (any of its p-values)


def simulate_power(
    laws: torch.Tensor,
    other_variance: float,
    positions: int,
    shape: str,
    delta: float,
    alpha_per_test: float,
    runs: int,
    seed: int,
) -> Power:
    """laws [n, V] float64: the target's conditionals at the biased position along n continuations (the
    fixture's PIT case); other_variance: the sum of the log-likelihood's conditional variances over the
    other positions of those continuations; positions: the case's output length. See the module docstring."""
    n = laws.shape[0]
    generator = torch.Generator().manual_seed(seed)
    numbers = np.random.default_rng(seed)
    true = laws
    biased = shifted(true, shape, delta)
    achieved = mean_tv(true, biased)
    rejected = {name: 0 for name in (*STATISTICS, "any")}
    table = cumulants(true).sum(0).numpy()  # the log-likelihood terms' cumulants at the position, under the target
    grid = SADDLE_GRID.numpy()
    # the other positions' sum (tens of thousands of terms) taken as normal: K = s^2 s2 / 2
    other_table = np.stack(
        [grid * grid * other_variance / 2, grid * other_variance, np.full_like(grid, other_variance)], -1
    )
    for _ in range(runs):
        tokens = torch.multinomial(biased, 1, generator=generator).squeeze(-1)
        u = probability_ordered_pit(true, tokens, torch.rand(n, generator=generator, dtype=true.dtype)).numpy()
        centred, variance = (t.numpy() for t in log_likelihood_terms(true, tokens))
        pooled_u = np.concatenate([u, numbers.uniform(size=n * (positions - 1))])
        other_sum = numbers.normal(0.0, np.sqrt(other_variance))
        histogram, _ = np.histogram(pooled_u, bins=PIT_BINS, range=(0.0, 1.0))
        p_values = {
            "position KS": stats.kstest(u, "uniform").pvalue,
            "position log-likelihood": z_test(centred, variance, table)[1],
            "pooled KS": stats.kstest(pooled_u, "uniform").pvalue,
            "pooled binned chi-square": stats.chisquare(histogram).pvalue,
            "pooled log-likelihood": z_test(
                np.append(centred, other_sum), np.append(variance, other_variance), table + other_table
            )[1],
        }
        for name, p in p_values.items():
            rejected[name] += p <= alpha_per_test
        rejected["any"] += min(p_values.values()) <= alpha_per_test
    by_statistic = {name: float(rejected[name]) / runs for name in STATISTICS}
    return Power(shape, achieved, runs, alpha_per_test, by_statistic, rejected["any"] / runs)


TV_GRID = (0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.1, 0.12, 0.15, 0.2, 0.3)
LARGEST_TV = 0.5
POSITION_STATISTICS = ("position KS", "position log-likelihood", "any")


def smallest_detected_tv(
    laws: torch.Tensor,
    other_variance: float,
    positions: int,
    shape: str,
    alpha_per_test: float,
    runs: int,
    seed: int,
    power: float = 0.99,
) -> dict[str, float | None]:
    """Per statistic (and "any"), the smallest TV of TV_GRID whose simulated power reaches `power`. The
    pooled statistics dilute one position 48-fold: they are simulated at LARGEST_TV only, and None there
    means not reached at any TV up to it (so for every single-position TV a decoder can show)."""
    found: dict[str, float | None] = {name: None for name in (*STATISTICS, "any")}

    def record(delta: float) -> None:
        result = simulate_power(laws, other_variance, positions, shape, delta, alpha_per_test, runs, seed)
        for name, value in {**result.by_statistic, "any": result.any}.items():
            if found[name] is None and value >= power:
                found[name] = delta

    for delta in TV_GRID:
        record(delta)
        if all(found[name] is not None for name in POSITION_STATISTICS):
            break
    record(LARGEST_TV)
    return found
