"""A failure group's minimal case: its smallest case shrunk (harness/triage/shrink.py) on the run's own decoder and
model, alone (a batch of one), then run once more for the report's timeline and the reproducer script. A
greedy case fails when the decoder's tokens differ from target-only greedy; an invariant case fails when an
invariant breaks after some pass (harness/checks/invariants.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

import torch

from harness.checks.divergence import first_divergence
from harness.checks.invariants import Violation, decode_inspected
from harness.contract.decoder import Decoder, DecodeRequest, DecodeResult, SamplingConfig
from harness.contract.records import CaseRecord, GroupRecord, step_records
from harness.decoding.target_decoder import TargetOnlyDecoder
from harness.models.loading import ModelBundle
from harness.models.teacher_forcing import target_forward
from harness.triage.shrink import RequestCase, shrink


def case_request(case: RequestCase, forced: dict[int, int]) -> DecodeRequest:
    """The DecodeRequest of a case, with its forced drafts resolved to tokens."""
    return DecodeRequest(
        case.prompt_ids,
        case.max_new_tokens,
        sampling=SamplingConfig(case.temperature, case.top_k, case.top_p),
        seed=case.seed,
        num_draft_tokens=case.num_draft_tokens,
        draft_mode=case.draft_mode,  # type: ignore[arg-type]
        eos_token_ids=case.eos_token_ids,
        forced_drafts={**dict(case.fixed_drafts), **forced},
    )


class Oracle(Protocol):
    kind: str

    def divergence_of(self, case: RequestCase) -> int | None: ...

    def view(self, case: RequestCase) -> dict[str, Any]: ...


class GreedyOracle:
    """Builds a case's request (forced drafts = the target's runner-up at the forced positions) and its
    target-only reference, and runs the decoder on it alone (a batch of one)."""

    kind = "greedy"

    def __init__(self, decoder: Decoder, bundle: ModelBundle) -> None:
        self.decoder, self.bundle, self.target = decoder, bundle, TargetOnlyDecoder(bundle)
        self._references: dict[tuple, tuple[tuple[int, ...], list[int]]] = {}

    def reference(self, case: RequestCase) -> tuple[tuple[int, ...], list[int]]:
        """Target-only greedy tokens and the runner-up at each (cached: variants share prompt and length)."""
        key = (case.prompt_ids, case.max_new_tokens, case.eos_token_ids)
        if key not in self._references:
            plain = DecodeRequest(case.prompt_ids, case.max_new_tokens, eos_token_ids=case.eos_token_ids)
            [reference] = self.target.decode([plain])
            sequence = torch.tensor([case.prompt_ids + reference.token_ids], device=self.bundle.device)
            with torch.no_grad():
                _, logits = target_forward(self.bundle.target, sequence)
            chosen = logits[0, len(case.prompt_ids) - 1 : -1]  # the logits that chose each generated token
            self._references[key] = (reference.token_ids, chosen.topk(2, dim=-1).indices[:, 1].tolist())
        return self._references[key]

    def request_and_reference(self, case: RequestCase) -> tuple[DecodeRequest, tuple[int, ...]]:
        tokens, runner_up = self.reference(case)
        forced = {p: runner_up[p] for p in case.forced_positions if p < len(runner_up)}
        forced |= {p: tokens[p] for p in case.accepted_positions if p < len(tokens)}
        return case_request(case, forced), tokens

    def run(self, case: RequestCase) -> tuple[DecodeRequest, tuple[int, ...], DecodeResult]:
        request, reference = self.request_and_reference(case)
        [result] = self.decoder.decode([request])
        return request, reference, result

    def divergence_of(self, case: RequestCase) -> int | None:
        """Where the decoder's tokens first differ from the reference's; None when they do not (or when the
        decoder refuses or crashes on the variant: that is not the failure being shrunk)."""
        try:
            _, reference, result = self.run(case)
        except Exception:
            return None
        return first_divergence(reference, result.token_ids)

    def view(self, case: RequestCase) -> dict[str, Any]:
        request, reference, result = self.run(case)
        decode = self.bundle.tokenizer.decode
        view = {
            "forced_drafts": {str(p): t for p, t in request.forced_drafts.items()},
            "reference_tokens": [{"id": t, "text": decode([t])} for t in reference],
            "actual_tokens": [{"id": t, "text": decode([t])} for t in result.token_ids],
            "divergence_index": first_divergence(reference, result.token_ids),
            "passes": step_records(result.steps),
        }
        server_config = getattr(self.decoder, "server_config", None)  # an engine subject: its reproducer needs it
        if server_config is not None:
            view["server_config"] = server_config(case.num_draft_tokens, case.draft_mode)
        return view


class InvariantOracle:
    """Runs a case alone with the decoder's inspection hook and checks every pass (harness/checks/invariants.py)."""

    kind = "invariants"

    def __init__(self, decoder: Decoder, bundle: ModelBundle) -> None:
        self.decoder, self.bundle = decoder, bundle

    def run(self, case: RequestCase) -> tuple[DecodeRequest, DecodeResult, list[Violation]]:
        request = case_request(case, {})
        [result], violations, _ = decode_inspected(self.decoder, self.bundle, [request])
        return request, result, violations

    def divergence_of(self, case: RequestCase) -> int | None:
        """None when every pass is clean (or the decoder refuses the variant); else the whole output length:
        the failure is in the state, so the output is not cut at a token."""
        try:
            _, _, violations = self.run(case)
        except Exception:
            return None
        return case.max_new_tokens if violations else None

    def view(self, case: RequestCase) -> dict[str, Any]:
        request, result, violations = self.run(case)
        decode = self.bundle.tokenizer.decode
        tokens = [{"id": t, "text": decode([t])} for t in result.token_ids]
        return {
            "forced_drafts": {str(p): t for p, t in request.forced_drafts.items()},
            "reference_tokens": tokens,  # no token reference: the output may be sampled
            "actual_tokens": tokens,
            "divergence_index": None,
            "violation": violations[0].describe() if violations else None,
            "violations": len(violations),
            "passes": step_records(result.steps),
        }


# what a failing case's record shrinks with (case_of): a greedy divergence, or an invariant violation
ORACLES: dict[str, Callable[[Decoder, ModelBundle], Oracle]] = {"greedy": GreedyOracle, "invariants": InvariantOracle}


def minimal_case(oracle: Oracle, case: RequestCase, budget_s: float) -> dict[str, Any]:
    """Shrink `case` (if it still fails alone) and describe the minimal case: request, tokens, passes."""
    if oracle.divergence_of(case) is None:
        return {"original": case.to_dict(), "reproduced": False, "kind": oracle.kind}
    shrunk = shrink(case, oracle.divergence_of, budget_s)
    return {**shrunk.to_dict(), "reproduced": True, "kind": oracle.kind, "batch_size": 1, **oracle.view(shrunk.minimal)}


def case_of(record: CaseRecord) -> tuple[str, RequestCase] | None:
    """The shrinkable case a failing case's record holds: a greedy divergence or an invariant violation with
    its request."""
    divergence = record.get("divergence") or {}
    if divergence and not divergence.get("near_tie"):
        case = RequestCase.from_divergence(divergence)
        return ("greedy", case) if case else None
    request = (record.get("invariants") or {}).get("first_request")
    return ("invariants", RequestCase.from_request(request)) if request else None


def minimal_cases(
    groups: list[dict[str, Any]],
    cases_by_id: dict[str, dict[str, Any]],
    oracle_for: Callable[[str], Oracle],
    budget_s: float,
) -> dict[int, dict[str, Any]]:
    """group number -> its minimal case, for the groups whose smallest case is shrinkable (case_of); each
    group gets an equal share of what is left of the budget. oracle_for(kind) gives the oracle of a kind."""
    started, found = time.monotonic(), {}
    shrinkable = [(group, found_case) for group in groups if (found_case := case_of(cases_by_id[group["smallest"]]))]
    for done, (group, (kind, case)) in enumerate(shrinkable):
        left = budget_s - (time.monotonic() - started)
        if left <= 0:
            break
        found[group["group"]] = minimal_case(oracle_for(kind), case, left / (len(shrinkable) - done))
    mark_shared_causes(groups, found)
    return found


def minimal_size(minimal: dict[str, Any]) -> tuple[int, ...]:
    case = minimal["minimal"]
    return (
        case["num_draft_tokens"],
        len(case["forced_positions"]),
        case["max_new_tokens"],
        len(case["prompt_ids"]),
    )


def mark_shared_causes(groups: list[GroupRecord], found: dict[int, dict[str, Any]]) -> None:
    """Groups are told apart by the test that saw them; two reproduced groups share one cause when their
    minimal cases coincide, or when the same suite fails them the same way (the cause in words: where the
    first divergence sits, which invariant broke where). Each names the group of its cause with the smallest
    minimal case (`same_as_group`; None for that group itself)."""
    reproduced = [g for g in groups if found.get(g["group"], {}).get("reproduced")]
    parent = {g["group"]: g["group"] for g in reproduced}

    def root(number: int) -> int:
        while parent[number] != number:
            number = parent[number]
        return number

    for key in (lambda g: (g["suite"], g.get("cause")), lambda g: repr(found[g["group"]]["minimal"])):
        first_with: dict[Any, int] = {}
        for group in reproduced:
            other = first_with.setdefault(key(group), group["group"])
            parent[root(group["group"])] = root(other)
    for number in parent:
        members = [m for m in parent if root(m) == root(number)]
        representative = min(members, key=lambda m: (minimal_size(found[m]), m))
        found[number]["same_as_group"] = None if number == representative else representative
