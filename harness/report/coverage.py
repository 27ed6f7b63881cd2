"""How much of the greedy suite's output was compared with a target-only reference: each greedy check records
the output positions it looked at and how many of them it compared (a near-tie is compared too: the reference
is continued from the decoder's own prefix, harness/checks/divergence.py). Shown in the report and in
`mtp-harness summarize`."""

from __future__ import annotations

from dataclasses import dataclass

from harness.contract.records import CaseRecord


@dataclass(frozen=True)
class GreedyCoverage:
    cases: int  # greedy checks recorded
    positions: int  # output positions they looked at
    checked: int  # of those, compared with target-only greedy decoding
    near_ties: int  # numerical near-ties the checks stepped over (and went on checking after)

    @property
    def share(self) -> float | None:
        # share = checked / positions
        return self.checked / self.positions if self.positions else None


def greedy_coverage(cases: list[CaseRecord]) -> GreedyCoverage | None:
    """The run's greedy coverage, or None when no case recorded a greedy check."""
    checks = [case["greedy_check"] for case in cases if case.get("greedy_check")]
    if not checks:
        return None
    return GreedyCoverage(
        cases=len(checks),
        positions=sum(check["positions"] for check in checks),
        checked=sum(check["checked"] for check in checks),
        near_ties=sum(len(check["near_ties"]) for check in checks),
    )
