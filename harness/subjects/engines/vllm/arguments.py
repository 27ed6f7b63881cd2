"""vLLM's own arguments a run may pass through (--engine-arg NAME=VALUE, vLLM's LLM arguments): those the harness sets
itself (server.py llm_arguments), which a run cannot move, and those it cannot serve yet."""

OWNED_ARGUMENTS = (
    "model",
    "dtype",
    "max_model_len",
    "speculative_config",
    "seed",
    "enforce_eager",
    "async_scheduling",
    "skip_tokenizer_init",
    "structured_outputs_config",
    "max_num_seqs",
    "kv_cache_memory_bytes",
    "disable_log_stats",
    "enable_prefix_caching",
    "enable_chunked_prefill",
    "max_num_batched_tokens",
    "num_gpu_blocks_override",
    "block_size",
)
# parallel engines: the server installs its hooks (forcing, step recording, scoring) on every worker and reads them
# back from the first, which under tensor parallelism holds the gathered logits and the sampled tokens
UNSERVED_ARGUMENTS = {
    "pipeline_parallel_size": "with pipeline_parallel_size > 1 the last stage samples and drafts, and the harness "
    "reads its hooks from the first worker: not yet",
    "data_parallel_size": "data_parallel_size > 1 runs engines of their own behind one front end, and the harness "
    "drives one engine: not yet",
}
