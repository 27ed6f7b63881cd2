"""Deployed engine configurations: the settings under which an engine's MTP state is known to break, as named
variants of an engine subject (`--engine-config NAME`; the engine suite, suites/engine/, runs each of them). Each
engine declares its own in its package (`<engine>/configurations.py`), `default` among them.

A configuration is data: the settings merged into the engine server's configuration (the server maps them onto
the engine's own options), and the counters that show it happened. A run under a configuration counts only when
the engine's own counters show it (prefix-cache hits > 0, preemptions > 0, ...): the servers read them from the
engine's scheduler or log, never from the settings (harness/subjects/engines/vllm/server.py,
llamacpp/server.py).

Light on purpose (no torch): the door and the plugin read it before anything loads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from harness.contract.run_options import DEFAULT_CONFIGURATION

DEFAULT = DEFAULT_CONFIGURATION

# The counters an engine server reports with each reply (summed over the calls of a check):
EVIDENCE = MappingProxyType(
    {
        "prefix_cache_hit_tokens": "prompt tokens served from the prefix (prompt) cache",
        "partial_prefills": "prefill steps that ended inside a prompt (a prompt prefilled in chunks)",
        "prefills_beside_decodes": "steps in which one request prefilled while another decoded",
        "preemptions": "requests preempted (their cache freed, recomputed when resumed)",
        "steps_with_requests_waiting": "steps after which a request was left waiting for a place",
        "async_scheduling": "engines running with asynchronous scheduling (the engine's effective setting)",
        "prefix_caching": "engines running with prefix caching (the engine's effective setting)",
        "chunked_prefill": "engines running with chunked prefill (the engine's effective setting)",
        "preemptible": "engines whose KV blocks hold less than a request's context, so that a running request can "
        "need another block and be preempted for it (from the engine's effective block size)",
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


def configuration_table(*configurations: EngineConfiguration) -> Mapping[str, EngineConfiguration]:
    """An engine's deployed configurations by name, read-only."""
    return MappingProxyType({c.name: c for c in configurations})
