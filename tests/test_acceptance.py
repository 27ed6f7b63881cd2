"""Acceptance rules, checked exactly: the law of the tokens that MTP-assisted decoding emits, computed by
enumerating every draft and every cell of the uniforms the rule reads, must equal the target's law.

The rules read each uniform only through comparisons (u < threshold) and inverse-CDF lookups, so the
outcome is piecewise constant in each uniform. Evaluating the rule at the midpoint of every cell between
candidate breakpoints (every threshold and CDF value a rule could use) and weighting by the cell widths
gives its exact output law, without trusting the formula the rule was written from.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Callable

import pytest
import torch

from harness.decoding.acceptance import (
    acceptance_probability,
    accepted_prefix,
    greedy_accept,
    residual,
    speculative_accept,
)
from harness.decoding.sampling import sample_from

V = 4
TOLERANCE = 1e-12


def _normalise(x: torch.Tensor) -> torch.Tensor:
    return x / x.sum()


class ToyModels:
    """A target p(. | prefix) and draft laws q_j(. | prefix), random but fixed, with zeros where asked."""

    def __init__(self, seed: int, p_zeros: bool, q_zeros: bool, q_one_hot: bool) -> None:
        self.generator = torch.Generator().manual_seed(seed)
        self.p_zeros, self.q_zeros, self.q_one_hot = p_zeros, q_zeros, q_one_hot
        self._p: dict[tuple, torch.Tensor] = {}
        self._q: dict[tuple, torch.Tensor] = {}

    def _random(self, zeros: bool) -> torch.Tensor:
        x = torch.rand(V, generator=self.generator, dtype=torch.float64) ** 2
        if zeros:
            x[torch.randperm(V, generator=self.generator)[: V // 2]] = 0.0
        return _normalise(x)

    def p(self, prefix: tuple[int, ...]) -> torch.Tensor:
        if prefix not in self._p:
            self._p[prefix] = self._random(self.p_zeros)
        return self._p[prefix]

    def q(self, depth: int, prefix: tuple[int, ...]) -> torch.Tensor:
        key = (depth, *prefix)
        if key not in self._q:
            law = self._random(self.q_zeros)
            if self.q_one_hot:  # a greedy draft: the MTP head's argmax, proposed with a one-hot q
                law = torch.nn.functional.one_hot(law.argmax(), V).to(torch.float64)
            self._q[key] = law
        return self._q[key]


def _cells(breakpoints: set[float]) -> list[tuple[float, float]]:
    """(midpoint, width) of the cells of [0, 1) between the breakpoints."""
    points = sorted({0.0, 1.0, *(b for b in breakpoints if 0.0 < b < 1.0)})
    return [((a + b) / 2, b - a) for a, b in itertools.pairwise(points) if b > a]


def _cdf_points(law: torch.Tensor) -> set[float]:
    total = float(law.sum())
    return {float(c) / total for c in law.cumsum(0)} if total > 0 else set()


def exact_law(rule: Callable, models: ToyModels, k: int, n_tokens: int) -> dict[tuple[int, ...], float]:
    """The exact law of the first n_tokens emitted by repeated passes of (propose k drafts, verify with rule)."""
    law: dict[tuple[int, ...], float] = defaultdict(float)
    frontier = {(): 1.0}
    while frontier:
        next_frontier: dict[tuple[int, ...], float] = defaultdict(float)
        for prefix, weight in frontier.items():
            if len(prefix) >= n_tokens:
                law[prefix[:n_tokens]] += weight
                continue
            for drafts in itertools.product(range(V), repeat=k):
                draft_weight = 1.0
                for j, x in enumerate(drafts):
                    draft_weight *= float(models.q(j, prefix + drafts[:j])[x])
                if draft_weight == 0.0:
                    continue
                p = torch.stack([models.p(prefix + drafts[:j]) for j in range(k + 1)])
                q = torch.stack([models.q(j, prefix + drafts[:j]) for j in range(k)]) if k else torch.zeros(0, V)
                test_points = [{float(p[j, x] / q[j, x]), float(p[j, x]), float(q[j, x])} for j, x in enumerate(drafts)]
                sample_points: set[float] = set()
                for j in range(k + 1):
                    sample_points |= _cdf_points(p[j])
                    if j < k:
                        sample_points |= _cdf_points(residual(p[j], q[j])) | _cdf_points(q[j])
                grids = [_cells(points) for points in test_points] + [_cells(sample_points)]
                cells = list(itertools.product(*grids))
                uniforms = torch.tensor([[mid for mid, _ in cell] for cell in cells], dtype=torch.float64)
                widths = [math.prod(w for _, w in cell) for cell in cells]
                count = len(cells)
                accepted, next_token = rule(
                    p.expand(count, -1, -1),
                    q.expand(count, -1, -1),
                    torch.tensor(drafts, dtype=torch.long).expand(count, -1),
                    uniforms,
                )
                for a, token, width in zip(accepted.tolist(), next_token.tolist(), widths, strict=True):
                    next_frontier[prefix + drafts[:a] + (token,)] += weight * draft_weight * width
        frontier = next_frontier
    return law


def target_law(models: ToyModels, n_tokens: int) -> dict[tuple[int, ...], float]:
    law = {}
    for sequence in itertools.product(range(V), repeat=n_tokens):
        probability = 1.0
        for i, token in enumerate(sequence):
            probability *= float(models.p(sequence[:i])[token])
        law[sequence] = probability
    return law


def max_difference(a: dict, b: dict) -> float:
    return max(abs(a.get(key, 0.0) - b.get(key, 0.0)) for key in set(a) | set(b))


CASES = {
    "dense p and q": dict(p_zeros=False, q_zeros=False, q_one_hot=False),
    "q with zeros": dict(p_zeros=False, q_zeros=True, q_one_hot=False),
    "p with zeros": dict(p_zeros=True, q_zeros=False, q_one_hot=False),
    "p and q with zeros": dict(p_zeros=True, q_zeros=True, q_one_hot=False),
    "one-hot q (greedy drafts)": dict(p_zeros=False, q_zeros=False, q_one_hot=True),
    "one-hot q, p with zeros": dict(p_zeros=True, q_zeros=False, q_one_hot=True),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize(("k", "n_tokens"), [(1, 3), (2, 3), (3, 3)])
def test_speculative_sampling_emits_exactly_the_target_law(case, k, n_tokens):
    models = ToyModels(seed=17 + k, **CASES[case])
    emitted = exact_law(speculative_accept, models, k, n_tokens)
    assert abs(sum(emitted.values()) - 1.0) < TOLERANCE
    assert max_difference(emitted, target_law(models, n_tokens)) < TOLERANCE


def test_when_p_equals_q_every_draft_is_accepted():
    p = _normalise(torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64))
    probabilities = acceptance_probability(p, p)
    assert torch.equal(probabilities, torch.ones(V, dtype=torch.float64))
    assert torch.equal(residual(p, p), p)  # the fallback, for a rejection that has probability 0


def test_one_hot_q_accepts_with_probability_p_and_resamples_p_without_the_draft():
    p = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    q = torch.nn.functional.one_hot(torch.tensor(2), V).to(torch.float64)
    assert acceptance_probability(p[2], q[2]) == pytest.approx(0.3, abs=1e-15)
    torch.testing.assert_close(residual(p, q), torch.tensor([0.1, 0.2, 0.0, 0.4], dtype=torch.float64) / 0.7)


def _residual_p(p, q, drafts, uniforms):
    """A broken rule: after a rejection it resamples from p instead of norm(max(p - q, 0))."""
    k = drafts.shape[1]
    p_x = p[:, :k].gather(-1, drafts[..., None]).squeeze(-1)
    q_x = q.gather(-1, drafts[..., None]).squeeze(-1)
    accepted = accepted_prefix(uniforms[:, :k] < acceptance_probability(p_x, q_x))
    rows = torch.arange(len(drafts))
    return accepted, sample_from(p[rows, accepted], uniforms[:, k])


def test_the_exact_law_exposes_a_residual_drawn_from_p():
    models = ToyModels(seed=3, **CASES["dense p and q"])
    assert max_difference(exact_law(_residual_p, models, 1, 2), target_law(models, 2)) > 1e-3


def test_greedy_accept_takes_the_argmax_prefix_and_the_targets_token_after_it():
    p = torch.nn.functional.one_hot(torch.tensor([[1, 2, 3, 0], [1, 2, 3, 0]]), V).to(torch.float64)
    drafts = torch.tensor([[1, 2, 0], [1, 2, 3]])
    accepted, next_token = greedy_accept(p, torch.zeros(2, 3, V), drafts)
    assert accepted.tolist() == [2, 3]
    assert next_token.tolist() == [3, 0]  # correction at the first mismatch; bonus after all accepted


def test_the_exact_law_separates_biased_mutant_rules_from_a_merely_slower_one():
    from harness.subjects.mutant_decoders import _speculative_with, drop_the_bonus

    models = ToyModels(seed=5, **CASES["dense p and q"])
    truth = target_law(models, 3)
    bonus_from_the_wrong_position = _speculative_with(residual, bonus_offset=1)
    accept_if_equal = _speculative_with(residual, accept_if_equal=True)
    assert max_difference(exact_law(bonus_from_the_wrong_position, models, 2, 3), truth) > 1e-3
    assert max_difference(exact_law(accept_if_equal, models, 2, 3), truth) > 1e-3
    # dropping the bonus token wastes the pass's last target distribution but keeps the law exact
    assert max_difference(exact_law(drop_the_bonus, models, 2, 3), truth) < TOLERANCE
