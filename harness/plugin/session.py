"""A harness session's set-up: the run's options read and checked once at the door (harness/door/) and kept on the
config (`run_options(config)`), an engine built from its source made where missing, the session seed (printed in the
report header, handed to pytest-xdist workers, replayable with --harness-seed=last), one torch thread per xdist
worker, glibc's allocator keeping freed memory (harness/models/allocator.py), the suites' markers, the Hypothesis
profile of the budget, and the run recorder when a report is asked for."""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import threading
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

from harness.contract.budget import BUDGETS
from harness.contract.errors import HarnessError
from harness.contract.paths import resolve_model_path
from harness.contract.run_options import Reference, RunOptions, given_options, option_named
from harness.contract.suites import OTHER_MARKERS, SUITES
from harness.models.allocator import keep_freed_memory

if TYPE_CHECKING:
    pass

USAGE_ERROR = 2  # the exit status of options that cannot work, as `mtp-harness run` and argparse give it
SEED_CACHE_KEY = "mtp_harness/seed"
OPTIONS_RECORD = "mtp_harness_options"  # the controller's checked options, handed to each xdist worker
FRONT_END = pytest.StashKey["FrontEnd"]()  # how the session's front end spells an option
RUN_OPTIONS = pytest.StashKey[RunOptions]()


def read_options(config: pytest.Config) -> None:
    """Bad input stops here, as one line, before any test runs: called before pytest loads the suites' conftest files,
    which import torch and the harness (seconds). The door reads the options once, in the controller; an xdist worker
    takes the controller's checked options (pytest_configure_node) instead of reading them again."""
    workerinput = getattr(config, "workerinput", None)
    from harness.door import UsageError, read_run_options
    from harness.door.reading import FRONT_END_VARIABLE, front_end_named

    if workerinput is not None and OPTIONS_RECORD in workerinput:
        config.stash[RUN_OPTIONS] = RunOptions.from_record(json.loads(workerinput[OPTIONS_RECORD]))
        config.stash[FRONT_END] = front_end_named("")
        return

    # `mtp-harness run` names its options as it spells them (--decoder); its children do not inherit the spelling
    front_end = config.stash[FRONT_END] = front_end_named(os.environ.pop(FRONT_END_VARIABLE, ""))
    try:
        config.stash[RUN_OPTIONS] = read_run_options(
            given_options(config.known_args_namespace, prefix="harness_"), front_end
        )
    except UsageError as error:  # pytest.exit is not caught while pytest parses its command line
        sys.stderr.write(f"{front_end.name}: {error}\n")
        raise SystemExit(USAGE_ERROR) from None


def run_options(config: pytest.Config) -> RunOptions:
    """The session's options, with its seed resolved."""
    return config.stash[RUN_OPTIONS]


def pytest_configure(config: pytest.Config) -> None:
    keep_freed_memory()  # glibc reuses freed tensors' memory instead of faulting in fresh pages
    if getattr(config, "workerinput", None) is not None:
        # pytest-xdist: one torch thread per worker, so N workers share N cores instead of oversubscribing them;
        # processes a test starts (an engine, a child pytest run) inherit one OpenMP thread too
        import torch

        torch.set_num_threads(1)
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        os.environ.setdefault("MKL_NUM_THREADS", "1")
    for suite in SUITES:
        config.addinivalue_line("markers", f"{suite.name}: {suite.what}")
    for name, description in OTHER_MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {description}")
    try:
        config.stash[RUN_OPTIONS] = config.stash[RUN_OPTIONS].with_seed(_session_seed(config))
    except HarnessError as error:
        front_end = config.stash[FRONT_END]
        flag = front_end.spell(option_named("seed"))
        pytest.exit(f"{front_end.name}: {flag} {config.stash[RUN_OPTIONS].seed}: {error}", returncode=USAGE_ERROR)
    options = config.stash[RUN_OPTIONS]
    if getattr(config, "workerinput", None) is None:
        build_the_engine(options)
    if options.reference is Reference.ENGINE:  # the engine process alone reads the checkpoint's weights
        from harness.models.weights_guard import forbid_weight_files

        forbid_weight_files("under --reference engine the engine process alone reads the checkpoint's weights")
    settings.load_profile(os.environ.get("MTP_HARNESS_HYPOTHESIS_PROFILE", BUDGETS[options.budget].hypothesis_profile))
    report = config.getoption("--harness-report")
    if report and getattr(config, "workerinput", None) is None:
        stop_on_sigterm()
        from harness.plugin.recorder import RunRecorder, pytest_run_header, run_directory

        run_dir = run_directory(report)
        header = pytest_run_header(config, options, run_dir.name)
        config.pluginmanager.register(RunRecorder(config, run_dir, header), "mtp_harness_recorder")


def build_the_engine(options: RunOptions) -> None:
    """An engine built from its source (llama.cpp) is built first where the run's build is missing (its fixes and the
    user's patches in): minutes, once per patch set, in the controller before any test."""
    from harness.subjects.engines.abilities import SourceBuild
    from harness.subjects.engines.registry import engine_of_decoder

    engine = engine_of_decoder(options.decoder, options.engine.version)
    build = engine.ability(SourceBuild) if engine is not None else None
    if build is None:
        return
    try:
        build.make(options.engine, lambda line: print(f"mtp-harness: {line}", flush=True))
    except HarnessError as error:
        pytest.exit(f"mtp-harness: {error}", returncode=pytest.ExitCode.INTERNAL_ERROR)


def _session_seed(config: pytest.Config) -> int:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and "mtp_harness_seed" in workerinput:
        return int(workerinput["mtp_harness_seed"])
    value = config.stash[RUN_OPTIONS].seed
    if value == "random":
        seed = random.SystemRandom().randrange(2**32)
    elif value == "last":
        cache = getattr(config, "cache", None)  # absent with -p no:cacheprovider
        cached = cache.get(SEED_CACHE_KEY, None) if cache is not None else None
        if cached is None:
            raise HarnessError("no previous seed recorded in the pytest cache")
        seed = int(cached)
    else:
        seed = int(value)
    if getattr(config, "cache", None) is not None:
        config.cache.set(SEED_CACHE_KEY, seed)
    return seed


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # noqa: ANN001 - xdist WorkerController
    """pytest-xdist: every worker runs with the controller's checked options and session seed."""
    node.workerinput[OPTIONS_RECORD] = json.dumps(run_options(node.config).to_record())
    node.workerinput["mtp_harness_seed"] = run_options(node.config).seed


def pytest_report_header(config: pytest.Config) -> list[str]:
    options = run_options(config)
    return [
        f"mtp-harness: session seed {options.seed} (replay: --harness-seed={options.seed}), "
        f"decoder {options.decoder}, model {resolve_model_path(options.model)}, "
        f"device {options.device}, dtype {options.dtype}, reference {options.reference}"
    ]


def stop_on_sigterm() -> None:
    """SIGTERM (a CI runner's timeout, `kill`) stops the run as Ctrl-C does: pytest then ends the session
    (pytest-xdist its workers) and the recorder writes the cases that finished, marked interrupted."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    if threading.current_thread() is threading.main_thread():  # signals are for the main thread only
        signal.signal(signal.SIGTERM, interrupt)
