"""Per-case hooks: a case's parameters and check records on its report, and the mutation catalogue's
stop-at-first-catch (--harness-stop-suite-on-catch, --harness-stop-on-catch)."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from harness.contract.errors import WeightsNotLoaded
from harness.contract.paths import suite_of
from harness.plugin.known import judge

_CAUGHT = pytest.StashKey[set[str]]()
CATCH_EXCEPTIONS = (AssertionError, pytest.fail.Exception)  # an assertion fired: not a crash


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # noqa: ANN201 - hook wrapper
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and call.excinfo.errisinstance(WeightsNotLoaded):
        _skip_for_weights(item, report, call.excinfo.value)
        return
    if report.when == "call" and hasattr(item, "callspec"):
        _carry_check_records(item.callspec.params.values(), report)
    judge(item, call, report)  # a watched test's failure: a known finding, or a failure it does not explain
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


def _skip_for_weights(item: pytest.Item, report: pytest.TestReport, error: BaseException) -> None:
    """A check that needs the checkpoint's weights in a run that loads none (--reference engine) is skipped, naming
    what it needed: the run judges what the engine's own reference can judge, and says what it could not."""
    path, line, _ = item.location
    report.outcome = "skipped"
    report.longrepr = (str(path), (line or 0) + 1, f"Skipped: needs {error} (--reference harness runs it)")


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
