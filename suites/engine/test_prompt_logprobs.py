"""Prompt logprobs with and without speculation: the log-probabilities an engine returns for a prompt are the
target's, whether MTP speculation is on or off (vllm-project/vllm#53488: prompt_logprobs were wrong with MTP on).
The largest difference from the harness's own float64 target is recorded beside."""

from __future__ import annotations

import math

import pytest
import torch

from harness.models.teacher_forcing import target_forward

pytestmark = pytest.mark.engine

TOP = 5  # the top tokens compared at each position, beside the prompt token's own
SAME = 1e-5  # float32 logprobs of one engine's target forward, with and without speculation (measured: 0.0)


def test_prompt_logprobs_are_the_same_with_and_without_speculation(
    speculative_engine, bundle, engine_prompts, record_property, request
):
    """Judged under either reference: the check compares the engine with itself; the distance from the harness's
    float64 target is recorded beside only where this run loaded the weights (not under --reference engine)."""
    engine = speculative_engine
    rescoring = request.getfixturevalue("rescoring_bundle") if bundle.has_weights else None
    if not hasattr(engine, "prompt_logprobs"):
        pytest.skip(f"decoder {engine.name!r} returns no prompt log-probabilities")
    prompts = [p.encode(bundle.tokenizer) for p in engine_prompts[:6]]
    with_mtp = engine.prompt_logprobs(prompts, TOP)
    plain = engine.without_speculation()
    try:
        without = plain.prompt_logprobs(prompts, TOP)
    finally:
        plain.close()
    worst, from_target = 0.0, 0.0
    for prompt, ours, theirs in zip(prompts, with_mtp, without, strict=True):
        exact = None
        if rescoring is not None:
            with torch.no_grad():
                _, logits = target_forward(rescoring.target, torch.tensor([prompt], device=rescoring.device))
            exact = torch.log_softmax(logits[0].double(), dim=-1)
        for position in range(1, len(prompt)):
            a, b = ours[position], theirs[position]
            token = int(prompt[position])
            assert token in a and token in b, f"position {position}: the prompt token's logprob is missing"
            shared = set(a) & set(b)
            assert len(shared) >= TOP, f"position {position}: the top tokens differ, {sorted(a)} against {sorted(b)}"
            worst = max(worst, max(abs(a[t] - b[t]) for t in shared))
            if exact is not None:
                from_target = max(from_target, abs(a[token] - float(exact[position - 1, token])))
            assert math.isfinite(a[token]), f"position {position}: logprob {a[token]}"
    record_property(
        "prompt_logprobs",
        f"largest difference with/without speculation {worst:.3g}, "
        + (
            f"from the float64 target {from_target:.3g}"
            if rescoring
            else "from the float64 target: not computed (--reference engine: this run loads no weights)"
        ),
    )
    assert worst <= SAME, f"prompt logprobs changed with speculation on, by up to {worst:.3g} (bound {SAME})"
