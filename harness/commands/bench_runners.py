"""`mtp-harness bench --job runners|v2-sampling`: what vLLM's Model Runner V2 costs here against V1, from runs of the
suites as a user runs them (`mtp-harness run --decoder vllm-mtp`, one worker).

- runners: the greedy suite's k = 2 cases (every prompt, every forced-rejection schedule, both batch layouts: the CI's
  V2 slice) on V1 and on V2, one after the other; each case's duration from its run's results.json, and over the
  cases both ran
      ratio = sum(V2 case seconds) / sum(V1 case seconds)              (goal: at most RUNNER_RATIO_GOAL)
  beside the median cases and each run's wall time (engine starts included). The sum, not the median: the cases
  share their decodes (the first case of a batch decodes it for every forced-rejection schedule cut from it), so
  the median case is one that decoded nothing (measured: 2.0 ms on V1, 1.7 ms on V2, a ratio of 0.85 that says
  nothing of V2's cost);
- v2-sampling: the sampling suite on V2 at the smoke budget, its wall time against V2_SAMPLING_GOAL_S.

Wall-clock on a possibly shared machine: run it on an idle one; the ratio compares two runs made minutes apart.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

RUNNER_RATIO_GOAL = 3.0  # issue 65: a V2 greedy case at most 3x a V1 one (here: their sums)
V2_SAMPLING_GOAL_S = 600.0  # issue 65: the sampling family on V2 at the smoke budget under 10 minutes
GREEDY_SLICE = "k2"  # the CI's V2 slice (.ci/run)


@dataclass(frozen=True)
class RunTiming:
    """One `mtp-harness run`: its wall time, exit status and each case's seconds (results.json)."""

    runner: str
    command: list[str]
    wall_s: float
    exit_code: int
    case_seconds: dict[str, float]


def timed_run(runner: str, suite: str, model: str, budget: str, extra: list[str], report_dir: Path) -> RunTiming:
    """`mtp-harness run --decoder vllm-mtp --engine-runner RUNNER --suite SUITE -n 1`, its output echoed, timed."""
    command = [sys.executable, "-m", "harness.commands.cli", "run", "--decoder", "vllm-mtp", "--engine-runner", runner]
    command += ["--model", model, "--suite", suite, "--budget", budget, "-n", "1", "--report-dir", str(report_dir)]
    command += extra
    started = time.perf_counter()
    done = subprocess.run(command, check=False)
    wall = time.perf_counter() - started
    [results] = [json.loads(path.read_text()) for path in report_dir.glob("*/results.json")] or [{"cases": []}]
    seconds = {c["nodeid"]: float(c["duration_s"]) for c in results["cases"] if c.get("duration_s") is not None}
    return RunTiming(runner, command, round(wall, 1), done.returncode, seconds)


@dataclass(frozen=True)
class RunnerComparison:
    model: str
    v1: RunTiming
    v2: RunTiming

    @property
    def common(self) -> list[str]:
        return sorted(set(self.v1.case_seconds) & set(self.v2.case_seconds))

    def median(self, timing: RunTiming) -> float:
        return statistics.median(timing.case_seconds[nodeid] for nodeid in self.common) if self.common else 0.0

    def total(self, timing: RunTiming) -> float:
        return sum(timing.case_seconds[nodeid] for nodeid in self.common)

    @property
    def ratio(self) -> float:
        v1 = self.total(self.v1)
        return self.total(self.v2) / v1 if v1 else float("inf")

    def to_dict(self) -> dict[str, object]:
        return {
            "model": self.model,
            "cases": len(self.common),
            "total_case_s": {"v1": round(self.total(self.v1), 3), "v2": round(self.total(self.v2), 3)},
            "median_case_s": {"v1": self.median(self.v1), "v2": self.median(self.v2)},
            "ratio": self.ratio,
            "goal": RUNNER_RATIO_GOAL,
            "wall_s": {"v1": self.v1.wall_s, "v2": self.v2.wall_s},
            "exit_codes": {"v1": self.v1.exit_code, "v2": self.v2.exit_code},
        }

    def summary(self) -> str:
        verdict = "within" if self.ratio <= RUNNER_RATIO_GOAL else "over"
        return (
            f"runners on {self.model}: {len(self.common)} greedy cases (k = 2) on both; their seconds V1 "
            f"{self.total(self.v1):.1f} s, V2 {self.total(self.v2):.1f} s: V2/V1 {self.ratio:.2f}x "
            f"(goal at most {RUNNER_RATIO_GOAL:.0f}x: {verdict}); runs V1 {self.v1.wall_s:.0f} s, V2 "
            f"{self.v2.wall_s:.0f} s wall, exit codes {self.v1.exit_code} and {self.v2.exit_code}"
        )


def compare_runners(model: str = "tiny-mimo") -> RunnerComparison:
    """The greedy slice on V1, then on V2."""
    with tempfile.TemporaryDirectory(prefix="mtp-harness-bench-") as directory:
        timings = {
            runner: timed_run(runner, "greedy", model, "smoke", ["--", "-k", GREEDY_SLICE], Path(directory, runner))
            for runner in ("v1", "v2")
        }
    return RunnerComparison(model, timings["v1"], timings["v2"])


def time_v2_sampling(model: str = "tiny-mimo") -> dict[str, object]:
    """The sampling suite on V2 at the smoke budget, timed against V2_SAMPLING_GOAL_S."""
    with tempfile.TemporaryDirectory(prefix="mtp-harness-bench-") as directory:
        timing = timed_run("v2", "sampling", model, "smoke", [], Path(directory))
    return {**asdict(timing), "goal_s": V2_SAMPLING_GOAL_S, "ratio": timing.wall_s / V2_SAMPLING_GOAL_S}


def v2_sampling_summary(result: dict[str, object]) -> str:
    verdict = "within" if float(result["ratio"]) < 1 else "over"
    return (
        f"v2-sampling: the sampling suite on V2 at the smoke budget, {len(result['case_seconds'])} cases in "
        f"{result['wall_s']:.0f} s (goal {V2_SAMPLING_GOAL_S:.0f} s: {verdict}); exit code {result['exit_code']}"
    )
