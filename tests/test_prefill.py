"""The prompts' pass computes each distinct prompt once (harness/decoding/forward.py `prefill`, and depth 1's first pass
likewise: `once_per_distinct_row`): every row then holds
what the pass over the whole batch puts in it (its cache slots, its recurrent state, its hidden states), whatever rows
share a prompt, a prefix or trailing zeros (the padding token). Bit for bit on the attention-only fixtures. On the
hybrid (tiny-qwen3-next) the gated delta rule's float64 rounding depends on the batch it runs in: a row decoded alone
differs from the same row in this batch by up to 8.9e-15 already, and the shared pass by up to 1.0e-14 (measured
2026-12-05), so the hybrid is held to 1e-13, far inside the invariant suite's 1e-10."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache

import harness.decoding.forward as forward_module
import harness.decoding.proposer as proposer_module
from harness.contract.decoder import DecodeRequest, SamplingConfig
from harness.decoding.forward import _target_hidden, once_per_distinct_row, prefill
from harness.decoding.mtp_decoder import MTPDecoder
from harness.decoding.slots import SlotCache
from harness.models.loading import bundle_for

PROMPT = [5, 17, 3, 9, 41, 2, 8]
# rows: a prompt three times, its prefix, the prompt with a trailing 0 (the padding token), another prompt
HYBRID_ROUNDING = 1e-13
ROWS = [PROMPT, PROMPT, [7, 7, 30, 4], PROMPT, PROMPT[:4], [*PROMPT, 0], [0, 0, 12]]


def right_padded(rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    width = max(map(len, rows))
    ids = torch.tensor([row + [0] * (width - len(row)) for row in rows])
    valid = torch.tensor([[column < len(row) for column in range(width)] for row in rows])
    return ids, torch.arange(width)[None, :].expand(len(rows), -1), valid


def row_state(slots: SlotCache, row: int) -> list[torch.Tensor]:
    views, positions = slots.row_view(row)
    recurrent = slots.recurrent.row_view(row)
    return (
        [tensor for layer in views for tensor in layer]
        + [tensor for pair in recurrent.values() for tensor in pair]
        + [torch.tensor(positions)]
    )


@pytest.mark.parametrize(
    ("model", "dtype"),
    [("tiny-deepseek-v3", "float64"), ("tiny-deepseek-v3", "float32"), ("tiny-qwen3-next", "float64")],
)
def test_rows_sharing_a_prompt_hold_bit_for_bit_what_the_whole_batch_s_pass_gives_them(model, dtype):
    bundle = bundle_for(model, "cpu", dtype)
    ids, positions, valid = right_padded(ROWS)
    layers = range(bundle.config.num_hidden_layers)
    with torch.no_grad():
        shared = SlotCache(bundle.new_target_cache(), layers, len(ROWS), bundle.device)
        hidden = prefill(bundle, shared, ids, positions, valid)
        whole = SlotCache(bundle.new_target_cache(), layers, len(ROWS), bundle.device)
        expected, _ = _target_hidden(bundle, whole, ids, positions, valid)
    assert shared.valid.shape == whole.valid.shape and torch.equal(shared.valid, whole.valid)
    tolerance = HYBRID_ROUNDING if bundle.is_hybrid else 0.0
    for row, length in enumerate(map(len, ROWS)):
        for got, want in zip(
            [hidden[row, :length], *row_state(shared, row)],
            [expected[row, :length], *row_state(whole, row)],
            strict=True,
        ):
            torch.testing.assert_close(got, want, atol=tolerance, rtol=0.0, msg=f"row {row}")
    if bundle.is_hybrid:
        assert shared.recurrent.states  # the recurrent layers were compared


def unshared(slots, forward, *inputs):
    return forward(*inputs)


@pytest.mark.parametrize("draft_mode", ["greedy", "sample"])
def test_a_decode_with_shared_first_passes_is_the_decode_without_them(monkeypatch, draft_mode):
    """The prompt's pass and depth 1's first pass, each shared by the rows of one prompt, change no token, draft, q
    or pass record of a sampled batch (the rows draw with their own seeds, so their drafts differ after depth 1)."""
    bundle = bundle_for("tiny-deepseek-v3", "cpu", "float64")
    sampling = SamplingConfig(temperature=1.0)
    requests = [
        DecodeRequest(tuple(row), 6, sampling=sampling, seed=seed, num_draft_tokens=3, draft_mode=draft_mode)
        for seed, row in enumerate(ROWS * 3)
    ]
    shared = MTPDecoder(bundle).decode(requests)
    monkeypatch.setattr(forward_module, "once_per_distinct_row", unshared)
    monkeypatch.setattr(proposer_module, "once_per_distinct_row", unshared)
    assert MTPDecoder(bundle).decode(requests) == shared
    assert len({result.token_ids for result in shared}) > len({tuple(row) for row in ROWS})  # the seeds differ


def test_rows_equal_in_their_ids_but_not_their_hidden_states_run_unshared():
    batches = []

    def forward(ids, hidden):
        batches.append(len(ids))
        return hidden * 2

    ids = torch.tensor([[3, 4], [3, 4], [5, 6]])
    hidden = torch.zeros(3, 2, 4, dtype=torch.float64)
    slots = SlotCache(DynamicCache(), [0], 3, torch.device("cpu"))
    assert torch.equal(once_per_distinct_row(slots, forward, ids, hidden), hidden * 2)
    assert batches == [2]  # rows 0 and 1 ran once
    hidden[1, 1, 3] = 1e-300
    slots = SlotCache(DynamicCache(), [0], 3, torch.device("cpu"))
    assert torch.equal(once_per_distinct_row(slots, forward, ids, hidden), hidden * 2)
    assert batches == [2, 3]  # a hidden state differs: every row ran
