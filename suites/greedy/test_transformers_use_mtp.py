"""transformers' own MTP generation (`generate(use_mtp=True)`), code no one here wrote, must reproduce its
plain greedy `generate` token for token on every prompt fixture, on the model under test (--model). In bf16/fp16
a difference where use_mtp's token is within the dtype's tolerance of the precise best is a near-tie, and the
check goes on against plain greedy generate continued from use_mtp's own prefix (harness/checks/divergence.py)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import pytest
import torch

from harness.checks.divergence import NearTieWarning, check_greedy, describe_divergence, precise_logits
from harness.contract.records import GreedyCheckRecord, attach_record
from harness.subjects.engines.transformers.use_mtp import TransformersMTPUnsupported, enable_transformers_mtp

pytestmark = pytest.mark.greedy


def test_transformers_use_mtp_greedy_equals_plain_greedy(bundle, rescoring_bundle, prompt, record_property):
    try:
        model = enable_transformers_mtp(bundle)
    except TransformersMTPUnsupported as reason:
        pytest.skip(str(reason))
    prompt_ids = prompt.encode(bundle.tokenizer)
    pad = bundle.eos_token_ids[0]

    def generate(prefix: Sequence[int], max_new_tokens: int, **options: object) -> list[int]:
        ids = torch.tensor([list(prefix)], device=bundle.device)
        output = model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=pad, **options)
        return output[0, ids.shape[1] :].tolist()

    def plain_continuation(prefix: Sequence[int]) -> list[int]:
        left = prompt.max_new_tokens - (len(prefix) - len(prompt_ids))
        return [] if left <= 0 or prefix[-1] in bundle.eos_token_ids else generate(prefix, left)

    plain = generate(prompt_ids, prompt.max_new_tokens)
    assisted = generate(prompt_ids, prompt.max_new_tokens, use_mtp=True)
    decode = rescoring_bundle.tokenizer.decode
    outcome = check_greedy(
        plain, assisted, prompt_ids, bundle.dtype, decode, precise_logits(rescoring_bundle), plain_continuation
    )
    check = GreedyCheckRecord(
        positions=len(assisted), checked=outcome.checked, near_ties=[tie["index"] for tie in outcome.near_ties]
    )
    attach_record(record_property, "greedy_check", check)
    for tie in outcome.near_ties:
        warnings.warn(NearTieWarning(f"prompt {prompt.id}, use_mtp: {describe_divergence(tie)}"), stacklevel=1)
    assert outcome.failure is None, (
        f"prompt {prompt.id}, use_mtp against plain greedy: {describe_divergence(outcome.failure)}"
    )
