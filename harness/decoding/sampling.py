"""Turning logits into the distribution a decoder samples from, and sampling from it with explicit randomness.

The processing order, used identically for the target (p) and for sampled drafts (q):

    before:       logit bias, min_tokens, penalties (harness/decoding/processors.py; they read each position's history)
    temperature:  logits / T                      (T = 0 means greedy: one-hot on the argmax)
    min-p:        keep tokens with softmax(l / T)[t] >= min_p * max softmax(l / T)
    top-k:        keep tokens whose logit >= the k-th largest logit (ties at the threshold are kept)
    top-p:        sort by probability, keep the smallest prefix whose mass reaches top_p (the top token always)

Sampling is by inverse CDF from a uniform u in [0, 1) that the caller draws from its own torch.Generator:
    token = min{ j : cumsum(probs)_j > u * sum(probs) }   (a token of probability 0 is never returned)
"""

from __future__ import annotations

import torch

from harness.contract.decoder import SamplingConfig
from harness.decoding.processors import TokenHistory, apply_before_temperature


def probability_dtype(dtype: torch.dtype) -> torch.dtype:
    """Probabilities are computed in at least float32 (float64 stays float64)."""
    return torch.promote_types(dtype, torch.float32)


def process_logits(logits: torch.Tensor, config: SamplingConfig, history: TokenHistory | None = None) -> torch.Tensor:
    """logits [..., V] -> probabilities [..., V] after the processors before temperature (given each position's
    `history`, where the config reads it), temperature, min-p, top-k and top-p (in that order)."""
    logits = apply_before_temperature(logits.to(probability_dtype(logits.dtype)), config, history)
    if config.is_greedy:
        return one_hot(logits.argmax(dim=-1), logits.shape[-1], logits.dtype)
    scaled = logits / config.temperature
    if config.min_p > 0.0:
        # softmax(s)[t] >= min_p * max softmax(s)  <=>  s[t] >= max s + log(min_p)
        floor = scaled.amax(dim=-1, keepdim=True) + torch.log(torch.tensor(config.min_p, dtype=scaled.dtype))
        scaled = scaled.masked_fill(scaled < floor, float("-inf"))
    if config.top_k and config.top_k < scaled.shape[-1]:
        threshold = scaled.topk(config.top_k, dim=-1).values[..., -1:]
        scaled = scaled.masked_fill(scaled < threshold, float("-inf"))
    probs = torch.softmax(scaled, dim=-1)
    if config.top_p < 1.0:
        probs = top_p_filter(probs, config.top_p)
    return probs


def top_p_filter(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Keep the smallest set of most likely tokens whose mass reaches top_p; renormalise.

    A token is kept when the mass of the tokens sorted before it is < top_p.
    """
    sorted_probs, order = probs.sort(dim=-1, descending=True, stable=True)
    mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs
    keep_sorted = mass_before < top_p
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    kept = probs * keep
    return kept / kept.sum(dim=-1, keepdim=True)


def raw_logprobs(logits: torch.Tensor) -> torch.Tensor:
    """The target's raw log-probabilities [..., V]: log_softmax of its logits before any processing (what a request's
    `logprobs` reports)."""
    return torch.log_softmax(logits.to(probability_dtype(logits.dtype)), dim=-1)


def one_hot(tokens: torch.Tensor, vocab_size: int, dtype: torch.dtype) -> torch.Tensor:
    """tokens [...] -> one-hot distributions [..., V]."""
    return torch.nn.functional.one_hot(tokens, vocab_size).to(dtype)


def sample_from(probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF sample: probs [..., V] (need not be normalised), uniforms [...] in [0, 1) -> tokens [...]."""
    cdf = probs.cumsum(dim=-1)
    target = (uniforms.to(cdf.dtype) * cdf[..., -1]).unsqueeze(-1)
    tokens = torch.searchsorted(cdf, target, right=True).squeeze(-1)
    return tokens.clamp(max=probs.shape[-1] - 1)


def uniforms(generators: list[torch.Generator], count: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """[len(generators), count] uniforms in [0, 1), row b drawn from generators[b] (per-request RNG isolation)."""
    if not generators:
        return torch.empty(0, count, dtype=dtype)
    return torch.stack([torch.rand(count, generator=g, dtype=dtype, device=g.device) for g in generators])
