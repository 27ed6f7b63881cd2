"""What each llama.cpp finding's failure looks like: predicates over a failed case's records and message
(harness/subjects/engines/findings.py FailedCase). A failure the predicate of no watching finding accepts is a failure.

- accepted tokens dropped at the context end: an output that is a proper prefix of what it should be, ending
  within k + 1 tokens of the context (prompt + output + k + 1 >= the model's context), where the request asked
  for no more than fits. Nothing else (a wrong token, an early stop away from the context end) is explained;
- the first prompt token paired with a hidden state that does not exist: greedy tokens unchanged and only the
  drafts different, between two decodes of one request (alone and in a batch) or against the checkpoint's MTP
  computation. A draft-conformance record cannot tell this from another drafting bug of the same size: the
  signature accepts mismatches in at most MISMATCH_SHARE of the passes (a drafter that is wholly wrong is not
  explained), and the finding says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.subjects.engines.findings import FailedCase

# Drafts of the first prompt token's phantom entry differ from the checkpoint's in 1% (tiny-glm4-moe, k = 1) to
# 18% (tiny-qwen3-next, k = 3) of the passes measured on 2026-12-01; a broken drafter mismatches most passes.
MISMATCH_SHARE = 0.25


def _tokens(steps: Sequence[Mapping[str, Any]]) -> list[int]:
    return [token for step in steps for token in step["emitted"]]


def _is_proper_prefix(short: Sequence[int], long: Sequence[int]) -> bool:
    return len(short) < len(long) and list(long[: len(short)]) == list(short)


def _prompt_length(case: FailedCase, prompt_id: str) -> int:
    from harness.models.prompts import load_prompts

    bundle = case.model()
    prompt = next(p for p in load_prompts() if p.id == prompt_id)
    return len(prompt.encode(bundle.tokenizer))


def _at_the_context_end(case: FailedCase, prompt_length: int, output_length: int, k: int) -> bool:
    return prompt_length + output_length + k + 1 >= case.model().max_context


def cut_short_at_the_context_end(case: FailedCase) -> bool:
    """The output stops early, a prefix of the right one, within k + 1 tokens of the context end."""
    divergence = case.records.get("divergence")
    if divergence:
        ended = divergence.get("actual_token") is None  # the output ended where the reference goes on
        k = int(divergence.get("num_draft_tokens") or 1)
        return ended and _at_the_context_end(case, len(divergence["prompt_ids"]), int(divergence["index"]), k)
    speculation = case.records.get("speculation")
    if speculation:
        request, short = speculation["request"], speculation["speculative"]
        return _is_proper_prefix(short, speculation["without"]) and _at_the_context_end(
            case, len(request["prompt_ids"]), len(short), int(request["num_draft_tokens"])
        )
    passes = case.records.get("passes")
    if passes and passes.get("other_steps") is not None:
        ours, theirs = _tokens(passes["steps"]), _tokens(passes["other_steps"])
        short, long = (ours, theirs) if len(ours) < len(theirs) else (theirs, ours)
        return _is_proper_prefix(short, long) and _at_the_context_end(
            case, _prompt_length(case, passes["prompt_id"]), len(short), int(passes["num_draft_tokens"])
        )
    return False


def only_the_drafts_differ(case: FailedCase) -> bool:
    """Two decodes of one request with the same tokens and finish but other drafts (batch against alone, a
    seeded request in and out of its batch), or draft-conformance mismatches in at most MISMATCH_SHARE of the
    passes; never a changed token."""
    divergence = case.records.get("divergence")
    if divergence and not divergence.get("near_tie"):
        return False
    passes = case.records.get("passes")
    if passes and passes.get("other_steps") is not None:
        return _tokens(passes["steps"]) == _tokens(passes["other_steps"])
    isolation = case.records.get("isolation")
    if isolation:
        return isolation["alone"] == isolation["in_batch"]
    conformance = case.records.get("conformance")
    if conformance:
        return 0 < len(conformance["mismatches"]) <= MISMATCH_SHARE * conformance["passes"]
    return False
