"""Draft conformance: in greedy draft mode a draft is a deterministic function of the committed prefix, so every
pass's drafts must equal the drafts the harness's own proposer makes from the same prefix. A polluted MTP cache or a
stale hidden state leaves greedy output intact and only lowers acceptance; this is the check that exposes it, for
decoders that cannot be inspected too (the invariant suite's check 7, and the engine suite under each deployed
configuration)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.contract.decoder import DecodeRequest, DecodeResult
from harness.contract.records import (
    ConformanceMismatchRecord,
    ConformanceRecord,
    ConformanceRequestRecord,
    hidden_pairing_records,
    step_fact_records,
    step_records,
)
from harness.decoding.mtp_decoder import MTPDecoder
from harness.models.loading import ModelBundle
from harness.models.prompts import Prompt

DraftedPass = tuple[tuple[int, ...], tuple[int, ...], int, int]  # (committed prefix, drafts, request index, pass start)


def proposed_drafts(requests: Sequence[DecodeRequest], results: Sequence[DecodeResult]) -> list[DraftedPass]:
    """(committed ids, drafts, request index, pass start) of every pass that drafted, from the verification
    steps."""
    passes = []
    for index, (request, result) in enumerate(zip(requests, results, strict=True)):
        for step in result.steps:
            if step.drafts:
                passes.append((request.prompt_ids + result.token_ids[: step.start], step.drafts, index, step.start))
    return passes


def conformance_record(
    k: int,
    prompts: Sequence[Prompt],
    requests: Sequence[DecodeRequest],
    results: Sequence[DecodeResult],
    passes: Sequence[DraftedPass],
    expected: Sequence[tuple[int, ...]],
) -> ConformanceRecord:
    """The passes whose drafts the committed prefix does not give, with their requests (what a finding's
    signature reads)."""
    mismatched = [
        (index, start, drafts, ours)
        for (_, drafts, index, start), ours in zip(passes, expected, strict=True)
        if drafts != ours
    ]
    involved = sorted({index for index, *_ in mismatched})
    position = {index: i for i, index in enumerate(involved)}
    involved_requests = []
    for index in involved:
        record = ConformanceRequestRecord(
            prompt_id=prompts[index].id,
            prompt_ids=list(requests[index].prompt_ids),
            token_ids=list(results[index].token_ids),
            steps=step_records(results[index].steps),
        )
        if results[index].prefill_chunk_ends:
            record["prefill_chunk_ends"] = list(results[index].prefill_chunk_ends)
        if results[index].hidden_pairings:
            record["hidden_pairings"] = hidden_pairing_records(results[index].hidden_pairings)
        if results[index].step_facts:
            record["step_facts"] = step_fact_records(results[index].step_facts)
        involved_requests.append(record)
    return ConformanceRecord(
        num_draft_tokens=k,
        passes=len(passes),
        mismatches=[
            ConformanceMismatchRecord(request=position[index], start=start, drafts=list(drafts), expected=list(ours))
            for index, start, drafts, ours in mismatched
        ],
        requests=involved_requests,
    )


def harness_drafts(
    bundle: ModelBundle, passes: Sequence[tuple[tuple[int, ...], tuple[int, ...]]], chunk: int = 32
) -> list[tuple[int, ...]]:
    """The harness proposer's drafts for each prefix: the first pass of a fresh decode of that prefix
    (decoded in batches of similar prefix length, to keep padding small). `bundle` holds the MTP depths the
    decoder under test drafts with."""
    order = sorted(range(len(passes)), key=lambda i: len(passes[i][0]))
    drafts = [None] * len(passes)
    decoder = MTPDecoder(bundle)
    for start in range(0, len(order), chunk):
        indices = order[start : start + chunk]
        requests = [DecodeRequest(passes[i][0], 1, num_draft_tokens=len(passes[i][1])) for i in indices]
        for i, result in zip(indices, decoder.decode(requests), strict=True):
            drafts[i] = result.steps[0].drafts
    return drafts


def acceptance_per_depth(
    passes: Sequence[tuple[tuple[int, ...], Sequence[int]]], committed_after: Sequence[tuple[int, ...]]
) -> dict[int, float]:
    """Per draft index j: P(draft j accepted | drafts 0..j-1 accepted), from the committed continuation."""
    offered, accepted = {}, {}
    for (prefix, drafts), continuation in zip(passes, committed_after, strict=True):
        for j, draft in enumerate(drafts):
            if len(prefix) + j >= len(continuation):
                break
            offered[j] = offered.get(j, 0) + 1
            if continuation[len(prefix) + j] != draft:
                break
            accepted[j] = accepted.get(j, 0) + 1
    return {j + 1: round(accepted.get(j, 0) / n, 3) for j, n in sorted(offered.items())}


@dataclass(frozen=True)
class Conformance:
    """The drafted passes of a decode, the harness proposer's drafts for each, and the acceptance per depth of both
    (P(draft j accepted | drafts before it accepted), from the committed continuation)."""

    passes: list[DraftedPass]
    expected: list[tuple[int, ...]]
    subject_acceptance: dict[int, float]
    proposer_acceptance: dict[int, float]

    @property
    def mismatched(self) -> list[tuple[int, tuple[int, ...], tuple[int, ...]]]:
        """(committed length, drafts, the proposer's drafts) of every pass whose drafts the prefix does not give."""
        return [
            (len(prefix), tuple(drafts), tuple(ours))
            for (prefix, drafts, *_), ours in zip(self.passes, self.expected, strict=True)
            if tuple(drafts) != tuple(ours)
        ]

    def describe(self) -> str:
        first = self.mismatched[0]
        return (
            f"{len(self.mismatched)} of {len(self.passes)} passes proposed drafts the committed prefix does not give; "
            f"first: at committed length {first[0]} drafts {list(first[1])}, expected {list(first[2])}. Acceptance "
            f"per depth: decoder {self.subject_acceptance}, harness proposer {self.proposer_acceptance}"
        )

    def record(
        self, k: int, prompts: Sequence[Prompt], requests: Sequence[DecodeRequest], results: Sequence[DecodeResult]
    ) -> ConformanceRecord:
        return conformance_record(k, prompts, requests, results, self.passes, self.expected)


def check_conformance(
    proposer: ModelBundle, requests: Sequence[DecodeRequest], results: Sequence[DecodeResult]
) -> Conformance:
    """Every drafted pass of `results` against the drafts `proposer` (the MTP depths the decoder drafts with) makes
    from the same committed prefix."""
    passes = proposed_drafts(requests, results)
    expected = harness_drafts(proposer, [(prefix, drafts) for prefix, drafts, *_ in passes])
    finals = {r.prompt_ids: r.prompt_ids + res.token_ids for r, res in zip(requests, results, strict=True)}
    continuation = [next(full for p, full in finals.items() if prefix[: len(p)] == p) for prefix, *_ in passes]
    subject = acceptance_per_depth([(prefix, drafts) for prefix, drafts, *_ in passes], continuation)
    reference = acceptance_per_depth(list(zip([p for p, *_ in passes], expected, strict=True)), continuation)
    return Conformance(passes, expected, subject, reference)
