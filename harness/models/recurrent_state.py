"""The state of a batch's recurrent (linear-attention) layers, kept at each row's committed tokens.

A KV cache is rolled back by dropping the entries of rejected drafts. A recurrent layer cannot be: every
token it reads is folded into one state (harness/models/gated_deltanet.py). So each forward pass records the
layer's state after each of its T inputs (T + 1 states, the first being the one it started from), as vLLM
keeps one state slot per draft position, and the rollback picks, per row, the state after the last input
it keeps. Only the latest pass can be rolled back: earlier passes' inputs are all committed.

    after a forward:   state[row] = trail[row, n_valid(row)]       (right padding never enters the state)
    after a rollback:  state[row] = trail[row, n_kept(row)]        n_kept = inputs of the pass at positions
                                                                   below the row's limit

The records live on the transformers cache object the model is run with (`layer_states(cache)`), keyed by
layer index, beside the KV layers of the full-attention layers.

transformers >= 5.25 also counts, on each linear-attention layer of its cache, the tokens it has read
(`cumulative_length_linear`): `Cache.get_seq_length()` reads layer 0, on Qwen3-Next a linear-attention layer, and
the model's default position ids start from it. transformers advances the count in its own conv-state update and
rewinds it in `crop`; the harness replaces both, so it keeps the count itself (`advance_token_count`):

    after a forward of T inputs:       count += T        (transformers' `update_conv_state`, padding included)
    after dropping n slots of a row:   count -= n        (transformers' `crop(-n)`; harness/decoding/slots.py)

so the count equals the slots of the attention layers of the same cache, as `get_seq_length()` read them in 5.24
(which has no count: it skipped linear-attention layers to the first attention layer).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from harness.contract.errors import HarnessError

STATES_ATTRIBUTE = "mtp_harness_recurrent_states"
TOKEN_COUNT_ATTRIBUTE = "cumulative_length_linear"  # transformers >= 5.25, LinearAttentionCacheLayerMixin
# (inputs of the latest pass kept per row [B], its valid inputs per row [B]) -> (index into the conv trail,
# index into the recurrent trail) per row: which recorded state each row resumes from
RestoreRule = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


def restore_after_kept_inputs(kept: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The correct rule: both states resume after the last kept input."""
    return kept, kept


@dataclass
class LayerState:
    """One linear-attention layer's state for a batch, and the states its latest forward passed through."""

    conv: torch.Tensor  # [B, C, K]: the last K inputs of the causal convolution (zeros before the first)
    recurrent: torch.Tensor  # [B, heads, d_k, d_v]
    conv_trail: torch.Tensor  # [B, T + 1, C, K]: after 0..T inputs of the latest forward
    recurrent_trail: torch.Tensor  # [B, T + 1, heads, d_k, d_v]

    def resume_from(self, conv_index: torch.Tensor, recurrent_index: torch.Tensor) -> None:
        rows = torch.arange(self.conv.shape[0], device=self.conv.device)
        self.conv = self.conv_trail[rows, conv_index]
        self.recurrent = self.recurrent_trail[rows, recurrent_index]

    def select_rows(self, keep: torch.Tensor) -> None:
        self.conv, self.recurrent = self.conv[keep], self.recurrent[keep]
        self.conv_trail, self.recurrent_trail = self.conv_trail[keep], self.recurrent_trail[keep]


def layer_states(cache: object) -> dict[int, LayerState]:
    """The recurrent layers' states stored on a transformers cache object (created empty on first use)."""
    states = getattr(cache, STATES_ATTRIBUTE, None)
    if states is None:
        states = {}
        setattr(cache, STATES_ATTRIBUTE, states)
    return states


def token_count(cache: object, layer: int) -> torch.Tensor | None:
    """The 0-d tensor in which transformers counts the tokens linear-attention layer `layer` of `cache` has read
    (>= 5.25), or None where it keeps none: transformers 5.24, an attention layer, a layer not created yet."""
    layers = getattr(cache, "layers", ())
    count = getattr(layers[layer], TOKEN_COUNT_ATTRIBUTE, None) if layer < len(layers) else None
    return count if isinstance(count, torch.Tensor) else None


def advance_token_count(cache: object, layer: int, tokens: int) -> None:
    """count += tokens (negative: a rollback) where transformers keeps a count for the layer; in place, as
    transformers' own `add_`/`sub_` (the count may be a static address for CUDA graphs)."""
    count = token_count(cache, layer)
    if count is not None:
        count.add_(tokens)


class RecurrentRows:
    """Per-row restore of the recurrent layers of one cache: after each forward and at each rollback."""

    def __init__(self, cache: object) -> None:
        self.cache = cache
        self.pass_positions: torch.Tensor | None = None  # [B, T] of the latest forward
        self.pass_valid: torch.Tensor | None = None

    @property
    def states(self) -> dict[int, LayerState]:
        return layer_states(self.cache)

    def appended(self, positions: torch.Tensor, valid: torch.Tensor) -> None:
        """After a forward over [B, T] inputs: each row resumes after its valid inputs (a prefix of the row)."""
        if not self.states:
            return
        counts = valid.sum(dim=1)
        prefix = torch.arange(valid.shape[1], device=valid.device)[None, :] < counts[:, None]
        if not bool((prefix == valid).all()):
            raise HarnessError("recurrent layers need each row's valid inputs to come first (right padding)")
        self.pass_positions, self.pass_valid = positions, valid
        for state in self.states.values():
            state.resume_from(counts, counts)

    def keep_below(self, limit: torch.Tensor, rule: RestoreRule = restore_after_kept_inputs) -> None:
        """Roll back every input of the latest forward at a position >= limit[row]."""
        if not self.states or self.pass_valid is None or self.pass_positions is None:
            return
        kept_inputs = self.pass_valid & (self.pass_positions < limit[:, None])
        first = torch.where(self.pass_valid, self.pass_positions, torch.iinfo(torch.long).max).min(dim=1).values
        if bool((self.pass_valid.any(dim=1) & (limit < first)).any()):
            raise HarnessError("a recurrent state can be rolled back only within the latest forward pass")
        conv_index, recurrent_index = rule(kept_inputs.sum(dim=1), self.pass_valid.sum(dim=1))
        for state in self.states.values():
            state.resume_from(conv_index, recurrent_index)

    def select_rows(self, keep: torch.Tensor) -> None:
        for state in self.states.values():
            state.select_rows(keep)
        if self.pass_valid is not None and self.pass_positions is not None:
            self.pass_valid, self.pass_positions = self.pass_valid[keep], self.pass_positions[keep]

    def row_view(self, row: int) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
        """Per recurrent layer index: (conv state [C, K], recurrent state [heads, d_k, d_v]) of `row`."""
        return {layer: (state.conv[row], state.recurrent[row]) for layer, state in sorted(self.states.items())}
