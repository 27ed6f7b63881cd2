"""Batched KV caches with ragged per-row state: slots, their positions, and which are valid.

A forward pass appends the same number of slots to every row of a transformers `DynamicCache`. Rows
differ in how many of them they keep (ragged acceptance), so instead of cropping per row we keep a
validity mask and the position id of every slot, and build the attention mask from them:

    query at position t may attend slot s  <=>  valid[s] and position[s] <= t

A rejected draft is rolled back by invalidating its slots; slots invalid in every row at the tail are cropped, and once
the dead slots outnumber the live ones of the fullest row, every row's valid slots move to the front, in their order
(compact): without it a k = 4 whole-sequence case attended over about 230 slots per row to use 54 (tiny-deepseek-v3, T =
1: about 1.3 tokens per pass of 5). Masked slots get weight exp(finfo.min - max) = 0 exactly, so a row's attention is
what it would be with those slots absent. Recurrent (linear-attention) layers of the same cache are restored per row
instead (harness/models/recurrent_state.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import DynamicCache

from harness.models.recurrent_state import RecurrentRows, RestoreRule, advance_token_count, restore_after_kept_inputs

# Serving engines page their KV caches in blocks of KV_BLOCK tokens (vLLM's default block_size). The slot caches
# here are not paged; the number says where a paged-cache bug would show: at the first token of a block.
KV_BLOCK = 16
COMPACT_SLACK = 16  # dead slots tolerated beyond the live ones before a compaction (it copies every layer's cache)


class SlotCache:
    """Slot bookkeeping for some layers of a DynamicCache (the target's layers, or one MTP depth's)."""

    def __init__(self, cache: DynamicCache, layers: Sequence[int], batch: int, device: torch.device) -> None:
        self.cache = cache
        self.layers = tuple(layers)
        self.valid = torch.zeros(batch, 0, dtype=torch.bool, device=device)
        self.positions = torch.zeros(batch, 0, dtype=torch.long, device=device)
        self.recurrent = RecurrentRows(cache)

    @property
    def num_slots(self) -> int:
        return self.valid.shape[1]

    def attention_mask(
        self, query_positions: torch.Tensor, query_valid: torch.Tensor, dtype: torch.dtype
    ) -> torch.Tensor:
        """Additive mask [B, 1, Q, S + Q] for queries that will be appended as the next Q slots."""
        key_valid = torch.cat([self.valid, query_valid], dim=1)
        key_positions = torch.cat([self.positions, query_positions], dim=1)
        allowed = key_valid[:, None, :] & (key_positions[:, None, :] <= query_positions[:, :, None])
        mask = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
        return mask.masked_fill(~allowed, torch.finfo(dtype).min)[:, None]

    def appended(self, query_positions: torch.Tensor, query_valid: torch.Tensor) -> None:
        """Record the Q slots the forward pass just appended."""
        self.valid = torch.cat([self.valid, query_valid], dim=1)
        self.positions = torch.cat([self.positions, query_positions], dim=1)
        self.recurrent.appended(query_positions, query_valid)

    def keep_below(self, limit: torch.Tensor, recurrent_rule: RestoreRule = restore_after_kept_inputs) -> None:
        """Invalidate every slot whose position is >= limit[row] (rollback), then crop the dead tail; restore
        each recurrent layer to the state after the row's last kept input (recurrent_rule)."""
        self.valid &= self.positions < limit[:, None]
        self.trim()
        if self.num_slots > 2 * self.widest_row() + COMPACT_SLACK:
            self.compact()
        self.recurrent.keep_below(limit, recurrent_rule)

    def widest_row(self) -> int:
        """The most valid slots any row holds."""
        return int(self.valid.sum(dim=1).max()) if self.valid.numel() else 0

    def compact(self) -> None:
        """Move each row's valid slots to the front, in their order, and crop the rest: row b's slot j becomes slot
        (number of valid slots before j in row b). Its attention is unchanged: the same keys with the same positions,
        in the same order, less slots it gave weight 0."""
        width = self.widest_row()
        # a stable sort of "invalid" puts each row's valid slots first, in order
        order = torch.sort((~self.valid).to(torch.uint8), dim=1, stable=True).indices[:, :width]
        for layer in self._filled_layers():
            cached = self.cache.layers[layer]
            cached.keys, cached.values = _gather_slots(cached.keys, order), _gather_slots(cached.values, order)
        self._rewind_token_counts(self.num_slots - width)
        self.valid = self.valid.gather(1, order)
        self.positions = self.positions.gather(1, order)

    def trim(self) -> None:
        """Crop trailing slots that are invalid in every row (and the token count transformers >= 5.25 keeps
        on each linear-attention layer, which then equals the attention layers' length again)."""
        alive = self.valid.any(dim=0).nonzero()
        keep = int(alive[-1]) + 1 if len(alive) else 0
        drop = self.num_slots - keep
        if drop:
            for layer in self._filled_layers():
                self.cache.layers[layer].crop(-drop)
            self._rewind_token_counts(drop)
            self.valid = self.valid[:, :keep]
            self.positions = self.positions[:, :keep]

    def select_rows(self, keep: torch.Tensor) -> None:
        """Keep only the rows `keep` (indices), e.g. to drop finished requests from a batch."""
        for layer in self._filled_layers():
            cached = self.cache.layers[layer]
            cached.keys, cached.values = cached.keys[keep], cached.values[keep]
        self.recurrent.select_rows(keep)
        self.valid = self.valid[keep]
        self.positions = self.positions[keep]

    def row_view(self, row: int) -> tuple[tuple[tuple[torch.Tensor, ...], ...], tuple[int, ...]]:
        """Per layer, the cached tensors of `row`'s valid slots [heads, slots, dim]; and those slots' positions."""
        index = self.valid[row].nonzero().squeeze(-1)
        filled = self._filled_layers()
        views = []
        for layer in self.layers:
            if layer not in filled:
                views.append(())
                continue
            cached = self.cache.layers[layer]
            views.append((cached.keys[row].index_select(-2, index), cached.values[row].index_select(-2, index)))
        return tuple(views), tuple(self.positions[row, index].tolist())

    def _rewind_token_counts(self, dropped: int) -> None:
        """The token count transformers >= 5.25 keeps on each linear-attention layer follows the slots dropped."""
        for layer in self.layers:
            advance_token_count(self.cache, layer, -dropped)

    def _filled_layers(self) -> list[int]:
        """This cache's layers that hold tensors (transformers creates layers lazily, on first update)."""
        layers = self.cache.layers
        return [
            layer
            for layer in self.layers
            if layer < len(layers)
            and getattr(layers[layer], "keys", None) is not None
            and layers[layer].keys.dim() == 4
        ]


def _gather_slots(tensor: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """tensor [B, heads, S, D], order [B, W] slot indices -> [B, heads, W, D]."""
    index = order[:, None, :, None].expand(tensor.shape[0], tensor.shape[1], order.shape[1], tensor.shape[3])
    return tensor.gather(2, index)


class RaggedBuffer:
    """Per-row sequences of vectors [B, W, H] with per-row lengths, appended and sliced without row loops."""

    def __init__(self, batch: int, hidden: int, dtype: torch.dtype, device: torch.device) -> None:
        self.data = torch.zeros(batch, 0, hidden, dtype=dtype, device=device)
        self.lengths = torch.zeros(batch, dtype=torch.long, device=device)

    @classmethod
    def from_tensor(cls, data: torch.Tensor, lengths: torch.Tensor) -> RaggedBuffer:
        """Wrap data [B, W, H] whose row b holds lengths[b] items."""
        buffer = cls(data.shape[0], data.shape[2], data.dtype, data.device)
        buffer.data, buffer.lengths = data, lengths
        return buffer

    def concat(self, other: torch.Tensor, other_lengths: torch.Tensor) -> RaggedBuffer:
        """A new buffer: each row's items followed by the first other_lengths[row] items of other [B, M, H]."""
        batch, _, hidden = self.data.shape
        width = int((self.lengths + other_lengths).max()) if batch else 0
        out = RaggedBuffer(batch, hidden, self.data.dtype, self.data.device)
        out.data = torch.zeros(batch, width, hidden, dtype=self.data.dtype, device=self.data.device)
        out.lengths = self.lengths + other_lengths
        columns = torch.arange(width, device=self.data.device)[None, :]
        from_self = columns < self.lengths[:, None]
        from_other = (columns >= self.lengths[:, None]) & (columns < out.lengths[:, None])
        if self.data.shape[1]:
            own = self.data[:, : min(width, self.data.shape[1])]
            out.data[:, : own.shape[1]] = torch.where(from_self[:, : own.shape[1], None], own, 0.0)
        if other.shape[1]:
            source = (columns - self.lengths[:, None]).clamp(0, other.shape[1] - 1)
            gathered = other.gather(1, source[..., None].expand(-1, -1, hidden))
            out.data = torch.where(from_other[..., None], gathered, out.data)
        return out

    def slice(self, start: torch.Tensor, stop: torch.Tensor) -> RaggedBuffer:
        """Rows' items [start[row], stop[row]) as a new buffer."""
        batch, width, hidden = self.data.shape
        lengths = (stop - start).clamp(min=0)
        new_width = int(lengths.max()) if batch else 0
        out = RaggedBuffer(batch, hidden, self.data.dtype, self.data.device)
        out.lengths = lengths
        if new_width == 0 or width == 0:
            out.data = torch.zeros(batch, new_width, hidden, dtype=self.data.dtype, device=self.data.device)
            return out
        columns = torch.arange(new_width, device=self.data.device)[None, :]
        source = (start[:, None] + columns).clamp(0, width - 1)
        gathered = self.data.gather(1, source[..., None].expand(-1, -1, hidden))
        out.data = torch.where((columns < lengths[:, None])[..., None], gathered, 0.0)
        return out

    def select_rows(self, keep: torch.Tensor) -> RaggedBuffer:
        return RaggedBuffer.from_tensor(self.data[keep], self.lengths[keep])
