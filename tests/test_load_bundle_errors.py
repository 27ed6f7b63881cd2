"""Bad checkpoints get a clear CheckpointError naming the file and tensor, never a bare error from deep inside."""

from __future__ import annotations

import json
import re

import pytest
import torch

from harness.contract.errors import CheckpointError, HarnessError, NoMTPWeightsError, UnknownLayoutError
from harness.contract.paths import FIXTURE_MODELS
from harness.models.loading import load_bundle


def test_missing_directory_is_named(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(CheckpointError, match=f"model directory {re.escape(str(missing))} does not exist"):
        load_bundle(missing)


def test_a_file_instead_of_a_directory_is_refused(tmp_path):
    file = tmp_path / "model.safetensors"
    file.write_bytes(b"")
    with pytest.raises(CheckpointError, match=r"is not a directory"):
        load_bundle(file)


@pytest.mark.parametrize(
    ("name", "mtp_prefix", "expected"),
    [
        ("tiny-deepseek-v3", ("model.layers.2.", "model.layers.3."), r"model\.layers\.2\.eh_proj\.weight"),
        ("tiny-mtp-prefix", ("mtp.",), r"mtp\.fc\.weight"),
        ("tiny-mimo", ("model.mtp_layers.",), r"model\.mtp_layers\.0\.input_proj\.weight"),
    ],
)
def test_checkpoint_without_mtp_weights_says_what_it_expected(broken_copy, name, mtp_prefix, expected):
    path = broken_copy(name, tensors=lambda t: {k: v for k, v in t.items() if not k.startswith(mtp_prefix)})
    with pytest.raises(NoMTPWeightsError, match=f"checkpoint has no MTP layers: expected .*{expected}"):
        load_bundle(path)


def test_mtp_tensors_in_an_unknown_layout_are_reported_by_name(broken_copy):
    def rename(tensors):
        return {k.replace("mtp.", "model.nextn_predict.", 1): v for k, v in tensors.items()}

    path = broken_copy("tiny-mtp-prefix", tensors=rename)
    with pytest.raises(UnknownLayoutError, match=r"no known layout.*model\.nextn_predict\."):
        load_bundle(path)


def test_mtp_tensor_of_the_wrong_shape_names_file_and_tensor(broken_copy):
    name = "model.layers.2.eh_proj.weight"

    def shrink(tensors):
        tensors[name] = tensors[name][:, :64].contiguous()
        return tensors

    path = broken_copy("tiny-deepseek-v3", tensors=shrink)
    with pytest.raises(
        CheckpointError,
        match=rf"model\.safetensors: tensor {re.escape(name)} has shape \(64, 64\), expected \(64, 128\)",
    ):
        load_bundle(path)


def test_missing_mtp_block_tensor_is_named(broken_copy):
    path = broken_copy(
        "tiny-mimo", tensors=lambda t: {k: v for k, v in t.items() if k != "model.mtp_layers.0.self_attn.q_proj.weight"}
    )
    with pytest.raises(
        CheckpointError, match=r"MTP depth 0 is missing tensors for \['block\.self_attn\.q_proj\.weight'\]"
    ):
        load_bundle(path)


def test_target_tensor_of_the_wrong_shape_is_reported(broken_copy):
    def shrink(tensors):
        tensors["model.norm.weight"] = torch.ones(32)
        return tensors

    path = broken_copy("tiny-mimo", tensors=shrink)
    with pytest.raises(CheckpointError, match=r"tensor model\.norm\.weight has shape \(32,\), expected \(64,\)"):
        load_bundle(path)


def test_tokenizer_larger_than_the_model_vocab_is_a_vocab_mismatch(broken_copy):
    path = broken_copy("tiny-mtp-prefix")
    tokenizer_file = path / "tokenizer.json"
    document = json.loads(tokenizer_file.read_text())
    document["added_tokens"].append(
        {
            "id": 1024,
            "content": "<|extra|>",
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
    )
    tokenizer_file.write_text(json.dumps(document))
    with pytest.raises(
        CheckpointError, match=r"tokenizer has 1025 tokens .*'<\|extra\|>'.* vocab_size is 1024: vocab mismatch"
    ):
        load_bundle(path)


def test_pickle_only_checkpoint_is_refused_without_unpickling(tmp_path):
    directory = tmp_path / "pickled"
    directory.mkdir()
    (directory / "config.json").write_text("{}")
    (directory / "pytorch_model.bin").write_bytes(b"not even a pickle: it must never be opened")
    with pytest.raises(CheckpointError, match=r"only pickle weights .*pytorch_model\.bin.*safetensors only"):
        load_bundle(directory)


def test_corrupt_safetensors_file_is_named(broken_copy):
    path = broken_copy("tiny-mimo")
    (path / "model.safetensors").write_bytes(b"\x00" * 64)
    with pytest.raises(CheckpointError, match=r"model\.safetensors: not a readable safetensors file"):
        load_bundle(path)


def test_missing_config_is_named(broken_copy):
    path = broken_copy("tiny-mimo")
    (path / "config.json").unlink()
    with pytest.raises(CheckpointError, match=r"has no config\.json"):
        load_bundle(path)


def test_index_naming_a_missing_shard_is_reported(broken_copy):
    path = broken_copy("tiny-mimo")
    (path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"x": "model-00002.safetensors"}}))
    with pytest.raises(CheckpointError, match=r"missing: .*model-00002\.safetensors"):
        load_bundle(path)


def test_unknown_dtype_lists_the_known_ones():
    with pytest.raises(HarnessError, match=r"unknown dtype 'float8'; known: float64"):
        load_bundle(FIXTURE_MODELS / "tiny-mimo", dtype="float8")
