"""The engines the harness drives out of process: their environments, the decoder names that run them, and
the findings recorded against them. Light on purpose (no torch import): the plugin reads it at collection."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.subjects.engines.environments import EngineEnvironment
from harness.subjects.engines.vllm_environment import VLLM
from harness.subjects.engines.vllm_findings import VLLM_FINDINGS
from harness.subjects.engines.vllm_reproducer import vllm_reproducer_script
from harness.subjects.findings import Finding


@dataclass(frozen=True)
class EngineSubject:
    environment: EngineEnvironment
    decoders: tuple[str, ...]
    findings: tuple[Finding, ...]
    # (group, run, filename) -> a greedy failure group's reproducer script that uses the engine alone
    reproducer: Callable[[dict[str, Any], dict[str, Any], str], str] | None = None


ENGINES = {VLLM.name: EngineSubject(VLLM, ("vllm-mtp", "vllm"), VLLM_FINDINGS, vllm_reproducer_script)}


def engine_of_decoder(decoder: str) -> EngineSubject | None:
    """The engine behind a decoder name, or None for an in-process decoder."""
    return next((engine for engine in ENGINES.values() if decoder in engine.decoders), None)
