"""The pytest plugin (entry point `pytest11: mtp_harness`): options, markers, seeds, session-wide models.

Options live in one group, `mtp-harness`. The session seed is printed in the report header and handed
to pytest-xdist workers; each test's seed is derived from it and the test's node id.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

from harness.budget import BUDGETS, DEFAULT_BUDGET
from harness.paths import DEFAULT_MODEL, DEFAULT_PROMPTS, FIXTURE_MODELS, suite_of
from harness.seeds import derive_seed

if TYPE_CHECKING:  # torch and transformers load lazily: a plain `pytest --help` stays fast
    from harness.api import Decoder
    from harness.models import ModelBundle
    from harness.prompts import Prompt


DEFAULT_SEED = 20261129
SEED_CACHE_KEY = "mtp_harness/seed"

MARKERS = {
    "greedy": "greedy suites: token-for-token identity with target-only greedy decoding",
    "sampling": "sampling suites: chi-square / G tests against the exact target distribution",
    "invariants": "invariant suites: KV cache and position state after every rejection",
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
        help="also run tests marked slow (e.g. the sampling calibration); they run anyway when -m names 'slow'",
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
        help="smoke | ci | full: scales sampling N and Hypothesis examples (default ci; see harness.budget). "
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
        "ones, each with a reproducer script (harness/shrink.py; 0: no shrinking). Default: 60.",
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


def pytest_configure(config: pytest.Config) -> None:
    if getattr(config, "workerinput", None) is not None:
        # pytest-xdist: one torch thread per worker, so N workers share N cores instead of oversubscribing them;
        # processes a test starts (an engine, a child pytest run) inherit one OpenMP thread too
        import torch

        torch.set_num_threads(1)
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        os.environ.setdefault("MKL_NUM_THREADS", "1")
    for name, description in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {description}")
    config.stash[_SEED] = _session_seed(config)
    budget = BUDGETS[config.getoption("--harness-budget")]
    settings.load_profile(os.environ.get("MTP_HARNESS_HYPOTHESIS_PROFILE", budget.hypothesis_profile))
    report = config.getoption("--harness-report")
    if report and getattr(config, "workerinput", None) is None:
        from harness.recorder import Recorder, pytest_run_header, run_directory

        run_dir = run_directory(report)
        model = resolve_model_path(config.getoption("--model"))
        header = pytest_run_header(config, config.stash[_SEED], resolved_dtype(config), model, run_dir.name)
        config.pluginmanager.register(Recorder(config, run_dir, header), "mtp_harness_recorder")


_SEED = pytest.StashKey[int]()


def _session_seed(config: pytest.Config) -> int:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and "mtp_harness_seed" in workerinput:
        return int(workerinput["mtp_harness_seed"])
    value = config.getoption("--harness-seed")
    if value == "random":
        seed = random.SystemRandom().randrange(2**32)
    elif value == "last":
        cache = getattr(config, "cache", None)  # absent with -p no:cacheprovider
        cached = cache.get(SEED_CACHE_KEY, None) if cache is not None else None
        if cached is None:
            raise pytest.UsageError("--harness-seed=last: no previous seed recorded in the pytest cache")
        seed = int(cached)
    else:
        try:
            seed = int(value)
        except ValueError:
            raise pytest.UsageError(f"--harness-seed must be an integer, 'random' or 'last', got {value!r}") from None
    if getattr(config, "cache", None) is not None:
        config.cache.set(SEED_CACHE_KEY, seed)
    return seed


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # noqa: ANN001 - xdist WorkerController
    """pytest-xdist: every worker uses the controller's session seed."""
    node.workerinput["mtp_harness_seed"] = node.config.stash[_SEED]


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [
        f"mtp-harness: session seed {config.stash[_SEED]} (replay: --harness-seed={config.stash[_SEED]}), "
        f"decoder {config.getoption('--decoder')}, model {resolve_model_path(config.getoption('--model'))}, "
        f"device {config.getoption('--device')}, dtype {resolved_dtype(config)}"
    ]


def resolve_model_path(model: str) -> Path:
    """A bundled fixture name ('tiny-mimo') or a directory path."""
    fixture = FIXTURE_MODELS / model
    return fixture if "/" not in model and fixture.is_dir() else Path(model)


def resolved_dtype(config: pytest.Config) -> str:
    """--dtype, else the decoder's own default for the device (vLLM: float32 on CPU), else float64 on CPU and
    bf16 on CUDA."""
    from harness.models import parse_dtype

    dtype = config.getoption("--dtype")
    device = str(config.getoption("--device"))
    if dtype is None:
        from harness.errors import HarnessError
        from harness.registry import default_dtype

        try:
            dtype = default_dtype(config.getoption("--decoder"), device)
        except HarnessError:
            dtype = None  # an unknown decoder is reported, with its near matches, when the decoder is built
    if dtype is not None:
        return str(parse_dtype(dtype)).removeprefix("torch.")
    return "bfloat16" if device.startswith("cuda") else "float64"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked slow are deselected unless --harness-slow is given or the -m expression names 'slow';
    tests a recorded engine finding makes fail are marked as strict xfails naming it (harness/findings.py)."""
    _mark_known_engine_failures(config, items)
    if config.getoption("--harness-slow") or "slow" in (config.getoption("markexpr") or ""):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]


def _mark_known_engine_failures(config: pytest.Config, items: list[pytest.Item]) -> None:
    from harness.engines.catalogue import engine_of_decoder
    from harness.findings import known_failures

    decoder = config.getoption("--decoder")
    engine = engine_of_decoder(decoder)
    if engine is None or not engine.findings:
        return
    flavour = "cuda" if str(config.getoption("--device")).startswith("cuda") else "cpu"
    version = engine.environment.installed_version(flavour)
    model = resolve_model_path(config.getoption("--model")).name
    for item in items:
        found = known_failures(engine.findings, decoder, version, flavour, model, item.nodeid)
        if found:
            from harness.engines.process import EngineError

            reason = "; ".join(f"{engine.environment.name} {version} bug, {f.document}: {f.title}" for f in found)
            raises = CATCH_EXCEPTIONS + ((EngineError,) if any(f.crashes for f in found) else ())
            item.add_marker(pytest.mark.xfail(reason=reason, strict=True, raises=raises))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests that take a `prompt` argument run once per prompt fixture, with the prompt id as test id."""
    if "prompt" in metafunc.fixturenames:
        from harness.prompts import load_prompts

        prompts = load_prompts(metafunc.config.getoption("--prompts"))
        metafunc.parametrize("prompt", prompts, ids=[p.id for p in prompts])


_CAUGHT = pytest.StashKey[set[str]]()
CATCH_EXCEPTIONS = (AssertionError, pytest.fail.Exception)  # an assertion fired: not a crash


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # noqa: ANN201 - hook wrapper
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and hasattr(item, "callspec"):
        _carry_check_records(item.callspec.params.values(), report)
    if (
        report.when == "call"
        and report.failed
        and call.excinfo is not None
        and call.excinfo.errisinstance(CATCH_EXCEPTIONS)
    ):
        if item.config.getoption("--harness-stop-suite-on-catch"):
            item.config.stash.setdefault(_CAUGHT, set()).add(suite_of(item.nodeid))
        if item.config.getoption("--harness-stop-on-catch"):
            item.session.shouldstop = f"mtp-harness: {item.nodeid} caught the decoder (--harness-stop-on-catch)"


def _carry_check_records(params: Iterable[object], report: pytest.TestReport) -> None:
    """A case of `harness.testing.parametrize_with_checks` carries its check's records into this session's
    own report (--harness-report) and JUnit properties."""
    from harness.testing import HarnessCheck

    for value in params:
        if isinstance(value, HarnessCheck):
            report.user_properties.extend(value.user_properties())


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.config.getoption("--harness-report") and hasattr(item, "callspec"):
        import json

        params = {name: str(getattr(value, "id", value)) for name, value in item.callspec.params.items()}
        item.user_properties.append(("mtp_harness.params", json.dumps(params)))
    suite = suite_of(item.nodeid)
    if suite in item.config.stash.get(_CAUGHT, set()):
        pytest.skip(f"suite {suite!r} already caught this decoder (--harness-stop-suite-on-catch)")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Before the report is written: shrink each failure group's smallest greedy case on the run's decoder."""
    config = session.config
    recorder = config.pluginmanager.get_plugin("mtp_harness_recorder")
    budget = float(config.getoption("--harness-shrink-seconds"))
    if recorder is None or budget <= 0:
        return
    from functools import cache

    from harness.minimal_cases import GreedyOracle, InvariantOracle, Oracle, minimal_cases
    from harness.triage import failure_groups

    cases = recorder.finished_cases()
    groups = failure_groups(cases, recorder.header)
    if not groups:
        return

    @cache
    def decoder_and_bundle() -> tuple[Decoder, ModelBundle]:
        from harness.registry import make_decoder

        model, device = config.getoption("--model"), config.getoption("--device")
        bundle = bundle_for(model, device, resolved_dtype(config))
        return make_decoder(config.getoption("--decoder"), bundle), bundle

    @cache
    def oracle_for(kind: str) -> Oracle:
        return {"greedy": GreedyOracle, "invariants": InvariantOracle}[kind](*decoder_and_bundle())

    try:
        recorder.minimal = minimal_cases(groups, {case["nodeid"]: case for case in cases}, oracle_for, budget)
    finally:
        if decoder_and_bundle.cache_info().currsize:  # an engine subject's processes stop here, not at exit
            close = getattr(decoder_and_bundle()[0], "close", None)
            if close is not None:
                close()


@pytest.fixture(scope="session")
def harness_seed(pytestconfig: pytest.Config) -> int:
    """The session seed (printed in the report header)."""
    return pytestconfig.stash[_SEED]


@pytest.fixture
def test_seed(request: pytest.FixtureRequest, harness_seed: int) -> int:
    """This test's seed: session seed + crc32(node id); stable under reordering and pytest-xdist."""
    return derive_seed(harness_seed, request.node.nodeid)


_BUNDLES: dict[tuple[str, str, str], ModelBundle] = {}


def bundle_for(model: str, device: str, dtype: str) -> ModelBundle:
    """Load a model once per process (session-wide cache keyed by path, device and dtype)."""
    from harness.models import load_bundle

    key = (str(resolve_model_path(model).resolve()), device, dtype)
    if key not in _BUNDLES:
        _BUNDLES[key] = load_bundle(key[0], device=device, dtype=dtype)
    return _BUNDLES[key]


@pytest.fixture(scope="session")
def bundle(pytestconfig: pytest.Config) -> ModelBundle:
    """The model under test (--model, --device, --dtype), loaded once per session."""
    return bundle_for(
        pytestconfig.getoption("--model"), pytestconfig.getoption("--device"), resolved_dtype(pytestconfig)
    )


@pytest.fixture(scope="session")
def decoder(pytestconfig: pytest.Config, bundle: ModelBundle) -> Decoder:
    """The decoder under test (--decoder), built once per session for the model under test."""
    from harness.registry import make_decoder

    return make_decoder(pytestconfig.getoption("--decoder"), bundle)


@pytest.fixture
def require(decoder: Decoder) -> Callable[..., None]:
    """require(*capabilities, **values): skip the test when the decoder under test declares it cannot serve it,
    naming the capability ("forced_drafts", "steps") or the exact request value (num_draft_tokens=3) it lacks."""
    from harness.api import cannot_serve

    def needs(*capabilities: str, **values: object) -> None:
        reason = cannot_serve(decoder, *capabilities, **values)
        if reason:
            pytest.skip(reason)

    return needs


@pytest.fixture(scope="session")
def prompts(pytestconfig: pytest.Config) -> list[Prompt]:
    """The prompt fixtures (--prompts)."""
    from harness.prompts import load_prompts

    return load_prompts(pytestconfig.getoption("--prompts"))
