"""Bad input stops at the door: the options of a run are checked before any test runs, each mistake as one line
that names the option and the value (the plugin exits with status 2, as `mtp-harness run` does).

What is checked, in seconds and without loading weights: the model directory (it exists, its config.json reads,
its safetensors index and tensor names are in an MTP layout the harness knows, its tokenizer is there), the
decoder name (with near matches), the dtype, the device (CUDA present when asked for), and an engine subject's
environment (installed).
"""

from __future__ import annotations

import re
from pathlib import Path

from harness.contract.dtypes import DTYPE_NAMES
from harness.contract.errors import HarnessError
from harness.contract.paths import FIXTURE_MODELS, resolve_model_path


class UsageError(HarnessError):
    """A run's option that cannot work, found before any test runs."""


def check_run_options(decoder: str, model: str, device: str, dtype: str | None, reference: str = "harness") -> None:
    """Raise UsageError, one line naming the option, for the first option of a run that cannot work. The checks
    that need no torch import (dtype, decoder name, engine environment, a missing model directory) come first.
    Under --reference engine the model directory is checked for what the harness reads of it (config.json and the
    tokenizer): the engine alone reads, and judges, its weights."""
    check_dtype(dtype)
    check_decoder(decoder, device)
    check_reference(reference, decoder)
    check_device(device)
    if reference == "engine":
        check_model_card(model)
    else:
        check_model(model)
    check_engine_serves_model(decoder, model)


def check_reference(reference: str, decoder: str) -> None:
    from harness.subjects.engines.supported import reference_option

    try:
        reference_option(decoder, reference)
    except HarnessError as error:
        raise UsageError(str(error)) from None


def check_dtype(dtype: str | None) -> None:
    if dtype is not None and dtype.lower() not in DTYPE_NAMES:
        raise UsageError(f"--dtype {dtype}: unknown dtype; known: {', '.join(DTYPE_NAMES)}")


def check_device(device: str) -> None:
    if not re.fullmatch(r"(cpu|cuda)(:\d+)?", device):  # without torch (seconds): the harness runs on cpu or cuda
        raise UsageError(f"--device {device}: the harness runs on cpu or cuda (cuda, cuda:1, ...)")
    if device.startswith("cpu"):
        return
    import torch

    if not torch.cuda.is_available():
        raise UsageError(f"--device {device}: torch sees no CUDA device on this machine")


def model_directory(model: str) -> Path:
    """--model as a path that exists (a directory, or the name of a bundled fixture)."""
    path = resolve_model_path(model)
    if not path.exists():
        fixtures = ", ".join(sorted(p.name for p in FIXTURE_MODELS.iterdir() if p.is_dir()))
        raise UsageError(f"--model {model}: no such model directory, and no bundled fixture of that name ({fixtures})")
    return path


def check_model(model: str) -> None:
    path = model_directory(model)
    from harness.models.checkpoint import check_checkpoint_files

    try:
        check_checkpoint_files(Path(path))  # a fraction of a second: most broken directories stop here
        from harness.models.loading import check_checkpoint  # imports torch and transformers (seconds)

        check_checkpoint(Path(path))
    except HarnessError as error:
        raise UsageError(f"--model {model}: {error}") from None


def check_model_card(model: str) -> None:
    """What --reference engine reads of the model directory: config.json and the tokenizer, no weight file."""
    path = model_directory(model)
    from harness.models.card import load_card  # imports torch and transformers (seconds)

    try:
        load_card(path)
    except HarnessError as error:
        raise UsageError(f"--model {model}: {error}") from None


def check_decoder(decoder: str, device: str) -> None:
    from harness.subjects.engines.supported import engine_of_decoder
    from harness.subjects.names import is_module_factory, unknown_decoder

    unknown = unknown_decoder(decoder)  # the names alone: building a factory imports torch and transformers
    if unknown is not None:
        raise UsageError(f"--decoder {decoder}: {unknown}")
    if is_module_factory(decoder):  # your own module: it must import and hold the factory
        from harness.subjects.registry import find_factory

        try:
            find_factory(decoder)
        except HarnessError as error:
            raise UsageError(f"--decoder {decoder}: {error}") from None
    engine = engine_of_decoder(decoder)
    if engine is not None:
        flavour = "cuda" if device.startswith("cuda") else "cpu"
        if engine.environment.installed_version(flavour) is None:
            name = engine.environment.name
            raise UsageError(
                f"--decoder {decoder}: the {name} {flavour} environment is not installed; run "
                f"`mtp-harness engine install {name} --flavour {flavour}`"
            )


def check_engine_serves_model(decoder: str, model: str) -> None:
    """An engine subject that needs more of the model directory than the harness does (llama.cpp: a GGUF)."""
    from harness.subjects.engines.supported import engine_of_decoder

    engine = engine_of_decoder(decoder)
    problem = engine.model_problem(resolve_model_path(model)) if engine and engine.model_problem else None
    if problem:
        raise UsageError(f"--decoder {decoder} --model {model}: {problem}")


def check_seed(seed: str | None) -> None:
    """--harness-seed: an integer, 'random' or 'last' (None: the default)."""
    if seed is None or seed in ("random", "last"):
        return
    try:
        int(seed)
    except ValueError:
        raise UsageError(f"--harness-seed {seed}: not an integer, 'random' or 'last'") from None
