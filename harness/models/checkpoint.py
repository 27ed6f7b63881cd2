"""Reading a model directory's safetensors: one file or shards with an index. Never pickle."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from safetensors import safe_open

from harness.contract.errors import CheckpointError
from harness.models.layouts import detect_layout
from harness.models.weights_guard import refuse_weights

if TYPE_CHECKING:
    import torch

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
PICKLE_FILES = ("pytorch_model.bin", "pytorch_model.bin.index.json", "model.pt", "model.bin")


@dataclass(frozen=True)
class SafetensorsCheckpoint:
    """Where each tensor of a checkpoint lives: tensor name -> safetensors file."""

    directory: Path
    weight_map: dict[str, Path]

    @property
    def tensor_names(self) -> list[str]:
        return list(self.weight_map)

    def read(self, names: list[str]) -> dict[str, torch.Tensor]:
        """Load the named tensors (grouped by file, each file opened once)."""
        refuse_weights(f"tensors of {self.directory}")
        by_file: dict[Path, list[str]] = {}
        for name in names:
            by_file.setdefault(self.weight_map[name], []).append(name)
        tensors: dict[str, torch.Tensor] = {}
        for file, file_names in by_file.items():
            try:
                with safe_open(str(file), framework="pt") as handle:
                    for name in file_names:
                        tensors[name] = handle.get_tensor(name)
            except (OSError, ValueError, RuntimeError) as error:  # safetensors raises SafetensorError(Exception)
                raise CheckpointError(f"{file}: cannot read tensors {file_names[:3]}...: {error}") from error
            except Exception as error:
                raise CheckpointError(f"{file}: not a readable safetensors file: {error}") from error
        return tensors


def open_checkpoint(directory: Path) -> SafetensorsCheckpoint:
    """Index a model directory's safetensors. Refuses pickle-only checkpoints with a clear message."""
    refuse_weights(f"the safetensors of {directory}")
    if not directory.exists():
        raise CheckpointError(f"model directory {directory} does not exist")
    if not directory.is_dir():
        raise CheckpointError(f"model path {directory} is not a directory")
    index = directory / INDEX_FILE
    single = directory / SINGLE_FILE
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (json.JSONDecodeError, KeyError, TypeError) as error:
            raise CheckpointError(f"{index}: not a safetensors index (needs a 'weight_map' object): {error}") from error
        files = {name: directory / file for name, file in weight_map.items()}
        missing = sorted({str(f) for f in files.values() if not f.is_file()})
        if missing:
            raise CheckpointError(f"{index} names shard files that are missing: {', '.join(missing)}")
        return SafetensorsCheckpoint(directory, files)
    if single.is_file():
        try:
            with safe_open(str(single), framework="numpy") as handle:  # the names only: no torch import
                names = list(handle.keys())
        except Exception as error:
            raise CheckpointError(f"{single}: not a readable safetensors file: {error}") from error
        return SafetensorsCheckpoint(directory, dict.fromkeys(names, single))
    pickles = [name for name in PICKLE_FILES if (directory / name).exists()]
    if pickles:
        raise CheckpointError(
            f"{directory} holds only pickle weights ({', '.join(pickles)}); mtp-harness loads safetensors only. "
            "Convert them with safetensors.torch.save_file."
        )
    raise CheckpointError(f"{directory} has no {SINGLE_FILE} or {INDEX_FILE}")


def read_config_json(directory: Path) -> dict:
    """A model directory's config.json as a JSON object; a CheckpointError names what is missing or malformed."""
    config_file = directory / "config.json"
    if not config_file.is_file():
        raise CheckpointError(f"{directory} has no config.json")
    try:
        raw = json.loads(config_file.read_text())
    except json.JSONDecodeError as error:
        raise CheckpointError(f"{config_file}: invalid JSON: {error}") from error
    if not isinstance(raw, dict):
        raise CheckpointError(f"{config_file}: not a JSON object")
    return raw


def check_checkpoint_files(directory: Path) -> None:
    """What can be checked of a model directory without torch or transformers (a fraction of a second): the
    safetensors files, config.json as JSON, the tensor names in an MTP layout the harness knows, the tokenizer."""
    checkpoint = open_checkpoint(directory)
    raw = read_config_json(directory)
    layers = raw.get("num_hidden_layers")
    if isinstance(layers, int) and not isinstance(layers, bool):  # else transformers' reading of the config decides
        detect_layout(checkpoint.tensor_names, layers)
    if not (directory / "tokenizer.json").is_file():
        raise CheckpointError(f"{directory} has no tokenizer.json")
