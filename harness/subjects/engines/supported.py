"""The engines the harness drives out of process: their environments, the decoder names that run them, and
the findings recorded against them. Light on purpose (no torch import): the plugin reads it at collection."""

from __future__ import annotations

import json
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

# vLLM's LLM arguments the harness sets (harness/subjects/engines/vllm_server.py llm_arguments): a run cannot move them
VLLM_OWNED_ARGUMENTS = (
    "model",
    "dtype",
    "max_model_len",
    "speculative_config",
    "seed",
    "enforce_eager",
    "async_scheduling",
    "skip_tokenizer_init",
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
VLLM_UNSERVED_ARGUMENTS = {
    "pipeline_parallel_size": "with pipeline_parallel_size > 1 the last stage samples and drafts, and the harness "
    "reads its hooks from the first worker: not yet",
    "data_parallel_size": "data_parallel_size > 1 runs engines of their own behind one front end, and the harness "
    "drives one engine: not yet",
}


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
    # the engine's own arguments a run may pass through (--engine-arg NAME=VALUE): the names the harness sets itself
    # are refused (model, dtype, speculation, the deployed configurations' settings), and those it cannot serve yet
    owned_arguments: tuple[str, ...] = ()
    unserved_arguments: Mapping[str, str] = field(default_factory=dict)


ENGINES = {
    VLLM.name: EngineSubject(
        VLLM,
        ("vllm-mtp", "vllm"),
        VLLM_FINDINGS,
        vllm_reproducer_script,
        fixable=True,
        configurations=VLLM_CONFIGURATIONS,
        scores_sequences=True,
        owned_arguments=VLLM_OWNED_ARGUMENTS,
        unserved_arguments=VLLM_UNSERVED_ARGUMENTS,
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


def engine_arguments(decoder: str, options: list[str] | tuple[str, ...] | None) -> dict[str, object]:
    """--engine-arg NAME=VALUE (repeated) for `decoder`: the engine's own arguments, passed through as data (a VALUE
    that reads as JSON is that value, else the string). A usage error names the argument at fault."""
    if not options:
        return {}
    engine = engine_of_decoder(decoder)
    if engine is None or not engine.owned_arguments:
        raise HarnessError(f"--engine-arg {options[0]}: decoder {decoder!r} is not an engine that takes arguments")
    arguments: dict[str, object] = {}
    for option in options:
        name, equals, text = option.partition("=")
        name = name.strip()
        if not equals or not name.isidentifier():
            raise HarnessError(f"--engine-arg {option}: write NAME=VALUE, NAME one of {engine.environment.name}'s")
        if name in engine.owned_arguments:
            raise HarnessError(
                f"--engine-arg {option}: the harness sets {name} itself (the model, dtype, speculation and "
                "--engine-config's settings)"
            )
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text  # a word: the string itself (quantization=fp8)
        if isinstance(value, dict | list):
            raise HarnessError(f"--engine-arg {option}: a value is a number, true, false, null or a string")
        if name in engine.unserved_arguments and not (value is None or (type(value) is int and value == 1)):
            raise HarnessError(f"--engine-arg {option}: {engine.unserved_arguments[name]}")
        arguments[name] = value
    return arguments
