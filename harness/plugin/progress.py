"""Quiet progress for `mtp-harness run` (loaded with `-p harness.plugin.progress`): one line every 1/PROGRESS_STEPS of
the cases, and, with pytest-xdist's workers, one at least every PROGRESS_EVERY_S seconds while cases run, finished or
not (a heartbeat: a run whose last cases take minutes is never silent for minutes; in one process a line comes when a
case ends, Progress.start_heartbeat says why), with cases done, total and the time left; pytest's dot per test is left
out. Runs in the controlling process only: pytest-xdist relays every worker's reports to it.

The time left weighs each case by its expected cost (case_costs.py: its duration in the last run of this run's kind
in the same report directory, else its test function's, else a prior), not as an equal share, less what a running
case has run already, and never shorter than the costliest xdist group still to finish on its one worker: a run whose
last cases are its slow ones is not "about 4s" from its end. Where running cases have gone past their expected cost,
the line says how many and by how much, and says the estimate is spent rather than "about 0s left". Where unfinished
cases have no measured cost (no duration of theirs or their function's, no prior: a V2 run's sampling suite), the line
says how many it counts at a guess.
"""

from __future__ import annotations

import shlex
import sys
import threading
import time

import pytest

from harness.plugin.case_costs import case_costs, overruns_s, remaining_s, time_left_s, unmeasured
from harness.plugin.case_order import cost_sources

PROGRESS_STEPS = 20  # a line every 5% of the cases
PROGRESS_EVERY_S = 60.0  # and at least one a minute while cases run
HEARTBEAT_POLL_S = 5.0


def format_duration(seconds: float) -> str:
    """12s, 3m 05s, 1h 02m."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"


def progress_line(
    done: int,
    total: int,
    failed: int,
    elapsed_s: float,
    left_s: float | None,
    overruns: list[float] | None = None,
    guessed: int = 0,
) -> str:
    """`done/total cases (pct), failed, elapsed[, time left][, cases running past their expected cost]`; when the
    estimate is spent while cases still run past theirs, it says so instead of "about 0s left"; where `guessed`
    unfinished cases have no measured cost (case_costs.unmeasured), the time left says it counts them at a guess."""
    percent = 100 * done // total if total else 100
    line = f"mtp-harness: {done}/{total} cases ({percent}%), {failed} failed, {format_duration(elapsed_s)} elapsed"
    if left_s is None or done >= total:
        return line
    overruns = [seconds for seconds in overruns or [] if round(seconds) > 0]  # as the line writes them
    if round(left_s) > 0 or not overruns:
        line = f"{line}, about {format_duration(left_s)} left"
        if guessed:
            cases = "1 case" if guessed == 1 else f"{guessed} cases"
            line = f"{line} ({cases} at a guess: not measured in a run of this kind)"
    else:
        line = f"{line}, the estimate spent"
    if overruns:
        cases = "1 case" if len(overruns) == 1 else f"{len(overruns)} cases"
        line = f"{line}, {cases} running past the estimate by up to {format_duration(overruns[0])}"
    return line


class Progress:
    """Counts finished cases (pytest_runtest_logfinish, once per test) and failed ones (any failed phase); keeps when
    each running case started, for the time left; a heartbeat thread writes the line when none was written for
    PROGRESS_EVERY_S. The hooks and the heartbeat share one lock."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.started = time.monotonic()
        self.session: pytest.Session | None = None
        self.done = 0
        self.failed: set[str] = set()
        self.step = 0  # of the last line: done * PROGRESS_STEPS // total
        self.last_line = self.started
        self.costs: dict[str, float] = {}  # nodeid -> expected seconds, once the cases are known
        self.guessed: set[str] = set()  # the cases whose cost is a suite's prior (case_costs.unmeasured)
        self.case_started: dict[str, float] = {}  # nodeid -> when it started (cases not finished)
        self.finished: set[str] = set()
        self.workers: set[str] = set()  # pytest-xdist's workers that collected
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.heartbeat: threading.Thread | None = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    def start_heartbeat(self) -> None:
        """The heartbeat thread, in pytest-xdist's controlling process only: there no test runs, so nothing captures
        its lines (in one process pytest captures the output of the test that runs, and a line written meanwhile
        would land in that test's captured output: there a line comes when a case ends)."""
        if self.heartbeat is None:
            self.heartbeat = threading.Thread(target=self.beat, name="mtp-harness-progress", daemon=True)
            self.heartbeat.start()

    def pytest_sessionfinish(self) -> None:
        self.stopped.set()
        if self.heartbeat is not None:
            self.heartbeat.join(timeout=HEARTBEAT_POLL_S)

    def beat(self) -> None:
        """Until the session ends: the line, when cases are known, some are unfinished and none was written for
        PROGRESS_EVERY_S."""
        while not self.stopped.wait(HEARTBEAT_POLL_S):
            with self.lock:
                if self.costs and self.done < self.total() and time.monotonic() - self.last_line >= PROGRESS_EVERY_S:
                    self.write_line(time.monotonic())

    def expect(self, nodeids: list[str]) -> None:
        sources = cost_sources(self.config, nodeids)
        costs, guessed = case_costs(*sources), unmeasured(*sources)
        with self.lock:
            self.costs, self.guessed = costs, guessed

    def pytest_collection_finish(self, session: pytest.Session) -> None:  # without xdist: the items are here
        self.expect([item.nodeid for item in session.items])

    def pytest_xdist_node_collection_finished(self, node: object, ids: list[str]) -> None:  # xdist: per worker
        self.workers.add(str(getattr(node, "gateway", node)))
        if not self.costs:
            self.expect(ids)
        self.start_heartbeat()

    @pytest.hookimpl(wrapper=True)
    def pytest_report_teststatus(self, report: pytest.TestReport):  # noqa: ANN201 - (category, letter, word)
        category, _, word = yield
        return category, "", word  # no dot per test; the category still feeds pytest's summary

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        with self.lock:
            self.case_started[nodeid] = time.monotonic()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self.failed.add(report.nodeid)

    def total(self) -> int:
        """The cases collected (xdist: what the workers collected), never fewer than those done."""
        return max(getattr(self.session, "testscollected", 0), self.done)

    def write_line(self, now: float) -> None:
        """The progress line as of `now` (the lock held), its time left from the costs taken as seconds on this
        machine (case_costs.py)."""
        self.last_line = now
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        left = overruns = None
        guessed = len(self.guessed - self.finished)
        if self.costs:
            running = {nodeid: now - started for nodeid, started in self.case_started.items()}
            left = time_left_s(remaining_s(self.costs, running, self.finished), len(self.workers) or 1)
            overruns = overruns_s(self.costs, running)
        reporter.write_line(
            progress_line(self.done, self.total(), len(self.failed), now - self.started, left, overruns, guessed)
        )

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        with self.lock:
            self.done += 1
            self.finished.add(nodeid)
            self.case_started.pop(nodeid, None)
            step, now = self.done * PROGRESS_STEPS // self.total(), time.monotonic()
            if step > self.step or now - self.last_line >= PROGRESS_EVERY_S:
                self.step = step
                self.write_line(now)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """In the controller: the command that reproduces the run by hand, printed once the door has passed its options,
    then the progress lines."""
    if getattr(config, "workerinput", None) is None:
        command = [sys.executable, "-m", "pytest", *map(str, config.invocation_params.args)]
        print("mtp-harness run:", shlex.join(command), flush=True)
        config.pluginmanager.register(Progress(config), "mtp_harness_progress")
