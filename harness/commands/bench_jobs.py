"""`mtp-harness bench --job run|mutants`: the harness's own jobs timed against their goals, so that a regression in
the harness's speed shows up as a number.

- run: `mtp-harness run` with no options (the default model and suites, one worker per core, the report directory
  `reports/`, whose last run orders the cases and informs the time left), timed from start to exit; and the progress
  line's time left, at the first line at or past 25%, 50% and 75% of the cases, against the time that was actually
  left (the run's elapsed time at its last line less the elapsed time of that line):
      error = estimated left / actual left - 1        (0.25: the estimate said 25% more than was left)
- mutants: `mtp-harness mutants` at the ci budget, timed; its exit status says whether every mutant was caught.

Each figure is printed beside its goal (GOALS) as a ratio: below 1 is within the goal. Wall-clock on a possibly shared
machine: run it on an idle one, and compare ratios measured the same day.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

GOALS_S = {"run": 180.0, "mutants": 900.0}  # issue 47: the default run under 3 minutes, the catalogue under 15
TIME_LEFT_GOAL = 0.25  # the time left within 25% of the time actually left
CHECKPOINTS = (25, 50, 75)
PROGRESS = re.compile(
    r"mtp-harness: (?P<done>\d+)/(?P<total>\d+) cases \((?P<percent>\d+)%\), \d+ failed, (?P<elapsed>[^,]+) elapsed"
    r"(?:, about (?P<left>[^,(]+) left(?: \([^)]*\))?|, (?P<spent>the estimate spent))?"
    r"(?:, .+ running past the estimate by .+)?$"
)
DURATION = re.compile(r"^(?:(?P<h>\d+)h)? ?(?:(?P<m>\d+)m)? ?(?:(?P<s>\d+)s)?$")


@dataclass(frozen=True)
class JobResult:
    job: str
    command: list[str]
    seconds: float
    goal_s: float
    exit_code: int
    cases: int | None = None
    time_left_error: dict[int, float] = field(default_factory=dict)  # checkpoint % -> estimated / actual - 1

    @property
    def ratio(self) -> float:
        return self.seconds / self.goal_s

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "ratio": self.ratio}


def parse_duration(text: str) -> float:
    """'12s', '3m 05s', '1h 02m' (progress.format_duration) -> seconds."""
    match = DURATION.match(text.strip())
    if match is None or not any(match.groups()):
        raise ValueError(f"not a duration: {text!r}")
    hours, minutes, seconds = (int(match.group(name) or 0) for name in ("h", "m", "s"))
    return 3600 * hours + 60 * minutes + seconds


def time_left_errors(lines: Iterable[str], checkpoints: Iterable[int] = CHECKPOINTS) -> tuple[int | None, dict]:
    """(cases, {checkpoint: error}) from a run's progress lines: at the first line at or past each checkpoint,
    estimated left / (elapsed at the last line - elapsed at that line) - 1, a spent estimate counting as 0 s left; a
    checkpoint without an estimate is left out."""
    progress = [match for line in lines if (match := PROGRESS.search(line.strip()))]
    if not progress:
        return None, {}
    end = parse_duration(progress[-1]["elapsed"])
    errors = {}
    for checkpoint in checkpoints:
        at = next((m for m in progress if int(m["percent"]) >= checkpoint), None)
        if at is None or (at["left"] is None and at["spent"] is None):
            continue
        actual = end - parse_duration(at["elapsed"])
        if actual > 0:
            errors[checkpoint] = (0.0 if at["spent"] else parse_duration(at["left"])) / actual - 1
    return int(progress[-1]["total"]), errors


def job_command(job: str) -> list[str]:
    """The job as a user runs it."""
    entry = [sys.executable, "-m", "harness.commands.cli"]
    if job == "run":
        return [*entry, "run"]
    if job == "mutants":
        return [*entry, "mutants", "--budget", "ci"]
    raise ValueError(f"unknown job {job!r}: run or mutants")


def time_job(job: str) -> JobResult:
    """Run the job, echoing its output, and time it."""
    command = job_command(job)
    started = time.perf_counter()
    lines = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as process:
        for line in process.stdout:
            sys.stdout.write(line)
            lines.append(line)
    seconds = time.perf_counter() - started
    cases, errors = time_left_errors(lines) if job == "run" else (None, {})
    return JobResult(job, command, seconds, GOALS_S[job], process.returncode, cases, errors)


def job_summary(result: JobResult) -> str:
    """The job's figures beside their goals."""
    verdict = "within" if result.ratio < 1 else "over"
    lines = [
        f"{result.job}: {result.seconds:.1f} s, goal {result.goal_s:.0f} s: {result.ratio:.2f}x ({verdict} the goal); "
        f"exit code {result.exit_code}" + (f", {result.cases} cases" if result.cases is not None else "")
    ]
    for checkpoint, error in sorted(result.time_left_error.items()):
        within = "within" if abs(error) <= TIME_LEFT_GOAL else "outside"
        lines.append(
            f"  time left at {checkpoint}%: {error:+.0%} of the time actually left ({within} the goal of "
            f"±{TIME_LEFT_GOAL:.0%})"
        )
    return "\n".join(lines)
