"""The plugin's command-line options (one group, `mtp-harness`) and markers."""

from __future__ import annotations

import pytest

from harness.contract.budget import BUDGETS, DEFAULT_BUDGET
from harness.contract.paths import DEFAULT_MODEL, DEFAULT_PROMPTS, FIXTURE_MODELS
from harness.contract.seeds import DEFAULT_SEED

MARKERS = {
    "greedy": "greedy suites: token-for-token identity with target-only greedy decoding",
    "sampling": "sampling suites: chi-square / G tests against the exact target distribution",
    "invariants": "invariant suites: KV cache and position state after every rejection",
    "engine": "engine suite: an engine subject under its deployed configurations (prefix cache, chunked prefill, ...)",
    "gpu": "needs CUDA; skipped with a reason where there is none",
    "slow": "takes minutes; run nightly",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mtp-harness", "mtp-harness: MTP decoding correctness")
    group.addoption(
        "--decoder",
        default="mtp",
        help="decoder under test: a registered name (mtp, target, transformers-mtp, mutant:<name>, ...) "
        "or module:factory for your own. Default: mtp.",
    )
    group.addoption(
        "--model",
        default=str(DEFAULT_MODEL),
        help="model directory (config.json, safetensors, tokenizer.json) or the name of a bundled fixture "
        f"({', '.join(sorted(p.name for p in FIXTURE_MODELS.glob('*') if p.is_dir()))}). Default: tiny-deepseek-v3.",
    )
    group.addoption("--device", default="cpu", help="torch device for the model, e.g. cpu or cuda. Default: cpu.")
    group.addoption(
        "--dtype",
        default=None,
        help="model dtype: float64, float32, bf16, fp16. Default: float64 on CPU (exact identity expected), "
        "bf16 on CUDA.",
    )
    group.addoption(
        "--harness-seed",
        default=str(DEFAULT_SEED),
        help=f"session seed: an integer, 'random' for a new one, or 'last' to replay the previous run's. "
        f"Default: {DEFAULT_SEED}.",
    )
    group.addoption(
        "--harness-slow",
        action="store_true",
        help="also run tests marked slow (e.g. the whole-sequence calibration); they run anyway when -m names 'slow'",
    )
    group.addoption(
        "--harness-stop-on-catch",
        action="store_true",
        help="stop the whole run at the first test that fails on an assertion (crashes do not stop it): "
        "the mutation catalogue's quick mode only needs one catching suite per mutant",
    )
    group.addoption(
        "--harness-budget",
        default=DEFAULT_BUDGET,
        choices=sorted(BUDGETS),
        help="smoke | ci | full: scales sampling N and Hypothesis examples (default ci; see harness.contract.budget). "
        "MTP_HARNESS_HYPOTHESIS_PROFILE, when set, still picks the Hypothesis profile.",
    )
    group.addoption(
        "--harness-stop-suite-on-catch",
        action="store_true",
        help="after the first test of a suite (greedy, sampling, invariants) fails on an assertion, skip that "
        "suite's remaining tests: the mutation catalogue only needs to know whether a suite catches a decoder",
    )
    group.addoption(
        "--harness-report",
        default=None,
        metavar="DIR",
        help="write the run's results.json and HTML report to DIR ('auto': reports/<time-stamp>); "
        "results.json is also kept up to date while the run goes",
    )
    group.addoption(
        "--harness-shrink-seconds",
        type=float,
        default=60.0,
        help="with --harness-report: seconds spent shrinking the failure groups' smallest greedy cases to minimal "
        "ones, each with a reproducer script (harness/triage/shrink.py; 0: no shrinking). Default: 60.",
    )
    group.addoption(
        "--engine-fixes",
        default="none",
        metavar="none|all|SLUG[,SLUG...]",
        help="for an engine subject: run the engine with the documented fix of the named findings applied inside "
        "its process (docs/findings/<slug>.md, Fix), to test what lies beneath the known bugs; a fixed "
        "finding marks no test, and the report says which fixes were in. Default: none (the engine as shipped).",
    )
    group.addoption(
        "--engine-config",
        default="default",
        metavar="NAME",
        help="for an engine subject: run every engine under this deployed configuration (vLLM: prefix-cache, "
        "chunked-prefill, preempt, queue, async; llama.cpp: prefix-cache, chunked-prefill, queue; see "
        "harness/subjects/engines/configurations.py). Default: default (the harness's own engine settings).",
    )
    group.addoption(
        "--engine-arg",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="for an engine subject: one of the engine's own arguments, passed through as data (repeat it), e.g. "
        "--engine-arg quantization=fp8 --engine-arg gpu_memory_utilization=0.85 (vLLM's LLM arguments); the report "
        "header records them. The harness's own settings (model, dtype, speculation, --engine-config's) are refused",
    )
    group.addoption(
        "--reference",
        default="harness",
        choices=("harness", "engine"),
        help="where the target-only truth comes from: harness (default: the harness's own copy of the checkpoint, "
        "loaded in this process) or engine (the engine under test without speculation and its own log-probabilities, "
        "for a checkpoint the harness cannot hold beside the engine: this process then reads no weight file, and "
        "the checks that need weights are skipped with the reason; harness/checks/engine_reference.py)",
    )
    group.addoption(
        "--prompts", default=str(DEFAULT_PROMPTS), help="prompt fixture file (JSON). Default: fixtures/prompts.json."
    )
    group.addoption(
        "--sampling-tv",
        type=float,
        default=None,
        help="the total-variation shift each first-token-law case must detect with power 0.99 at the family "
        "alpha; sets N per case (default: the budget's, "
        + ", ".join(f"{name} {budget.sampling_tv}" for name, budget in BUDGETS.items())
        + "); the whole-sequence cases' single-position shift scales with it (budget's: "
        + ", ".join(f"{name} {budget.position_tv}" for name, budget in BUDGETS.items())
        + ")",
    )


def resolved_dtype(config: pytest.Config) -> str:
    """--dtype, else the decoder's own default for the device (vLLM: float32 on CPU), else float64 on CPU and
    bf16 on CUDA."""
    from harness.models.loading import parse_dtype

    dtype = config.getoption("--dtype")
    device = str(config.getoption("--device"))
    if dtype is None:
        from harness.contract.errors import HarnessError
        from harness.subjects.registry import default_dtype

        try:
            dtype = default_dtype(config.getoption("--decoder"), device)
        except HarnessError:
            dtype = None  # an unknown decoder is reported, with its near matches, when the decoder is built
    if dtype is not None:
        return str(parse_dtype(dtype)).removeprefix("torch.")
    return "bfloat16" if device.startswith("cuda") else "float64"
