"""What an engine can do beyond what every engine does: each ability is an object of its own type, which an engine's
record lists (`Engine.abilities`) and whoever needs it asks for by type (`engine.ability(ModelRunners)`). An engine
without an ability simply does not list it, and the door refuses the option that needs it, naming the engine.

- `ModelRunners`: a choice of runner (--engine-runner), one picked per device when none is asked for;
- `SourceBuild`: a runner built here from the engine's source, with the user's patches (--engine-patch);
- `FixesOnImport`: the findings' fixes installed in the engine's Python process as it imports itself (a
  sitecustomize on its PYTHONPATH); an engine whose fixes take another road supplies its own `Fixes`;
- `EngineArguments`: the engine's own arguments passed through as data (--engine-arg);
- `OwnReference`: the engine can be its own reference (--reference engine): it decodes greedily without speculation
  and scores sequences;
- `ModelNeeds`: what the engine needs of a model directory beyond the checkpoint (a GGUF);
- `ReleaseModelNeeds`: whether another release can serve a model with a decoder, asked of that release in its own
  environment (transformers: a release's MTP generation and the model families it reads);
- `OverheadProbe`, `FailureReproducer`, `FindingReproducers`: what `mtp-harness bench`, triage and
  `mtp-harness matrix` run of it;
- `PinnedInProcess`: its pinned release is the harness's own and runs in the harness's process.

Light on purpose (no torch): the door reads abilities before anything loads.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from harness.contract.run_options import EngineOptions
from harness.subjects.engines import serving

FIXES_VARIABLE = "MTP_HARNESS_ENGINE_FIXES"  # the fix.py files the engine process installs (os.pathsep-separated)
FIXES_SITE = Path(serving.__file__).parent / "fixes"  # its sitecustomize.py installs them, put on the PYTHONPATH


@dataclass(frozen=True)
class ModelRunners:
    """A choice of runner: name -> what it is; the runner the engine picks itself per flavour (cpu, cuda); and why
    one cannot run in an installed environment (engine, flavour, runner, release -> the reason, or None)."""

    runners: Mapping[str, str]
    picked: Mapping[str, str]
    problem: Callable[[Any, str, str, str | None], str | None] | None = None

    def __post_init__(self) -> None:
        if not set(self.picked.values()) <= set(self.runners):
            raise ValueError(f"a runner picked by default is not one of {sorted(self.runners)}")


@dataclass(frozen=True)
class SourceBuild:
    """A runner built here from the engine's source (`runner`), where the user's own patches apply; another release
    runs `release_runner` (the published package: the build is the pinned release's). `make` builds what the run's
    engine options need unless built; `record` is that build's record (version, patches and their hashes, build
    time) for the run header, None where not built."""

    runner: str
    release_runner: str
    make: Callable[[EngineOptions, Callable[[str], None]], None]
    record: Callable[[EngineOptions], dict[str, Any] | None]


@runtime_checkable
class Fixes(Protocol):
    """How an engine runs with the documented fixes of its findings (--engine-fixes)."""

    def problem(self, slugs: Sequence[str], runner: str | None) -> str | None:
        """Why the engine cannot run these fixes on this runner, or None."""

    def process_environment(self, slugs: Sequence[str]) -> dict[str, str]:
        """What the engine's process needs in its environment to apply them."""


@dataclass(frozen=True)
class FixesOnImport:
    """The fixes installed inside the engine's Python process as it starts, each finding's fix.py in its folder of
    `findings` (<slug>/fix.py): the shared sitecustomize.py (harness/subjects/engines/serving/fixes/, standard library
    only) goes on the process's PYTHONPATH and installs the files named in MTP_HARNESS_ENGINE_FIXES. The engine's files
    are never touched."""

    findings: Path

    def fix(self, slug: str) -> Path:
        return self.findings / slug / "fix.py"

    def problem(self, slugs: Sequence[str], runner: str | None) -> str | None:
        missing = [slug for slug in slugs if not self.fix(slug).is_file()]
        return f"no fix written yet for {', '.join(missing)}" if missing else None

    def process_environment(self, slugs: Sequence[str]) -> dict[str, str]:
        pythonpath = os.pathsep.join(filter(None, [str(FIXES_SITE), os.environ.get("PYTHONPATH")]))
        return {"PYTHONPATH": pythonpath, FIXES_VARIABLE: os.pathsep.join(str(self.fix(slug)) for slug in slugs)}


@dataclass(frozen=True)
class EngineArguments:
    """The engine's own arguments a run passes through as data: those the harness sets itself (refused), and those it
    cannot serve yet other than at 1 or null (name -> why)."""

    owned: tuple[str, ...]
    unserved: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class OwnReference:
    """The engine can be its own reference: greedy decoding without speculation, and its log-probabilities of given
    sequences (--reference engine)."""


@dataclass(frozen=True)
class ModelNeeds:
    """What the engine needs of a model directory beyond the checkpoint: directory -> why it cannot serve it, or
    None (checked at the door)."""

    problem: Callable[[Path], str | None]


@dataclass(frozen=True)
class ModelDtypeNeeds:
    """What the engine needs of a model in a dtype on a flavour: (directory, dtype name, flavour) -> why it cannot
    serve it so, or None (checked at the door)."""

    problem: Callable[[Path, str, str], str | None]


@dataclass(frozen=True)
class ReleaseModelNeeds:
    """Whether a release other than the pinned one can serve a model directory with a decoder, measured in that
    release's environment: (decoder, the environment's Python, directory) -> why it cannot, or None (checked at the
    door, and by `mtp-harness matrix` for each release)."""

    problem: Callable[[str, Path, Path], str | None]


@dataclass(frozen=True)
class OverheadProbe:
    """A server script that builds the engine as its server does, installs no hook, and answers `generate` (the
    wire's requests decoded by the engine's own generate call, timed around it): `mtp-harness bench --job vllm`."""

    server: Path


@dataclass(frozen=True)
class FailureReproducer:
    """A greedy failure group's standalone script that uses the engine alone: (group, run header, file name) -> the
    script."""

    write: Callable[[dict[str, Any], dict[str, Any], str], str]


@dataclass(frozen=True)
class FindingReproducers:
    """The arguments each finding's standalone reproducer takes: (a runner, None: the engine's default; a model
    directory) -> arguments; `mtp-harness matrix` runs them on every release."""

    arguments: Callable[[str | None, Path], tuple[str, ...]]


@dataclass(frozen=True)
class PinnedInProcess:
    """Its pinned release is the harness's own and runs in the harness's process (transformers): decoder name -> its
    in-process factory (bundle -> decoder). Its decoders are this engine's, out of process, only with
    --engine-version."""

    decoders: Mapping[str, Callable[[Any], Any]]
