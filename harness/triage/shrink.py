"""Shrinking a failing case to a smallest one that still fails, as Hypothesis shrinks an example.

A case is a request the suites made (greedy, or sampled with its seed for the invariant suites): prompt,
max_new_tokens, k, the output positions where a draft was forced to the target's runner-up (so that the
target must reject it) and those where it was forced to the target's own token (so that it must be
accepted). A variant is smaller when it has fewer forced positions, a smaller k, fewer new tokens or a
shorter prompt (in that order of importance). For a variant the reference is recomputed (target-only
greedy) and the forced tokens are the target's runner-ups at the same positions of the new reference;
drafts the suite forced to fixed tokens keep them. What "fails" means is the caller's: the decoder's tokens
differ from the reference (greedy), or an invariant breaks.

The search is greedy and deterministic: first cut the output right after the first divergent token (the
tokens after it cannot matter to the first divergence), then try the single-step variants of the current case
in a fixed order, move to the first that fails, repeat until none fails (a local minimum: no single step
makes it smaller and failing) or the time budget is spent. The same failing case shrinks the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from typing import Any

from harness.contract.records import DivergenceRecord, RequestRecord


@dataclass(frozen=True)
class RequestCase:
    prompt_ids: tuple[int, ...]
    max_new_tokens: int
    num_draft_tokens: int
    forced_positions: tuple[int, ...] = ()  # forced to the target's runner-up: rejected
    eos_token_ids: tuple[int, ...] = ()
    accepted_positions: tuple[int, ...] = ()  # forced to the target's own token: accepted
    fixed_drafts: tuple[tuple[int, int], ...] = ()  # (position, token) forced to a fixed token
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0
    draft_mode: str = "greedy"

    @classmethod
    def from_request(cls, request: RequestRecord) -> RequestCase:
        """A request as the invariant suites record it (DecodeRequest's fields; forced drafts fixed)."""
        return cls(
            tuple(request["prompt_ids"]),
            int(request["max_new_tokens"]),
            int(request["num_draft_tokens"]),
            eos_token_ids=tuple(request.get("eos_token_ids") or ()),
            fixed_drafts=tuple(sorted((int(p), int(t)) for p, t in (request.get("forced_drafts") or {}).items())),
            temperature=float(request.get("temperature", 0.0)),
            top_k=int(request.get("top_k", 0)),
            top_p=float(request.get("top_p", 1.0)),
            seed=int(request.get("seed", 0)),
            draft_mode=str(request.get("draft_mode", "greedy")),
        )

    @classmethod
    def from_divergence(cls, divergence: DivergenceRecord) -> RequestCase | None:
        """The case a greedy divergence record describes, if it carries its request."""
        if not divergence.get("prompt_ids") or not divergence.get("num_draft_tokens"):
            return None
        reference = [token["id"] for token in divergence.get("reference_tokens") or []]
        forced = {int(position): token for position, token in (divergence.get("forced_drafts") or {}).items()}
        own = {p for p, token in forced.items() if p < len(reference) and reference[p] == token}
        return cls(
            tuple(divergence["prompt_ids"]),
            int(divergence["max_new_tokens"]),
            int(divergence["num_draft_tokens"]),
            tuple(sorted(set(forced) - own)),
            tuple(divergence.get("eos_token_ids") or ()),
            tuple(sorted(own)),
        )

    def size(self) -> tuple[int, int, int, int]:
        forced = len(self.forced_positions) + len(self.accepted_positions) + len(self.fixed_drafts)
        return (forced, self.num_draft_tokens, self.max_new_tokens, len(self.prompt_ids))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def truncated(case: RequestCase, divergence: int) -> RequestCase:
    """The case cut after its first divergent token (forced positions past the cut dropped)."""
    new_tokens = min(case.max_new_tokens, divergence + 1)
    kept = tuple(p for p in case.forced_positions if p < new_tokens)
    accepted = tuple(p for p in case.accepted_positions if p < new_tokens)
    fixed = tuple((p, t) for p, t in case.fixed_drafts if p < new_tokens)
    return replace(
        case, max_new_tokens=new_tokens, forced_positions=kept, accepted_positions=accepted, fixed_drafts=fixed
    )


def smaller_variants(case: RequestCase, divergence: int) -> Iterator[RequestCase]:
    """The output cut after the first divergence, then single steps down, most important first: drop a
    forced position, lower k, fewer new tokens, a shorter prompt (its tail kept: the tokens nearest the
    output)."""
    cut = truncated(case, divergence)
    if cut != case:
        yield cut
    for position in reversed(case.forced_positions):
        yield replace(case, forced_positions=tuple(p for p in case.forced_positions if p != position))
    for position in reversed(case.accepted_positions):
        yield replace(case, accepted_positions=tuple(p for p in case.accepted_positions if p != position))
    for pair in reversed(case.fixed_drafts):
        yield replace(case, fixed_drafts=tuple(other for other in case.fixed_drafts if other != pair))
    for k in range(1, case.num_draft_tokens):
        yield replace(case, num_draft_tokens=k)
    fixed = [p for p, _ in case.fixed_drafts]
    last_forced = max((*case.forced_positions, *case.accepted_positions, *fixed), default=-1)
    for new_tokens in sorted({case.max_new_tokens // 2, case.max_new_tokens - 1}):
        if max(1, last_forced + 1) <= new_tokens < case.max_new_tokens:
            yield replace(case, max_new_tokens=new_tokens)
    length = len(case.prompt_ids)
    for keep in sorted({length // 2, length - 1}):
        if 1 <= keep < length:
            yield replace(case, prompt_ids=case.prompt_ids[-keep:])


@dataclass(frozen=True)
class Shrunk:
    original: RequestCase
    minimal: RequestCase
    tried: int  # variants run
    steps: int  # moves to a smaller failing variant
    finished: bool  # False: the time budget ran out before a local minimum
    elapsed_s: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "original": self.original.to_dict(),
            "minimal": self.minimal.to_dict(),
            "tried": self.tried,
            "steps": self.steps,
            "finished": self.finished,
            "elapsed_s": round(self.elapsed_s, 2),
        }


def shrink(case: RequestCase, divergence_of: Callable[[RequestCase], int | None], budget_s: float) -> Shrunk:
    """The smallest failing case reachable by single steps from `case`, within budget_s. `divergence_of`
    runs a case and returns its first divergent index (None: it passes); `case` must fail."""
    started = time.monotonic()
    current, tried, steps = case, 0, 0
    divergence = divergence_of(case)
    if divergence is None:
        raise ValueError(f"shrink: the case does not fail: {case}")
    while True:
        for variant in smaller_variants(current, divergence):
            if time.monotonic() - started > budget_s:
                return Shrunk(case, current, tried, steps, False, time.monotonic() - started)
            tried += 1
            found = divergence_of(variant)
            if found is not None:
                current, divergence, steps = variant, found, steps + 1
                break
        else:
            return Shrunk(case, current, tried, steps, True, time.monotonic() - started)
