"""Acceptance rules: pure functions from (target p, draft q, drafts, uniforms) to (accepted count, next token).

Notation: p is the target's processed distribution, q the draft's (Leviathan et al.; transformers).
Shapes: B rows, k drafts, V vocab.
    p         [B, k+1, V]   p[:, j] is the target's distribution for the position of draft j; p[:, k] the bonus
    q         [B, k, V]     the law each draft was drawn from (one-hot for greedy or forced drafts)
    drafts    [B, k]
    uniforms  [B, k+1]      drawn by the caller from each request's own generator: u[:, j] tests draft j,
                            u[:, k] samples the correction (or bonus) token
Returns accepted [B] (drafts 0..accepted-1 accepted) and next_token [B] (the target's own token).

Speculative sampling (Leviathan et al. 2023, Chen et al. 2023), exact for any q the draft was drawn from:
    accept draft x with probability min(1, p(x) / q(x))
    on the first rejection, sample from the residual norm(max(p - q, 0))
    if all k are accepted, sample a bonus token from p at position k+1
With a one-hot q (greedy or forced draft) this accepts x with probability p(x), and on rejection samples
from p with x removed, renormalised.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from harness.decoding.sampling import sample_from


class AcceptanceRule(Protocol):
    def __call__(
        self, p: torch.Tensor, q: torch.Tensor, drafts: torch.Tensor, uniforms: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]: ...


@dataclass(frozen=True)
class PassPlace:
    """Where a verification pass sits, per row [B]: the sequence index of its first new token (the prompt
    included: KV block boundaries are multiples of the block size there) and the tokens it may still emit
    before max_new_tokens. The correct rules ignore it; a rule with `positioned = True` is handed it (the
    mutants whose error depends on the position: harness/subjects/mutant_decoders.py)."""

    first_index: torch.Tensor
    remaining: torch.Tensor


def accepted_prefix(accepts: torch.Tensor) -> torch.Tensor:
    """accepts [B, k] bool -> length of the all-True prefix [B]."""
    return accepts.long().cumprod(dim=-1).sum(dim=-1)


def greedy_accept(
    p: torch.Tensor, q: torch.Tensor, drafts: torch.Tensor, uniforms: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy verification: accept drafts while each equals argmax p; the next token is argmax p there."""
    target_tokens = p.argmax(dim=-1)  # [B, k+1]
    k = drafts.shape[1]
    accepted = accepted_prefix(target_tokens[:, :k] == drafts)
    return accepted, target_tokens.gather(1, accepted[:, None]).squeeze(1)


def acceptance_probability(p_of_draft: torch.Tensor, q_of_draft: torch.Tensor) -> torch.Tensor:
    """min(1, p(x) / q(x)) for drafts x drawn from q (so q(x) > 0)."""
    return torch.clamp(p_of_draft / q_of_draft, max=1.0)


def residual(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """norm(max(p - q, 0)) over the last axis. With q = 0 this is p itself (the bonus distribution).

    When p <= q everywhere (p == q up to rounding), rejection had probability 0; fall back to p.
    """
    excess = torch.clamp(p - q, min=0.0)
    mass = excess.sum(dim=-1, keepdim=True)
    return torch.where(mass > 0, excess / mass.clamp(min=torch.finfo(p.dtype).tiny), p)


def speculative_accept(
    p: torch.Tensor, q: torch.Tensor, drafts: torch.Tensor, uniforms: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Distribution-preserving verification of k drafts (see the module docstring)."""
    if uniforms is None:
        raise ValueError("speculative_accept needs uniforms [B, k+1] drawn from each request's generator")
    batch, k = drafts.shape
    p_of_draft = p[:, :k].gather(-1, drafts[..., None]).squeeze(-1)
    q_of_draft = q.gather(-1, drafts[..., None]).squeeze(-1)
    # u < min(1, p/q): accept; u is uniform in [0, 1), so probability exactly min(1, p/q)
    accepted = accepted_prefix(uniforms[:, :k] < acceptance_probability(p_of_draft, q_of_draft))
    rows = torch.arange(batch, device=p.device)
    # q beyond the last draft is 0, so the residual at position k is p itself: the bonus token
    q_padded = torch.cat([q, torch.zeros_like(q[:, :1])], dim=1)
    correction = residual(p[rows, accepted], q_padded[rows, accepted])
    return accepted, sample_from(correction, uniforms[:, k])
