"""A run's options as one typed value: what runs (decoder, model, device, dtype), how hard (budget, seed, prompts,
the sampling suite's detectable shift), where the truth comes from (reference) and how an engine subject runs
(engine options). `mtp-harness run`, the pytest plugin, triage's re-run commands, minimal-case shrinking and
`harness.testing` all carry this value; `pytest_arguments` is the one function that writes it back as a command line,
and harness/subjects/run_options.py is the one that reads and checks a command line into it.

Pure data (no torch): the plugin imports it before any test runs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from typing import Any, Literal

from harness.contract.budget import DEFAULT_BUDGET
from harness.contract.paths import DEFAULT_MODEL, DEFAULT_PROMPTS
from harness.contract.seeds import DEFAULT_SEED

DEFAULT_DECODER = "mtp"
DEFAULT_DEVICE = "cpu"
DEFAULT_CONFIGURATION = "default"  # an engine's own settings, no deployed configuration
NO_FIXES = "none"  # --engine-fixes: the engine as shipped
ALL_FIXES = "all"  # --engine-fixes: every documented fix of the engine's findings
PYTEST_PREFIX = "--harness-"  # every option the pytest plugin registers starts with it

Scalar = str | int | float | bool | None  # an engine argument's value: JSON data, never code
SeedChoice = int | Literal["random", "last"]


class Reference(StrEnum):
    """Where the target-only truth comes from."""

    HARNESS = "harness"  # the harness's own copy of the checkpoint, in its process
    ENGINE = "engine"  # the engine under test without speculation, and its own log-probabilities


@dataclass(frozen=True)
class EngineOptions:
    """How an engine subject runs: its deployed configuration, the findings whose documented fix it runs with (sorted
    slugs; empty: as shipped), its own arguments, passed through as data (name, value) in the order given, the
    runner it runs (vLLM's model runner: v1 or v2; llama.cpp's build: source or wheel; None for an engine with one)
    and the user's own patches to its source, applied in its build in the order given (absolute paths; an engine
    built from its source only: llama.cpp), and the engine's release whose environment runs (None: the pinned one;
    `mtp-harness engine install NAME --version X` installs another)."""

    configuration: str = DEFAULT_CONFIGURATION
    fixes: tuple[str, ...] = ()
    arguments: tuple[tuple[str, Scalar], ...] = ()
    runner: str | None = None
    patches: tuple[str, ...] = ()
    version: str | None = None  # the engine's release whose environment runs (None: the pinned one)

    @property
    def argument_values(self) -> dict[str, Scalar]:
        return dict(self.arguments)

    @property
    def is_default(self) -> bool:
        return self == EngineOptions()


@dataclass(frozen=True)
class RunOptions:
    """Everything that decides what a run computes. `dtype` is the resolved dtype name (float64, float32, bfloat16,
    float16) once read by harness/subjects/run_options.py; `seed` is the session seed, or 'random' / 'last' until the
    pytest session resolves it."""

    decoder: str = DEFAULT_DECODER
    model: str = str(DEFAULT_MODEL)
    device: str = DEFAULT_DEVICE
    dtype: str | None = None
    budget: str = DEFAULT_BUDGET
    seed: SeedChoice = DEFAULT_SEED
    reference: Reference = Reference.HARNESS
    engine: EngineOptions = field(default_factory=EngineOptions)
    prompts: str = str(DEFAULT_PROMPTS)
    sampling_tv: float | None = None  # None: the budget's

    def with_seed(self, seed: int) -> RunOptions:
        return replace(self, seed=seed)

    def to_record(self) -> dict[str, Any]:
        """As JSON data (the run header's `options`); RunOptions.from_record reads it back."""
        record = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "engine"}
        record["reference"] = str(self.reference)
        record["engine"] = {
            "configuration": self.engine.configuration,
            "fixes": list(self.engine.fixes),
            "arguments": [[name, value] for name, value in self.engine.arguments],
            "runner": self.engine.runner,
            "patches": list(self.engine.patches),
            "version": self.engine.version,
        }
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> RunOptions:
        engine = record.get("engine") or {}
        known = {f.name for f in fields(cls)} - {"engine", "reference"}
        return cls(
            **{name: value for name, value in record.items() if name in known},
            reference=Reference(record.get("reference", Reference.HARNESS)),
            engine=EngineOptions(
                configuration=engine.get("configuration", DEFAULT_CONFIGURATION),
                fixes=tuple(engine.get("fixes", ())),
                arguments=tuple((str(name), value) for name, value in engine.get("arguments", ())),
                runner=engine.get("runner"),
                patches=tuple(engine.get("patches", ())),
                version=engine.get("version"),
            ),
        )


# the pytest options that carry a RunOptions field (pytest_arguments writes them; the plugin reads them)
RUN_OPTION_FLAGS = tuple(
    PYTEST_PREFIX + name
    for name in (
        "decoder",
        "model",
        "device",
        "dtype",
        "budget",
        "seed",
        "reference",
        "engine-config",
        "engine-fixes",
        "engine-arg",
        "engine-runner",
        "engine-patch",
        "engine-version",
        "prompts",
        "sampling-tv",
    )
)


def without_run_options(arguments: list[str]) -> list[str]:
    """A pytest command line's arguments without those that carry RunOptions fields (`--harness-decoder=x` or
    `--harness-decoder x`): what selects and reports the tests, to be joined with pytest_arguments(options)."""
    kept, skip_value = [], False
    for argument in arguments:
        if skip_value:
            skip_value = False
            continue
        flag = argument.split("=", 1)[0]
        if flag in RUN_OPTION_FLAGS:
            skip_value = "=" not in argument
            continue
        kept.append(argument)
    return kept


def engine_argument_text(name: str, value: Scalar) -> str:
    """NAME=VALUE as --engine-arg reads it back: a string that would read as other JSON is written quoted."""
    if isinstance(value, str):
        try:
            json.loads(value)
        except json.JSONDecodeError:
            return f"{name}={value}"
    return f"{name}={json.dumps(value)}"


def pytest_arguments(options: RunOptions) -> list[str]:
    """The pytest options that make a run with `options` (the plugin's --harness-... options): what runs, its budget
    and seed always; the reference, engine options, prompts and sampling shift where they are not the defaults."""
    seed = options.seed
    arguments = [
        f"{PYTEST_PREFIX}decoder={options.decoder}",
        f"{PYTEST_PREFIX}model={options.model}",
        f"{PYTEST_PREFIX}device={options.device}",
        *([f"{PYTEST_PREFIX}dtype={options.dtype}"] if options.dtype else []),
        f"{PYTEST_PREFIX}budget={options.budget}",
        f"{PYTEST_PREFIX}seed={seed}",
    ]
    if options.reference is not Reference.HARNESS:
        arguments.append(f"{PYTEST_PREFIX}reference={options.reference}")
    engine = options.engine
    if engine.configuration != DEFAULT_CONFIGURATION:
        arguments.append(f"{PYTEST_PREFIX}engine-config={engine.configuration}")
    if engine.fixes:
        arguments.append(f"{PYTEST_PREFIX}engine-fixes={','.join(engine.fixes)}")
    arguments += [f"{PYTEST_PREFIX}engine-arg={engine_argument_text(n, v)}" for n, v in engine.arguments]
    if engine.runner is not None:
        arguments.append(f"{PYTEST_PREFIX}engine-runner={engine.runner}")
    arguments += [f"{PYTEST_PREFIX}engine-patch={patch}" for patch in engine.patches]
    if engine.version is not None:
        arguments.append(f"{PYTEST_PREFIX}engine-version={engine.version}")
    if options.prompts != str(DEFAULT_PROMPTS):
        arguments.append(f"{PYTEST_PREFIX}prompts={options.prompts}")
    if options.sampling_tv is not None:
        arguments.append(f"{PYTEST_PREFIX}sampling-tv={options.sampling_tv!r}")
    return arguments


# the run options `mtp-harness run` spells as pytest does (--harness-seed); the others it reads without the prefix
# (--decoder), except those it has no option for, which follow `--` as pytest arguments
CLI_KEEPS_PREFIX = frozenset({PYTEST_PREFIX + "seed"})
CLI_PASSES_THROUGH = frozenset({PYTEST_PREFIX + "prompts", PYTEST_PREFIX + "sampling-tv"})


def run_command(options: RunOptions, suites: str) -> list[str]:
    """The `mtp-harness run` command line of a run with `options` on these suites (comma-joined names), written from
    pytest_arguments: what a summary prints to run a suite again, e.g. beneath the findings that masked it."""
    command, passed_through = ["mtp-harness", "run", "--suite", suites], []
    for argument in pytest_arguments(options):
        flag = argument.split("=", 1)[0]
        if flag in CLI_PASSES_THROUGH:
            passed_through.append(argument)
        elif flag in CLI_KEEPS_PREFIX:
            command.append(argument)
        else:
            command.append("--" + argument.removeprefix(PYTEST_PREFIX))
    return command + (["--", *passed_through] if passed_through else [])
