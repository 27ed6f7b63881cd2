"""Deployed engine configurations: the settings under which an engine's MTP state is known to break, as named
variants of an engine subject (`--engine-config NAME`; the engine suite, suites/engine/, runs each of them).

A configuration is data: the settings merged into the engine server's configuration (the server maps them onto
the engine's own options), and the counters that show it happened. A run under a configuration counts only when
the engine's own counters show it (prefix-cache hits > 0, preemptions > 0, ...): the servers read them from the
engine's scheduler or log, never from the settings (harness/subjects/engines/vllm_server.py, llamacpp_server.py).

Light on purpose (no torch): the door and the plugin read it before anything loads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

DEFAULT = "default"

# The counters an engine server reports with each reply (summed over the calls of a check):
EVIDENCE = MappingProxyType(
    {
        "prefix_cache_hit_tokens": "prompt tokens served from the prefix (prompt) cache",
        "partial_prefills": "prefill steps that ended inside a prompt (a prompt prefilled in chunks)",
        "prefills_beside_decodes": "steps in which one request prefilled while another decoded",
        "preemptions": "requests preempted (their cache freed, recomputed when resumed)",
        "steps_with_requests_waiting": "steps after which a request was left waiting for a place",
        "async_scheduling": "engines running with asynchronous scheduling (the engine's effective setting)",
        "context_shift": "engines running with context shift (the engine's effective setting)",
        "context_shifts": "context shifts (the oldest tokens of a full context discarded)",
    }
)


@dataclass(frozen=True)
class EngineConfiguration:
    """A deployed configuration of one engine: what it is in words, the server settings that make it, and the
    counters (EVIDENCE) that must all be > 0 for a run to have been under it. `switch`: the counter of the engine's
    effective setting, where the engine may turn the configuration off for a platform or a model (vLLM's
    asynchronous scheduling on CPU, llama.cpp's context shift for recurrent memory): at 0 the configuration is one
    this engine does not have here, and a check under it is skipped with that reason."""

    name: str
    what: str
    settings: Mapping[str, object] = field(default_factory=dict)
    evidence: tuple[str, ...] = ()
    # request fields and capabilities the engine cannot serve under it, with the reason (as a decoder's
    # why_unsupported)
    lacks: Mapping[str, str] = field(default_factory=dict)
    switch: str | None = None

    def __post_init__(self) -> None:
        unknown = ({*self.evidence, self.switch} - {None}) - set(EVIDENCE)
        if unknown:
            raise ValueError(f"configuration {self.name!r}: unknown evidence {sorted(unknown)}")


def missing_evidence(configuration: EngineConfiguration, counters: Mapping[str, int]) -> list[str]:
    """The counters of `configuration` that did not move (each <= 0 in `counters`): empty when it happened."""
    return [name for name in configuration.evidence if counters.get(name, 0) <= 0]


def configuration_names(configurations: Mapping[str, EngineConfiguration]) -> str:
    return ", ".join(sorted(configurations))


# --- vLLM ------------------------------------------------------------------------------------------------------
# The harness's default vLLM engine (vllm_server.llm_arguments): a fresh LLM, a 256 MiB KV cache (about 350,000
# tokens of a fixture), vLLM's scheduler defaults (prefix caching and chunked prefill on, a token budget far above
# the fixtures' prompts, 256 sequences): every request is scheduled at once and prefilled whole.
VLLM_CHUNK_TOKENS = 32  # the chunked-prefill token budget: prompts of 33+ tokens are prefilled in chunks
VLLM_BLOCK_SIZE = 32  # tokens a KV block: vLLM's CPU attention takes multiples of 32 (its default, 128, would leave
# most of a fixture's 256-token context outside any full block: no prefix-cache hit, little to preempt)
VLLM_PREEMPT_BLOCKS = 16  # 512 tokens: two max_model_len requests
VLLM_QUEUE_SEQUENCES = 2

VLLM_CONFIGURATIONS: Mapping[str, EngineConfiguration] = MappingProxyType(
    {
        c.name: c
        for c in (
            EngineConfiguration(
                DEFAULT, "the harness's default engine: every request scheduled at once, whole prefill"
            ),
            EngineConfiguration(
                "prefix-cache",
                f"automatic prefix caching in blocks of {VLLM_BLOCK_SIZE} tokens: a prompt seen before (or sharing its "
                "leading blocks) starts from cached KV blocks",
                {"enable_prefix_caching": True, "block_size": VLLM_BLOCK_SIZE},
                ("prefix_cache_hit_tokens",),
            ),
            EngineConfiguration(
                "chunked-prefill",
                f"chunked prefill with a scheduler budget of {VLLM_CHUNK_TOKENS} tokens a step: long prompts are "
                "prefilled in chunks, beside requests that decode",
                {
                    "enable_chunked_prefill": True,
                    "max_num_batched_tokens": VLLM_CHUNK_TOKENS,
                    "max_num_seqs": 8,  # vLLM asks for a token budget of at least max_num_seqs
                },
                ("partial_prefills", "prefills_beside_decodes"),
            ),
            EngineConfiguration(
                "preempt",
                f"a KV cache of {VLLM_PREEMPT_BLOCKS} blocks of {VLLM_BLOCK_SIZE} tokens: running requests are "
                "preempted and recomputed when resumed",
                {"num_gpu_blocks_override": VLLM_PREEMPT_BLOCKS, "block_size": VLLM_BLOCK_SIZE},
                ("preemptions",),
            ),
            EngineConfiguration(
                "queue",
                f"at most {VLLM_QUEUE_SEQUENCES} sequences at once: requests wait and start while others finish",
                {"max_num_seqs": VLLM_QUEUE_SEQUENCES},
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
    }
)

# --- llama.cpp -------------------------------------------------------------------------------------------------
# The harness's default llama.cpp server (llamacpp_server.Engine): 4 parallel slots of max_context tokens, each
# request pinned to a slot and queued behind that slot's earlier requests, no prompt cache, whole-prompt batches.
LLAMACPP_BATCH_TOKENS = 16  # n_batch = n_ubatch for chunked prompt processing
LLAMACPP_CONFIGURATIONS: Mapping[str, EngineConfiguration] = MappingProxyType(
    {
        c.name: c
        for c in (
            EngineConfiguration(
                DEFAULT, "the harness's default server: 4 slots, no prompt cache, whole-prompt batches"
            ),
            EngineConfiguration(
                "prefix-cache",
                "prompt cache reuse (`cache_prompt`): a slot keeps its last request's KV and a new prompt reuses its "
                "common prefix",
                {"cache_prompt": True},
                ("prefix_cache_hit_tokens",),
            ),
            EngineConfiguration(
                "chunked-prefill",
                f"prompts processed in batches of {LLAMACPP_BATCH_TOKENS} tokens (n_batch = n_ubatch), beside "
                "slots that decode",
                {"n_batch": LLAMACPP_BATCH_TOKENS},
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
    }
)
