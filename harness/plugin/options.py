"""The plugin's command-line options (one group, `mtp-harness`, every option prefixed `--harness-`), and when the
plugin acts: in a session that runs the harness's suites or passes a harness option, and in no other (installed,
mtp-harness changes nothing in another project's pytest sessions)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.contract.budget import BUDGETS, DEFAULT_BUDGET
from harness.contract.paths import DATA_ROOT, FIXTURE_MODELS, PYTEST_CONFIG, SUITES_DIR
from harness.contract.run_options import (
    DEFAULT_CONFIGURATION,
    DEFAULT_DECODER,
    DEFAULT_DEVICE,
    NO_FIXES,
    PYTEST_PREFIX,
    Reference,
    RunOptions,
)
from harness.contract.seeds import DEFAULT_SEED

SUITES_PACKAGE = "harness.suites"  # `pytest --pyargs harness.suites` runs an installed harness's suites


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mtp-harness", "mtp-harness: MTP decoding correctness")

    def option(name: str, **kwargs: object) -> None:
        group.addoption(PYTEST_PREFIX + name, **kwargs)

    option(
        "decoder",
        default=DEFAULT_DECODER,
        help="decoder under test: a registered name (mtp, target, transformers-mtp, vllm-mtp, mutant:<name>, ...) "
        "or module:factory for your own. Default: mtp.",
    )
    option(
        "model",
        default=RunOptions().model,
        help="model directory (config.json, safetensors, tokenizer.json) or the name of a bundled fixture "
        f"({', '.join(sorted(p.name for p in FIXTURE_MODELS.glob('*') if p.is_dir()))}). Default: tiny-deepseek-v3.",
    )
    option("device", default=DEFAULT_DEVICE, help="torch device for the model, e.g. cpu or cuda. Default: cpu.")
    option(
        "dtype",
        default=None,
        help="model dtype: float64, float32, bf16, fp16. Default: the decoder's own (vLLM and llama.cpp: float32 on "
        "CPU), else float64 on CPU (exact identity expected) and bf16 on CUDA.",
    )
    option(
        "seed",
        default=str(DEFAULT_SEED),
        help=f"session seed: an integer, 'random' for a new one, or 'last' to replay the previous run's. "
        f"Default: {DEFAULT_SEED}.",
    )
    option(
        "budget",
        default=DEFAULT_BUDGET,
        choices=sorted(BUDGETS),
        help="smoke | ci | full: scales sampling N and Hypothesis examples (default ci; see harness.contract.budget). "
        "MTP_HARNESS_HYPOTHESIS_PROFILE, when set, still picks the Hypothesis profile.",
    )
    option(
        "reference",
        default=str(Reference.HARNESS),
        choices=[str(r) for r in Reference],
        help="where the target-only truth comes from: harness (default: the harness's own copy of the checkpoint, "
        "loaded in this process) or engine (the engine under test without speculation and its own log-probabilities, "
        "for a checkpoint the harness cannot hold beside the engine: this process then reads no weight file, and "
        "the checks that need weights are skipped with the reason; harness/checks/engine_reference.py)",
    )
    option(
        "engine-config",
        default=DEFAULT_CONFIGURATION,
        metavar="NAME",
        help="for an engine subject: run every engine under this deployed configuration (vLLM: prefix-cache, "
        "chunked-prefill, preempt, queue, async; llama.cpp: prefix-cache, chunked-prefill, queue, context-shift). "
        "Default: default (the harness's own engine settings).",
    )
    option(
        "engine-fixes",
        default=NO_FIXES,
        metavar="none|all|SLUG[,SLUG...]",
        help="for an engine subject: run the engine with the documented fix of the named findings applied inside "
        "its process (docs/findings/<slug>.md, Fix), to test what lies beneath the known bugs; a fixed "
        "finding marks no test, and the report says which fixes were in. Default: none (the engine as shipped).",
    )
    option(
        "engine-arg",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="for an engine subject: one of the engine's own arguments, passed through as data (repeat it), e.g. "
        "--harness-engine-arg quantization=fp8 (vLLM's LLM arguments); the report header records them. The harness's "
        "own settings (model, dtype, speculation, --harness-engine-config's) are refused",
    )
    option(
        "engine-runner",
        default=None,
        metavar="NAME",
        help="for an engine subject with a choice of runner: which (vLLM's model runner: v1, v2; on CPU, v2 runs its "
        "Triton kernels in Triton's interpreter; llama.cpp's build: source, built from its source with the harness's "
        "instrumentation, or wheel, the published wheel). Default: the one the engine picks itself on the device "
        "(vLLM: v1 on CPU, v2 on CUDA; llama.cpp: source), named in the report header.",
    )
    option(
        "engine-version",
        default=None,
        metavar="RELEASE",
        help="for an engine subject: the engine's release to run, from its own environment (mtp-harness engine install "
        "NAME --version RELEASE); as shipped, from its published package. Default: the pinned release",
    )
    option(
        "engine-patch",
        action="append",
        default=[],
        metavar="FILE",
        help="for an engine built from its source (llama.cpp): a change of your own to its source (a unified diff "
        "relative to llama.cpp's tree, as git diff writes it), applied in its build after the harness's "
        "instrumentation (repeat it; the build must exist: mtp-harness engine install llama.cpp --build --patch FILE, "
        "or mtp-harness run, which builds it). The report header records each patch's SHA-256.",
    )
    option("prompts", default=RunOptions().prompts, help="prompt fixture file (JSON). Default: fixtures/prompts.json.")
    option(
        "sampling-tv",
        type=float,
        default=None,
        help="the total-variation shift each first-token-law case must detect with power 0.99 at the family "
        "alpha; sets N per case (default: the budget's, "
        + ", ".join(f"{name} {budget.sampling_tv}" for name, budget in BUDGETS.items())
        + "); the whole-sequence cases' single-position shift scales with it (budget's: "
        + ", ".join(f"{name} {budget.position_tv}" for name, budget in BUDGETS.items())
        + ")",
    )
    option(
        "slow",
        action="store_true",
        help="also run tests marked slow (e.g. the whole-sequence calibration); they run anyway when -m names 'slow'",
    )
    option(
        "report",
        default=None,
        metavar="DIR",
        help="write the run's results.json and HTML report to DIR ('auto': reports/<time-stamp>); "
        "results.json is also kept up to date while the run goes",
    )
    option(
        "shrink-seconds",
        type=float,
        default=60.0,
        help="with --harness-report: seconds spent shrinking the failure groups' smallest greedy cases to minimal "
        "ones, each with a reproducer script (harness/triage/shrink.py; 0: no shrinking). Default: 60.",
    )
    option(
        "stop-suite-on-catch",
        action="store_true",
        help="after the first test of a suite (greedy, sampling, invariants) fails on an assertion, skip that "
        "suite's remaining tests: the mutation catalogue only needs to know whether a suite catches a decoder",
    )
    option(
        "stop-on-catch",
        action="store_true",
        help="stop the whole run at the first test that fails on an assertion (crashes do not stop it): "
        "the mutation catalogue's quick mode only needs one catching suite per mutant",
    )


def harness_session(config: pytest.Config) -> bool:
    """Whether this session is the harness's: it passes a --harness- option, uses the harness's own pytest settings
    (a clone's pyproject.toml, the wheel's suites.ini: `mtp-harness run`, `pytest` in a clone), or names the harness's
    suites (a path inside them, or `--pyargs harness.suites`). Otherwise the plugin does nothing but register its
    options."""
    arguments = [str(argument) for argument in config.invocation_params.args]
    if any(argument.startswith(PYTEST_PREFIX) for argument in arguments):
        return True
    if config.inipath is not None and _same(config.inipath, PYTEST_CONFIG):
        return True
    for argument in arguments:
        if argument == SUITES_PACKAGE or argument.startswith(SUITES_PACKAGE + "."):
            return True
        path = (config.invocation_params.dir / argument.split("::")[0]).resolve()
        if path == DATA_ROOT or _inside(path, SUITES_DIR):
            return True
    return False


def _same(a: Path, b: Path) -> bool:
    return a.resolve() == b.resolve()


def _inside(path: Path, folder: Path) -> bool:
    return path == folder.resolve() or folder.resolve() in path.parents
