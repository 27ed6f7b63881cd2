"""One check per run option, keyed by the option's name (CHECKS), each `(what it was given, the reading so far) -> the
field's value`. In seconds and without loading weights: the decoder name and an engine's environment, the release,
the device, the dtype, the reference, the model directory, the budget, the seed, and an engine subject's options,
which each ask the engine's own ability (harness/subjects/engines/abilities.py) and refuse, naming the engine, where it
has none."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from harness.contract.budget import BUDGETS
from harness.contract.dtypes import DTYPE_NAMES
from harness.contract.errors import HarnessError
from harness.contract.paths import DEFAULT_MODEL, DEFAULT_PROMPTS, FIXTURE_MODELS, resolve_model_path
from harness.contract.run_options import (
    ALL_FIXES,
    DEFAULT_CONFIGURATION,
    NO_FIXES,
    Reference,
    Scalar,
    SeedChoice,
)
from harness.contract.seeds import DEFAULT_SEED
from harness.contract.suites import parse_minimums
from harness.door.reading import Check, Reading, Refusal
from harness.subjects.decoder_registry import default_dtype, find_factory, is_module_factory, unknown_decoder
from harness.subjects.engines.abilities import (
    EngineArguments,
    Fixes,
    ModelDtypeNeeds,
    ModelNeeds,
    ModelRunners,
    OwnReference,
    PinnedInProcess,
    ReleaseModelNeeds,
    SourceBuild,
)
from harness.subjects.engines.engine import Engine
from harness.subjects.engines.environments import flavour_of
from harness.subjects.engines.registry import engine_of_decoder, engines


def given_release(reading: Reading) -> str | None:
    """The engine release asked for, None where none is, or where it names the decoder's engine's pinned release: what
    a run without --engine-version runs (in the harness's process, for an engine whose pinned release is its own)."""
    release = reading.given["engine-version"]
    if release is None:
        return None
    engine = engine_of_decoder(str(reading.given["decoder"]), any_release=True)
    flavour = flavour_of(str(reading.given["device"]))
    pinned = engine is not None and release == engine.environment.flavour(flavour).version
    return None if pinned else str(release)


def the_engine(reading: Reading, lacking: str) -> Engine:
    """The decoder's engine; a refusal saying the decoder is not an engine `lacking` where it runs in this process."""
    if reading.engine is None:
        raise Refusal(f"decoder {reading.checked['decoder']!r} is not an engine {lacking}")
    return reading.engine


def decoder(name: str, reading: Reading) -> str:
    """A known decoder name (near matches otherwise), or a module:factory that imports; an engine's decoder needs its
    environment installed (that of the release asked for: its own check)."""
    unknown = unknown_decoder(name)  # the names alone: building a factory imports torch and transformers
    if unknown is not None:
        raise Refusal(unknown)
    if is_module_factory(name):
        find_factory(name)
    release = given_release(reading)
    reading.engine = engine = engine_of_decoder(name, release)
    if engine is not None and release is None:
        flavour = flavour_of(str(reading.given["device"]))
        if engine.environment.installed_version(flavour) is None:
            raise Refusal(
                f"the {engine.name} {flavour} environment is not installed; run "
                f"`mtp-harness engine install {engine.name} --flavour {flavour}`"
            )
    return name


def engine_version(value: str | None, reading: Reading) -> str | None:
    """Another release of the decoder's engine than the pinned one: a release number whose environment is installed."""
    release = given_release(reading)
    if release is None:
        return None
    engine = the_engine(reading, "with releases to choose from")
    flavour = flavour_of(str(reading.given["device"]))
    engine.environment.flavour(flavour, release)  # one that is no release number stops here
    if engine.environment.installed_version(flavour, release) is None:
        raise Refusal(
            f"the {engine.name} {flavour} environment of that release is not installed; run "
            f"`mtp-harness engine install {engine.name} --flavour {flavour} --version {release}`"
        )
    return release


def device(value: str, reading: Reading) -> str:
    """cpu or cuda[:N] (without torch: the harness runs on nothing else); CUDA present when asked for."""
    if not re.fullmatch(r"(cpu|cuda)(:\d+)?", value):
        raise Refusal("the harness runs on cpu or cuda (cuda, cuda:1, ...)")
    if value.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise Refusal("torch sees no CUDA device on this machine")
    return value


def dtype(value: str | None, reading: Reading) -> str:
    """A known dtype, else the decoder's own default for the device (vLLM: float32 on CPU), else float64 on CPU and bf16
    on CUDA; as its canonical name (float64, float32, bfloat16, float16)."""
    if value is not None and value.lower() not in DTYPE_NAMES:
        raise Refusal(f"unknown dtype; known: {', '.join(DTYPE_NAMES)}")
    chosen = value or default_dtype(reading.checked["decoder"], reading.checked["device"])
    if chosen is not None:
        return DTYPE_NAMES[chosen.lower()]
    return "bfloat16" if reading.checked["device"].startswith("cuda") else "float64"


def reference(value: str, reading: Reading) -> Reference:
    """harness, or engine for an engine that can be its own reference."""
    try:
        chosen = Reference(value)
    except ValueError:
        raise Refusal(f"choose {', '.join(Reference)}") from None
    engine = reading.engine
    if chosen is Reference.ENGINE and (engine is None or engine.ability(OwnReference) is None):
        able = [name for e in engines().values() if e.ability(OwnReference) for name in e.decoders]
        what = "is not an engine" if engine is None else f"runs {engine.name}, which scores no sequence"
        raise Refusal(
            f"decoder {reading.checked['decoder']!r} {what}; the engine can be its own reference for "
            f"{', '.join(able)} (its greedy output without speculation and its log-probabilities)"
        )
    return chosen


def model_directory(model: str) -> Path:
    """A model directory that exists, or the name of a bundled fixture."""
    path = resolve_model_path(model)
    if not path.exists():
        fixtures = ", ".join(sorted(p.name for p in FIXTURE_MODELS.iterdir() if p.is_dir()))
        raise Refusal(f"no such model directory, and no bundled fixture of that name ({fixtures})")
    return path


def model(value: str | None, reading: Reading) -> str:
    """The model directory as checked_model checks it, under the run's reference and for the decoder's engine; what
    the release can serve of it, asked of the release (ReleaseModelNeeds: another release in its environment, the
    pinned release of an engine that runs in the harness's process in the harness's Python)."""
    checked = checked_model(value or str(DEFAULT_MODEL), reading.checked["reference"], reading.engine)
    release, decoder = reading.checked["engine-version"], reading.checked["decoder"]
    engine = reading.engine or engine_of_decoder(decoder, any_release=True)  # in process: the pinned release's engine
    problem = release_model_problem(engine, decoder, flavour_of(reading.checked["device"]), release, checked)
    if problem:
        raise Refusal(problem)
    dtype_problem = model_dtype_problem(reading.engine, reading.checked["dtype"], reading.checked["device"], checked)
    if dtype_problem:
        raise Refusal(dtype_problem)
    return checked


def model_dtype_problem(engine: Engine | None, dtype: str, device: str, model: str) -> str:
    """Why the engine cannot serve the model in this dtype on this device (ModelDtypeNeeds), or ""."""
    needs = engine.ability(ModelDtypeNeeds) if engine is not None else None
    problem = needs.problem(resolve_model_path(model), dtype, flavour_of(device)) if needs is not None else None
    return f"{engine.name} cannot serve it in {dtype}: {problem}" if problem else ""  # type: ignore[union-attr]


def release_model_problem(engine: Engine | None, decoder: str, flavour: str, release: str | None, model: str) -> str:
    """Why `release` of the engine (installed) cannot serve the model with `decoder`, asked in its environment; ""
    where it can, or where the engine has no such question. The pinned release of an engine that runs in the harness's
    process (PinnedInProcess) is asked in the harness's own Python."""
    needs = engine.ability(ReleaseModelNeeds) if engine is not None else None
    if needs is None or (release is None and engine.ability(PinnedInProcess) is None):  # type: ignore[union-attr]
        return ""
    python = Path(sys.executable) if release is None else engine.environment.python(flavour, release)  # type: ignore[union-attr]
    return needs.problem(decoder, python, resolve_model_path(model)) or ""


def checked_model(value: str, chosen: Reference, engine: Engine | None) -> str:
    """The directory exists, config.json reads, its tensor names are in an MTP layout the harness knows and its
    tokenizer is there, no weight read (under --reference engine: config.json and the tokenizer only); what the
    engine needs of it."""
    path = model_directory(value)
    if chosen is Reference.ENGINE:
        from harness.models.card import load_card  # torch and transformers (seconds)

        load_card(path)
    else:
        from harness.models.checkpoint import check_checkpoint_files

        check_checkpoint_files(path)  # a fraction of a second: most broken directories stop here
        from harness.models.loading import check_checkpoint  # torch and transformers (seconds)

        check_checkpoint(path)
    needs = engine.ability(ModelNeeds) if engine is not None else None
    problem = needs.problem(path) if needs is not None else None
    if problem:
        raise Refusal(f"{engine.name} cannot serve it: {problem}")  # type: ignore[union-attr]
    return value


def budget(value: str, reading: Reading) -> str:
    if value not in BUDGETS:
        raise Refusal(f"choose {', '.join(sorted(BUDGETS))}")
    return value


def seed(value: str | int | None, reading: Reading) -> SeedChoice:
    """An integer, 'random' or 'last' (None: the default)."""
    if value is None:
        return DEFAULT_SEED
    if value in ("random", "last"):
        return value  # type: ignore[return-value]
    try:
        return int(value)
    except ValueError:
        raise Refusal("not an integer, 'random' or 'last'") from None


def engine_config(value: str, reading: Reading) -> str:
    """`default`, or a deployed configuration of the decoder's engine."""
    if value == DEFAULT_CONFIGURATION:
        return value
    engine = the_engine(
        reading,
        "with deployed configurations (the harness's own decoder has none: its analogue, a batch against each "
        "request alone, is in the greedy suite)",
    )
    return engine.configuration(value).name


def engine_runner(value: str | None, reading: Reading) -> str | None:
    """One of the engine's runners that its installed environment can run; none asked for: the one the engine picks
    itself on the device (another release: its published package), named. None for an engine with one way to run."""
    engine, release = reading.engine, reading.checked["engine-version"]
    runners = engine.ability(ModelRunners) if engine is not None else None
    build = engine.ability(SourceBuild) if engine is not None else None
    flavour = flavour_of(reading.checked["device"])
    if value is None:
        picked = runners.picked.get(flavour) if runners is not None else None
        return build.release_runner if release is not None and build is not None and picked == build.runner else picked
    if runners is None:
        raise Refusal(f"decoder {reading.checked['decoder']!r} is not an engine with a choice of runner")
    if value not in runners.runners:
        raise Refusal(f"{engine.name} has no such runner; known: {', '.join(runners.runners)}")  # type: ignore[union-attr]
    if release is not None and build is not None and value == build.runner:
        raise Refusal(
            f"{engine.name}'s {value} runner builds the pinned release's source; another release runs "  # type: ignore[union-attr]
            f"{build.release_runner}"
        )
    problem = runners.problem(engine, flavour, value, release) if runners.problem else None
    if problem:
        raise Refusal(problem)
    return value


def engine_fixes(value: str, reading: Reading) -> tuple[str, ...]:
    """`none` (the engine as shipped), `all`, or comma-separated findings of the decoder's engine, each with a fix the
    engine can apply on the run's runner (its own rules: Fixes.problem); the pinned release only. The slugs, sorted."""
    if value == NO_FIXES:
        return ()
    engine = the_engine(reading, "with findings to fix")
    release = reading.checked["engine-version"]
    if release is not None:
        raise Refusal(
            f"the findings' fixes are written for {engine.name}'s pinned release; run {reading.flag('engine-version')} "
            f"{release} as shipped"
        )
    return fixes_named(value, engine, reading.checked["engine-runner"])


def fixes_named(value: str, engine: Engine, runner: str | None) -> tuple[str, ...]:
    """`all` or comma-separated findings of `engine` (sorted slugs), each with a fix the engine can apply on `runner`
    (its own rules: Fixes.problem); also what `mtp-harness engine install --build --fixes` builds in."""
    fixes = engine.ability(Fixes)
    if fixes is None:
        raise Refusal(f"{engine.name} has no way to run with its findings' fixes")
    known = {finding.slug for finding in engine.findings}
    wanted = known if value == ALL_FIXES else {slug.strip() for slug in value.split(",") if slug.strip()}
    unknown = sorted(wanted - known)
    if unknown or not wanted:
        raise Refusal(
            f"no finding {', '.join(unknown) or '(none named)'} of {engine.name}; known: {NO_FIXES}, {ALL_FIXES}, "
            f"{', '.join(sorted(known))}"
        )
    slugs = tuple(sorted(wanted))
    problem = fixes.problem(slugs, runner)
    if problem:
        raise Refusal(problem)
    return slugs


def engine_patch(values: list[str], reading: Reading) -> tuple[str, ...]:
    """Files of the user's own changes to an engine built from its source, for a run of that build; as absolute paths,
    in the order given. Whether each applies is the build's to say (it names the one that does not)."""
    if not values:
        return ()
    build = reading.engine.ability(SourceBuild) if reading.engine is not None else None
    if build is None:
        raise Refusal(f"decoder {reading.checked['decoder']!r} is not an engine built from its source", values[0])
    runner = reading.checked["engine-runner"]
    if runner != build.runner:
        raise Refusal(
            f"{reading.engine.name}'s {runner} runner is not built here; a patch needs its {build.runner} runner",  # type: ignore[union-attr]
            values[0],
        )
    resolved = []
    for patch in values:
        path = Path(patch).expanduser().resolve()
        if not path.is_file():
            raise Refusal("no such file", patch)
        if not path.read_bytes().strip():
            raise Refusal("the file is empty", patch)
        resolved.append(str(path))
    return tuple(resolved)


def engine_arg(values: list[str], reading: Reading) -> tuple[tuple[str, Scalar], ...]:
    """NAME=VALUE (repeated): the engine's own arguments, passed through as data (a VALUE that reads as JSON is that
    value, else the string); none the harness sets itself."""
    if not values:
        return ()
    accepted = reading.engine.ability(EngineArguments) if reading.engine is not None else None
    if accepted is None:
        raise Refusal(f"decoder {reading.checked['decoder']!r} is not an engine that takes arguments", values[0])
    arguments: dict[str, Scalar] = {}
    for option in values:
        name, equals, text = option.partition("=")
        name = name.strip()
        if not equals or not name.isidentifier():
            raise Refusal(f"write NAME=VALUE, NAME one of {reading.engine.name}'s", option)  # type: ignore[union-attr]
        if name in accepted.owned:
            raise Refusal(
                f"the harness sets {name} itself (the model, dtype, speculation and --engine-config's settings)", option
            )
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text  # a word: the string itself (quantization=fp8)
        if isinstance(value, dict | list):
            raise Refusal("a value is a number, true, false, null or a string", option)
        if name in accepted.unserved and not (value is None or (type(value) is int and value == 1)):
            raise Refusal(accepted.unserved[name], option)
        arguments[name] = value
    return tuple(arguments.items())


def prompts(value: str | None, reading: Reading) -> str:
    value = value or str(DEFAULT_PROMPTS)
    if not Path(value).is_file():
        raise Refusal("no such prompt file")
    return value


def sampling_tv(value: str | float | None, reading: Reading) -> float | None:
    """None (the budget's), or a total-variation distance in (0, 1)."""
    if value is None:
        return None
    try:
        tv = float(value)
    except ValueError:
        raise Refusal("a total-variation distance in (0, 1)") from None
    if not 0 < tv < 1:
        raise Refusal("a total-variation distance in (0, 1)")
    return tv


def min_judged(value: str | None, reading: Reading) -> tuple[tuple[str, int], ...]:
    """SUITE=N pairs joined by commas, each suite known (near matches otherwise)."""
    try:
        return tuple(parse_minimums(value or "").items())
    except HarnessError as error:
        raise Refusal(str(error)) from None


CHECKS: dict[str, Check] = {
    "decoder": decoder,
    "engine-version": engine_version,
    "device": device,
    "dtype": dtype,
    "reference": reference,
    "model": model,
    "budget": budget,
    "seed": seed,
    "engine-config": engine_config,
    "engine-runner": engine_runner,
    "engine-fixes": engine_fixes,
    "engine-patch": engine_patch,
    "engine-arg": engine_arg,
    "prompts": prompts,
    "sampling-tv": sampling_tv,
    "min-judged": min_judged,
}
