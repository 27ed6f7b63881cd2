"""One record per engine: everything the harness knows of an engine, declared once in the engine's own package
(`harness/subjects/engines/<engine>/__init__.py`, as `ENGINE`) and read by the engine registry
(harness/subjects/engines/registry.py). The command line, the door, the plugin, the report and triage ask the record;
nothing else lists an engine's decoders, configurations, findings or arguments.

Light on purpose (no torch): the door and the plugin read the records before anything loads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from harness.contract.errors import HarnessError
from harness.contract.run_options import DEFAULT_CONFIGURATION, EngineOptions
from harness.subjects.engines.configurations import EngineConfiguration, configuration_names
from harness.subjects.engines.environments import EngineEnvironment, flavour_of
from harness.subjects.engines.findings import Finding

if TYPE_CHECKING:
    from harness.contract.decoder import Decoder
    from harness.models.loading import ModelBundle

# (engine, decoder name, bundle, options) -> the engine's decoder of that name; an engine package imports its decoder
# module (torch) inside this function only
DecoderFactory = Callable[["Engine", str, "ModelBundle", EngineOptions], "Decoder"]
Ability = TypeVar("Ability")


@dataclass(frozen=True)
class Engine:
    """An engine the harness drives out of process, in its own environment.

    decoders: decoder name -> whether it speculates (`vllm-mtp`: True, `vllm`: False; at least one that speculates, at
    most one that does not); make_decoder: builds one of them; server: the script its environment's Python runs (it
    speaks harness/subjects/engines/wire.py); default_dtypes: device type -> the dtype a run uses when --dtype is not
    given; configurations: its deployed configurations (--engine-config), `default` among them; findings: the bugs
    found in it (harness/subjects/engines/findings.py, one folder each); abilities: what it can do beyond that, each
    an object of its own type (abilities.py: a choice of runners, a build from source, fixes, its own arguments,
    being its own reference, ...)."""

    environment: EngineEnvironment
    decoders: Mapping[str, bool]
    make_decoder: DecoderFactory
    server: Path
    default_dtypes: Mapping[str, str]
    configurations: Mapping[str, EngineConfiguration]
    findings: tuple[Finding, ...] = ()
    abilities: tuple[object, ...] = ()

    def __post_init__(self) -> None:
        if DEFAULT_CONFIGURATION not in self.configurations:
            raise ValueError(f"engine {self.name!r}: its configurations lack {DEFAULT_CONFIGURATION!r}")
        if not any(self.decoders.values()) or list(self.decoders.values()).count(False) > 1:
            raise ValueError(f"engine {self.name!r}: decoders that speculate, and at most one that does not")
        kinds = [type(ability) for ability in self.abilities]
        if len(set(kinds)) < len(kinds):
            raise ValueError(f"engine {self.name!r}: an ability listed twice")

    def ability(self, kind: type[Ability]) -> Ability | None:
        """Its ability of this type (abilities.py), or None where it has none."""
        return next((ability for ability in self.abilities if isinstance(ability, kind)), None)

    @property
    def name(self) -> str:
        return self.environment.name

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
        return self.make_decoder(self, decoder, bundle, options)
