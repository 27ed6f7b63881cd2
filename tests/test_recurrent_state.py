"""The harness's Gated DeltaNet arithmetic and its per-row state restore, against transformers' own kernels."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch.nn import functional
from transformers.models.qwen3_next.modeling_qwen3_next import (
    causal_conv1d_fn,
    torch_chunk_gated_delta_rule,
    torch_recurrent_gated_delta_rule,
)

from harness.contract.errors import HarnessError
from harness.models.gated_deltanet import causal_conv_windows, gated_delta_rule
from harness.models.recurrent_state import LayerState, RecurrentRows, advance_token_count, layer_states, token_count


def _delta_rule_inputs(dtype: torch.dtype, length: int = 11) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(1818)
    batch, heads, d_k, d_v = 3, 4, 8, 6

    def draw(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator, dtype=torch.float64).to(dtype)

    query, key, value = (
        draw(batch, length, heads, d_k),
        draw(batch, length, heads, d_k),
        draw(batch, length, heads, d_v),
    )
    g = -functional.softplus(draw(batch, length, heads))
    beta = draw(batch, length, heads).sigmoid()
    initial = draw(batch, heads, d_k, d_v) * 0.1
    return query, key, value, g, beta, initial


@pytest.mark.parametrize("kernel", [torch_recurrent_gated_delta_rule, torch_chunk_gated_delta_rule])
def test_the_delta_rule_computes_transformers_kernels_function(kernel):
    """Same outputs and final state as transformers' token-by-token and chunked kernels, to float32 rounding
    (those kernels compute in float32); and S_0..S_T are the states after 0..T tokens."""
    query, key, value, g, beta, initial = _delta_rule_inputs(torch.float32)
    ours, states = gated_delta_rule(query, key, value, g, beta, initial)
    theirs, final = kernel(
        query, key, value, g=g, beta=beta, initial_state=initial, output_final_state=True, use_qk_l2norm_in_kernel=True
    )
    torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(states[:, -1], final, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(states[:, 0], initial, rtol=0, atol=0)
    prefix_out, prefix_states = gated_delta_rule(query[:, :4], key[:, :4], value[:, :4], g[:, :4], beta[:, :4], initial)
    torch.testing.assert_close(prefix_states, states[:, :5], rtol=0, atol=0)
    torch.testing.assert_close(prefix_out, ours[:, :4], rtol=0, atol=0)


def test_transformers_kernels_are_float32_and_the_harness_rule_stays_float64():
    """Why the harness has its own forward: in a float64 model transformers' kernel rounds to float32 (its
    state differs from the float64 recurrence by far more than the 1e-10 invariant tolerance)."""
    query, key, value, g, beta, initial = _delta_rule_inputs(torch.float64)
    ours, states = gated_delta_rule(query, key, value, g, beta, initial)
    assert ours.dtype == states.dtype == torch.float64
    _, final = torch_recurrent_gated_delta_rule(
        query, key, value, g=g, beta=beta, initial_state=initial, output_final_state=True, use_qk_l2norm_in_kernel=True
    )
    assert final.dtype == torch.float32
    assert 1e-10 < float((final.double() - states[:, -1]).abs().max()) < 1e-4


def test_conv_windows_give_transformers_causal_conv_and_its_state():
    """Window i of cat(state, inputs) is the conv state after i inputs; the depthwise conv over windows
    1..T is transformers' causal_conv1d_fn (zero state = its left padding)."""
    generator = torch.Generator().manual_seed(7)
    channels, kernel, length = 5, 4, 9
    inputs = torch.randn(2, channels, length, generator=generator, dtype=torch.float64)
    weight = torch.randn(channels, kernel, generator=generator, dtype=torch.float64)
    windows = causal_conv_windows(torch.zeros(2, channels, kernel, dtype=torch.float64), inputs)
    assert windows.shape == (2, length + 1, channels, kernel)
    ours = functional.silu((windows[:, 1:] * weight).sum(-1)).transpose(1, 2)
    torch.testing.assert_close(ours, causal_conv1d_fn(inputs, weight, None, activation="silu"), rtol=0, atol=1e-14)
    torch.testing.assert_close(windows[:, -1], inputs[..., -kernel:], rtol=0, atol=0)


def _rows_with_trail(trail_length: int) -> tuple[RecurrentRows, object]:
    cache = type("Cache", (), {})()
    rows = RecurrentRows(cache)
    # state value = the number of inputs folded in, per row: trail[row, i] == i
    counts = torch.arange(trail_length, dtype=torch.float64)
    conv = counts[None, :, None, None].expand(3, -1, 2, 4).clone()
    recurrent = counts[None, :, None, None, None].expand(3, -1, 1, 2, 2).clone()
    layer_states(cache)[0] = LayerState(conv[:, -1], recurrent[:, -1], conv, recurrent)
    return rows, cache


def test_rows_resume_after_their_valid_inputs_and_then_after_their_kept_inputs():
    rows, cache = _rows_with_trail(5)
    positions = torch.tensor([[10, 11, 12, 13], [3, 4, 5, 6], [7, 8, 9, 10]])
    valid = torch.tensor([[True, True, True, True], [True, True, False, False], [True, False, False, False]])
    rows.appended(positions, valid)
    state = layer_states(cache)[0]
    assert state.recurrent[:, 0, 0, 0].tolist() == [4, 2, 1]  # right padding never enters the state
    rows.keep_below(torch.tensor([12, 4, 8]))  # row 0 keeps 10, 11; row 1 keeps 3; row 2 keeps 7
    assert state.recurrent[:, 0, 0, 0].tolist() == [2, 1, 1]
    assert state.conv[:, 0, 0].tolist() == [2, 1, 1]
    rows.select_rows(torch.tensor([2, 0]))
    assert rows.row_view(1)[0][1][0, 0, 0] == 2


def test_a_rollback_past_the_latest_pass_is_refused_not_silently_wrong():
    rows, _ = _rows_with_trail(3)
    rows.appended(torch.tensor([[5, 6], [5, 6], [5, 6]]), torch.ones(3, 2, dtype=torch.bool))
    with pytest.raises(HarnessError, match="only within the latest forward pass"):
        rows.keep_below(torch.tensor([4, 6, 7]))


def test_rows_must_be_right_padded():
    rows, _ = _rows_with_trail(3)
    with pytest.raises(HarnessError, match="right padding"):
        rows.appended(torch.tensor([[5, 6]] * 3), torch.tensor([[False, True], [True, True], [True, True]]))


def test_the_token_count_moves_where_transformers_keeps_one_and_nowhere_else():
    """transformers >= 5.25 keeps `cumulative_length_linear` on a linear-attention cache layer: += T a forward,
    -= n a crop. An attention layer, a 5.24 linear-attention layer and a layer not created yet have none."""
    counted = SimpleNamespace(cumulative_length_linear=torch.tensor(0))
    cache = SimpleNamespace(layers=[counted, SimpleNamespace(keys=None)])
    advance_token_count(cache, 0, 7)
    advance_token_count(cache, 0, -3)
    assert token_count(cache, 0) is counted.cumulative_length_linear and int(counted.cumulative_length_linear) == 4
    advance_token_count(cache, 1, 5)
    advance_token_count(cache, 2, 5)
    assert token_count(cache, 1) is None and token_count(cache, 2) is None and token_count(object(), 0) is None
