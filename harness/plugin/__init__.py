"""The pytest side: the plugin (entry point `pytest11: mtp_harness`), the run recorder that writes results.json and
the report, and the quiet progress of `mtp-harness run`.

This package is the plugin's switch, and all that pytest loads into every session where mtp-harness is installed: it
registers the harness's options (options.py: every one prefixed `--harness-`) and nothing else, unless the session is
the harness's (options.harness_session: it runs the harness's suites or passes a harness option). Then it reads and
checks the run's options before any conftest loads (session.py), and registers the plugin's parts: session.py (seed,
markers, threads, Hypothesis profile, recorder), collection.py (which tests run, which findings watch them), cases.py
(each case's report), fixtures.py (the fixtures), minimal.py (failure groups shrunk at the end), shared_work.py (work
the xdist workers share: the sampling family). known.py has the recorded engine findings judge their tests; recorder.py,
progress.py and case_order.py are plugins of their own, the last two driven by case_costs.py (each case's expected
seconds).

Imports: every subpackage but harness.commands; nothing outside the pytest side imports it.
"""

from __future__ import annotations

import pytest

from harness.plugin.options import harness_session, pytest_addoption

ACTIVE = pytest.StashKey[bool]()

__all__ = ["pytest_addoption", "pytest_configure", "pytest_load_initial_conftests"]


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, args: list[str]) -> None:
    """In a harness session, the run's options are read and checked here, before pytest loads the suites' conftest
    files (harness/door/): bad input stops as one line with exit status 2."""
    early_config.stash[ACTIVE] = harness_session(early_config)
    if early_config.stash[ACTIVE] and not getattr(early_config.known_args_namespace, "help", False):
        from harness.plugin.session import read_options

        read_options(early_config)


def pytest_configure(config: pytest.Config) -> None:
    """In a harness session, the plugin's parts join the session (their own pytest_configure runs as they join)."""
    if not config.stash.get(ACTIVE, False) or config.getoption("help", False):
        return
    from harness.plugin import cases, collection, fixtures, minimal, session, shared_work

    for part in (session, collection, cases, fixtures, minimal, shared_work):
        config.pluginmanager.register(part, f"mtp_harness_{part.__name__.rsplit('.', 1)[-1]}")
