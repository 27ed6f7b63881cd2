"""vLLM's deployed configurations (harness/subjects/engines/configurations.py): the settings its server maps
onto vLLM's own options, and the counters that show each happened."""

from __future__ import annotations

from collections.abc import Mapping

from harness.subjects.engines.configurations import DEFAULT, EngineConfiguration, configuration_table

# The harness's default vLLM engine (server.py llm_arguments): a fresh LLM, a 256 MiB KV cache (about 350,000
# tokens of a fixture), vLLM's scheduler defaults (prefix caching and chunked prefill on, a token budget far above
# the fixtures' prompts, 256 sequences): every request is scheduled at once and prefilled whole.
CHUNK_TOKENS = 32  # the chunked-prefill token budget: prompts of 33+ tokens are prefilled in chunks
BLOCK_SIZE = 32  # tokens a KV block: vLLM's CPU attention takes multiples of 32 (its default, 128, would leave
# most of a fixture's 256-token context outside any full block: no prefix-cache hit, little to preempt)
PREEMPT_BLOCKS = 16  # 512 tokens: two max_model_len requests
QUEUE_SEQUENCES = 2

CONFIGURATIONS: Mapping[str, EngineConfiguration] = configuration_table(
    EngineConfiguration(DEFAULT, "the harness's default engine: every request scheduled at once, whole prefill"),
    EngineConfiguration(
        "prefix-cache",
        f"automatic prefix caching in blocks of {BLOCK_SIZE} tokens: a prompt seen before (or sharing its "
        "leading blocks) starts from cached KV blocks",
        {"enable_prefix_caching": True, "block_size": BLOCK_SIZE},
        ("prefix_cache_hit_tokens",),
        # vLLM turns it off for MLA on a CPU without AMX (vllm/platforms/cpu.py:516-526), and so does the
        # hybrid-with-prefix-caching finding's fix for a hybrid with speculation on CPU
        switch="prefix_caching",
    ),
    EngineConfiguration(
        "chunked-prefill",
        f"chunked prefill with a scheduler budget of {CHUNK_TOKENS} tokens a step: long prompts are "
        "prefilled in chunks, beside requests that decode",
        {
            "enable_chunked_prefill": True,
            "max_num_batched_tokens": CHUNK_TOKENS,
            "max_num_seqs": 8,  # vLLM asks for a token budget of at least max_num_seqs
        },
        ("partial_prefills", "prefills_beside_decodes"),
        switch="chunked_prefill",  # vLLM turns it off for MLA on a CPU without AMX (vllm/platforms/cpu.py:516-526)
    ),
    EngineConfiguration(
        "preempt",
        f"a KV cache of {PREEMPT_BLOCKS} blocks of {BLOCK_SIZE} tokens: running requests are "
        "preempted and recomputed when resumed",
        {"num_gpu_blocks_override": PREEMPT_BLOCKS, "block_size": BLOCK_SIZE},
        ("preemptions",),
        # a hybrid's attention blocks are made as large as its recurrent state's page (vllm/platforms/interface.py:
        # 288 tokens for tiny-qwen3-next-hd64, then capped at its 256-token context): a request never grows into a
        # second block, so none is preempted (requests wait instead)
        switch="preemptible",
    ),
    EngineConfiguration(
        "queue",
        f"at most {QUEUE_SEQUENCES} sequences at once: requests wait and start while others finish",
        {"max_num_seqs": QUEUE_SEQUENCES},
        ("steps_with_requests_waiting",),
    ),
    EngineConfiguration(
        "async",
        "asynchronous scheduling: the next step is scheduled while the current one runs",
        {"async_scheduling": True},
        ("async_scheduling",),
        # the scheduler output then holds placeholders for the drafts; the recorder reads no passes
        {"steps": "under asynchronous scheduling vLLM's scheduler output holds placeholder drafts"},
        switch="async_scheduling",  # vLLM turns it off on CPU (vllm/platforms/cpu.py)
    ),
)
