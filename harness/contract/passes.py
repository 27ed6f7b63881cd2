"""The pass contract: what every result's verification passes must say, whatever the decoder, checked where results
enter the harness (an engine's wire, an in-process decoder's decode: harness/subjects/decoder_registry.py). Every pass
check of the suites judges positions from the passes; a pass record that does not add up to the tokens (a wrong
accepted count, a pass that starts elsewhere) would make them judge the wrong positions. For each pass i:

    it starts where the passes before it ended:   start_i = sum_{j < i} len(emitted_j)
    it accepts a prefix of its drafts:            0 <= accepted_i <= len(drafts_i) <= k
    it emits its accepted drafts, then at most one token of the target's own (fewer where the output ends inside it):
                                                  emitted_i[:a] == drafts_i[:a], a = min(accepted_i, len(emitted_i))
                                                  len(emitted_i) <= accepted_i + 1
and the passes emit the output:                   emitted_0 + emitted_1 + ... == token_ids

A decoder that reports no passes (it lacks the `steps` capability) has nothing to check; n samples are checked one by
one. A result that breaks it keeps its tokens (the greedy check still judges them and names a divergence first) and
has its passes replaced by `UnaddedPasses`, which raises PassContractError wherever a check reads them to judge, and
after the tokens the greedy check fails the case with the contract's problem; reports show the passes as reported
(`reported_passes`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence

from harness.contract.decoder import DecodeRequest, DecodeResult, VerifyStep
from harness.contract.errors import HarnessError


class PassContractError(HarnessError):
    """A result whose verification passes do not add up to its tokens: the decoder (or its adapter) misreports them."""


def pass_problem(request: DecodeRequest, result: DecodeResult) -> str | None:
    """The first way the result's passes break the contract, or None."""
    if not result.steps:
        return None
    committed = 0
    for index, step in enumerate(result.steps):
        where = f"pass {index} (start {step.start})"
        if step.start != committed:
            return f"{where}: starts at {step.start}, after {committed} committed tokens"
        if len(step.drafts) > request.num_draft_tokens:
            return f"{where}: {len(step.drafts)} drafts, more than k = {request.num_draft_tokens}"
        if not 0 <= step.accepted <= len(step.drafts):
            return f"{where}: {step.accepted} accepted of {len(step.drafts)} drafts"
        shown = min(step.accepted, len(step.emitted))
        if tuple(step.emitted[:shown]) != tuple(step.drafts[:shown]):
            return f"{where}: emitted {list(step.emitted)} does not begin with its accepted drafts {list(step.drafts)}"
        if len(step.emitted) > step.accepted + 1:
            return f"{where}: {len(step.emitted)} tokens emitted for {step.accepted} accepted drafts"
        committed += len(step.emitted)
    emitted = tuple(token for step in result.steps for token in step.emitted)
    if emitted != tuple(result.token_ids):
        return f"the passes emitted {len(emitted)} tokens {list(emitted)[:8]}..., the output is {len(result.token_ids)}"
    return None


class UnaddedPasses:
    """The passes of a result that breaks the contract, in place of its `steps`: every read that would judge them
    (iterating, indexing, len, truth) raises PassContractError with the problem; `reported` keeps them as the decoder
    reported them, for the records."""

    def __init__(self, reported: Sequence[VerifyStep], problem: str) -> None:
        self.reported = tuple(reported)
        self.problem = problem

    def refuse(self, *_: object) -> None:
        raise PassContractError(self.problem)

    def __iter__(self) -> Iterator[VerifyStep]:
        self.refuse()
        return iter(())

    __len__ = __getitem__ = __bool__ = __contains__ = refuse  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnaddedPasses) and (self.reported, self.problem) == (other.reported, other.problem)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"UnaddedPasses({self.problem!r})"


def reported_passes(steps: Sequence[VerifyStep] | UnaddedPasses) -> tuple[VerifyStep, ...]:
    """A result's passes as its decoder reported them, whether or not they keep the contract."""
    return steps.reported if isinstance(steps, UnaddedPasses) else tuple(steps)


def pass_contract_problem(result: DecodeResult) -> str | None:
    """The message of the first of the result's outcomes (its samples, else itself) whose passes break the
    contract, or None."""
    for outcome in result.samples or (result,):
        if isinstance(outcome.steps, UnaddedPasses):
            return outcome.steps.problem
    return None


def with_pass_contract(
    requests: Sequence[DecodeRequest], results: Sequence[DecodeResult], decoder: str
) -> list[DecodeResult]:
    """The results, each one (or sample) whose passes break the contract with its passes made UnaddedPasses, the
    problem naming the decoder, the request and the first broken pass."""

    def checked(request: DecodeRequest, outcome: DecodeResult, which: str) -> DecodeResult:
        problem = pass_problem(request, outcome)
        if problem is None:
            return outcome
        message = f"decoder {decoder}, {which}: its passes break the pass contract: {problem}"
        return dataclasses.replace(outcome, steps=UnaddedPasses(outcome.steps, message))

    entered = []
    for index, (request, result) in enumerate(zip(requests, results, strict=True)):
        if result.samples:
            samples = tuple(
                checked(request, sample, f"request {index}, sample {number}")
                for number, sample in enumerate(result.samples)
            )
            result = dataclasses.replace(result, samples=samples)
        else:
            result = checked(request, result, f"request {index}")
        entered.append(result)
    return entered
