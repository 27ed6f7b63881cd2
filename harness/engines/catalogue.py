"""The engines the harness drives out of process: their environments, the decoder names that run them, and
the findings recorded against them. Light on purpose (no torch import): the plugin reads it at collection."""

from __future__ import annotations

from dataclasses import dataclass

from harness.engines.environments import EngineEnvironment
from harness.engines.vllm_environment import VLLM
from harness.engines.vllm_findings import VLLM_FINDINGS
from harness.findings import Finding


@dataclass(frozen=True)
class EngineSubject:
    environment: EngineEnvironment
    decoders: tuple[str, ...]
    findings: tuple[Finding, ...]


ENGINES = {VLLM.name: EngineSubject(VLLM, ("vllm-mtp", "vllm"), VLLM_FINDINGS)}


def engine_of_decoder(decoder: str) -> EngineSubject | None:
    """The engine behind a decoder name, or None for an in-process decoder."""
    return next((engine for engine in ENGINES.values() if decoder in engine.decoders), None)
