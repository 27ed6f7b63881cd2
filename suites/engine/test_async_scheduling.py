"""Asynchronous scheduling (the next step scheduled while the current one runs), where the platform has it:
greedy output equal to the reference and seeded samples equal to synchronous scheduling's. vLLM turns it off on
CPU; the engine's effective setting decides, and a run without it is skipped with that reason."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.engine


def test_asynchronous_scheduling_gives_the_outputs_of_synchronous_scheduling(
    engine_k, configured, engine, engine_prompts, references_of, check_tokens, shown, sampled_requests, same_samples
):
    decoder = configured("async")
    references = references_of(engine_prompts)
    greedy = [r.request(num_draft_tokens=engine_k) for r in references]
    results = decoder.decode(greedy)
    shown(decoder)  # skips where the engine runs without asynchronous scheduling (vLLM on CPU)
    for reference, request, result in zip(references, greedy, results, strict=True):
        check_tokens(reference, result, request=request)
    sampled = sampled_requests([r.prompt for r in references])
    asynchronous = decoder.decode(sampled)
    same_samples(sampled, engine.decode(sampled), asynchronous, ("synchronous", "asynchronous"))
