"""The MTP proposer: chains the MTP depths to propose k drafts, and keeps each depth's cache committed.

Indexing (as in harness/models/mtp_depth.py): depth d at index i reads h^{d-1}_i and token t_{i+d}, at position
i + d, and predicts t_{i+d+1}. With L committed tokens (t_0 .. t_{L-1}), a pass drafts position L:

    step s = 1..min(k, D): depth s runs on every index it has not committed yet, up to i = L-2.
        Its tokens t_{i+s} are committed for i + s <= L-1, drafts x_{i+s-L+1} beyond. The output at
        i = L-2 gives q_s and draft x_s for position L-1+s.
    step s > D: the last depth again (as vLLM does), one index further: token x_{s-1}, hidden = the
        previous step's output, position L-2+s.

An entry is committed when its token position is < L (all its inputs were committed when it was made).
After the target verified the drafts, `commit` keeps exactly those and drops the rest (rollback), so
the next pass starts from what depth d would compute from scratch on the committed prefix. Committed
outputs h^d that depth d+1 has not consumed yet are carried in `pending[d]`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from transformers import DynamicCache

from harness.decoding.forward import depth_pass, once_per_distinct_row
from harness.decoding.slots import RaggedBuffer, SlotCache
from harness.models.loading import ModelBundle

NO_LIMIT = 2**62  # keep_below limit for rows that did not take part in a pass

# (step s, logits [B, V] of the draft position) -> (draft tokens [B], their law q [B, V])
DraftChooser = Callable[[int, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


class MTPProposer:
    """Drafts with the bundle's MTP depths; one instance per batch being decoded."""

    def __init__(self, bundle: ModelBundle, batch: int) -> None:
        self.bundle = bundle
        self.num_depths = len(bundle.depths)
        device = bundle.device
        cache = DynamicCache()
        self.slots = [SlotCache(cache, [d], batch, device) for d in range(self.num_depths)]
        # next_index[d]: entries depth d+1 has committed, i.e. its next index to compute
        self.next_index = [torch.zeros(batch, dtype=torch.long, device=device) for _ in range(self.num_depths)]
        hidden = bundle.config.hidden_size
        # pending[e]: committed h^e for indices next_index[e] .. (input to depth e+1)
        self.pending = [RaggedBuffer(batch, hidden, bundle.dtype, device) for _ in range(self.num_depths)]
        self._chunks: list[RaggedBuffer] = []  # this pass's output of each depth that ran, for commit
        self._steps_run = 0

    def add_target_hidden(self, hidden: torch.Tensor, lengths: torch.Tensor) -> None:
        """Append committed target hidden states h^0 (first lengths[row] of hidden [B, M, H])."""
        self.pending[0] = self.pending[0].concat(hidden, lengths)

    def select_rows(self, keep: torch.Tensor) -> None:
        """Keep only the rows `keep` (between passes)."""
        for slots in self.slots:
            slots.select_rows(keep)
        self.next_index = [index[keep] for index in self.next_index]
        self.pending = [buffer.select_rows(keep) for buffer in self.pending]

    def propose(
        self, sequence: torch.Tensor, lengths: torch.Tensor, active: torch.Tensor, k: int, choose: DraftChooser
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Propose k drafts per row. sequence [B, T]: committed tokens (T >= max(lengths) + k);
        lengths [B]: L per row (>= 2 for active rows). Returns drafts [B, k] and q [B, k, V]."""
        batch = sequence.shape[0]
        rows = torch.arange(batch, device=sequence.device)
        sequence = sequence.clone()
        drafts, laws = [], []
        self._chunks = []
        previous_chunk: RaggedBuffer | None = None
        last_hidden = None
        for step in range(1, k + 1):
            if step <= self.num_depths:
                d = step - 1
                start = self.next_index[d]
                count = torch.where(active, lengths - 1 - start, 0).clamp(min=0)
                inputs = (
                    self.pending[d]
                    if previous_chunk is None
                    else self.pending[d].concat(previous_chunk.data, previous_chunk.lengths)
                )
                width = int(count.max())
                columns = torch.arange(width, device=sequence.device)[None, :]
                valid = columns < count[:, None]
                indices = start[:, None] + columns
                positions = indices + step
                tokens = sequence.gather(1, positions.clamp(max=sequence.shape[1] - 1))
                hidden_in = inputs.data[:, :width] if inputs.data.shape[1] >= width else _pad(inputs.data, width)
                out_hidden = once_per_distinct_row(  # while depth d holds nothing, equal rows run once
                    self.slots[d],
                    lambda *inputs, d=d: depth_pass(self.bundle, d, self.slots[d], *inputs),
                    torch.where(valid, tokens, 0),
                    hidden_in,
                    positions,
                    valid,
                )
                draft_at = (count - 1).clamp(min=0)
                last_hidden = out_hidden[rows, draft_at]
                tokens_s, q_s = choose(step, self.bundle.depths[d].head(last_hidden))
                previous_chunk = RaggedBuffer.from_tensor(out_hidden, count)
                self._chunks.append(previous_chunk)
            else:
                d = self.num_depths - 1
                positions = (lengths - 2 + step)[:, None]
                token = sequence.gather(1, positions.clamp(max=sequence.shape[1] - 1))
                last_hidden = depth_pass(
                    self.bundle, d, self.slots[d], token, last_hidden[:, None], positions, active[:, None]
                )[:, 0]
                tokens_s, q_s = choose(step, self.bundle.depths[d].head(last_hidden))
            write_at = (lengths - 1 + step).clamp(max=sequence.shape[1] - 1)
            sequence[rows, write_at] = torch.where(active, tokens_s, sequence[rows, write_at])
            drafts.append(tokens_s)
            laws.append(q_s)
        self._steps_run = min(k, self.num_depths)
        return torch.stack(drafts, dim=1), torch.stack(laws, dim=1)

    def commit(self, lengths: torch.Tensor, active: torch.Tensor) -> None:
        """After verification: keep only entries made from committed inputs (token position < L, the committed
        length when the pass began); carry forward the committed outputs the next depth has not consumed."""
        ran = self._steps_run
        new_index = [
            torch.where(active, (lengths - (d + 1)).clamp(min=0), self.next_index[d]) if d < ran else self.next_index[d]
            for d in range(self.num_depths)
        ]
        for d in range(ran):
            self.rollback_depth(d, torch.where(active, lengths, NO_LIMIT))
        # level 0 (target hidden): depth 1 consumed everything pending up to L-2
        if ran >= 1:
            self.pending[0] = self.pending[0].slice(new_index[0] - self.next_index[0], self.pending[0].lengths)
        # level e >= 1 (depth e's output): committed outputs end at new_index[e-1]
        for e in range(1, min(ran + 1, self.num_depths)):
            source = self.pending[e].concat(self._chunks[e - 1].data, self._chunks[e - 1].lengths)
            base = self.next_index[e]
            self.pending[e] = self.carry(source, new_index[e] - base, new_index[e - 1] - base)
        self.next_index = new_index
        self._chunks = []

    def rollback_depth(self, d: int, limit: torch.Tensor) -> None:
        """Drop depth d's entries whose token position is >= limit (made from a draft)."""
        self.slots[d].keep_below(limit)

    def carry(self, outputs: RaggedBuffer, start: torch.Tensor, stop: torch.Tensor) -> RaggedBuffer:
        """The committed outputs [start, stop) (per row, relative to `outputs`) the next depth will read."""
        return outputs.slice(start, stop)


def _pad(data: torch.Tensor, width: int) -> torch.Tensor:
    """Right-pad [B, W, H] with zeros to [B, width, H]."""
    return torch.nn.functional.pad(data, (0, 0, 0, width - data.shape[1]))
