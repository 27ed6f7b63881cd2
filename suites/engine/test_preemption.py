"""Preemption: a KV cache too small for the batch, so that running requests are preempted (their cache freed) and
recomputed when resumed, drafts and MTP layers included. Greedy output must equal the reference and the drafts the
checkpoint's MTP computation.

Seeded samples are not compared with an unpreempted run: vLLM's rejection sampler draws its randomness per
verification pass, and a resumed request's first pass is a prefill without drafts, so the same seed meets other
draws after a preemption; vLLM does not promise the same samples, only the same law (run the sampling suite under
`--engine-config preempt` for that)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.engine

PROMPT_TOKENS, NEW_TOKENS, REQUESTS = 60, 100, 6  # 6 x 160 tokens against a cache of 512: preemption is certain


def test_preempted_requests_decode_as_the_reference(configured, long_prompts, references_of, run_checked):
    decoder = configured("preempt")
    run_checked(decoder, references_of(long_prompts("preempt", REQUESTS, PROMPT_TOKENS, NEW_TOKENS)))
