"""What the features suite asserts about one result, as functions returning the problems found (empty: it holds).

- logprobs: at every output position, the reported logprob of the output token and the top tokens equal the
  target's raw log_softmax there (teacher-forced, harness/checks/feature_cases.py) within the dtype's tolerance,
  whichever kind of token it was (accepted draft, correction, bonus);
- passes: a greedy pass accepts exactly the drafts that are the output's tokens, and the forced drafts it proposed are
  the forced tokens.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from harness.contract.decoder import DecodeResult, VerifyStep
from harness.contract.records import LogprobMismatchRecord, LogprobsRecord, step_records


def token_kinds(steps: tuple[VerifyStep, ...]) -> dict[int, str]:
    """Output position -> "draft" (an accepted draft), "correction" (the target's token after a rejection) or
    "bonus" (the target's token after every draft was accepted, or in a pass without drafts)."""
    kinds = {}
    for step in steps:
        after_the_drafts = "correction" if step.accepted < len(step.drafts) else "bonus"
        for index in range(len(step.emitted)):
            kinds[step.start + index] = "draft" if index < step.accepted else after_the_drafts
    return kinds


def drafted_positions(steps: tuple[VerifyStep, ...]) -> set[int]:
    """The output positions emitted by passes that proposed drafts."""
    return {step.start + index for step in steps if step.drafts for index in range(len(step.emitted))}


def logprob_mismatches(
    result: DecodeResult, raw_logits: torch.Tensor, top: int, tolerance: float
) -> list[LogprobMismatchRecord]:
    """raw_logits [L+1, V]: the target's logits at the output's positions (teacher-forced). Every position whose
    reported logprob, top-token count or top-token logprobs differ from the target's raw log_softmax."""
    truth = torch.log_softmax(raw_logits.double(), dim=-1)
    kinds, drafted = token_kinds(result.steps), drafted_positions(result.steps)
    mismatches: list[LogprobMismatchRecord] = []
    for position, token in enumerate(result.token_ids):
        reported = result.logprobs[position] if position < len(result.logprobs) else None
        expected = float(truth[position, token])
        what = ""
        if reported is None:
            what = "no logprobs reported"
        elif reported.token != token or abs(reported.logprob - expected) > tolerance:
            what = (
                f"logprob of token {reported.token} is {reported.logprob:.6g}, the target's of {token} is "
                f"{expected:.6g}"
            )
        elif len(reported.top) != top:
            what = f"{len(reported.top)} top tokens, asked for {top}"
        else:
            best = truth[position].topk(top).values.tolist() if top else []
            for rank, (candidate, value) in enumerate(reported.top):
                if abs(value - float(truth[position, candidate])) > tolerance or abs(value - best[rank]) > tolerance:
                    what = (
                        f"top {rank} token {candidate} has logprob {value:.6g}, the target's is "
                        f"{float(truth[position, candidate]):.6g} and its rank-{rank} logprob {best[rank]:.6g}"
                    )
                    break
        if what:
            mismatches.append(
                {
                    "position": position,
                    "kind": kinds.get(position, "token"),
                    "drafted_pass": position in drafted,
                    "token": token,
                    "reported": None if reported is None else reported.logprob,
                    "expected": expected,
                    "reported_top": 0 if reported is None else len(reported.top),
                    "asked_top": top,
                    "what": what,
                }
            )
    return mismatches


def describe_mismatches(mismatches: list[LogprobMismatchRecord], limit: int = 5) -> str:
    shown = "; ".join(f"position {m['position']} ({m['kind']}): {m['what']}" for m in mismatches[:limit])
    more = f" (and {len(mismatches) - limit} more)" if len(mismatches) > limit else ""
    return shown + more


def logprobs_record(seed: int, result: DecodeResult, mismatches: list[LogprobMismatchRecord]) -> LogprobsRecord:
    return {
        "seed": seed,
        "positions": len(result.token_ids),
        "steps": step_records(result.steps),
        "mismatches": mismatches,
    }


def greedy_pass_problems(result: DecodeResult, forced: Mapping[int, int]) -> list[str]:
    """A greedy pass accepts a draft exactly when it is the output's token there; a proposed forced draft is the
    forced token. The one latitude: a draft equal to the output's last token may be reported as the target's own token
    (llama.cpp stops accepting at an EOG draft, common/sampling.cpp `common_sampler_sample_and_accept_n`;
    transformers' assisted generation stops verifying at max_new_tokens); the output and its end are the same
    whichever emits it."""
    problems = []
    output = result.token_ids
    last = len(output) - 1
    for step in result.steps:
        for index, draft in enumerate(step.drafts):
            position = step.start + index
            if position in forced and draft != forced[position]:
                problems.append(f"pass at {step.start}: draft {index} is {draft}, not the forced {forced[position]}")
            if position >= len(output):
                continue
            if index < step.accepted and draft != output[position]:
                problems.append(
                    f"pass at {step.start}: accepted draft {draft} at {position}, the output has it {output[position]}"
                )
            if index == step.accepted and draft == output[position] and position != last:
                problems.append(f"pass at {step.start}: rejected draft {draft} at {position}, the output's own token")
    return problems
