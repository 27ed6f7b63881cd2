"""One record per engine: everything the harness knows of an engine, declared once in the engine's own package
(`harness/subjects/engines/<engine>/__init__.py`, as `ENGINE`) and read by the engine registry
(harness/subjects/engines/registry.py). The command line, the door, the plugin, the report and triage ask the record;
nothing else lists an engine's decoders, configurations, findings or arguments.

Light on purpose (no torch): the door and the plugin read the records before anything loads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.contract.errors import HarnessError
from harness.contract.run_options import DEFAULT_CONFIGURATION, EngineOptions
from harness.subjects.engines.configurations import EngineConfiguration, configuration_names
from harness.subjects.engines.environments import EngineEnvironment, flavour_of
from harness.subjects.engines.findings import Finding

if TYPE_CHECKING:
    from harness.contract.decoder import Decoder
    from harness.models.loading import ModelBundle

# (engine, bundle, speculative, options) -> the engine's decoder; an engine package imports its decoder module (torch)
# inside this function only
DecoderFactory = Callable[["Engine", "ModelBundle", bool, EngineOptions], "Decoder"]
# (failure group, run header, file name) -> a greedy failure group's reproducer script that uses the engine alone
ReproducerWriter = Callable[[dict[str, Any], dict[str, Any], str], str]


@dataclass(frozen=True)
class Engine:
    """An engine the harness drives out of process, in its own environment.

    decoders: decoder name -> whether it speculates (`vllm-mtp`: True, `vllm`: False; at least one that speculates, at
    most one that does not); decoder_factories: decoder name -> its own factory, where an engine's decoders differ by
    more than speculation (transformers: MTP and assisted generation; the others are built by make_decoder);
    pinned_in_process: its pinned release is the harness's own and runs in the harness's process (transformers): its
    decoders are this engine's only with --engine-version (registry.engine_of_decoder); server: the script its
    environment's Python runs (it speaks harness/subjects/engines/wire.py); default_dtypes: device type -> the dtype a
    run uses when --dtype is not given; configurations: its deployed configurations (--engine-config), `default` among
    them; findings: the bugs found in it; fixes: the folder of its findings' fixes, put on its PYTHONPATH under
    --engine-fixes (None: a compiled engine, nothing to patch in its process); reproducer: a greedy failure group's
    script using the engine alone; model_problem: model directory -> why it cannot serve it (checked at the door);
    scores_sequences: whether it can be its own reference (--reference engine: greedy decoding without speculation and
    its log-probabilities of given sequences); owned_arguments: its own arguments the harness sets itself (refused
    from --engine-arg); unserved_arguments: name -> why a value other than 1 or null cannot be served yet; runners:
    the model runners a run may choose (--engine-runner), name -> what it is; default_runners: flavour -> the runner
    the engine itself picks there (what a run without --engine-runner gets, named explicitly); runner_problem:
    (engine, flavour, runner, release) -> why that runner cannot run in the installed environment of that release
    (None: the pinned one; checked at the door); source_runner: the runner built from the engine's source here, where
    --engine-patch applies (llama.cpp: source; None: installed from a wheel); release_runner: the runner another
    release (--engine-version) runs by default where the source runner builds the pinned release only (llama.cpp:
    wheel); build_record: the run's engine options -> the record of the build it runs (version,
    patches and their hashes, build time; None where not built), for the run header; make_build: builds what the
    run's engine options need from source when it is not built yet (`mtp-harness run` calls it before the tests);
    alone: a server script that builds the engine as `server` does, installs no hook, and answers `generate` (the
    wire's requests decoded by the engine's own generate call, timed around that call) for the overhead probe
    (`mtp-harness bench --job vllm`; None: no probe for this engine); reproducer_arguments: (a runner, None: the
    engine's default; a model directory) -> the arguments of each finding's standalone reproducer
    (docs/findings/<slug>.py) run on them, as `mtp-harness matrix` runs them on every release (None: its findings
    have no reproducer to run)."""

    environment: EngineEnvironment
    decoders: Mapping[str, bool]
    make_decoder: DecoderFactory
    server: Path
    default_dtypes: Mapping[str, str]
    configurations: Mapping[str, EngineConfiguration]
    findings: tuple[Finding, ...] = ()
    fixes: Path | None = None
    reproducer: ReproducerWriter | None = None
    model_problem: Callable[[Path], str | None] | None = None
    scores_sequences: bool = False
    owned_arguments: tuple[str, ...] = ()
    unserved_arguments: Mapping[str, str] = field(default_factory=dict)
    runners: Mapping[str, str] = field(default_factory=dict)
    default_runners: Mapping[str, str] = field(default_factory=dict)
    runner_problem: Callable[[Engine, str, str, str | None], str | None] | None = None
    source_runner: str | None = None
    release_runner: str | None = None
    build_record: Callable[[EngineOptions], dict[str, Any] | None] | None = None
    make_build: Callable[[EngineOptions, Callable[[str], None]], None] | None = None
    alone: Path | None = None
    reproducer_arguments: Callable[[str | None, Path], tuple[str, ...]] | None = None
    decoder_factories: Mapping[str, DecoderFactory] = field(default_factory=dict)
    pinned_in_process: bool = False

    def __post_init__(self) -> None:
        if DEFAULT_CONFIGURATION not in self.configurations:
            raise ValueError(f"engine {self.name!r}: its configurations lack {DEFAULT_CONFIGURATION!r}")
        if not any(self.decoders.values()) or list(self.decoders.values()).count(False) > 1:
            raise ValueError(f"engine {self.name!r}: decoders that speculate, and at most one that does not")
        if not set(self.decoder_factories) <= set(self.decoders):
            raise ValueError(f"engine {self.name!r}: a decoder factory for a decoder it does not declare")
        if not set(self.default_runners.values()) <= set(self.runners):
            raise ValueError(f"engine {self.name!r}: a default runner it does not declare")

    @property
    def name(self) -> str:
        return self.environment.name

    @property
    def takes_arguments(self) -> bool:
        return bool(self.owned_arguments)

    def decoder_name(self, speculative: bool) -> str:
        """Its (first) decoder that speculates, or its decoder that does not; a HarnessError where it has none."""
        for name, speculates in self.decoders.items():
            if speculates == speculative:
                return name
        raise HarnessError(f"{self.name} has no decoder without speculation")

    def configuration(self, name: str) -> EngineConfiguration:
        """The deployed configuration `name`; a HarnessError names the known ones."""
        if name not in self.configurations:
            raise HarnessError(
                f"{self.name} has no engine configuration {name!r}; known: {configuration_names(self.configurations)}"
            )
        return self.configurations[name]

    def version(self, device: str, release: str | None = None) -> str | None:
        """The engine version its environment holds for `device` (cpu, cuda, cuda:1), that of `release` where given,
        or None when not installed."""
        return self.environment.installed_version(flavour_of(device), release)

    def build(self, decoder: str, bundle: ModelBundle, options: EngineOptions) -> Decoder:
        """The decoder `decoder` (one of `decoders`) for `bundle`, under the engine options of the run."""
        factory = self.decoder_factories.get(decoder, self.make_decoder)
        return factory(self, bundle, self.decoders[decoder], options)
