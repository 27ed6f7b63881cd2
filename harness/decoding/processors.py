"""The request's logit processors that come before temperature (SamplingConfig's order), as pure functions of the
raw logits l [..., V] and the history of each position:

    logit bias:          l[t] += bias[t]
    min_tokens:          l[e] = -inf for every EOS id e while n < min_tokens, n = the tokens generated before
    repetition (r):      l[t] = l[t] / r if l[t] > 0 else l[t] * r, for every t in the prompt or the output before
    frequency (f), presence (a):
                         l[t] -= f * c[t] + a * [c[t] > 0], c[t] = how often t occurs in the output before

"The output before" a position is what a target-only decoder has generated when it decodes that position: for the
verification of drafts x_1..x_k after committed output o, the position of x_j reads o + x_1..x_{j-1} (it is only
used if those drafts are accepted); rejected drafts never count. Bias and min_tokens mask tokens with -inf and
finite values; a processed logit of -inf has probability 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from harness.contract.decoder import SamplingConfig


@dataclass(frozen=True)
class TokenHistory:
    """What the history-reading processors see at each position, for logits [..., V]:
    output_counts [..., V]  c: each token's count in the output before the position
    generated [...]         n: the tokens generated before the position
    in_prompt [B, V] bool   the tokens of the row's prompt (broadcast over the positions between B and V)
    eos [B, V] bool         the row's EOS ids (the same broadcast)"""

    output_counts: torch.Tensor
    generated: torch.Tensor
    in_prompt: torch.Tensor
    eos: torch.Tensor


def prefix_drafts(drafts: torch.Tensor, drafted: torch.Tensor) -> torch.Tensor:
    """[B, k+1, k] bool: draft i is in the output before verification position j exactly when i < j (and real)."""
    k = drafts.shape[1]
    before = torch.ones(k + 1, k, dtype=torch.bool, device=drafts.device).tril(-1)
    real = torch.arange(k, device=drafts.device)[None, :] < drafted[:, None]
    return before[None] & real[:, None, :]


# (drafts [B, k], drafts each row proposed [B]) -> [B, k+1, k] bool: the drafts in the output before each position
CountedDrafts = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def history_of_positions(
    history: TokenHistory, drafts: torch.Tensor, drafted: torch.Tensor, counted: CountedDrafts
) -> TokenHistory:
    """`history` [B, V] extended to the k + 1 verification positions: counted(drafts, drafted) [B, k+1, k] says which
    drafts are in the output before each position."""
    vocab = history.output_counts.shape[-1]
    included = counted(drafts, drafted).to(history.output_counts.dtype)  # [B, k+1, k]
    one_hot = torch.nn.functional.one_hot(drafts, vocab).to(history.output_counts.dtype)  # [B, k, V]
    counts = history.output_counts[:, None, :] + included @ one_hot
    generated = history.generated[:, None] + included.sum(-1).long()
    return TokenHistory(counts, generated, history.in_prompt, history.eos)


def history_of_sequences(
    sequence: torch.Tensor,
    prompt_lengths: torch.Tensor,
    lengths: torch.Tensor,
    eos_table: torch.Tensor,
    vocab_size: int,
    count_dtype: torch.dtype,
) -> TokenHistory:
    """The history at the next position of each row of committed tokens `sequence` [B, W] (prompt, then output, up to
    `lengths`), EOS ids `eos_table` [B, E] (-1: none)."""
    columns = torch.arange(sequence.shape[1], device=sequence.device)[None, :]
    in_output = (columns >= prompt_lengths[:, None]) & (columns < lengths[:, None])
    counts = torch.zeros(sequence.shape[0], vocab_size, dtype=count_dtype, device=sequence.device)
    counts.scatter_add_(1, sequence, in_output.to(count_dtype))
    prompt_counts = torch.zeros(sequence.shape[0], vocab_size, dtype=torch.long, device=sequence.device)
    prompt_counts.scatter_add_(1, sequence, (columns < prompt_lengths[:, None]).long())
    in_prompt = prompt_counts > 0
    eos = torch.zeros(sequence.shape[0], vocab_size + 1, dtype=torch.bool, device=sequence.device)
    eos.scatter_(1, torch.where(eos_table < 0, vocab_size, eos_table), True)
    return TokenHistory(counts, lengths - prompt_lengths, in_prompt, eos[:, :vocab_size])


def bias_vector(config: SamplingConfig, vocab_size: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """bias [V]: the request's logit_bias, 0 elsewhere."""
    bias = torch.zeros(vocab_size, dtype=dtype, device=device)
    if config.logit_bias:
        tokens, values = zip(*config.logit_bias, strict=True)
        bias[list(tokens)] = torch.tensor(values, dtype=dtype, device=device)
    return bias


def broadcast_rows(mask: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """A per-row [B, V] tensor shaped to broadcast over logits [B, ..., V]."""
    return mask.reshape(mask.shape[0], *([1] * (logits.dim() - 2)), mask.shape[-1])


def apply_before_temperature(
    logits: torch.Tensor, config: SamplingConfig, history: TokenHistory | None
) -> torch.Tensor:
    """The logit bias, min_tokens and the penalties on logits [..., V] (the module docstring's formulas)."""
    if config.logit_bias:
        logits = logits + bias_vector(config, logits.shape[-1], logits.dtype, logits.device)
    if not config.reads_history:
        return logits
    if history is None:
        raise ValueError("penalties and min_tokens need the history of every position (TokenHistory)")
    if config.min_tokens:
        too_early = (history.generated < config.min_tokens)[..., None] & broadcast_rows(history.eos, logits)
        logits = logits.masked_fill(too_early, float("-inf"))
    counts = history.output_counts.to(logits.dtype)
    if config.repetition_penalty != 1.0:
        seen = (counts > 0) | broadcast_rows(history.in_prompt, logits)
        r = config.repetition_penalty
        logits = torch.where(seen, torch.where(logits > 0, logits / r, logits * r), logits)
    if config.frequency_penalty or config.presence_penalty:
        logits = logits - config.frequency_penalty * counts - config.presence_penalty * (counts > 0).to(logits.dtype)
    return logits
