"""What several vLLM findings' signatures share (each finding's own predicate is in its folder's finding.py):

- draft-conformance mismatches explained together (`conformance_explained_by`): the drafter skip explains a
  request's mismatches at or after its first predicted skip; position 0, GLM-4.5's pre-norm hand-over and the chunked
  prefill's last prompt token explain a mismatch whose drafts equal those of the harness's proposer computing the MTP
  layer as the findings watching the test describe it (the chunk ends as the engine reported them;
  harness/subjects/engines/vllm/drafting.py); a mismatch none explains leaves the failure a failure;
- the drafter skip predicted pass by pass from the engine steps (`drafter_skipped_passes`, `skips_as_predicted`):
  the pass after each step whose longest sequence + k passes max_model_len holds token 0 only, and no other pass
  holds unforced token-0 drafts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.subjects.engines.findings import FailedCase

DRAFTER_SKIP = "vllm-drafter-skipped-for-the-whole-batch-near-max-model-len"


POSITION_ZERO = "vllm-mtp-zeroes-the-token-embedding-at-position-0"


PRE_NORM_CHAIN = "vllm-glm4-moe-mtp-chains-drafts-from-the-pre-norm-hidden-state"


CHUNK_END_TOKEN = "vllm-mtp-chunked-prefill-feeds-the-last-prompt-token-at-every-chunk-end"


def longest_of(step_facts: Mapping[str, Sequence[int]] | None) -> Sequence[int]:
    """Each pass's engine step's longest sequence (VLLMDecoder.step_facts "longest"); empty where not reported."""
    return (step_facts or {}).get("longest", [])


def drafter_skipped_passes(batch_longest: Sequence[int], k: int, max_model_len: int) -> set[int]:
    """The passes of one decode whose drafts vLLM's drafter skip replaces by token 0: the pass after each pass whose
    engine step's longest sequence does not leave the drafter its k query tokens,

        skip after pass i  <=>  batch_longest[i] + k > max_model_len

    (`_input_fits_in_drafter`, gpu_model_runner.py:4288: the drafter does not run in that step and every request of
    the batch is given k drafts of token 0 for its next pass, :4454-4460; the scheduler then trims them at
    max_model_len, so the long request's own next pass may hold fewer, or none)."""
    return {index + 1 for index, longest in enumerate(batch_longest) if longest + k > max_model_len}


def predicted_skips(
    steps: Sequence[Mapping[str, Any]], batch_longest: Sequence[int], k: int, max_model_len: int
) -> set[int]:
    """The passes of one decode the skip predicts (drafter_skipped_passes), within the decode."""
    return {i for i in drafter_skipped_passes(batch_longest, k, max_model_len) if i < len(steps)}


def skips_as_predicted(
    steps: Sequence[Mapping[str, Any]], batch_longest: Sequence[int], k: int, max_model_len: int, forced: Mapping
) -> list[int] | None:
    """The drafted passes (their indices) the skip made, where the decode's passes match the prediction: every
    predicted pass with drafts holds token 0 only, and every pass of token-0 drafts not forced to 0 was predicted;
    None where they do not match, or where the engine reported no steps to predict from."""
    if len(batch_longest) != len(steps):
        return None
    predicted = predicted_skips(steps, batch_longest, k, max_model_len)
    zero = {i for i, step in enumerate(steps) if unproposed_zero_drafts(step, forced)}
    drafted = sorted(i for i in predicted if steps[i]["drafts"])
    if not zero <= predicted or any(token != 0 for i in drafted for token in steps[i]["drafts"]):
        return None
    return drafted


def unproposed_zero_drafts(step: Mapping[str, Any], forced: Mapping[str, int]) -> bool:
    """A pass that verified drafts of token 0 only, none of them forced to 0."""
    drafts = step["drafts"]
    forced_zero = any(forced.get(str(step["start"] + j)) == 0 for j in range(len(drafts)))
    return bool(drafts) and all(token == 0 for token in drafts) and not forced_zero


_EXPLAINED: dict[tuple[str, str], frozenset[str]] = {}  # one computation per failed case for the three findings


def conformance_explained_by(case: FailedCase) -> frozenset[str]:
    """The watching findings that explain some of a draft-conformance failure's mismatches, when together they
    explain all of them; empty when a mismatch is left (a draft the findings do not account for: a new bug).

    The drafter skip explains a request's mismatches at or after its own all-zero pass; the position-0 and
    GLM-4.5 findings explain a mismatch whose drafts equal those of the harness's proposer with the MTP layer
    computed as they describe (both described together where both watch)."""
    conformance = case.records.get("conformance")
    if not conformance:
        return frozenset()
    key = (case.nodeid, repr(conformance))
    if key not in _EXPLAINED:
        if len(_EXPLAINED) > 64:  # a run has a few conformance failures: keep the memo small
            _EXPLAINED.clear()
        _EXPLAINED[key] = _explain_mismatches(conformance, case)
    return _EXPLAINED[key]


def _explain_mismatches(conformance: Mapping[str, Any], case: FailedCase) -> frozenset[str]:
    requests = conformance["requests"]
    left, used = list(conformance["mismatches"]), set()
    if DRAFTER_SKIP in case.watched_by:
        k, context = int(conformance["num_draft_tokens"]), case.model().max_context
        first_skip = {}
        for index, request in enumerate(requests):
            skips = skips_as_predicted(request["steps"], longest_of(request.get("step_facts")), k, context, {})
            if skips:
                first_skip[index] = request["steps"][skips[0]]["start"]
        kept = [m for m in left if m["request"] not in first_skip or m["start"] < first_skip[m["request"]]]
        used |= {DRAFTER_SKIP} if len(kept) < len(left) else set()
        left = kept
    described = {
        "zero_position_zero": POSITION_ZERO in case.watched_by,
        "chain_pre_norm": PRE_NORM_CHAIN in case.watched_by,
    }
    chunked = CHUNK_END_TOKEN in case.watched_by and any(r.get("prefill_chunk_ends") for r in requests)
    if left and (any(described.values()) or chunked):
        from harness.subjects.engines.vllm.drafting import drafts_as_described

        passes = [(committed_prefix(requests[m["request"]], m["start"]), len(m["drafts"])) for m in left]
        fed = [
            (tuple(requests[m["request"]].get("prefill_chunk_ends", [])), requests[m["request"]]["prompt_ids"][-1])
            for m in left
        ]
        expected = drafts_as_described(case.model(), passes, **described, fed_last_prompt_token=fed if chunked else ())
        kept = [m for m, drafts in zip(left, expected, strict=True) if tuple(m["drafts"]) != drafts]
        if len(kept) < len(left):
            flags = (*described.values(), chunked)
            used |= {
                slug for slug, flag in zip((POSITION_ZERO, PRE_NORM_CHAIN, CHUNK_END_TOKEN), flags, strict=True) if flag
            }
        left = kept
    return frozenset(used) if not left else frozenset()


def committed_prefix(request: Mapping[str, Any], start: int) -> list[int]:
    """The prompt and the tokens committed before the pass that started at output position `start`."""
    return [*request["prompt_ids"], *request["token_ids"][:start]]
