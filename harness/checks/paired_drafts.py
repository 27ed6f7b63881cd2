"""What an MTP layer drafts when some entries of its cache pair their token with a hidden state other than the
target's at the position before: the prediction a finding makes for an engine that pairs them so (llama.cpp's kept
state, docs/findings/llamacpp-draft-mtp-pairs-the-first-prompt-token-with-a-stale-hidden-state.md), from the
pairings the engine reports (harness.contract.decoder.HiddenPairing).

The checkpoint's MTP layer pairs token t_p with the target's h_{p-1} and has no entry at position 0
(harness/models/mtp_depth.py). With `paired` (position -> hidden state) and one depth reused for the later steps, as
llama.cpp's one NextN layer is, greedy drafts from L committed tokens are:

    e_p       = depth(t_p, paired[p] if p in paired else h_{p-1}) at position p, for p < L (p = 0 only when paired)
    x_1       = argmax head(e_{L-1})
    e_{L-1+s} = depth(x_s, e_{L-2+s}) at position L - 1 + s,   x_{s+1} = argmax head(e_{L-1+s})

each e computed over the entries before it (causal attention over the layer's cache), the whole sequence at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from harness.contract.decoder import HiddenPairing
from harness.models.loading import ModelBundle
from harness.models.mtp_depth import rotary_embeddings
from harness.models.teacher_forcing import causal_mask, target_forward


def pairings_in_force(pairings: Sequence[HiddenPairing], step: int) -> dict[int, tuple[float, ...]]:
    """The cache entries paired with a state of their own when the drafts of step `step` were made: each pairing up
    to that step, a later one at or below a position rewriting the cache from there on (an entry paired with the
    target's own state, hidden None, leaves nothing of its own)."""
    kept: dict[int, tuple[float, ...]] = {}
    for pairing in pairings:
        if pairing.step > step:
            break
        kept = {position: hidden for position, hidden in kept.items() if position < pairing.position}
        if pairing.hidden is not None:
            kept[pairing.position] = pairing.hidden
    return kept


def target_hidden_states(bundle: ModelBundle, sequence_ids: Sequence[int]) -> torch.Tensor:
    """h^0 [T, H] the MTP depths read, of the target over the whole sequence (causal: h_p depends on t_0..t_p only)."""
    with torch.no_grad():
        hidden, _ = target_forward(bundle.target, torch.tensor([list(sequence_ids)], device=bundle.device))
    return hidden[0]


def paired_drafts(
    bundle: ModelBundle,
    sequence_ids: Sequence[int],
    target_hidden: torch.Tensor,
    length: int,
    k: int,
    paired: Mapping[int, Sequence[float]],
) -> tuple[int, ...]:
    """k greedy drafts of `bundle`'s first MTP depth from the first `length` tokens of `sequence_ids`, its entries
    paired as `paired` says where it says, with `target_hidden` (target_hidden_states of a sequence holding those
    tokens) elsewhere (the formula in the module docstring)."""
    depth = bundle.depths[0]
    positions = [p for p in range(length) if p >= 1 or p in paired]
    rows = [
        torch.tensor(list(paired[p]), dtype=bundle.dtype, device=bundle.device) if p in paired else target_hidden[p - 1]
        for p in positions
    ]
    tokens = [sequence_ids[p] for p in positions]
    hidden = torch.stack(rows)
    drafts: list[int] = []
    with torch.no_grad():
        for _ in range(k):
            position_ids = torch.tensor([positions], device=bundle.device)
            entries = hidden[None]
            outputs = depth(
                torch.tensor([tokens], device=bundle.device),
                entries,
                rotary_embeddings(bundle.target, entries, position_ids, depth.layer_type),
                causal_mask(len(tokens), bundle.dtype, bundle.device),
                position_ids,
            )[0]
            last = outputs[-1]
            draft = int(depth.head(last).argmax())
            drafts.append(draft)
            tokens.append(draft)
            positions.append(positions[-1] + 1)
            hidden = torch.cat([hidden, last[None]])
    return tuple(drafts)
