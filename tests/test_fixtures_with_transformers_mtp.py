"""The fixtures work with transformers' own MTP generation, whatever --model the session tests."""

from __future__ import annotations

import pytest
import torch

from harness.subjects.engines.transformers.use_mtp import TransformersMTPUnsupported, enable_transformers_mtp


def test_use_mtp_on_tiny_mtp_prefix_equals_plain_greedy_on_every_prompt(fixture_bundle, prompts):
    bundle = fixture_bundle("tiny-mtp-prefix")
    model = enable_transformers_mtp(bundle)
    for prompt in prompts:
        ids = torch.tensor([prompt.encode(bundle.tokenizer)])
        settings = dict(max_new_tokens=prompt.max_new_tokens, do_sample=False, pad_token_id=0)
        plain = model.generate(ids, **settings)
        assert model.generate(ids, use_mtp=True, **settings).tolist() == plain.tolist(), prompt.id
        assert plain.shape[1] > ids.shape[1], prompt.id


def test_use_mtp_refuses_the_mimo_layout_with_a_reason(fixture_bundle):
    with pytest.raises(TransformersMTPUnsupported, match=r"no weight mapping for the MiMo layout"):
        enable_transformers_mtp(fixture_bundle("tiny-mimo"))


def test_use_mtp_refuses_the_hybrid_with_a_reason(fixture_bundle):
    """transformers 5.24 refuses assisted generation on stateful models; 5.25 allows it, but its MTP generation
    needs `num_mtp_layers`, which Qwen3-Next's config lacks: either way a reason, not a crash inside generate."""
    with pytest.raises(TransformersMTPUnsupported, match=r"refuses MTP on stateful models|has no num_mtp_layers"):
        enable_transformers_mtp(fixture_bundle("tiny-qwen3-next"))
