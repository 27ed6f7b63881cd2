"""Run budgets: one knob that scales the sample sizes, the Hypothesis examples and the mutation catalogue,
so the same session is a few-minute smoke on a CPU and a full run on a GPU runner.

    smoke   Hypothesis 10 examples, sampling N for a TV shift of 0.08 (one position of a PIT case: 0.2), four
            mutants (one per suite + control), 30 calibration reruns, 2 false-alarm seeds (nightly)
    ci      Hypothesis 25 examples, TV 0.05 (one position: 0.1), 60 calibration reruns (every commit; the default)
    full    Hypothesis 400 examples, TV 0.02 (one position: 0.05), every mutant, with the statistical-efficiency
            measurement, 200 calibration reruns (and the slow whole-sequence calibration), 50 false-alarm seeds
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, settings


@dataclass(frozen=True)
class Budget:
    name: str
    hypothesis_profile: str
    sampling_tv: float  # the law cases' N detects this TV shift of the first tokens' law
    position_tv: float  # the PIT cases' N detects this TV shift at any one of their output positions
    mutants: tuple[str, ...] | None  # None: the whole catalogue
    efficiency: bool
    calibration_reruns: int  # reruns of each law case in the p-value calibration (suites/sampling/test_calibration.py)
    false_alarm_seeds: int  # nightly: session seeds the sampling suite runs under on the correct decoder


BUDGETS = {
    "smoke": Budget(
        "smoke",
        "smoke",
        0.08,
        0.2,
        ("commit-heads-unverified", "no-mtp-rollback", "residual-from-p", "no-bonus"),
        False,
        30,
        2,
    ),
    "ci": Budget("ci", "ci", 0.05, 0.1, None, False, 60, 5),
    "full": Budget("full", "nightly", 0.02, 0.05, None, True, 200, 50),
}
DEFAULT_BUDGET = "ci"

settings.register_profile("smoke", max_examples=10, deadline=None, derandomize=True)
settings.register_profile("ci", max_examples=25, deadline=None, derandomize=True)
settings.register_profile(
    "nightly", max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)

BUDGET_HELP = "smoke | ci | full: sampling N, Hypothesis examples, which mutants (default ci)"
