"""Slot caches compact their dead slots (harness/decoding/slots.py): each row keeps its valid slots, keys, values and
positions, in order, and a query attends to them exactly as before."""

from __future__ import annotations

import torch
from transformers import DynamicCache

from harness.decoding.slots import COMPACT_SLACK, SlotCache
from harness.models.attention import exact_attention_forward

BATCH, HEADS, DIM = 3, 2, 8


def kept_in_turn(passes: int, width: int) -> list[list[int]]:
    """Per pass, per row: row b keeps all `width` slots on the passes p with p % BATCH == b, one slot on the others
    (every pass appends `width` slots: one row accepted everything; each row's own slots are mostly dead)."""
    return [[width if p % BATCH == b else 1 for b in range(BATCH)] for p in range(passes)]


def filled_cache(kept: list[list[int]], width: int, seed: int = 7) -> SlotCache:
    """One forward of `width` slots per row for each pass; after pass p row b keeps the first kept[p][b] slots of
    the pass (a rejection), the way a decode pass appends k + 1 slots and keeps the accepted ones."""
    generator = torch.Generator().manual_seed(seed)
    slots = SlotCache(DynamicCache(), [0], BATCH, torch.device("cpu"))
    lengths = torch.zeros(BATCH, dtype=torch.long)
    for kept_now in kept:
        positions = lengths[:, None] + torch.arange(width)[None, :]
        keys = torch.randn(BATCH, HEADS, width, DIM, dtype=torch.float64, generator=generator)
        values = torch.randn(BATCH, HEADS, width, DIM, dtype=torch.float64, generator=generator)
        slots.cache.update(keys, values, 0)
        slots.appended(positions, torch.ones(BATCH, width, dtype=torch.bool))
        lengths = lengths + torch.tensor(kept_now)
        slots.keep_below(lengths)
    return slots


def attention(slots: SlotCache, query: torch.Tensor, query_positions: torch.Tensor) -> torch.Tensor:
    layer = slots.cache.layers[0]
    mask = slots.attention_mask(query_positions, torch.ones_like(query_positions, dtype=torch.bool), query.dtype)
    output, _ = exact_attention_forward(None, query, layer.keys, layer.values, mask[..., : slots.num_slots], 0.5)
    return output


def test_dead_slots_are_compacted_away_and_each_row_keeps_its_slots_in_order():
    kept = kept_in_turn(passes=24, width=8)
    compacted = filled_cache(kept, width=8)
    # 192 slots appended, each row keeps 80 of them: compacted once the dead ones outnumber the live by the slack
    assert compacted.num_slots < 192 and compacted.num_slots <= 2 * 80 + COMPACT_SLACK
    for row in range(BATCH):
        views, positions = compacted.row_view(row)
        assert positions == tuple(range(80))
        assert views[0][0].shape == (HEADS, 80, DIM)


def test_a_compacted_cache_holds_and_attends_what_the_uncompacted_one_does(monkeypatch):
    import harness.decoding.slots as slots_module

    kept = kept_in_turn(passes=12, width=5)
    monkeypatch.setattr(slots_module, "COMPACT_SLACK", 0)
    compacted = filled_cache(kept, width=5)
    monkeypatch.setattr(slots_module, "COMPACT_SLACK", 10**9)
    uncompacted = filled_cache(kept, width=5)
    assert compacted.num_slots < uncompacted.num_slots == 60
    for row in range(BATCH):
        (compacted_view,), compacted_positions = compacted.row_view(row)
        (uncompacted_view,), uncompacted_positions = uncompacted.row_view(row)
        assert compacted_positions == uncompacted_positions
        assert all(torch.equal(a, b) for a, b in zip(compacted_view, uncompacted_view, strict=True))
    query = torch.randn(BATCH, HEADS, 1, DIM, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    query_positions = torch.full((BATCH, 1), 28)
    torch.testing.assert_close(
        attention(compacted, query, query_positions), attention(uncompacted, query, query_positions)
    )
