"""`mtp-harness run`: one pytest-xdist worker per usable core unless -n says otherwise, and a quiet progress line
every 5% of the cases with the time left (harness/plugin/progress.py) instead of a dot per test."""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import time
from types import SimpleNamespace

import pytest

import harness.commands.run as cli
import harness.plugin.progress as progress
from harness.commands.cli import build_parser
from harness.contract.run_options import given_options
from harness.plugin.progress import Progress, format_duration, progress_line

pytest_plugins = ["pytester"]


def command_for(tmp_path, *options: str) -> list[str]:
    args = build_parser().parse_args(["run", *options])
    return cli.pytest_command(args, given_options(args), tmp_path / "junit.xml")


def workers_of(command: list[str]) -> int:
    if "-n" not in command:
        return 0
    assert command[command.index("-n") + 2 : command.index("-n") + 4] == ["--dist", "loadgroup"]
    return int(command[command.index("-n") + 1])


def test_run_uses_one_worker_per_usable_core_by_default(tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "usable_cores", lambda: 6)
    assert workers_of(command_for(tmp_path)) == 6
    assert workers_of(command_for(tmp_path, "-n", "auto")) == 6


def test_run_with_n_0_runs_in_one_process_and_n_3_with_three_workers(tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "usable_cores", lambda: 6)
    assert workers_of(command_for(tmp_path, "-n", "0")) == 0
    assert workers_of(command_for(tmp_path, "--workers", "3")) == 3


def test_run_on_one_core_or_an_accelerator_runs_in_one_process_unless_told(tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "usable_cores", lambda: 1)
    assert workers_of(command_for(tmp_path)) == 0
    monkeypatch.setattr(cli, "usable_cores", lambda: 6)
    assert workers_of(command_for(tmp_path, "--device", "cuda")) == 0  # each worker would load the model
    assert workers_of(command_for(tmp_path, "--device", "cuda:1", "-n", "2")) == 2


def test_run_without_pytest_xdist_runs_in_one_process(tmp_path, monkeypatch, capsys):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "xdist" else find_spec(name))
    assert workers_of(command_for(tmp_path, "-n", "2")) == 0
    assert "pytest-xdist is not installed; running in one process" in capsys.readouterr().out


def test_the_workers_option_takes_a_count_or_auto():
    assert cli.workers_option("auto") == "auto" and cli.workers_option("0") == 0
    for bad in ("-1", "two", "logical"):
        with pytest.raises(argparse.ArgumentTypeError):
            cli.workers_option(bad)


def test_usable_cores_counts_this_process_s_cores():
    assert 1 <= cli.usable_cores() <= (os.cpu_count() or 1)


def test_run_s_pytest_command_loads_the_progress_plugin_instead_of_dots(tmp_path):
    command = command_for(tmp_path, "-n", "0")
    assert command[command.index("-p") + 1] == "harness.plugin.progress"
    assert command[command.index("-o") + 1] == "console_output_style=classic"


def test_a_progress_line_says_cases_done_total_failures_and_time_left():
    assert progress_line(38, 756, 0, 75.0, 1425.0) == (
        "mtp-harness: 38/756 cases (5%), 0 failed, 1m 15s elapsed, about 23m 45s left"
    )
    assert progress_line(756, 756, 2, 3725.0, 0.0) == "mtp-harness: 756/756 cases (100%), 2 failed, 1h 02m elapsed"
    assert progress_line(1, 756, 0, 9.0, None) == "mtp-harness: 1/756 cases (0%), 0 failed, 9s elapsed"
    assert format_duration(59.6) == "1m 00s"


def test_cases_running_past_their_estimate_are_named_and_a_spent_estimate_is_not_about_0s_left():
    assert progress_line(4, 25, 0, 130.0, 40.0, [12.0]) == (
        "mtp-harness: 4/25 cases (16%), 0 failed, 2m 10s elapsed, about 40s left, "
        "1 case running past the estimate by up to 12s"
    )
    assert progress_line(4, 25, 0, 130.0, 0.2, [312.0, 5.0]) == (
        "mtp-harness: 4/25 cases (16%), 0 failed, 2m 10s elapsed, the estimate spent, "
        "2 cases running past the estimate by up to 5m 12s"
    )
    assert progress_line(24, 25, 0, 130.0, 0.2, []).endswith("about 0s left")  # nothing running past it


def test_a_time_left_that_counts_unmeasured_cases_says_how_many_it_guesses():
    """A first V2 run printed "75/1251 cases (5%), 8m 21s elapsed, about 32s left" from the harness decoder's costs."""
    assert progress_line(75, 1251, 0, 501.0, 32.0, [], guessed=900) == (
        "mtp-harness: 75/1251 cases (5%), 0 failed, 8m 21s elapsed, about 32s left "
        "(900 cases at a guess: not measured in a run of this kind)"
    )
    assert progress_line(75, 1251, 0, 501.0, 32.0, [], guessed=1).endswith(
        "(1 case at a guess: not measured in a run of this kind)"
    )
    assert progress_line(75, 1251, 0, 501.0, 32.0, []).endswith("about 32s left")


class FakeConfig:
    """What Progress reads of pytest's config: no report directory, and a terminal that keeps the lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.pluginmanager = self
        self.stash: dict = {}  # no harness options: the suites' priors

    def getoption(self, name, default=None):
        return default

    def get_plugin(self, name):
        return self

    def write_line(self, line: str) -> None:
        self.lines.append(line)


def test_the_time_left_weighs_each_case_by_its_cost_not_as_an_equal_share(monkeypatch):
    clock = iter(float(t) for t in range(100, 200))
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    config = FakeConfig()
    watcher = Progress(config)
    watcher.session, watcher.workers = SimpleNamespace(testscollected=22), {"gw0", "gw1"}
    # 20 cheap cases expected to take 1 s each, then one group of two cases of 30 s each (one worker runs them)
    cheap = [f"suites/greedy/test_g.py::test_a[{i}]" for i in range(20)]
    dear = [f"suites/sampling/test_s.py::test_b[{i}]@sampling" for i in range(2)]
    watcher.costs = {**dict.fromkeys(cheap, 1.0), **dict.fromkeys(dear, 30.0)}
    watcher.pytest_runtest_logstart(dear[0])  # at clock 101
    for nodeid in cheap[:11]:
        watcher.pytest_runtest_logstart(nodeid)
        watcher.pytest_runtest_logreport(SimpleNamespace(nodeid=nodeid, failed=False))
        watcher.pytest_runtest_logfinish(nodeid)
    line = config.lines[-1]  # at clock 123: 11 of 22 cases, 50%
    assert "11/22 cases (50%)" in line, line
    # the group needs 60 s, less the 22 s its first case has run: 38 s; the cheap ones 9 x 1 s over 2 workers
    # (counting cases as equal shares would say about 23 s)
    assert line.endswith("about 38s left"), line


def test_the_heartbeat_writes_the_line_while_a_long_case_runs_and_stops_with_the_session(monkeypatch):
    monkeypatch.setattr(progress, "PROGRESS_EVERY_S", 0.05)
    monkeypatch.setattr(progress, "HEARTBEAT_POLL_S", 0.01)
    config = FakeConfig()
    watcher = Progress(config)
    watcher.pytest_sessionstart(SimpleNamespace(testscollected=2))
    assert watcher.heartbeat is None  # in one process pytest would capture its lines: none
    cases = ["suites/sampling/test_s.py::test_law[1]", "suites/sampling/test_s.py::test_law[2]"]
    try:
        watcher.pytest_xdist_node_collection_finished(SimpleNamespace(gateway="gw0"), cases)  # xdist's controller
        watcher.costs = dict.fromkeys(watcher.costs, 0.02)  # each case expected to take 20 ms
        watcher.pytest_runtest_logstart(cases[0])
        deadline = time.monotonic() + 30
        while not (config.lines and "running past" in config.lines[-1]) and time.monotonic() < deadline:
            time.sleep(0.01)  # a line each 50 ms; the overrun shows once it rounds to a second
    finally:
        watcher.pytest_sessionfinish()
    written = len(config.lines)
    assert written >= 3, config.lines  # no case finished, yet a line every PROGRESS_EVERY_S
    assert all(line.startswith("mtp-harness: 0/2 cases (0%), 0 failed") for line in config.lines), config.lines
    assert re.search(r"the estimate spent, 1 case running past the estimate by up to \d+s$", config.lines[-1])
    time.sleep(0.1)
    assert len(config.lines) == written  # the heartbeat ended with the session


MANY_TESTS = """
import pytest

@pytest.mark.parametrize("i", range(40))
def test_case(i):
    assert i != 7
"""


def progress_lines(output: list[str]) -> list[tuple[int, int, int]]:
    found = (re.match(r"mtp-harness: (\d+)/(\d+) cases \(\d+%\), (\d+) failed", line) for line in output)
    return [(int(m[1]), int(m[2]), int(m[3])) for m in found if m]


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_progress_prints_a_line_every_5_percent_and_no_dot_per_test(pytester, workers):
    pytester.makepyfile(MANY_TESTS)
    result = pytester.runpytest_subprocess(
        "-q", "-p", "harness.plugin.progress", "-o", "console_output_style=classic", "-p", "no:cacheprovider", *workers
    )
    result.assert_outcomes(passed=39, failed=1)
    lines = progress_lines(result.outlines)
    assert [done for done, _, _ in lines] == list(range(2, 41, 2))  # 40 cases: every 2nd is the next 5%
    assert {total for _, total, _ in lines} == {40}
    assert lines[-1][2] == 1 and "about" in next(line for line in result.outlines if "20/40 cases" in line)
    assert not [line for line in result.outlines if re.fullmatch(r"[.FsxE]+\s*(\[\s*\d+%\])?", line.strip())]
    result.stdout.fnmatch_lines(["FAILED *test_case*7*"])  # the failure itself is still reported
