"""What a greedy decode's pass record must say outside the passes a known bug predicts: read from the record alone
(a case's `passes` record: each pass's start, drafts, accepted count and emitted tokens), so that a finding's signature
explains a failure only where everything else about the decode is judged and right. A signature that accepts its
bug's symptom where it predicts it, and asks nothing of the other passes, would excuse an unrelated defect beside it.

    acceptance:     greedy verification accepts exactly the leading drafts equal to the target's tokens, so a pass
                    never rejects a draft equal to the token it emits there (the output's last token excepted: an
                    engine may stop accepting at the output's end and report the token as its own)
    forced drafts:  a draft proposed at a forced output position is the forced token
    the plan:       the passes before the first predicted one are the passes the case planned (start, tokens emitted)

The pass contract (harness/contract/passes.py, checked where results enter the harness) holds already: the passes add
up to the tokens."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Step = Mapping[str, Any]  # a pass as a record holds it: start, drafts, accepted, emitted


def acceptance_problem(steps: Sequence[Step]) -> str | None:
    """The first pass that rejected a draft equal to the token it emitted there (the output's last token excepted)."""
    length = sum(len(step["emitted"]) for step in steps)
    for index, step in enumerate(steps):
        accepted, drafts, emitted = int(step["accepted"]), step["drafts"], step["emitted"]
        at_the_end = step["start"] + accepted == length - 1
        if accepted < min(len(drafts), len(emitted)) and drafts[accepted] == emitted[accepted] and not at_the_end:
            token = drafts[accepted]
            return (
                f"pass {index} (start {step['start']}) rejected draft {accepted}, {token}, the token it emitted there"
            )
    return None


def forced_drafts_problem(steps: Sequence[Step], forced: Mapping[str, int], excepted: set[int]) -> str | None:
    """The first draft proposed at a forced output position that is not the forced token, outside the passes
    `excepted` (forced: output position, as text, -> token)."""
    for index, step in enumerate(steps):
        if index in excepted:
            continue
        for offset, draft in enumerate(step["drafts"]):
            wanted = forced.get(str(step["start"] + offset))
            if wanted is not None and draft != wanted:
                return f"pass {index} (start {step['start']}) drafted {draft} where {wanted} was forced"
    return None


def plan_problem(steps: Sequence[Step], plan: Sequence[Sequence[int]], until: int) -> str | None:
    """The first pass before index `until` that is not the plan's (start, tokens emitted)."""
    actual = [(int(step["start"]), len(step["emitted"])) for step in steps[:until]]
    wanted = [(int(start), int(emitted)) for start, emitted in plan[:until]]
    if actual != wanted:
        first = next((i for i, pair in enumerate(zip(actual, wanted, strict=False)) if pair[0] != pair[1]), None)
        where = min(len(actual), len(wanted)) if first is None else first
        return f"the passes before pass {until} are {actual}, not the plan's {wanted} (from pass {where})"
    return None


def judged_outside(
    steps: Sequence[Step], predicted: set[int], forced: Mapping[str, int], plan: Sequence[Sequence[int]] | None
) -> str | None:
    """What is wrong with a decode outside the passes `predicted` (the indices its bug accounts for), or None: its
    acceptance everywhere, its forced drafts outside them, its passes before the first of them against `plan` (the
    planned passes, or another decode of the same request, as [start, tokens emitted]; None: no plan)."""
    until = min(predicted, default=len(steps))
    return (
        acceptance_problem(steps)
        or forced_drafts_problem(steps, forced, predicted)
        or (plan_problem(steps, plan, until) if plan is not None else None)
    )


def as_plan(steps: Sequence[Step]) -> list[list[int]]:
    """Another decode's passes as a plan: [start, tokens emitted] each."""
    return [[int(step["start"]), len(step["emitted"])] for step in steps]
