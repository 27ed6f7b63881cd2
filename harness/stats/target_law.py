"""The exact law of the first L generated tokens under the target model, by enumeration with pruning.

For a prompt and sampling settings, the probability of a continuation x_1..x_L is the product of the
target's processed conditionals (temperature -> top-k -> top-p, exactly as the decoders apply them):

    P(x_1..x_L) = prod_t p(x_t | prompt, x_<t)

Branches are expanded level by level; a branch whose probability falls below `prune_mass` is not
expanded, and all such mass is pooled into one OTHER cell. A continuation that reaches EOS ends there
(a shorter cell). The cells' and OTHER's probabilities sum to 1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import torch

from harness.contract.decoder import SamplingConfig
from harness.decoding.sampling import process_logits
from harness.models.loading import ModelBundle
from harness.models.teacher_forcing import target_forward

OTHER = ("<other>",)

# prefixes -> for each, the processed conditional of the next token as (token, probability) pairs and the mass of
# the tokens it does not list (0 when it lists every token of nonzero probability)
NextLaws = Callable[[Sequence[tuple[int, ...]]], Iterable[tuple[Iterable[tuple[int, float]], float]]]


@dataclass(frozen=True)
class TargetLaw:
    """cells: continuation (token ids) -> probability; `other` pools every pruned branch."""

    cells: dict[tuple[int, ...], float]
    other: float
    length: int
    prune_mass: float

    def cell_of(self, tokens: tuple[int, ...]) -> tuple:
        """The cell a sampled continuation falls into: its first `length` tokens. One outside the law's cells keeps
        them too: the goodness of fit pools it with OTHER where the law has pruned mass left, and names it where the
        law has none (an impossible draw: harness/stats/goodness_of_fit.py)."""
        return tuple(tokens[: self.length])


def target_law(
    bundle: ModelBundle,
    prompt_ids: tuple[int, ...],
    sampling: SamplingConfig,
    length: int,
    prune_mass: float = 1e-4,
    batch: int = 256,
) -> TargetLaw:
    """Enumerate the first `length` tokens' law on the harness's own copy of the target (the module docstring)."""

    def next_laws(prefixes: Sequence[tuple[int, ...]]) -> Iterable[tuple[Iterable[tuple[int, float]], float]]:
        for start in range(0, len(prefixes), batch):
            chunk = prefixes[start : start + batch]
            ids = torch.tensor([prompt_ids + prefix for prefix in chunk], device=bundle.device)
            with torch.no_grad():
                _, logits = target_forward(bundle.target, ids)
            probs = process_logits(logits[:, -1], sampling).double().cpu()
            for row in probs:
                values = row.tolist()
                yield ((token, values[token]) for token in row.nonzero().squeeze(-1).tolist()), 0.0

    return enumerate_law(next_laws, set(bundle.eos_token_ids), length, prune_mass)


def enumerate_law(next_laws: NextLaws, eos: set[int], length: int, prune_mass: float) -> TargetLaw:
    """Expand the prefixes level by level from the conditionals `next_laws` gives: a child of mass
    weight x p < prune_mass, and the unlisted rest of a conditional (each token of it below prune_mass), pool into
    OTHER; a child ending at EOS is a cell; the rest expand."""
    frontier: dict[tuple[int, ...], float] = {(): 1.0}
    cells: dict[tuple[int, ...], float] = {}
    other = 0.0
    for _ in range(length):
        prefixes = list(frontier)
        next_frontier: dict[tuple[int, ...], float] = {}
        for prefix, (listed, rest) in zip(prefixes, next_laws(prefixes), strict=True):
            weight = frontier[prefix]
            other += weight * rest
            for token, p in listed:
                mass = p * weight
                if mass < prune_mass:
                    other += mass
                elif token in eos:
                    cells[(*prefix, token)] = mass
                else:
                    next_frontier[(*prefix, token)] = mass
        frontier = next_frontier
    cells.update(frontier)
    return TargetLaw(cells, other, length, prune_mass)
