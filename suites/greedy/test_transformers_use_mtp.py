"""transformers' own MTP generation (`generate(use_mtp=True)`), code no one here wrote, must reproduce its
plain greedy `generate` token for token on every prompt fixture, on the model under test (--model)."""

from __future__ import annotations

import pytest
import torch

from harness.subjects.transformers.use_mtp import TransformersMTPUnsupported, enable_transformers_mtp

pytestmark = pytest.mark.greedy


def greedy_with_and_without_mtp(bundle, prompt) -> tuple[list[int], list[int]]:
    """(use_mtp output, plain greedy output), generated tokens only."""
    try:
        model = enable_transformers_mtp(bundle)
    except TransformersMTPUnsupported as reason:
        pytest.skip(str(reason))
    ids = torch.tensor([prompt.encode(bundle.tokenizer)], device=bundle.device)
    settings = dict(max_new_tokens=prompt.max_new_tokens, do_sample=False, pad_token_id=bundle.eos_token_ids[0])
    plain = model.generate(ids, **settings)[0, ids.shape[1] :].tolist()
    assisted = model.generate(ids, use_mtp=True, **settings)[0, ids.shape[1] :].tolist()
    return assisted, plain


def test_transformers_use_mtp_greedy_equals_plain_greedy(bundle, prompt):
    assisted, plain = greedy_with_and_without_mtp(bundle, prompt)
    divergence = next((i for i, (a, b) in enumerate(zip(assisted, plain, strict=False)) if a != b), None)
    assert assisted == plain, (
        f"prompt {prompt.id}: use_mtp gave {len(assisted)} tokens, plain greedy {len(plain)}; "
        f"first divergence at generated index {divergence}"
    )
