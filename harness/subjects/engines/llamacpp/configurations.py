"""llama.cpp's deployed configurations (harness/subjects/engines/configurations.py): the settings its server maps
onto llama.cpp's own options, and the counters that show each happened."""

from __future__ import annotations

from collections.abc import Mapping

from harness.subjects.engines.configurations import DEFAULT, EngineConfiguration, configuration_table

# The harness's default llama.cpp server (server.py Engine): 4 parallel slots of max_context tokens, each
# request pinned to a slot and queued behind that slot's earlier requests, no prompt cache, whole-prompt batches.
BATCH_TOKENS = 16  # n_batch = n_ubatch for chunked prompt processing
CONFIGURATIONS: Mapping[str, EngineConfiguration] = configuration_table(
    EngineConfiguration(DEFAULT, "the harness's default server: 4 slots, no prompt cache, whole-prompt batches"),
    EngineConfiguration(
        "prefix-cache",
        "prompt cache reuse (`cache_prompt`): a slot keeps its last request's KV and a new prompt reuses its "
        "common prefix",
        {"cache_prompt": True},
        ("prefix_cache_hit_tokens",),
    ),
    EngineConfiguration(
        "chunked-prefill",
        f"prompts processed in batches of {BATCH_TOKENS} tokens (n_batch = n_ubatch), beside slots that decode",
        {"n_batch": BATCH_TOKENS},
        ("partial_prefills",),
    ),
    EngineConfiguration(
        "queue",
        "2 slots and the server's own queue: requests are not pinned, they wait for a free slot",
        {"parallel": 2, "server_queue": True},
        ("steps_with_requests_waiting",),
    ),
    EngineConfiguration(
        "context-shift",
        "context shift: when a slot's context is full, the older half of it is discarded and the rest "
        "shifted, the MTP context's with it, and a request may outgrow the context (llama.cpp pads a slot "
        "to a multiple of 256 tokens: a fixture's whole context)",
        {"ctx_shift": True},
        ("context_shifts",),
        switch="context_shift",  # llama.cpp turns it off for memory that cannot shift (recurrent state)
    ),
)
