"""Forced-rejection schedules for greedy suites, and the verification passes they must produce.

Forcing every output position controls the whole pass structure: a position forced to the reference's
own token is accepted, one forced to a token the target does not choose (its runner-up) is rejected.
A pass starting at output position s drafts s..s+k-1; with the first rejection at r it commits
reference[s..r] (accepted drafts, then the target's correction) and the next pass starts at r+1; with
none it commits k drafts and the bonus token, and the next pass starts at s+k+1.

A decoder drafts from output position `first` on (its `drafts_from` attribute, read by
harness.contract.decoder.drafts_from): 0 for the harness's decoders, 1 for an engine whose prefill samples
the first token without drafts (vLLM). Positions before it are single-token passes without drafts; the
schedules are laid out from `first`.

A decoder that emits the position after a rejection without drafts (`undrafted_after_rejection`, read by
harness.contract.decoder.undrafted_after_rejection: llama.cpp on a hybrid model, whose replay after restoring the
recurrent state computes that token) makes a single-token pass there: with the first rejection at r, the passes are
(s, r - s + 1), (r + 1, 1), then the next drafting pass at r + 2. A forced draft at r + 1 is never proposed.

A decoder with a documented cap on its drafts near the end of the context or output (`max_drafts`, read by
harness.contract.decoder.draft_cap: llama.cpp keeps two positions of the context free and drafts no further than
max_new_tokens - 1) proposes fewer drafts there, none where the cap is 0: those passes are laid out with the cap.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ExpectedStep:
    """A pass the decoder must make: where it starts, and where (if anywhere) its forced rejection is."""

    start: int
    rejected_at: int | None  # output position of the forced rejection inside this pass
    emitted: int  # tokens it commits


def forced_drafts(reference: Sequence[int], runner_up: Sequence[int], rejections: Iterable[int]) -> dict[int, int]:
    """Every reference position forced: the reference token (accepted), or the runner-up where rejected."""
    rejected = set(rejections)
    return {i: (runner_up[i] if i in rejected else token) for i, token in enumerate(reference)}


def expected_steps(
    length: int,
    k: int,
    rejections: Iterable[int],
    first: int = 0,
    undrafted_after_rejection: bool = False,
    cap: Callable[[int], int] | None = None,
) -> list[ExpectedStep]:
    """The passes a correct decoder makes over `length` reference tokens with every position forced, when it
    drafts from output position `first` on (and, `undrafted_after_rejection`, emits the position after each
    rejection in a pass without drafts; `cap`: pass start -> the most drafts the decoder proposes there, its
    documented limit near the end of the context or output, harness.contract.decoder.draft_cap)."""
    rejected = set(rejections)
    steps = [ExpectedStep(start, None, 1) for start in range(min(first, length))]
    start = min(first, length)
    while start < length:
        drafts = k if cap is None else max(0, min(k, cap(start)))
        rejected_at = next((p for p in range(start, start + drafts) if p in rejected and p < length), None)
        emitted = (rejected_at - start + 1) if rejected_at is not None else drafts + 1
        emitted = min(emitted, length - start)
        steps.append(ExpectedStep(start, rejected_at, emitted))
        start += emitted
        if rejected_at is not None and undrafted_after_rejection and start < length:
            steps.append(ExpectedStep(start, None, 1))
            start += 1
    return steps


def every_position(length: int, k: int) -> set[int]:
    """Reject every draft: each pass's first draft is rejected.

    Each schedule gives positions relative to the first drafted position; scheduled_rejections lays it out."""
    return set(range(length))


def first_drafted_position(length: int, k: int) -> set[int]:
    return {0}


def final_position(length: int, k: int) -> set[int]:
    """The last output position before max_new_tokens (when a pass drafts it)."""
    return {length - 1}


def last_draft_index(length: int, k: int) -> set[int]:
    """Accept drafts 0..k-2 of every pass and reject draft k-1: positions k-1, 2k-1, 3k-1, ..."""
    return set(range(k - 1, length, k))


def first_draft_after_full_acceptance(length: int, k: int) -> set[int]:
    """Alternate passes: all k drafts accepted (plus the bonus), then the next pass's first draft rejected."""
    return set(range(k + 1, length, k + 2))


SCHEDULES = {
    "every-position": every_position,
    "first-drafted-position": first_drafted_position,
    "final-position": final_position,
    "last-draft-index": last_draft_index,
    "first-draft-after-full-acceptance": first_draft_after_full_acceptance,
}


def scheduled_rejections(schedule: str, length: int, k: int, first: int = 0) -> set[int]:
    """The output positions `schedule` rejects for a decoder that drafts from `first` on: the schedule's
    pattern laid out over positions first..length-1."""
    return {first + position for position in SCHEDULES[schedule](max(length - first, 0), k)}
