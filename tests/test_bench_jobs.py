"""`mtp-harness bench --job run|mutants` (harness/commands/bench_jobs.py): the progress lines a run prints are read
back into the time-left errors at 25/50/75%, and each figure is set beside its goal."""

from __future__ import annotations

import pytest

from harness.commands.bench_jobs import JobResult, job_command, job_summary, parse_duration, time_left_errors
from harness.plugin.progress import format_duration, progress_line


@pytest.mark.parametrize("seconds", [0, 7, 59, 60, 185, 3599, 3600, 7380])
def test_a_duration_reads_back_as_progress_writes_it(seconds):
    written = format_duration(seconds)
    assert parse_duration(written) == (seconds if seconds < 3600 else seconds // 60 * 60)


def test_the_time_left_error_at_each_checkpoint_is_the_estimate_over_what_was_left():
    # a 200 s run of 100 cases; at 25% it said 200 s left (150 were: +33%), at 50% 90 (100 were: -10%), at 75% 50
    # (50 were: 0%); the last line (100%) carries no estimate
    lines = [
        progress_line(10, 100, 0, 20, 300),
        progress_line(25, 100, 0, 50, 200),
        progress_line(50, 100, 1, 100, 90),
        progress_line(80, 100, 1, 150, 50),
        progress_line(100, 100, 1, 200, None),
        "mtp-harness: PASSED in 203.0s (pytest exit code 0); report reports/x/index.html",
    ]
    cases, errors = time_left_errors(lines)
    assert cases == 100
    assert errors == pytest.approx({25: 200 / 150 - 1, 50: 90 / 100 - 1, 75: 0.0})


def test_a_line_with_cases_past_their_estimate_reads_back_and_a_spent_estimate_counts_as_nothing_left():
    # at 25% it said 60 s left with one case 12 s past its estimate (100 s were left: -40%); at 50% the estimate was
    # spent (50 s were left: -100%)
    lines = [
        progress_line(25, 100, 0, 100, 60, [12.0]),
        progress_line(50, 100, 0, 150, 0.3, [70.0, 3.0]),
        progress_line(100, 100, 0, 200, None),
    ]
    assert "the estimate spent, 2 cases running past the estimate by up to 1m 10s" in lines[1]
    assert time_left_errors(lines) == (100, pytest.approx({25: 60 / 100 - 1, 50: -1.0}))


def test_a_line_whose_time_left_counts_cases_at_a_guess_reads_back():
    lines = [
        progress_line(25, 100, 0, 100, 60, [12.0], guessed=40),
        progress_line(50, 100, 0, 150, 45, [], guessed=1),
        progress_line(100, 100, 0, 200, None),
    ]
    assert "about 1m 00s left (40 cases at a guess" in lines[0]
    assert time_left_errors(lines) == (100, pytest.approx({25: 60 / 100 - 1, 50: 45 / 50 - 1}))


def test_a_run_without_progress_lines_has_no_errors():
    assert time_left_errors(["collected 0 items"]) == (None, {})


def test_each_figure_is_set_beside_its_goal():
    result = JobResult("run", job_command("run"), 171.0, 180.0, 0, 1329, {25: 0.05, 50: -0.3})
    summary = job_summary(result)
    assert "run: 171.0 s, goal 180 s: 0.95x (within the goal); exit code 0, 1329 cases" in summary
    assert "time left at 25%: +5% of the time actually left (within the goal of ±25%)" in summary
    assert "time left at 50%: -30% of the time actually left (outside the goal of ±25%)" in summary
    assert job_command("mutants")[-3:] == ["mutants", "--budget", "ci"]
