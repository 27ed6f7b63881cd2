"""The plugin's command-line options (one group, `mtp-harness`, every option prefixed `--harness-`), and when the
plugin acts: in a session that runs the harness's suites or passes a harness option, and in no other (installed,
mtp-harness changes nothing in another project's pytest sessions)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.contract.paths import DATA_ROOT, PYTEST_CONFIG, SUITES_DIR
from harness.contract.run_options import PYTEST_PREFIX, declare_options

SUITES_PACKAGE = "harness.suites"  # `pytest --pyargs harness.suites` runs an installed harness's suites


def pytest_addoption(parser: pytest.Parser) -> None:
    """The run options (the table of harness/contract/run_options.py, each as --harness-NAME), then the options of a
    pytest session itself (the report, shrinking, slow tests, stopping at a catch)."""
    group = parser.getgroup("mtp-harness", "mtp-harness: MTP decoding correctness")
    declare_options(group.addoption, lambda row: [row.pytest_flag])

    def option(name: str, **kwargs: object) -> None:
        group.addoption(PYTEST_PREFIX + name, **kwargs)

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
