"""A run's options read from its command line and checked, once per process, before any test runs: bad input stops
here, each mistake as one line that names the option as the front end spells it (`--decoder` for `mtp-harness run`,
`--harness-decoder` for pytest) and the value; the plugin and `mtp-harness run` exit with status 2.

What is checked, in seconds and without loading weights: the dtype, the decoder name (with near matches) and an
engine subject's environment (installed), the reference, the device (CUDA present when asked for), the model
directory (it exists, its config.json reads, its safetensors index and tensor names are in an MTP layout the harness
knows, its tokenizer is there; under --reference engine only config.json and the tokenizer), what the engine needs
of it (llama.cpp: a GGUF), the seed, the budget, the prompts file, the sampling shift, and the engine options: the
deployed configuration, the findings whose fix to apply and the engine's own arguments. The result is the run's
`RunOptions` (harness/contract/run_options.py), with the dtype resolved.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from harness.contract.budget import BUDGETS, DEFAULT_BUDGET
from harness.contract.dtypes import DTYPE_NAMES
from harness.contract.errors import HarnessError
from harness.contract.paths import DEFAULT_PROMPTS, FIXTURE_MODELS, resolve_model_path
from harness.contract.run_options import (
    ALL_FIXES,
    DEFAULT_CONFIGURATION,
    DEFAULT_DECODER,
    DEFAULT_DEVICE,
    NO_FIXES,
    PYTEST_PREFIX,
    EngineOptions,
    Reference,
    RunOptions,
    Scalar,
    SeedChoice,
)
from harness.contract.seeds import DEFAULT_SEED
from harness.subjects.engines.engine import Engine
from harness.subjects.engines.environments import flavour_of
from harness.subjects.engines.registry import engine_of_decoder, engines
from harness.subjects.registry import default_dtype, find_factory, is_module_factory, unknown_decoder


class UsageError(HarnessError):
    """A run's option that cannot work, found before any test runs."""


@dataclass(frozen=True)
class Spelling:
    """How a front end spells each option in its messages."""

    decoder: str
    model: str
    device: str
    dtype: str
    budget: str
    seed: str
    reference: str
    engine_config: str
    engine_fixes: str
    engine_arg: str
    engine_runner: str
    engine_patch: str
    engine_version: str
    prompts: str
    sampling_tv: str


PYTEST = Spelling(
    *(PYTEST_PREFIX + name for name in ("decoder", "model", "device", "dtype", "budget", "seed", "reference")),
    *(
        PYTEST_PREFIX + name
        for name in ("engine-config", "engine-fixes", "engine-arg", "engine-runner", "engine-patch", "engine-version")
    ),
    *(PYTEST_PREFIX + name for name in ("prompts", "sampling-tv")),
)
CLI = Spelling(
    "--decoder",
    "--model",
    "--device",
    "--dtype",
    "--budget",
    "--harness-seed",
    "--reference",
    "--engine-config",
    "--engine-fixes",
    "--engine-arg",
    "--engine-runner",
    "--engine-patch",
    "--engine-version",
    "--harness-prompts",
    "--harness-sampling-tv",
)


def read_run_options(
    *,
    decoder: str = DEFAULT_DECODER,
    model: str | None = None,
    device: str = DEFAULT_DEVICE,
    dtype: str | None = None,
    budget: str = DEFAULT_BUDGET,
    seed: str | int | None = None,
    reference: str = Reference.HARNESS,
    engine_config: str = DEFAULT_CONFIGURATION,
    engine_fixes: str = NO_FIXES,
    engine_args: list[str] | tuple[str, ...] = (),
    engine_runner: str | None = None,
    engine_patches: list[str] | tuple[str, ...] = (),
    engine_version: str | None = None,
    prompts: str | None = None,
    sampling_tv: float | None = None,
    spelling: Spelling = PYTEST,
) -> RunOptions:
    """The run's options, checked; a UsageError (one line, the option named as `spelling` spells it) for the first
    that cannot work. The checks that need no torch import (dtype, decoder name, engine environment, a missing model
    directory) come first."""
    s = spelling
    model = model or RunOptions().model
    check_dtype(dtype, s)
    engine_version = None if is_pinned_release(decoder, device, engine_version) else engine_version
    engine = check_decoder(decoder, device, s, engine_version)
    chosen_reference = check_reference(reference, decoder, engine, s)
    check_device(device, s)
    if chosen_reference is Reference.ENGINE:
        check_model_card(model, s)
    else:
        check_model(model, s)
    if engine is not None and engine.model_problem is not None:
        problem = engine.model_problem(resolve_model_path(model))
        if problem:
            raise UsageError(f"{s.decoder} {decoder} {s.model} {model}: {problem}")
    if budget not in BUDGETS:
        raise UsageError(f"{s.budget} {budget}: choose {', '.join(sorted(BUDGETS))}")
    if sampling_tv is not None and not 0 < sampling_tv < 1:
        raise UsageError(f"{s.sampling_tv} {sampling_tv}: a total-variation distance in (0, 1)")
    prompts = prompts or str(DEFAULT_PROMPTS)
    if not Path(prompts).is_file():
        raise UsageError(f"{s.prompts} {prompts}: no such prompt file")
    fixes = check_engine_fixes(engine_fixes, decoder, engine, s)
    runner = check_engine_runner(engine_runner, decoder, engine, device, s, engine_version)
    check_engine_release(engine_version, engine, fixes, runner, s)
    check_fixes_in_the_build(fixes, engine, runner, s)
    return RunOptions(
        decoder=decoder,
        model=model,
        device=device,
        dtype=resolved_dtype(decoder, device, dtype),
        budget=budget,
        seed=check_seed(seed, s),
        reference=chosen_reference,
        engine=EngineOptions(
            configuration=check_engine_configuration(engine_config, decoder, engine, s),
            fixes=fixes,
            arguments=check_engine_arguments(engine_args, decoder, engine, s),
            runner=runner,
            patches=check_engine_patches(engine_patches, decoder, engine, runner, s),
            version=engine_version,
        ),
        prompts=prompts,
        sampling_tv=sampling_tv,
    )


def resolved_dtype(decoder: str, device: str, dtype: str | None) -> str:
    """--dtype, else the decoder's own default for the device (vLLM: float32 on CPU), else float64 on CPU and bf16 on
    CUDA; as its canonical name (float64, float32, bfloat16, float16)."""
    if dtype is None:
        try:
            dtype = default_dtype(decoder, device)
        except HarnessError:
            dtype = None  # an unknown decoder is reported, with its near matches, when the decoder is built
    if dtype is not None:
        return DTYPE_NAMES[dtype.lower()]
    return "bfloat16" if device.startswith("cuda") else "float64"


def check_dtype(dtype: str | None, s: Spelling = PYTEST) -> None:
    if dtype is not None and dtype.lower() not in DTYPE_NAMES:
        raise UsageError(f"{s.dtype} {dtype}: unknown dtype; known: {', '.join(DTYPE_NAMES)}")


def check_device(device: str, s: Spelling = PYTEST) -> None:
    if not re.fullmatch(r"(cpu|cuda)(:\d+)?", device):  # without torch (seconds): the harness runs on cpu or cuda
        raise UsageError(f"{s.device} {device}: the harness runs on cpu or cuda (cuda, cuda:1, ...)")
    if device.startswith("cpu"):
        return
    import torch

    if not torch.cuda.is_available():
        raise UsageError(f"{s.device} {device}: torch sees no CUDA device on this machine")


def model_directory(model: str, s: Spelling = PYTEST) -> Path:
    """--model as a path that exists (a directory, or the name of a bundled fixture)."""
    path = resolve_model_path(model)
    if not path.exists():
        fixtures = ", ".join(sorted(p.name for p in FIXTURE_MODELS.iterdir() if p.is_dir()))
        raise UsageError(
            f"{s.model} {model}: no such model directory, and no bundled fixture of that name ({fixtures})"
        )
    return path


def check_model(model: str, s: Spelling = PYTEST) -> None:
    path = model_directory(model, s)
    from harness.models.checkpoint import check_checkpoint_files

    try:
        check_checkpoint_files(Path(path))  # a fraction of a second: most broken directories stop here
        from harness.models.loading import check_checkpoint  # imports torch and transformers (seconds)

        check_checkpoint(Path(path))
    except HarnessError as error:
        raise UsageError(f"{s.model} {model}: {error}") from None


def check_model_card(model: str, s: Spelling = PYTEST) -> None:
    """What --reference engine reads of the model directory: config.json and the tokenizer, no weight file."""
    path = model_directory(model, s)
    from harness.models.card import load_card  # imports torch and transformers (seconds)

    try:
        load_card(path)
    except HarnessError as error:
        raise UsageError(f"{s.model} {model}: {error}") from None


def is_pinned_release(decoder: str, device: str, version: str | None) -> bool:
    """--engine-version names the decoder's engine's pinned release: what a run without --engine-version runs (in the
    harness's process, for an engine whose pinned release is the harness's own)."""
    engine = engine_of_decoder(decoder, any_release=True) if version is not None else None
    return engine is not None and version == engine.environment.flavour(flavour_of(device)).version


def check_decoder(decoder: str, device: str, s: Spelling = PYTEST, version: str | None = None) -> Engine | None:
    """The decoder name is known (or its module:factory imports); an engine subject's environment is installed (at
    `version`, the engine's release, where given: one that is no release number, or not installed, is named).
    Returns the decoder's engine, None for one that runs in the harness's process."""
    unknown = unknown_decoder(decoder)  # the names alone: building a factory imports torch and transformers
    if unknown is not None:
        raise UsageError(f"{s.decoder} {decoder}: {unknown}")
    if is_module_factory(decoder):  # your own module: it must import and hold the factory
        try:
            find_factory(decoder)
        except HarnessError as error:
            raise UsageError(f"{s.decoder} {decoder}: {error}") from None
    engine = engine_of_decoder(decoder, version)
    if version is not None and engine is None:
        raise UsageError(f"{s.engine_version} {version}: decoder {decoder!r} is not an engine")
    if engine is not None:
        flavour = flavour_of(device)
        if version is not None:
            try:
                engine.environment.flavour(flavour, version)
            except HarnessError as error:
                raise UsageError(f"{s.engine_version} {version}: {error}") from None
        if engine.environment.installed_version(flavour, version) is None:
            where, of_release, release = (
                (f"{s.decoder} {decoder}", "", "")
                if version is None
                else (f"{s.engine_version} {version}", " of that release", f" --version {version}")
            )
            raise UsageError(
                f"{where}: the {engine.name} {flavour} environment{of_release} is not installed; "
                f"run `mtp-harness engine install {engine.name} --flavour {flavour}{release}`"
            )
    return engine


def check_reference(option: str, decoder: str, engine: Engine | None, s: Spelling = PYTEST) -> Reference:
    """--reference: harness (the harness's own copy of the checkpoint) or engine (the decoder's engine without
    speculation, for an engine that scores sequences)."""
    try:
        reference = Reference(option)
    except ValueError:
        raise UsageError(f"{s.reference} {option}: choose {', '.join(Reference)}") from None
    if reference is Reference.ENGINE and (engine is None or not engine.scores_sequences):
        able = [name for e in engines().values() if e.scores_sequences for name in e.decoders]
        what = "is not an engine" if engine is None else f"runs {engine.name}, which scores no sequence"
        raise UsageError(
            f"{s.reference} engine: decoder {decoder!r} {what}; the engine can be its own reference for "
            f"{', '.join(able)} (its greedy output without speculation and its log-probabilities)"
        )
    return reference


def check_seed(seed: str | int | None, s: Spelling = PYTEST) -> SeedChoice:
    """The session seed: an integer, 'random' or 'last' (None: the default)."""
    if seed is None:
        return DEFAULT_SEED
    if seed in ("random", "last"):
        return seed  # type: ignore[return-value]
    try:
        return int(seed)
    except ValueError:
        raise UsageError(f"{s.seed} {seed}: not an integer, 'random' or 'last'") from None


def check_engine_configuration(option: str, decoder: str, engine: Engine | None, s: Spelling = PYTEST) -> str:
    """--engine-config: `default`, or a deployed configuration of the decoder's engine."""
    if option == DEFAULT_CONFIGURATION:
        return option
    if engine is None:
        raise UsageError(
            f"{s.engine_config} {option}: decoder {decoder!r} is not an engine with deployed configurations (the "
            "harness's own decoder has none: its analogue, a batch against each request alone, is in the greedy suite)"
        )
    try:
        return engine.configuration(option).name
    except HarnessError as error:
        raise UsageError(f"{s.engine_config} {option}: {error}") from None


def check_engine_fixes(option: str, decoder: str, engine: Engine | None, s: Spelling = PYTEST) -> tuple[str, ...]:
    """--engine-fixes: `none` (the engine as shipped), `all`, or comma-separated finding slugs of the decoder's
    engine; the slugs, sorted."""
    if option == NO_FIXES:
        return ()
    if engine is None:
        raise UsageError(f"{s.engine_fixes} {option}: decoder {decoder!r} is not an engine with findings to fix")
    if engine.fixes is None:
        raise UsageError(
            f"{s.engine_fixes} {option}: {engine.name} is compiled into its wheel; the harness cannot apply a "
            f"finding's fix inside its process (build it with the fix and point "
            f"{engine.environment.python_override} at that environment's Python)"
        )
    known = {finding.slug for finding in engine.findings}
    wanted = known if option == ALL_FIXES else {slug.strip() for slug in option.split(",") if slug.strip()}
    unknown = sorted(wanted - known)
    if unknown or not wanted:
        raise UsageError(
            f"{s.engine_fixes} {option}: no finding {', '.join(unknown) or '(none named)'} of {engine.name}; known: "
            f"{NO_FIXES}, {ALL_FIXES}, {', '.join(sorted(known))}"
        )
    return tuple(sorted(wanted))


def check_engine_runner(
    option: str | None,
    decoder: str,
    engine: Engine | None,
    device: str,
    s: Spelling = PYTEST,
    version: str | None = None,
) -> str | None:
    """--engine-runner: one of the model runners of the decoder's engine (vLLM: v1, v2), available in its installed
    environment; without it, the runner the engine itself picks on this device, named. None for an engine with no
    choice of runner."""
    runners = engine.runners if engine is not None else {}
    if option is None:
        default = engine.default_runners.get(flavour_of(device)) if engine is not None and runners else None
        if version is not None and default is not None and default == engine.source_runner:
            return engine.release_runner  # another release runs from its published package (the build is the pin's)
        return default
    if not runners:
        raise UsageError(f"{s.engine_runner} {option}: decoder {decoder!r} is not an engine with a choice of runner")
    if option not in runners:
        raise UsageError(f"{s.engine_runner} {option}: {engine.name} has no such runner; known: {', '.join(runners)}")
    problem = engine.runner_problem(engine, flavour_of(device), option, version) if engine.runner_problem else None
    if problem:
        raise UsageError(f"{s.engine_runner} {option}: {problem}")
    return option


def check_fixes_in_the_build(fixes: tuple[str, ...], engine: Engine | None, runner: str | None, s: Spelling) -> None:
    """An engine built from its source (llama.cpp) applies a finding's fix as a patch in its build: the run must use
    that build, and each finding named must have its patch (<fixes folder>/<slug>.patch)."""
    if not fixes or engine is None or engine.source_runner is None or engine.fixes is None:
        return
    if runner != engine.source_runner:
        raise UsageError(
            f"{s.engine_fixes} {','.join(fixes)}: {engine.name}'s fixes are patches to its source, built in: run "
            f"{s.engine_runner} {engine.source_runner}, not {runner}"
        )
    missing = [slug for slug in fixes if not (engine.fixes / f"{slug}.patch").is_file()]
    if missing:
        raise UsageError(f"{s.engine_fixes} {','.join(fixes)}: no fix written yet for {', '.join(missing)}")


def check_engine_release(
    version: str | None, engine: Engine | None, fixes: tuple[str, ...], runner: str | None, s: Spelling
) -> None:
    """--engine-version: another release runs as shipped (the findings' fixes are written and measured against the
    pinned release) and from its published package (an engine built here builds the pinned release's source)."""
    if version is None or engine is None:
        return
    if fixes:
        raise UsageError(
            f"{s.engine_version} {version}: the findings' fixes are written for {engine.name}'s pinned release; run "
            f"another release as shipped (without {s.engine_fixes})"
        )
    if engine.source_runner is not None and runner == engine.source_runner:
        raise UsageError(
            f"{s.engine_version} {version}: {engine.name}'s {runner} runner builds the pinned release's source; run "
            f"{s.engine_runner} {engine.release_runner}"
        )


def check_engine_patches(
    patches: list[str] | tuple[str, ...], decoder: str, engine: Engine | None, runner: str | None, s: Spelling = PYTEST
) -> tuple[str, ...]:
    """--engine-patch: files of the user's own changes to an engine built from its source (llama.cpp), for a run of
    that build; as absolute paths, in the order given. Whether each applies is the build's to say (it names the one
    that does not)."""
    if not patches:
        return ()
    first = patches[0]
    if engine is None or engine.source_runner is None:
        raise UsageError(f"{s.engine_patch} {first}: decoder {decoder!r} is not an engine built from its source")
    if runner != engine.source_runner:
        raise UsageError(
            f"{s.engine_patch} {first}: {engine.name}'s {runner} runner is not built here; a patch needs "
            f"{s.engine_runner} {engine.source_runner}"
        )
    resolved = []
    for patch in patches:
        path = Path(patch).expanduser().resolve()
        if not path.is_file():
            raise UsageError(f"{s.engine_patch} {patch}: no such file")
        if not path.read_bytes().strip():
            raise UsageError(f"{s.engine_patch} {patch}: the file is empty")
        resolved.append(str(path))
    return tuple(resolved)


def check_engine_arguments(
    options: list[str] | tuple[str, ...], decoder: str, engine: Engine | None, s: Spelling = PYTEST
) -> tuple[tuple[str, Scalar], ...]:
    """--engine-arg NAME=VALUE (repeated): the engine's own arguments, passed through as data (a VALUE that reads as
    JSON is that value, else the string)."""
    if not options:
        return ()
    if engine is None or not engine.takes_arguments:
        raise UsageError(f"{s.engine_arg} {options[0]}: decoder {decoder!r} is not an engine that takes arguments")
    arguments: dict[str, Scalar] = {}
    for option in options:
        name, equals, text = option.partition("=")
        name = name.strip()
        if not equals or not name.isidentifier():
            raise UsageError(f"{s.engine_arg} {option}: write NAME=VALUE, NAME one of {engine.name}'s")
        if name in engine.owned_arguments:
            raise UsageError(
                f"{s.engine_arg} {option}: the harness sets {name} itself (the model, dtype, speculation and "
                "--engine-config's settings)"
            )
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text  # a word: the string itself (quantization=fp8)
        if isinstance(value, dict | list):
            raise UsageError(f"{s.engine_arg} {option}: a value is a number, true, false, null or a string")
        if name in engine.unserved_arguments and not (value is None or (type(value) is int and value == 1)):
            raise UsageError(f"{s.engine_arg} {option}: {engine.unserved_arguments[name]}")
        arguments[name] = value
    return tuple(arguments.items())
