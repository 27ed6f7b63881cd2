"""What every out-of-process engine's decoder does, whatever the engine: its engine processes (one per k and draft
mode, started on first use, kept for the decoder's lifetime: harness/subjects/engines/process.py), the wire calls to
them, the capabilities it lacks without speculation or under a deployed configuration, the findings' fixes put into
its processes under --engine-fixes (and checked applied), its deployed configurations as variants of the subject
(`configured(name)`, `without_speculation()`) and the engine's own counters of what it did (`take_evidence()`).

An engine's package subclasses `EngineDecoder` with what only that engine knows: which dtypes and models it serves
(`check_bundle`), the configuration its server builds the engine from (`server_config`), the environment variables
its process needs (`server_env`), and its own operations (log-probabilities, scoring).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

from harness.contract.decoder import DecodeRequest, DecodeResult
from harness.contract.features import FEATURES, refuse_unserved
from harness.contract.passes import with_pass_contract
from harness.contract.run_options import EngineOptions
from harness.decoding.batch import decode_in_groups
from harness.subjects.engines.abilities import Fixes
from harness.subjects.engines.batch_steps import StepFact, with_step_facts
from harness.subjects.engines.environments import flavour_of
from harness.subjects.engines.process import EngineError, EnginePool, EngineProcess
from harness.subjects.engines.wire import EngineProtocolError

if TYPE_CHECKING:
    from harness.models.loading import ModelBundle
    from harness.subjects.engines.engine import Engine

EngineKey = tuple[int, str]  # (k, draft mode) of an engine process; (0, "greedy") without speculation
DRAFTING = ("num_draft_tokens", "draft_mode", "forced_drafts")  # what a decoder without speculation cannot serve


def engine_threads() -> int:
    """The threads an engine process computes with (MTP_HARNESS_ENGINE_THREADS, default 1): it shares the machine with
    the harness and other engines."""
    return int(os.environ.get("MTP_HARNESS_ENGINE_THREADS", "1"))


class EngineDecoder:
    """An engine subject: `engine`'s decoder that speculates (or not, speculative=False) on `bundle`'s model, under
    the run's engine options (deployed configuration, fixes, the engine's own arguments)."""

    drafts_from = 1  # the engines' prefill samples output token 0 without drafts
    subject_name: str | None = None  # its decoder's name where the engine has more than one that speculates
    # what the engine cannot serve even with speculation, and why; request field -> the values it serves with it
    speculative_lacks: Mapping[str, str] = MappingProxyType({})
    speculative_serves: Mapping[str, set[object]] = MappingProxyType({})
    # the request features (harness/contract/features.py) the engine package passes on to the engine, and why not the
    # others (in the engine's own words where it refuses them)
    engine_features: frozenset[str] = frozenset()
    why_no_feature: Mapping[str, str] = MappingProxyType({})
    # what its findings' signatures read of the batch each pass ran in (DecodeResult.step_facts; batch_steps.py)
    step_facts: Mapping[str, StepFact] = MappingProxyType({})

    def __init__(self, engine: Engine, bundle: ModelBundle, speculative: bool, options: EngineOptions) -> None:
        self.engine = engine
        self.configuration = engine.configuration(options.configuration)  # the deployed configuration it runs under
        self.check_bundle(bundle)
        self.bundle = bundle
        self.speculative = speculative
        self.options = options
        self.name = self.subject_name or engine.decoder_name(speculative)
        self.flavour = flavour_of(bundle.device)
        lacks = dict(self.speculative_lacks)
        if not speculative:
            lacks |= {field: f"{engine.name} without speculation drafts nothing" for field in DRAFTING}
        lacks |= self.configuration.lacks
        self.unsupported = frozenset(lacks)
        self.features = self.engine_features
        self.why_unsupported = {
            **{name: f"the harness's {engine.name} package does not pass {name} on yet" for name in FEATURES},
            **self.why_no_feature,
            **lacks,
        }
        self.serves = dict(self.speculative_serves) if speculative else {}
        self.pool = EnginePool()

    # --- what an engine's package says ---------------------------------------------------------------------------
    def check_bundle(self, bundle: ModelBundle) -> None:
        """Raise a HarnessError when the engine cannot serve this model, dtype or device."""

    def server_config(self, k: int, draft_mode: str) -> dict[str, object]:
        """The configuration the engine's server builds its engine from (the first line it reads)."""
        raise NotImplementedError

    def server_env(self) -> dict[str, str]:
        """Environment variables of the engine's process, besides the harness's own."""
        return {}

    def server_preload(self, config: Mapping[str, object]) -> Mapping[str, object] | None:
        """What the server's `prepare_process` needs to import the engine before its configuration arrives, for
        engines whose servers are forked from a zygote that imported it once (forked.py); None: a process of its own
        each start (the default)."""
        return None

    def server_python(self) -> Path:
        """The Python of the environment the engine's processes run in (default: the engine's installed one)."""
        return self.engine.environment.python(self.flavour, self.options.version)

    def check_requests(self, requests: Sequence[DecodeRequest]) -> None:
        """Raise InvalidRequest for a request the engine cannot serve as asked."""

    @property
    def context_limit(self) -> int:
        """The longest prompt + output a request may ask for."""
        return self.bundle.max_context

    # --- what every engine subject does --------------------------------------------------------------------------
    @property
    def engine_configurations(self) -> Mapping[str, object]:
        return self.engine.configurations

    @property
    def engine_version(self) -> str | None:
        return self.engine.environment.installed_version(self.flavour, self.options.version)

    def engine_key(self, request: DecodeRequest) -> EngineKey:
        return (request.num_draft_tokens, request.draft_mode) if self.speculative else (0, "greedy")

    def decode(self, requests: Sequence[DecodeRequest]) -> list[DecodeResult]:
        refuse_unserved(self, requests)  # the wire carries no request feature an engine package does not declare
        self.check_requests(requests)

        def decode_group(group: list[DecodeRequest], indices: list[int]) -> list[DecodeResult]:
            results = self.process(self.engine_key(group[0])).decode(group)
            for index, request, result in zip(indices, group, results, strict=True):
                if request.n > 1 and len(result.samples) != request.n:
                    raise EngineProtocolError(
                        f"engine {self.name}, request {index}: asked for n = {request.n} samples, got "
                        f"{len(result.samples)}"
                    )
            return with_step_facts(group, results, self.step_facts)

        # the engine draws a request's n samples itself (no fan-out here: its own is under test)
        results = decode_in_groups(
            requests, self.bundle.vocab_size, self.context_limit, self.engine_key, decode_group, lambda r: [r]
        )
        return with_pass_contract(requests, results, self.name)  # where the engine's results enter the harness

    def call(self, op: str, fields: Mapping[str, object], about: str) -> object:
        """One of the engine's own operations, on its process at k = 1 (without speculation: its only one)."""
        return self.process((1, "greedy") if self.speculative else (0, "greedy")).call(op, fields, about)

    def process(self, key: EngineKey) -> EngineProcess:
        return self.pool.get(key, lambda: self.start(key))

    def start(self, key: EngineKey) -> EngineProcess:
        k, draft_mode = key
        label = f"{self.name}-{self.bundle.name}" + (f"-k{k}-{draft_mode}" if self.speculative else "")
        label += "" if self.configuration.name == EngineOptions().configuration else f"-{self.configuration.name}"
        label += f"-{self.options.runner}" if self.options.runner else ""
        env = self.server_env()
        fixes = self.engine.ability(Fixes)
        if self.options.fixes and fixes is not None:
            env.update(fixes.process_environment(self.options.fixes))
        python = self.server_python()
        config = self.server_config(k, draft_mode)
        process = EngineProcess(python, self.engine.server, config, env, label, preload=self.server_preload(config))
        applied = tuple(process.info.get("fixes", ()))
        if fixes is not None and applied != self.options.fixes:
            process.close()
            raise EngineError(
                f"engine {label}: asked for the fixes {list(self.options.fixes)}, it applied {list(applied)}"
            )
        if self.options.runner is not None and process.info.get("runner") != self.options.runner:
            process.close()
            ran = process.info.get("runner")
            raise EngineError(f"engine {label}: asked for model runner {self.options.runner}, it runs {ran}")
        return process

    def configured(self, configuration: str) -> EngineDecoder:
        """The same subject (speculation, fixes, arguments) under another deployed configuration, with engines of
        its own."""
        return type(self)(
            self.engine, self.bundle, self.speculative, replace(self.options, configuration=configuration)
        )

    def without_speculation(self) -> EngineDecoder:
        """The engine without speculation, with the same configuration, fixes and arguments, with engines of its own."""
        return type(self)(self.engine, self.bundle, False, self.options)

    def take_evidence(self) -> dict[str, int]:
        """The engine's own counters of what it did since the last take (configurations.EVIDENCE)."""
        return self.pool.take_evidence()

    def close(self) -> None:
        self.pool.close()
