"""The per-token terms of the whole-sequence statistics (harness/stats/sequence.py has the formulas and the tests
built on them): the probability-ordered PIT's parts, the centred log-likelihood with its variance, and the cumulant
table of the saddlepoint p-value. Pure torch, importing nothing else of the harness, so that an engine's own process
computes them from the full logits it holds (harness/subjects/engines/vllm/scoring.py): vLLM's environment has torch
and numpy, not scipy."""

from __future__ import annotations

import torch

SADDLE_GRID = torch.linspace(-0.6, 0.6, 33, dtype=torch.float64)  # s values where K, K', K'' are tabulated


def pit_parts(probs: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(P(tokens ranked before x), p(x)), tokens ranked by probability, largest first (ties: lower id first).
    probs [..., V], tokens [...] (long) -> two [...]."""
    p_of_token = probs.gather(-1, tokens[..., None]).squeeze(-1)
    token_ids = torch.arange(probs.shape[-1], device=probs.device)
    ahead = (probs > p_of_token[..., None]) | ((probs == p_of_token[..., None]) & (token_ids < tokens[..., None]))
    return (probs * ahead).sum(-1), p_of_token


def probability_ordered_pit(probs: torch.Tensor, tokens: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """u = P(tokens ranked before x) + V p(x) (pit_parts). probs [..., V], tokens [...] (long), uniforms [...] ->
    u [...]."""
    before, p_of_token = pit_parts(probs, tokens)
    return pit_from_parts(before, p_of_token, uniforms)


def pit_from_parts(before: torch.Tensor, p_of_token: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """u = before + V p(x), V ~ U(0, 1) (clamped to [0, 1] against rounding)."""
    return (before + uniforms * p_of_token).clamp(0.0, 1.0)


def log_likelihood_terms(probs: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(l - mu, s2) per token: the centred log-likelihood of x and its exact conditional variance."""
    log_p = torch.log(probs.clamp_min(torch.finfo(probs.dtype).tiny))
    mean = torch.xlogy(probs, probs).sum(-1)  # sum p log p (0 log 0 = 0)
    second = (probs * log_p * log_p).sum(-1)
    centred = log_p.gather(-1, tokens[..., None]).squeeze(-1) - mean
    return centred, (second - mean * mean).clamp_min(0.0)


def cumulants(probs: torch.Tensor, grid: torch.Tensor = SADDLE_GRID) -> torch.Tensor:
    """[..., G, 3]: K(s), K'(s), K''(s) at each s of the grid for X = log p(x) - mu, x ~ p (per context).
    The tilted law q_s is proportional to p^(1 + s): K = log sum p^(1+s) - s mu, K' = E_q[log p] - mu,
    K'' = Var_q[log p]. Computed in float32 (a float64 exp is ~7x slower here), returned as float64, with the
    constraints K(0) = K'(0) = 0 made exact: K(s) - K(0) - s K'(0) and K'(s) - K'(0). Each context's float32 K is
    off by ~1e-7, mostly its law's rounding away from a sum of 1; summed over the tens of thousands of terms of
    a whole-sequence case that error (0.003 over 65,000) exceeded K(s_hat) near the mean, and Lugannani-Rice gave
    anything in [0, 1] (0.08 for a true 0.90 at Z = 0.12; 0 on llama.cpp's samples of tiny-glm4-moe at Z = 0.16:
    tests/test_stats.py).
    One exp per grid point: with m = max log p and 1 + s > 0 on the grid, the weights w = exp((1 + s)(log p - m))
    are in (0, 1] (1 at the mode: no overflow), W = sum w, log sum p^(1+s) = log W + (1 + s) m, and
    E_q[f] = sum w f / W: logsumexp's arithmetic without its second exp pass (2.2x faster on 1,500 contexts of 1,024
    tokens, with errors against float64 no larger: docs/measurements/speed.md)."""
    if bool((grid <= -1).any()):
        raise ValueError("the saddlepoint grid needs 1 + s > 0 at every s")
    probs = probs.float()
    support = probs > 0
    log_p = torch.where(support, torch.log(probs.clamp_min(torch.finfo(probs.dtype).tiny)), torch.zeros_like(probs))
    mean = (probs * log_p).sum(-1)
    log_p_or_minus_inf = log_p.masked_fill(~support, -torch.inf)  # (1 + s) (-inf) = -inf: off the support for any s
    mode = log_p_or_minus_inf.amax(-1, keepdim=True)
    below_mode = log_p_or_minus_inf - mode
    log_p_squared = log_p * log_p
    tables = []
    for s in grid.tolist():
        weights = torch.exp((1 + s) * below_mode)
        total = weights.sum(-1)
        log_total = torch.log(total) + (1 + s) * mode.squeeze(-1)
        first = (weights * log_p).sum(-1) / total
        second = (weights * log_p_squared).sum(-1) / total - first * first
        tables.append(torch.stack([log_total - s * mean, first - mean, second.clamp_min(0.0)], dim=-1))
    table = torch.stack(tables, dim=-2).double()
    s = grid.to(table)
    [zero] = torch.nonzero(s == 0).flatten().tolist()  # the grid holds s = 0
    k0, k1_0 = table[..., zero : zero + 1, 0], table[..., zero : zero + 1, 1]
    return torch.stack([table[..., 0] - k0 - s * k1_0, table[..., 1] - k1_0, table[..., 2]], dim=-1)
