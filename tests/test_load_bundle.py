"""load_bundle on the three checkpoint layouts, on sharded checkpoints, and agreement with transformers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM, DeepseekV3ForCausalLM
from transformers.modeling_layers import MtpModel

from harness.contract.paths import FIXTURE_MODELS
from harness.models.attention import EXACT_ATTENTION
from harness.models.layouts import DEEPSEEK_V3, MIMO, MTP_PREFIX
from harness.models.loading import load_bundle
from harness.models.numerics import use_float64_arithmetic
from harness.models.teacher_forcing import mtp_forward, target_forward

TEXT = "The for statement is used to iterate over the elements of a sequence"


@pytest.mark.parametrize(
    ("name", "layout", "depths", "hidden_first", "target_class"),
    [
        ("tiny-deepseek-v3", DEEPSEEK_V3, 2, False, "DeepseekV3ForCausalLM"),
        ("tiny-mtp-prefix", MTP_PREFIX, 1, False, "MellumForCausalLM"),
        ("tiny-mimo", MIMO, 1, True, "Qwen2ForCausalLM"),
    ],
)
def test_load_bundle_detects_each_layout(fixture_bundle, name, layout, depths, hidden_first, target_class):
    bundle = fixture_bundle(name)
    assert bundle.layout.name == layout
    assert bundle.layout.num_depths == len(bundle.depths) == depths
    assert bundle.layout.hidden_first is hidden_first
    assert type(bundle.target).__name__ == target_class
    assert bundle.dtype == torch.float64
    assert all(p.dtype == torch.float64 for p in bundle.depths.parameters() if "gate" not in str(p.shape))
    assert bundle.eos_token_ids == (0,)
    assert bundle.tokenizer.eos_token_id == 0
    assert bundle.max_context == 256


def test_deepseek_depths_carry_their_own_embedding_and_head_copies(fixture_bundle):
    bundle = fixture_bundle("tiny-deepseek-v3")
    for depth in bundle.depths:
        assert depth.embed_tokens is not bundle.target.get_input_embeddings()
        torch.testing.assert_close(depth.embed_tokens.weight, bundle.target.get_input_embeddings().weight)


@pytest.mark.parametrize("name", ["tiny-mtp-prefix", "tiny-mimo"])
def test_shared_layouts_reuse_the_target_embedding_and_head(fixture_bundle, name):
    bundle = fixture_bundle(name)
    assert bundle.depths[0].embed_tokens is bundle.target.get_input_embeddings()
    assert bundle.depths[0].head is bundle.target.get_output_embeddings()


def _shard(source: Path, destination: Path) -> None:
    """Rewrite a fixture as two safetensors shards plus an index, as large checkpoints ship."""
    destination.mkdir()
    for file in source.iterdir():
        if file.name != "model.safetensors":
            (destination / file.name).write_bytes(file.read_bytes())
    tensors = load_file(str(source / "model.safetensors"))
    names = sorted(tensors)
    halves = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    weight_map = {}
    for file, file_names in halves.items():
        save_file({n: tensors[n] for n in file_names}, str(destination / file), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(file_names, file))
    index = {
        "metadata": {"total_size": sum(t.numel() * t.element_size() for t in tensors.values())},
        "weight_map": weight_map,
    }
    (destination / "model.safetensors.index.json").write_text(json.dumps(index))


@pytest.mark.parametrize("name", ["tiny-deepseek-v3", "tiny-mimo"])
def test_sharded_checkpoint_loads_the_same_weights(fixture_bundle, tmp_path, name):
    _shard(FIXTURE_MODELS / name, tmp_path / "sharded")
    sharded = load_bundle(tmp_path / "sharded")
    single = fixture_bundle(name)
    ids = torch.tensor([single.tokenizer.encode(TEXT)])
    hidden, logits = target_forward(single.target, ids)
    sharded_hidden, sharded_logits = target_forward(sharded.target, ids)
    torch.testing.assert_close(sharded_logits, logits, rtol=0, atol=0)
    for ours, theirs in zip(
        mtp_forward(single.target, single.depths, ids, hidden),
        mtp_forward(sharded.target, sharded.depths, ids, sharded_hidden),
        strict=True,
    ):
        torch.testing.assert_close(theirs, ours, rtol=0, atol=0)


def test_transformers_deepseek_v3_loader_accepts_the_fixture(fixture_bundle):
    """DeepseekV3ForCausalLM.from_pretrained reads the fixture, and its logits equal the bundle's target."""
    model, info = DeepseekV3ForCausalLM.from_pretrained(
        FIXTURE_MODELS / "tiny-deepseek-v3",
        dtype=torch.float64,
        experts_implementation="eager",
        attn_implementation=EXACT_ATTENTION,  # the bundle's kernel (transformers' eager softmax runs in float32)
        output_loading_info=True,
    )
    assert info["missing_keys"] == set() or not info["missing_keys"]
    assert not info["mismatched_keys"]
    assert all(key.startswith(("model.layers.2.", "model.layers.3.")) for key in info["unexpected_keys"])
    use_float64_arithmetic(model)  # the bundle's router arithmetic (transformers routes in float32)
    bundle = fixture_bundle("tiny-deepseek-v3")
    ids = torch.tensor([bundle.tokenizer.encode(TEXT)])
    torch.testing.assert_close(model(ids).logits, target_forward(bundle.target, ids)[1], rtol=0, atol=0)


@pytest.mark.parametrize("name", ["tiny-deepseek-v3", "tiny-mtp-prefix"])
def test_mtp_depths_equal_transformers_own_mtp_model(fixture_bundle, name):
    """transformers' MtpModel, reading the same checkpoint with its own key mapping, computes the same
    draft logits at every depth as the harness's MTPDepth: the fixture layout is the real one."""
    bundle = fixture_bundle(name)
    main = AutoModelForCausalLM.from_pretrained(
        FIXTURE_MODELS / name, dtype=torch.float64, experts_implementation="eager", attn_implementation=EXACT_ATTENTION
    )
    if name == "tiny-deepseek-v3":  # transformers only looks for DeepSeek MTP weights at layer 61
        main._keys_to_ignore_on_load_unexpected = [r"model\.layers\.2.*", r"model\.layers\.3.*"]
    mtp_model = MtpModel.from_pretrained(main)
    use_float64_arithmetic(main, mtp_model)  # the bundle's router arithmetic (transformers routes in float32)
    ids = torch.tensor([bundle.tokenizer.encode(TEXT)])
    hidden, _ = target_forward(bundle.target, ids)
    ours = mtp_forward(bundle.target, bundle.depths, ids, hidden)
    carried = hidden
    for d, our_logits in enumerate(ours, start=1):
        span = ids.shape[1] - d
        position_ids = (torch.arange(span) + d)[None]
        carried = mtp_model.forward_layer(d - 1, carried[:, :span], position_ids, None, input_ids=ids[:, d:])
        theirs = mtp_model._project_to_logits(carried)
        torch.testing.assert_close(theirs, our_logits, rtol=1e-10, atol=1e-10)
