"""The engines the harness drives out of process: their environments, the decoder names that run them, and
the findings recorded against them. Light on purpose (no torch import): the plugin reads it at collection."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.contract.errors import HarnessError
from harness.subjects.engines.configurations import (
    DEFAULT,
    LLAMACPP_CONFIGURATIONS,
    VLLM_CONFIGURATIONS,
    EngineConfiguration,
    configuration_names,
)
from harness.subjects.engines.environments import EngineEnvironment
from harness.subjects.engines.llamacpp_environment import LLAMACPP, missing_gguf
from harness.subjects.engines.llamacpp_findings import LLAMACPP_FINDINGS
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
    # model directory -> why the engine cannot serve it (checked at the door), or None
    model_problem: Callable[[Path], str | None] | None = None
    # whether a finding's documented fix can be applied inside the engine's process (--engine-fixes): vLLM is
    # Python and is patched as it imports; llama.cpp is compiled into its wheel
    fixable: bool = False
    # the deployed configurations it runs under (--engine-config; harness/subjects/engines/configurations.py)
    configurations: Mapping[str, EngineConfiguration] = field(default_factory=dict)
    # whether it can be its own reference (--reference engine): greedy decoding without speculation, and its
    # log-probabilities of a given sequence (prompt logprobs) for runner-ups and near-ties
    scores_sequences: bool = False


ENGINES = {
    VLLM.name: EngineSubject(
        VLLM,
        ("vllm-mtp", "vllm"),
        VLLM_FINDINGS,
        vllm_reproducer_script,
        fixable=True,
        configurations=VLLM_CONFIGURATIONS,
        scores_sequences=True,
    ),
    LLAMACPP.name: EngineSubject(
        LLAMACPP,
        ("llamacpp-mtp", "llamacpp"),
        LLAMACPP_FINDINGS,
        None,
        missing_gguf,
        configurations=LLAMACPP_CONFIGURATIONS,
    ),
}


def engine_of_decoder(decoder: str) -> EngineSubject | None:
    """The engine behind a decoder name, or None for an in-process decoder."""
    return next((engine for engine in ENGINES.values() if decoder in engine.decoders), None)


NO_FIXES = "none"
ALL_FIXES = "all"


def engine_fixes(decoder: str, option: str) -> tuple[str, ...]:
    """--engine-fixes for `decoder`: `none` (the engine as shipped), `all`, or comma-separated finding slugs of
    the decoder's engine; the slugs, sorted. A usage error names what is wrong."""
    if option == NO_FIXES:
        return ()
    engine = engine_of_decoder(decoder)
    if engine is None:
        raise HarnessError(f"--engine-fixes {option}: decoder {decoder!r} is not an engine with findings to fix")
    if not engine.fixable:
        raise HarnessError(
            f"--engine-fixes {option}: {engine.environment.name} is compiled into its wheel; the harness cannot apply "
            "a finding's fix inside its process (build it with the fix and point "
            f"{engine.environment.python_override} at that environment's Python)"
        )
    known = {finding.slug for finding in engine.findings}
    wanted = known if option == ALL_FIXES else {slug.strip() for slug in option.split(",") if slug.strip()}
    unknown = sorted(wanted - known)
    if unknown or not wanted:
        raise HarnessError(
            f"--engine-fixes {option}: no finding {', '.join(unknown) or '(none named)'} of "
            f"{engine.environment.name}; known: {NO_FIXES}, {ALL_FIXES}, {', '.join(sorted(known))}"
        )
    return tuple(sorted(wanted))


def engine_configuration(decoder: str, option: str) -> str:
    """--engine-config for `decoder`: `default`, or a deployed configuration of the decoder's engine. A usage error
    names what is wrong."""
    if option == DEFAULT:
        return option
    engine = engine_of_decoder(decoder)
    if engine is None or not engine.configurations:
        raise HarnessError(
            f"--engine-config {option}: decoder {decoder!r} is not an engine with deployed configurations (the "
            "harness's own decoder has none: its analogue, a batch against each request alone, is in the greedy suite)"
        )
    if option not in engine.configurations:
        raise HarnessError(
            f"--engine-config {option}: {engine.environment.name} has no such configuration; known: "
            f"{configuration_names(engine.configurations)}"
        )
    return option


HARNESS_REFERENCE = "harness"
ENGINE_REFERENCE = "engine"


def reference_option(decoder: str, option: str) -> str:
    """--reference for `decoder`: `harness` (the harness's own copy of the checkpoint), or `engine` (the decoder's
    engine without speculation, for an engine that scores sequences). A usage error names what is wrong."""
    if option == HARNESS_REFERENCE:
        return option
    if option != ENGINE_REFERENCE:
        raise HarnessError(f"--reference {option}: choose {HARNESS_REFERENCE} or {ENGINE_REFERENCE}")
    engine = engine_of_decoder(decoder)
    if engine is None or not engine.scores_sequences:
        able = [name for e in ENGINES.values() if e.scores_sequences for name in e.decoders]
        what = "is not an engine" if engine is None else f"runs {engine.environment.name}, which scores no sequence"
        raise HarnessError(
            f"--reference engine: decoder {decoder!r} {what}; the engine can be its own reference for "
            f"{', '.join(able)} (its greedy output without speculation and its log-probabilities)"
        )
    return option
