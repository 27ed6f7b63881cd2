"""transformers' own MTP generation (`generate(use_mtp=True)`), code no one here wrote, must reproduce its
plain greedy `generate` token for token on every prompt fixture."""

from __future__ import annotations

import pytest
import torch

from harness.layouts import DEEPSEEK_V3, MIMO

pytestmark = pytest.mark.greedy


def _enable_transformers_mtp(bundle):
    """transformers finds DeepSeek-V3 MTP weights only at layer 61; point it at this checkpoint's layers."""
    if bundle.layout.name == MIMO:
        pytest.skip("transformers' MtpModel has no weight mapping for the MiMo layout (model.mtp_layers.*)")
    if bundle.layout.name == DEEPSEEK_V3:
        first = bundle.config.num_hidden_layers
        patterns = [rf"model\.layers\.{first + d}\..*" for d in range(bundle.layout.num_depths)]
        bundle.target._keys_to_ignore_on_load_unexpected = patterns
    return bundle.target


def test_transformers_use_mtp_greedy_equals_plain_greedy(bundle, prompt):
    model = _enable_transformers_mtp(bundle)
    ids = torch.tensor([prompt.encode(bundle.tokenizer)], device=bundle.device)
    settings = dict(max_new_tokens=prompt.max_new_tokens, do_sample=False, pad_token_id=bundle.eos_token_ids[0])
    plain = model.generate(ids, **settings)
    assisted = model.generate(ids, use_mtp=True, **settings)
    generated, reference = assisted[0, ids.shape[1] :].tolist(), plain[0, ids.shape[1] :].tolist()
    divergence = next((i for i, (a, b) in enumerate(zip(generated, reference, strict=False)) if a != b), None)
    assert generated == reference, (
        f"prompt {prompt.id}: use_mtp gave {len(generated)} tokens, plain greedy {len(reference)}; "
        f"first divergence at generated index {divergence}"
    )
