"""Quiet progress for `mtp-harness run` (loaded with `-p harness.plugin.progress`): one line every 1/PROGRESS_STEPS of
the cases, or after PROGRESS_EVERY_S seconds when some finished, with cases done, total and the time left;
pytest's dot per test is left out. Runs in the controlling process only: pytest-xdist relays every worker's
reports to it.

The time left weighs each case by its expected cost (case_costs.py: its duration in the last run in the same report
directory, else its test function's, else its suite's prior), not as an equal share, less what a running case has
run already, and never shorter than the costliest xdist group still to finish on its one worker: a run whose last
cases are its slow ones is not "about 4s" from its end.
"""

from __future__ import annotations

import time

import pytest

from harness.plugin.case_costs import case_costs, durations_before, remaining_s, time_left_s
from harness.plugin.case_order import run_priors

PROGRESS_STEPS = 20  # a line every 5% of the cases
PROGRESS_EVERY_S = 60.0


def format_duration(seconds: float) -> str:
    """12s, 3m 05s, 1h 02m."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"


def progress_line(done: int, total: int, failed: int, elapsed_s: float, left_s: float | None) -> str:
    """`done/total cases (pct), failed, elapsed[, time left]`."""
    percent = 100 * done // total if total else 100
    line = f"mtp-harness: {done}/{total} cases ({percent}%), {failed} failed, {format_duration(elapsed_s)} elapsed"
    return line if left_s is None or done >= total else f"{line}, about {format_duration(left_s)} left"


class Progress:
    """Counts finished cases (pytest_runtest_logfinish, once per test) and failed ones (any failed phase); keeps when
    each running case started, for the time left."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.started = time.monotonic()
        self.session: pytest.Session | None = None
        self.done = 0
        self.failed: set[str] = set()
        self.step = 0  # of the last line: done * PROGRESS_STEPS // total
        self.last_line = self.started
        self.costs: dict[str, float] = {}  # nodeid -> expected seconds, once the cases are known
        self.case_started: dict[str, float] = {}  # nodeid -> when it started (cases not finished)
        self.finished: set[str] = set()
        self.workers: set[str] = set()  # pytest-xdist's workers that collected

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    def expect(self, nodeids: list[str]) -> None:
        known = durations_before(self.config.getoption("harness_report", None), nodeids)
        self.costs = case_costs(nodeids, known, run_priors(self.config))

    def pytest_collection_finish(self, session: pytest.Session) -> None:  # without xdist: the items are here
        self.expect([item.nodeid for item in session.items])

    def pytest_xdist_node_collection_finished(self, node: object, ids: list[str]) -> None:  # xdist: per worker
        self.workers.add(str(getattr(node, "gateway", node)))
        if not self.costs:
            self.expect(ids)

    @pytest.hookimpl(wrapper=True)
    def pytest_report_teststatus(self, report: pytest.TestReport):  # noqa: ANN201 - (category, letter, word)
        category, _, word = yield
        return category, "", word  # no dot per test; the category still feeds pytest's summary

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.case_started[nodeid] = time.monotonic()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self.failed.add(report.nodeid)

    def time_left(self, now: float) -> float:
        """Seconds left (case_costs.py), the costs taken as seconds on this machine."""
        running = {nodeid: now - started for nodeid, started in self.case_started.items()}
        return time_left_s(remaining_s(self.costs, running, self.finished), len(self.workers) or 1)

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        self.done += 1
        self.finished.add(nodeid)
        self.case_started.pop(nodeid, None)
        total = max(getattr(self.session, "testscollected", 0), self.done)  # xdist: what the workers collected
        step, now = self.done * PROGRESS_STEPS // total, time.monotonic()
        if step > self.step or now - self.last_line >= PROGRESS_EVERY_S:
            self.step, self.last_line = step, now
            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                left = self.time_left(now) if self.costs else None
                reporter.write_line(progress_line(self.done, total, len(self.failed), now - self.started, left))


def pytest_configure(config: pytest.Config) -> None:
    if getattr(config, "workerinput", None) is None:
        config.pluginmanager.register(Progress(config), "mtp_harness_progress")
