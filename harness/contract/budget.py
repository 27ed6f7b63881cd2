"""Run budgets: one knob that scales the sample sizes, the Hypothesis examples and the mutation catalogue,
so the same session is a few-minute smoke on a CPU and a full run on a GPU runner.

    smoke   Hypothesis 10 examples; each first-token-law case sampled until its omnibus tests detect any TV shift of
            0.12 (a whole-sequence case: a gap of 0.2 in one position's PIT CDF), four mutants (one per suite + the
            control), 30 calibration reruns of each law case and 4 of the whole-sequence case, 2 false-alarm seeds
            (nightly)
    ci      Hypothesis 25 examples, TV 0.09 (one position: 0.1), 60 and 8 calibration reruns (every commit; the
            default)
    full    Hypothesis 400 examples, TV 0.04 (one position: 0.05), every mutant, with the statistical-efficiency
            measurement, 200 and 200 calibration reruns, 50 false-alarm seeds

Each shift is detected with power 0.99 at the family's worst Holm level (harness/stats/power.py law_sample_size,
ks_sample_size), measured by simulation at the least favourable alternative (harness/stats/power_simulation.py,
tests/test_power_claims.py, docs/concepts/sampling.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, settings


@dataclass(frozen=True)
class Budget:
    name: str
    hypothesis_profile: str
    sampling_tv: float  # each law case's N: its omnibus tests detect any TV shift this large of the first tokens' law
    position_tv: float  # the PIT cases' N: a gap this large in the PIT's CDF at any one output position is detected
    mutants: tuple[str, ...] | None  # None: the whole catalogue
    efficiency: bool
    calibration_reruns: int  # reruns of each law case in the p-value calibration (suites/sampling/test_calibration.py)
    sequence_calibration_reruns: int  # reruns of the whole-sequence case in the calibration (same module)
    false_alarm_seeds: int  # nightly: session seeds the sampling suite runs under on the correct decoder


BUDGETS = {
    "smoke": Budget(
        "smoke",
        "smoke",
        0.12,
        0.2,
        ("commit-heads-unverified", "no-mtp-rollback", "residual-from-p", "no-bonus"),
        False,
        30,
        4,
        2,
    ),
    "ci": Budget("ci", "ci", 0.09, 0.1, None, False, 60, 8, 5),
    "full": Budget("full", "nightly", 0.04, 0.05, None, True, 200, 200, 50),
}
DEFAULT_BUDGET = "ci"

settings.register_profile("smoke", max_examples=10, deadline=None, derandomize=True)
settings.register_profile("ci", max_examples=25, deadline=None, derandomize=True)
settings.register_profile(
    "nightly", max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)

BUDGET_HELP = "smoke | ci | full: sampling N, Hypothesis examples, which mutants (default ci)"
