"""A pytest session's set-up: the session seed (printed in the report header, handed to pytest-xdist
workers, replayable with --harness-seed=last), one torch thread per xdist worker, the Hypothesis profile of
the budget, the run recorder when a report is asked for, and the dtype a run resolves to."""

from __future__ import annotations

import os
import random
import signal
import sys
import threading

import pytest
from hypothesis import settings

from harness.contract.budget import BUDGETS
from harness.contract.errors import HarnessError
from harness.contract.paths import resolve_model_path
from harness.plugin.known import ENGINE_ARGS, ENGINE_CONFIG, ENGINE_FIXES, REFERENCE
from harness.plugin.options import MARKERS, resolved_dtype
from harness.subjects.door import check_run_options, check_seed
from harness.subjects.engines.supported import (
    ENGINE_REFERENCE,
    engine_arguments,
    engine_configuration,
    engine_fixes,
    reference_option,
)

USAGE_ERROR = 2  # the exit status of options that cannot work, as `mtp-harness run` and argparse give it

SEED_CACHE_KEY = "mtp_harness/seed"


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, args: list[str]) -> None:
    """Bad input stops here, as one line, before any test runs (harness/subjects/door.py): before pytest loads the
    suites' conftest files, which import torch and the harness (seconds). xdist workers check the same options
    again (they pass there: the controller checked them first); PYTEST_XDIST_WORKER cannot tell a worker apart, as
    a pytest run that a test starts inherits it."""
    options = early_config.known_args_namespace
    if getattr(options, "help", False):
        return
    try:
        check_run_options(options.decoder, options.model, str(options.device), options.dtype, options.reference)
    except HarnessError as error:  # pytest.exit is not caught while pytest parses its command line
        sys.stderr.write(f"mtp-harness: {error}\n")
        raise SystemExit(USAGE_ERROR) from None


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
    try:
        config.stash[SEED] = _session_seed(config)
        decoder = config.getoption("--decoder")
        config.stash[ENGINE_FIXES] = engine_fixes(decoder, config.getoption("--engine-fixes"))
        config.stash[ENGINE_CONFIG] = engine_configuration(decoder, config.getoption("--engine-config"))
        config.stash[REFERENCE] = reference_option(decoder, config.getoption("--reference"))
        config.stash[ENGINE_ARGS] = engine_arguments(decoder, config.getoption("--engine-arg"))
    except HarnessError as error:
        pytest.exit(f"mtp-harness: {error}", returncode=USAGE_ERROR)
    if config.stash[REFERENCE] == ENGINE_REFERENCE:  # the engine process alone reads the checkpoint's weights
        from harness.models.weights_guard import forbid_weight_files

        forbid_weight_files("under --reference engine the engine process alone reads the checkpoint's weights")
    budget = BUDGETS[config.getoption("--harness-budget")]
    settings.load_profile(os.environ.get("MTP_HARNESS_HYPOTHESIS_PROFILE", budget.hypothesis_profile))
    report = config.getoption("--harness-report")
    if report and getattr(config, "workerinput", None) is None:
        stop_on_sigterm()
        from harness.plugin.recorder import RunRecorder, pytest_run_header, run_directory

        run_dir = run_directory(report)
        model = resolve_model_path(config.getoption("--model"))
        header = pytest_run_header(config, config.stash[SEED], resolved_dtype(config), model, run_dir.name)
        config.pluginmanager.register(RunRecorder(config, run_dir, header), "mtp_harness_recorder")


SEED = pytest.StashKey[int]()


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
            raise HarnessError("--harness-seed last: no previous seed recorded in the pytest cache")
        seed = int(cached)
    else:
        check_seed(value)  # an integer, or a usage error naming the option
        seed = int(value)
    if getattr(config, "cache", None) is not None:
        config.cache.set(SEED_CACHE_KEY, seed)
    return seed


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # noqa: ANN001 - xdist WorkerController
    """pytest-xdist: every worker uses the controller's session seed."""
    node.workerinput["mtp_harness_seed"] = node.config.stash[SEED]


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [
        f"mtp-harness: session seed {config.stash[SEED]} (replay: --harness-seed={config.stash[SEED]}), "
        f"decoder {config.getoption('--decoder')}, model {resolve_model_path(config.getoption('--model'))}, "
        f"device {config.getoption('--device')}, dtype {resolved_dtype(config)}, reference {config.stash[REFERENCE]}"
    ]


def stop_on_sigterm() -> None:
    """SIGTERM (a CI runner's timeout, `kill`) stops the run as Ctrl-C does: pytest then ends the session
    (pytest-xdist its workers) and the recorder writes the cases that finished, marked interrupted."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    if threading.current_thread() is threading.main_thread():  # signals are for the main thread only
        signal.signal(signal.SIGTERM, interrupt)
