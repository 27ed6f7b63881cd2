"""Quiet progress for `mtp-harness run` (loaded with `-p harness.plugin.progress`): one line every 1/PROGRESS_STEPS of
the cases, or after PROGRESS_EVERY_S seconds when some finished, with cases done, total and the time left;
pytest's dot per test is left out. Runs in the controlling process only: pytest-xdist relays every worker's
reports to it.
"""

from __future__ import annotations

import time

import pytest

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


def time_left(done: int, total: int, first_done_s: float, now_s: float) -> float | None:
    """Seconds per case since the first one finished (start-up and collection left out) x cases to go."""
    return (now_s - first_done_s) / (done - 1) * (total - done) if done >= 2 else None


class Progress:
    """Counts finished cases (pytest_runtest_logfinish, once per test) and failed ones (any failed phase)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.started = time.monotonic()
        self.session: pytest.Session | None = None
        self.done = 0
        self.failed: set[str] = set()
        self.first_done = 0.0
        self.step = 0  # of the last line: done * PROGRESS_STEPS // total
        self.last_line = self.started

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    @pytest.hookimpl(wrapper=True)
    def pytest_report_teststatus(self, report: pytest.TestReport):  # noqa: ANN201 - (category, letter, word)
        category, _, word = yield
        return category, "", word  # no dot per test; the category still feeds pytest's summary

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self.failed.add(report.nodeid)

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        self.done += 1
        total = max(getattr(self.session, "testscollected", 0), self.done)  # xdist: what the workers collected
        step, now = self.done * PROGRESS_STEPS // total, time.monotonic()
        self.first_done = self.first_done or now
        if step > self.step or now - self.last_line >= PROGRESS_EVERY_S:
            self.step, self.last_line = step, now
            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                left = time_left(self.done, total, self.first_done, now)
                reporter.write_line(progress_line(self.done, total, len(self.failed), now - self.started, left))


def pytest_configure(config: pytest.Config) -> None:
    if getattr(config, "workerinput", None) is None:
        config.pluginmanager.register(Progress(config), "mtp_harness_progress")
