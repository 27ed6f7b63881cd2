"""Helpers for the harness's own tests: bundled fixture models and broken copies of them."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from harness.contract.paths import FIXTURE_MODELS
from harness.models.loading import ModelBundle, bundle_for

TensorEdit = Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]]


@pytest.fixture(scope="session")
def fixture_bundle() -> Callable[[str], ModelBundle]:
    """Load a bundled fixture model in float64 on CPU, once per session. Do not modify what it returns."""
    return lambda name: bundle_for(name, "cpu", "float64")


@pytest.fixture
def broken_copy(tmp_path: Path) -> Callable[..., Path]:
    """Copy a fixture model directory, editing its tensors and/or config, and return the copy's path."""

    def make(name: str, tensors: TensorEdit | None = None, config: Callable[[dict], dict] | None = None) -> Path:
        target = tmp_path / name
        shutil.copytree(FIXTURE_MODELS / name, target)
        if tensors is not None:
            weights = target / "model.safetensors"
            save_file(tensors(load_file(str(weights))), str(weights), metadata={"format": "pt"})
        if config is not None:
            config_file = target / "config.json"
            config_file.write_text(json.dumps(config(json.loads(config_file.read_text()))))
        return target

    return make


@pytest.fixture
def door():
    """One option through the door's check on its own, as the door reads it once `decoder` is read (its engine found,
    whatever is installed here): door(option, value, decoder) -> the checked value, or the door's UsageError."""
    from harness.contract.run_options import RUN_OPTION_TABLE, option_named
    from harness.door import PYTEST
    from harness.door.checks import CHECKS
    from harness.door.reading import Reading, checked
    from harness.subjects.engines.registry import engine_of_decoder

    def check(option: str, value: object, decoder: str = "mtp", **read: object) -> object:
        reading = Reading({"decoder": decoder, option: value}, PYTEST, RUN_OPTION_TABLE)
        reading.checked.update({"decoder": decoder, "device": "cpu", "engine-version": None, **read})
        reading.engine = engine_of_decoder(decoder)
        return checked(option_named(option), reading, CHECKS[option])

    return check
