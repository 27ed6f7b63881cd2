"""Prefix-cache hits: a prompt decoded again starts from the KV blocks (and the MTP layers' cache) its first decode
left, and prompts that share a long prefix start from its blocks. Greedy output must equal the reference and the
drafts the checkpoint's MTP computation, as on a cold cache (vllm-project/vllm#47930: acceptance collapsed after a
prefix-cache hit)."""

from __future__ import annotations

import pytest

from harness.checks.acceptance_profile import accepted_share
from harness.models.prompts import Prompt

pytestmark = pytest.mark.engine

SHARED_PREFIX_TOKENS = 96  # three of vLLM's 32-token blocks; llama.cpp reuses any common prefix


def test_a_prompt_decoded_again_decodes_as_on_a_cold_cache(
    engine_k, configured, long_prompts, references_of, run_checked
):
    decoder = configured("prefix-cache")
    # 100 tokens: three full blocks of 32 (vLLM leaves the last matched block to be recomputed for the drafter)
    references = references_of(long_prompts("again", 8, 100, 24))
    cold = decoder.decode([r.request(num_draft_tokens=engine_k) for r in references])
    decoder.take_evidence()  # the cold decode's counters: what it left is what the warm one must find
    warm, _ = run_checked(decoder, references)
    assert accepted_share(warm) >= accepted_share(cold), (
        f"acceptance fell after the prefix-cache hit: {accepted_share(warm):.3f} warm, {accepted_share(cold):.3f} cold"
    )


def test_prompts_sharing_a_long_prefix_start_from_its_cached_blocks_and_decode_as_the_reference(
    engine_k, configured, bundle, engine_prompts, prompts, references_of, run_checked
):
    decoder = configured("prefix-cache")
    prefix = next(p for p in prompts if p.kind == "long").encode(bundle.tokenizer)[:SHARED_PREFIX_TOKENS]
    sharing = [
        Prompt(f"shared-{p.id}", p.kind, p.seed, p.max_new_tokens, token_ids=(*prefix, *p.encode(bundle.tokenizer)))
        for p in engine_prompts
        if SHARED_PREFIX_TOKENS + len(p.encode(bundle.tokenizer)) + p.max_new_tokens + 6 < bundle.max_context
    ][:8]
    references = references_of(sharing)
    primer = references_of([Prompt("shared-prefix", "long", 0, 1, token_ids=tuple(prefix))])[0]
    decoder.decode([primer.request(num_draft_tokens=engine_k)] * len(sharing))  # the prefix in every slot's cache
    decoder.take_evidence()
    run_checked(decoder, references)
