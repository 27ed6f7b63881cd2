"""The whole-sequence case's power table on the default fixture: the smallest single-position TV shift each of
its statistics detects with power 0.99, simulated (harness/stats/position_power.py) on the fixture's own
target conditionals along target-sampled continuations.

    python -m harness.mutation.power_table
"""

from __future__ import annotations

import torch

from harness.checks.sampling_cases import PIT_LENGTH, case_grid, family_size, target_conditionals
from harness.contract.budget import BUDGETS
from harness.models.loading import bundle_for
from harness.models.prompts import load_prompts
from harness.stats.multiple_testing import FAMILY_ALPHA
from harness.stats.position_power import LARGEST_TV, SHAPES, smallest_detected_tv
from harness.stats.power import ks_sample_size
from harness.stats.sequence import log_likelihood_terms


def fixture_case_laws(budget: str, positions: tuple[int, ...], seed: int) -> tuple[torch.Tensor, torch.Tensor, float]:
    """The whole-sequence cases' prompt and sampling settings on the default fixture (float64), with the
    budget's sequence count n of target-sampled continuations: the target's conditionals at `positions`
    [n, len(positions), V], the log-likelihood variance summed per output position [PIT_LENGTH], and the
    per-test alpha of the whole grid's family."""
    bundle = bundle_for("tiny-deepseek-v3", "cpu", "float64")
    case = next(c for c in case_grid() if c.kind == "pit")
    prompt_ids = tuple(next(p for p in load_prompts() if p.id == case.prompt_id).encode(bundle.tokenizer))
    alpha = FAMILY_ALPHA / family_size(case_grid())
    n = ks_sample_size(BUDGETS[budget].position_tv, alpha)
    laws, variance = [], torch.zeros(PIT_LENGTH, dtype=torch.float64)
    for probs in target_conditionals(bundle, prompt_ids, case.sampling, n, seed=seed):
        laws.append(probs[:, list(positions)])
        variance += log_likelihood_terms(probs, probs.argmax(-1))[1].sum(0)  # s2 does not depend on the token
    return torch.cat(laws), variance, alpha


def main() -> None:
    """Print, for the ci and full budgets, the smallest single-position TV each whole-sequence statistic of
    the PIT case detects at power 0.99 (200 runs per grid point), at the last output position."""
    position = PIT_LENGTH - 1  # the last token (contexts differ little between positions)
    for budget in ("ci", "full"):
        laws, variance, alpha = fixture_case_laws(budget, (position,), seed=1)
        other = float(variance.sum() - variance[position])
        for shape in SHAPES:
            found = smallest_detected_tv(laws[:, 0], other, PIT_LENGTH, shape, alpha, 200, seed=position)
            cells = ", ".join(
                f"{name} {value if value is not None else f'> {LARGEST_TV}'}" for name, value in found.items()
            )
            print(f"{budget} (n = {laws.shape[0]}) position {position} {shape}: {cells}", flush=True)


if __name__ == "__main__":
    main()
