"""The committed fixture models are what the build script wrote: small, intact, and trained."""

from __future__ import annotations

import hashlib
import json

import pytest

from harness.contract.paths import FIXTURE_MODELS

FIXTURE_NAMES = tuple(sorted(p.name for p in FIXTURE_MODELS.iterdir() if (p / "manifest.json").is_file()))

MAX_BYTES = 10 * 1024 * 1024


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_fixture_files_match_their_manifest_and_stay_small(name):
    directory = FIXTURE_MODELS / name
    manifest = json.loads((directory / "manifest.json").read_text())
    assert {"config.json", "model.safetensors", "tokenizer.json", "generation_config.json"} <= manifest["files"].keys()
    for file, info in manifest["files"].items():
        data = (directory / file).read_bytes()
        assert hashlib.sha256(data).hexdigest() == info["sha256"], f"{name}/{file} changed since it was built"
    assert sum(f.stat().st_size for f in directory.iterdir()) < MAX_BYTES


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_fixture_heads_were_trained_to_exercise_accept_and_reject(name):
    manifest = json.loads((FIXTURE_MODELS / name).joinpath("manifest.json").read_text())
    acceptance = manifest["greedy_acceptance_per_depth"]
    assert len(acceptance) == manifest["num_mtp_depths"]
    # trained heads: well above chance (1/1024), and far from always right, so both paths run
    assert all(0.2 < rate < 0.95 for rate in acceptance), acceptance
    assert manifest["training"]["held_out_main_loss"] < 4.0
