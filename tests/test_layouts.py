"""Layout detection and tensor-name mapping are pure functions: names in, names out."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from harness.contract.errors import NoMTPWeightsError, UnknownLayoutError
from harness.models.experts import fuse_experts, split_experts
from harness.models.layouts import (
    DEEPSEEK_V3,
    MIMO,
    MTP_PREFIX,
    checkpoint_tensor_name,
    depth_tensor_name,
    detect_layout,
)

MAIN = ["model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", "model.norm.weight", "lm_head.weight"]


def test_deepseek_layout_counts_depths_after_the_main_layers():
    names = [*MAIN, "model.layers.61.eh_proj.weight", "model.layers.62.eh_proj.weight", "model.layers.61.enorm.weight"]
    match = detect_layout(names, num_hidden_layers=61)
    assert (match.name, match.num_depths, match.hidden_first) == (DEEPSEEK_V3, 2, False)


def test_deepseek_layout_maps_every_part():
    match = detect_layout([*MAIN, "model.layers.61.eh_proj.weight"], 61)
    assert depth_tensor_name(match, "model.layers.61.shared_head.norm.weight", 61) == (0, "final_norm.weight")
    assert depth_tensor_name(match, "model.layers.61.shared_head.head.weight", 61) == (0, "head.weight")
    assert depth_tensor_name(match, "model.layers.62.mlp.experts.3.up_proj.weight", 61) == (
        1,
        "block.mlp.experts.3.up_proj.weight",
    )
    assert depth_tensor_name(match, "model.layers.60.mlp.gate.weight", 61) is None


def test_mtp_prefix_layout_shares_fc_and_norms_across_depths():
    names = [*MAIN, "mtp.fc.weight", "mtp.norm.weight", "mtp.layers.0.input_layernorm.weight"]
    match = detect_layout(names, 2)
    assert (match.name, match.num_depths) == (MTP_PREFIX, 1)
    assert depth_tensor_name(match, "mtp.fc.weight", 2) == (-1, "eh_proj.weight")
    assert depth_tensor_name(match, "mtp.pre_fc_norm_embedding.weight", 2) == (-1, "enorm.weight")
    assert depth_tensor_name(match, "mtp.layers.0.self_attn.q_proj.weight", 2) == (0, "block.self_attn.q_proj.weight")
    assert depth_tensor_name(match, "mtp.layers.0.post_norm.weight", 2) == (0, "final_norm.weight")


def test_mimo_layout_is_hidden_first():
    names = [*MAIN, "model.mtp_layers.0.input_proj.weight", "model.mtp_layers.0.token_layernorm.weight"]
    match = detect_layout(names, 36)
    assert (match.name, match.num_depths, match.hidden_first) == (MIMO, 1, True)
    assert depth_tensor_name(match, "model.mtp_layers.0.hidden_layernorm.weight", 36) == (0, "hnorm.weight")
    assert depth_tensor_name(match, "model.mtp_layers.0.final_layernorm.weight", 36) == (0, "final_norm.weight")


def test_no_mtp_tensors_raises_no_mtp_weights_naming_the_expected_tensors():
    with pytest.raises(NoMTPWeightsError, match=r"expected model\.layers\.2\.eh_proj\.weight .* mtp\.fc\.weight"):
        detect_layout(MAIN, 2)


def test_gaps_in_depth_numbering_are_an_unknown_layout():
    with pytest.raises(UnknownLayoutError, match=r"numbered 0\.\.1 .*found \[0, 2\]"):
        detect_layout([*MAIN, "model.mtp_layers.0.input_proj.weight", "model.mtp_layers.2.input_proj.weight"], 2)


parts = st.sampled_from(["enorm", "hnorm", "eh_proj", "final_norm", "block.self_attn.q_proj", "block.mlp.gate"])


@given(depth=st.integers(0, 3), part=parts, layers=st.integers(1, 80))
def test_checkpoint_names_round_trip_through_the_layout(depth, part, layers):
    for layout, hidden_first in ((DEEPSEEK_V3, False), (MIMO, True)):
        name = checkpoint_tensor_name(layout, depth, f"{part}.weight", layers)
        match = detect_layout([*MAIN, checkpoint_tensor_name(layout, 0, "eh_proj.weight", layers)], layers)
        assert match.hidden_first is hidden_first
        assert depth_tensor_name(match, name, layers) == (depth, f"{part}.weight")


def test_fused_experts_round_trip_and_keep_gate_rows_first():
    generator = torch.Generator().manual_seed(0)
    per_expert = {}
    for j in range(3):
        for proj, shape in (("gate", (4, 6)), ("up", (4, 6)), ("down", (6, 4))):
            per_expert[f"block.mlp.experts.{j}.{proj}_proj.weight"] = torch.randn(shape, generator=generator)
    per_expert["block.mlp.gate.weight"] = torch.randn(3, 6, generator=generator)
    fused = fuse_experts(per_expert)
    assert fused["block.mlp.experts.gate_up_proj"].shape == (3, 8, 6)
    assert torch.equal(
        fused["block.mlp.experts.gate_up_proj"][1, :4], per_expert["block.mlp.experts.1.gate_proj.weight"]
    )
    assert torch.equal(fused["block.mlp.experts.down_proj"][2], per_expert["block.mlp.experts.2.down_proj.weight"])
    round_trip = split_experts(fused)
    assert round_trip.keys() == per_expert.keys()
    assert all(torch.equal(round_trip[k], per_expert[k]) for k in per_expert)


def test_fusing_with_a_missing_projection_names_the_expert():
    tensors = {"m.experts.0.gate_proj.weight": torch.zeros(2, 2), "m.experts.0.down_proj.weight": torch.zeros(2, 2)}
    with pytest.raises(ValueError, match=r"m\.experts\.0: missing up_proj"):
        fuse_experts(tensors)
