"""The reference itself is pinned: target-only greedy output of the default fixture, in float64 on CPU,
equals the committed golden token ids, so a change in the reference (model, loader, kernels) is noticed."""

from __future__ import annotations

import json

import pytest
import torch

from harness.contract.paths import DEFAULT_MODEL, GOLDEN

pytestmark = pytest.mark.greedy

GOLDEN_TOKENS = GOLDEN / "tiny-deepseek-v3.greedy.json"


def test_reference_equals_the_golden_token_ids(bundle, greedy_references):
    if bundle.path.resolve() != DEFAULT_MODEL.resolve() or bundle.dtype != torch.float64:
        pytest.skip("the golden file pins the default fixture (tiny-deepseek-v3) in float64")
    golden = json.loads(GOLDEN_TOKENS.read_text())
    actual = {prompt_id: list(reference.tokens) for prompt_id, reference in greedy_references.items()}
    changed = sorted(p for p in golden["tokens"] if golden["tokens"][p] != actual.get(p))
    assert not changed, f"target-only greedy output changed for {changed}; if intended, rebuild {GOLDEN_TOKENS.name}"
    assert set(golden["tokens"]) == set(actual)
