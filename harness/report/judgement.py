"""What a run judged, suite by suite: silence is never success. A case is judged when it ran its check and the
check's verdict counts (passed, near-tie, failed, error); an expected failure (a recorded finding's signature
explained it) and a skip are not judged. A suite with failures is FAILED; a suite with cases but none judged is
NOT JUDGED, with the findings that masked it and the `mtp-harness run` command that runs it beneath their fixes; a
suite that judged fewer cases than its stated minimum (a CI lane's, from measured counts) is TOO FEW JUDGED; only a
suite with judged cases (at least its minimum) and no failure is ok. A stated minimum of 0 (`--min-judged
sampling=0`: a CI lane whose measured count is 0, every case an expected failure) lets that suite stay NOT JUDGED
without failing the run: it still reads NOT JUDGED, with its masking findings. A suite whose every case was skipped
as not applicable to the decoder (the engine suite on the harness's own decoder: NOT_APPLICABLE) is "not applicable":
no verdict it could have had is missing.

The run's verdict follows (`run_verdict`): FAILED where a suite failed or pytest did, NOT JUDGED where a suite judged
nothing or too few, else ok; `mtp-harness run` and `summarize --json` give it as an exit status (NOT_JUDGED_EXIT where
pytest's own was 0).

The run's terminal summary (harness/plugin/recorder.py), `mtp-harness summarize` (text, markdown and --json) and the
HTML report all print this one judgement of results.json's cases. Pure data: no torch, no pandas.
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from harness.contract.records import CaseRecord, RunHeader
from harness.contract.run_options import RunOptions, run_command
from harness.contract.suites import NOT_APPLICABLE

FAILED, NOT_JUDGED, TOO_FEW, OK = "FAILED", "NOT JUDGED", "TOO FEW JUDGED", "ok"
NOT_APPLICABLE_VERDICT = "not applicable"
NOT_JUDGED_EXIT = 6  # `mtp-harness run`'s exit status where pytest's was 0 but a suite judged nothing, or too few
REASON_LIMIT = 120  # characters of a skip reason kept (its first line)


@dataclass(frozen=True)
class SuiteJudgement:
    """One suite's cases by what the run could say of them."""

    suite: str
    passed: int = 0  # near-ties included: a near-tie divergence passed over is a pass
    near_ties: int = 0
    failed: int = 0  # errors included
    xfailed: int = 0  # expected failures: cases a recorded finding's signature explained
    # finding slug -> cases it explained (a case explained by several findings counts for each of them)
    expected_failures: Mapping[str, int] = field(default_factory=dict)
    not_judged: Mapping[str, int] = field(default_factory=dict)  # skip reason -> cases
    minimum: int | None = None  # the fewest judged cases the run asked of it (None: not stated, at least one)

    @property
    def judged(self) -> int:
        return self.passed + self.failed

    @property
    def skipped(self) -> int:
        return sum(self.not_judged.values())

    @property
    def cases(self) -> int:
        return self.judged + self.xfailed + self.skipped

    @property
    def not_applicable(self) -> bool:
        """Every case skipped as not applicable to the decoder."""
        return (
            self.cases > 0
            and all(reason.startswith(NOT_APPLICABLE) for reason in self.not_judged)
            and (self.skipped == self.cases)
        )

    @property
    def floor(self) -> int:
        """The fewest judged cases the suite needs: its stated minimum, else one."""
        return 1 if self.minimum is None else self.minimum

    @property
    def verdict(self) -> str:
        if self.failed:
            return FAILED
        if self.not_applicable:
            return NOT_APPLICABLE_VERDICT
        if not self.judged:
            return NOT_JUDGED
        return TOO_FEW if self.judged < self.floor else OK

    @property
    def falls_short(self) -> bool:
        """NOT JUDGED or TOO FEW JUDGED below the suite's floor: the suite did not judge what the run needs of it (a
        suite NOT JUDGED under a stated minimum of 0 does not fall short)."""
        return self.verdict in (NOT_JUDGED, TOO_FEW) and self.judged < self.floor

    @property
    def masking_findings(self) -> tuple[str, ...]:
        """The findings whose expected failures stand where a verdict should be (a suite judged nothing)."""
        return tuple(sorted(self.expected_failures)) if self.verdict == NOT_JUDGED else ()

    def to_record(self, beneath: list[str] | None = None) -> dict[str, Any]:
        record = {
            "suite": self.suite,
            "verdict": self.verdict,
            "cases": self.cases,
            "judged": self.judged,
            "passed": self.passed,
            "near_ties": self.near_ties,
            "failed": self.failed,
            "xfailed": self.xfailed,
            "expected_failures": dict(self.expected_failures),
            "not_judged": dict(self.not_judged),
            "minimum": self.minimum,
        }
        if beneath:
            record["beneath"] = shlex.join(beneath)
        return record


def skip_reason(message: str) -> str:
    """A skip's reason as the summary groups it: the first line, at most REASON_LIMIT characters."""
    first = (message.strip().splitlines() or ["no reason given"])[0].strip()
    return first if len(first) <= REASON_LIMIT else first[: REASON_LIMIT - 1] + "…"


def judge(
    cases: Iterable[CaseRecord], key: str = "suite", minimum: Mapping[str, int] | None = None
) -> list[SuiteJudgement]:
    """The cases by `key` (suite, or decoder), FAILED first, then NOT JUDGED, TOO FEW JUDGED, ok and not applicable;
    by name within each. `minimum`: suite -> the fewest judged cases asked of it."""
    minimum = minimum or {}
    tallies: dict[str, dict[str, Counter]] = {}
    for case in cases:
        tally = tallies.setdefault(str(case[key]), {"outcomes": Counter(), "known": Counter(), "skips": Counter()})
        outcome = case["outcome"]
        tally["outcomes"][outcome] += 1
        if outcome == "xfailed":
            for slug in (case.get("known") or {}).get("findings") or ["(no finding recorded)"]:
                tally["known"][slug] += 1
        elif outcome == "skipped":
            tally["skips"][skip_reason(case["message"])] += 1
    judgements = [
        SuiteJudgement(
            suite=name,
            passed=t["outcomes"]["passed"] + t["outcomes"]["near-tie"],
            near_ties=t["outcomes"]["near-tie"],
            failed=t["outcomes"]["failed"] + t["outcomes"]["error"],
            xfailed=t["outcomes"]["xfailed"],
            expected_failures=dict(t["known"].most_common()),
            not_judged=dict(t["skips"].most_common()),
            minimum=minimum.get(name),
        )
        for name, t in tallies.items()
    ]
    order = {FAILED: 0, NOT_JUDGED: 1, TOO_FEW: 2, OK: 3, NOT_APPLICABLE_VERDICT: 4}
    return sorted(judgements, key=lambda j: (order[j.verdict], j.suite))


def judge_run(cases: Iterable[CaseRecord], run: Mapping[str, Any], key: str = "suite") -> list[SuiteJudgement]:
    """A run's judgement, each suite held to the minimum its run asked of it (the header's `min_judged`)."""
    return judge(cases, key, run.get("min_judged") if key == "suite" else None)


def beneath_command(judgement: SuiteJudgement, run: RunHeader) -> list[str] | None:
    """`mtp-harness run` of this suite with the run's options and the masking findings' fixes added, or None where
    no finding masked it, or where that command could not run: a release other than the pinned one (the door
    refuses --engine-fixes there: the fixes are written for the pinned release), or a masking finding with no fix."""
    if not judgement.masking_findings:
        return None
    options = RunOptions.from_record(run.get("options") or {})
    if options.engine.version is not None or not all_fixable(options.decoder, judgement.masking_findings):
        return None
    fixes = tuple(sorted(set(options.engine.fixes) | set(judgement.masking_findings)))
    return run_command(replace(options, engine=replace(options.engine, fixes=fixes)), judgement.suite)


def all_fixable(decoder: str, slugs: Iterable[str]) -> bool:
    """No finding named is one of the decoder's engine's without a fix (--engine-fixes could not apply it; a slug the
    engine does not know is left to the door)."""
    from harness.subjects.engines.registry import engine_of_decoder

    engine = engine_of_decoder(decoder, any_release=True)
    has_fix = {finding.slug: finding.fix is not None for finding in engine.findings} if engine is not None else {}
    return all(has_fix.get(slug, True) for slug in slugs)


def judgement_records(cases: Iterable[CaseRecord], run: RunHeader) -> list[dict[str, Any]]:
    """The judgement as JSON data (`mtp-harness summarize --json`)."""
    return [j.to_record(beneath_command(j, run)) for j in judge_run(cases, run)]


def run_verdict(judgements: Iterable[SuiteJudgement], pytest_status: int | None = 0) -> tuple[str, int]:
    """The run's verdict and exit status: pytest's status where it failed (1 and above: failures, interruptions,
    usage errors); otherwise FAILED where a suite failed (1), NOT JUDGED where a suite judged nothing or fewer than
    its minimum (NOT_JUDGED_EXIT), else ok (0). A suite that is not applicable counts for nothing."""
    judgements = list(judgements)
    if pytest_status or any(j.verdict == FAILED for j in judgements):
        return FAILED, pytest_status or 1
    if any(j.falls_short for j in judgements):
        return NOT_JUDGED, NOT_JUDGED_EXIT
    return OK, 0


def judgement_text(cases: Iterable[CaseRecord], run: RunHeader) -> str:
    """The judgement as the terminal prints it: a line per suite, then each NOT JUDGED suite's masking findings and
    the command that runs it beneath them, and each not-judged reason."""
    judgements = judge_run(cases, run)
    columns = ("cases", "judged", "passed", "failed", "xfailed", "skipped")
    width = max([len("suite"), *(len(j.suite) for j in judgements)]) + 2
    lines = [f"{'suite':<{width}}" + "".join(f"{c:>9}" for c in columns) + "  verdict"]
    for j in judgements:
        cells = (j.cases, j.judged, j.passed, j.failed, j.xfailed, j.skipped)
        lines.append(f"{j.suite:<{width}}" + "".join(f"{c:>9}" for c in cells) + f"  {j.verdict}")
    for j in judgements:
        for slug, count in j.expected_failures.items():
            lines.append(f"  {j.suite}: {count} expected failure(s) of finding {slug}")
        for reason, count in j.not_judged.items():
            lines.append(f"  {j.suite}: {count} not judged (skipped): {reason}")
        if j.verdict == TOO_FEW:
            lines.append(f"  {j.suite} TOO FEW JUDGED: {j.judged}, fewer than the {j.minimum} this run asked of it")
        if j.verdict == NOT_JUDGED:
            masked = ", ".join(j.masking_findings) or "no finding: every case was skipped"
            allowed = "; the run allowed it (a minimum of 0)" if not j.falls_short else ""
            lines.append(f"  {j.suite} NOT JUDGED: nothing in it was judged ({masked}){allowed}")
            beneath = beneath_command(j, run)
            if beneath:
                lines.append(f"  {j.suite} beneath those findings' fixes: {shlex.join(beneath)}")
    return "\n".join(lines)
