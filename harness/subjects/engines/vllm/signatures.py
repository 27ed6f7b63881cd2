"""What each vLLM finding's failure looks like: predicates over a failed case's records and message
(harness/subjects/engines/findings.py FailedCase). A failure the predicate of no watching finding accepts is a failure.

Each predicate accepts only what its bug can produce, so that a different bug in the same test fails:
- the CPU expand kernel: a rejected sampling case whose first output token follows the target (the plain sampler
  draws it with the request's own parameters; only the rejection sampler reads the garbage), a seeded request whose
  output changes with its batch, or the out-of-bounds top-k crash. How far the law moves depends on what the
  uninitialised memory holds, so another sampling bug of the rejection sampler would look the same in the record:
  the run beneath the fixes (--engine-fixes) is what judges vLLM's rejection sampler and its per-request randomness;
- the drafter skip: token-0 drafts the request never proposed, and nothing else (greedy tokens unchanged; draft
  mismatches only at or after a request's skipped pass, and only in a batch that holds a request at the context end,
  without which vLLM's condition for the skip cannot hold: the batch clear of it is judged pass by pass);
- probabilistic drafts without the request's seed: a seeded request with sampled drafts whose output changes with
  its batch (the record cannot tell it from another RNG bug of the draft path; its reproducer can);
- position 0, GLM-4.5's pre-norm hand-over and the chunked prefill's last prompt token: the engine's drafts equal
  those of the harness's proposer computing the MTP layer as the findings describe it (the chunk ends as the engine
  reported them; harness/subjects/engines/vllm/drafting.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from harness.subjects.engines.findings import FailedCase

OUT_OF_BOUNDS = re.compile(r"index -?\d+ is out of bounds for dimension \d+ with size \d+")
DRAFTER_SKIP = "vllm-drafter-skipped-for-the-whole-batch-near-max-model-len"
POSITION_ZERO = "vllm-mtp-zeroes-the-token-embedding-at-position-0"
PRE_NORM_CHAIN = "vllm-glm4-moe-mtp-chains-drafts-from-the-pre-norm-hidden-state"
CHUNK_END_TOKEN = "vllm-mtp-chunked-prefill-feeds-the-last-prompt-token-at-every-chunk-end"


# --- the CPU expand kernel ----------------------------------------------------------------------------------


def sampled_with_garbage_parameters(case: FailedCase) -> bool:
    """The out-of-bounds top-k crash; a rejected sampling case whose first output token is not rejected (a law case
    is two tokens long and its cells do not separate the first: any rejection); or a seeded sampled request whose
    output changes with its batch (its record present: the sampling parameters are read from uninitialised memory,
    which differs from batch to batch), or with its schedule or engine (a `repeat` record of a sampled request).

    The temperature, top-k and top-p the rejection sampler applies are whatever `new_empty` left in memory, so the
    law can move by any amount (TV 0.22 to 0.79 measured): no threshold on its size separates this bug from another.
    What the mechanism fixes is where it acts: the first token of every request is drawn before any draft exists, by
    vLLM's plain sampler with the request's own parameters, so a whole-sequence case rejected at output position 0
    is another bug. The record cannot tell this bug from another bug of the rejection sampler or of per-request
    randomness: the run beneath the fixes judges those."""
    if OUT_OF_BOUNDS.search(case.message):
        return True
    sampling = case.records.get("sampling")
    if sampling:
        return bool(sampling["rejected"]) and first_token_follows_the_target(sampling)
    repeat = case.records.get("repeat")  # the same seeded request in two runs (the engine suite)
    if repeat:
        return repeat["request"]["temperature"] > 0
    return "isolation" in case.records


def first_token_follows_the_target(sampling: Mapping[str, Any]) -> bool:
    """Output position 0 of a whole-sequence case not rejected by either of its tests (KS, log-likelihood; Holm
    over the case's family at its family alpha). A law case's cells pair the first two tokens and pool the rare
    pairs, so they cannot judge the first token alone: true."""
    if sampling["kind"] == "law":
        return True
    first = next(p for p in sampling["positions"] if p["position"] == 0)
    return first["ks_holm"] > sampling["family_alpha"] and first["z_holm"] > sampling["family_alpha"]


# --- probabilistic drafts without the request's seed -------------------------------------------------------


def sampled_drafts_not_seeded(case: FailedCase) -> bool:
    """A seeded sampled request with sampled drafts (draft_mode 'sample') whose output changed with its batch."""
    isolation = case.records.get("isolation")
    return bool(isolation) and isolation["request"]["draft_mode"] == "sample"


# --- the drafter skip ---------------------------------------------------------------------------------------


def drafts_of_token_zero(case: FailedCase) -> bool:
    """Greedy tokens unchanged, and the broken passes are token-0 drafts the request never proposed: a pass
    whose drafts are all 0 where no 0 was forced (pass checks), or draft mismatches of a request at or after its
    own all-zero pass, with every other mismatch explained by the other watching findings (draft conformance); in
    both, only where the case's batch (or the request alone) reaches the context end, as the skip needs."""
    if case.records.get("divergence") and not case.records["divergence"].get("near_tie"):
        return False  # the skip costs drafts, never tokens
    passes = case.records.get("passes")
    if passes:
        steps = passes["steps"] + (passes.get("other_steps") or [])
        skipped = any(unproposed_zero_drafts(step, passes["forced_drafts"]) for step in steps)
        k = int(passes["num_draft_tokens"])
        return skipped and batch_reaches_the_context_end(case, k, passes["prompt_id"])
    return DRAFTER_SKIP in conformance_explained_by(case)


def unproposed_zero_drafts(step: Mapping[str, Any], forced: Mapping[str, int]) -> bool:
    """A pass that verified k drafts of token 0, none of them forced to 0."""
    drafts = step["drafts"]
    forced_zero = any(forced.get(str(step["start"] + j)) == 0 for j in range(len(drafts)))
    return bool(drafts) and all(token == 0 for token in drafts) and not forced_zero


# --- drafts that differ from the checkpoint's MTP computation -----------------------------------------------


def drafts_with_position_zero_masked(case: FailedCase) -> bool:
    """Every draft mismatch explained by the watching findings together, some of them by the MTP layer computed
    with the position-0 embedding zeroed."""
    return POSITION_ZERO in conformance_explained_by(case)


def drafts_chained_from_the_pre_norm_state(case: FailedCase) -> bool:
    """Every draft mismatch explained by the watching findings together, some of them by the MTP layer computed
    chaining its pre-norm hidden state into the next draft step."""
    return PRE_NORM_CHAIN in conformance_explained_by(case)


def drafts_with_the_last_prompt_token_at_chunk_ends(case: FailedCase) -> bool:
    """Every draft mismatch explained by the watching findings together, some of them by the MTP layer's cache built
    with the prompt's last token at the end of each prefill chunk the engine reported for the request."""
    return CHUNK_END_TOKEN in conformance_explained_by(case)


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
    key = (case.nodeid, repr(conformance["mismatches"]))
    if key not in _EXPLAINED:
        if len(_EXPLAINED) > 64:  # a run has a few conformance failures: keep the memo small
            _EXPLAINED.clear()
        _EXPLAINED[key] = _explain_mismatches(conformance, case)
    return _EXPLAINED[key]


def _explain_mismatches(conformance: Mapping[str, Any], case: FailedCase) -> frozenset[str]:
    requests = conformance["requests"]
    left, used = list(conformance["mismatches"]), set()
    if DRAFTER_SKIP in case.watched_by and batch_reaches_the_context_end(case, int(conformance["num_draft_tokens"])):
        skipped_at = {
            index: min((s["start"] for s in request["steps"] if unproposed_zero_drafts(s, {})), default=None)
            for index, request in enumerate(requests)
        }
        kept = [m for m in left if skipped_at[m["request"]] is None or m["start"] < skipped_at[m["request"]]]
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


def batch_reaches_the_context_end(case: FailedCase, k: int, prompt_id: str | None = None) -> bool:
    """Whether the mechanism of the drafter skip can act on the case's batch: vLLM skips the drafter for a step when
    the batch's longest sequence plus the drafter's query tokens no longer fits max_model_len
    (`_input_fits_in_drafter`, gpu_model_runner.py:4288), which needs a request of the batch that reaches the last
    2k + 1 positions of the context (harness/checks/batches.py at_context_end). The batch is the case's parameter:
    mixed, clear-of-context-end or at-context-end (its prompt fixtures), separated (the batch of the case's prompt);
    a case with none decodes `prompt_id` alone (every prompt, where it names none)."""
    from harness.checks.batches import BATCHES, MIXED, SEPARATED, at_context_end, batch_members, own_batch
    from harness.models.prompts import load_prompts

    bundle = case.model()
    lengths = {p.id: (len(p.encode(bundle.tokenizer)), p.max_new_tokens) for p in load_prompts()}
    named = next((b for b in (*BATCHES, SEPARATED) if case.nodeid.rstrip("]").endswith(f"-{b}")), None)
    if named == SEPARATED and prompt_id is not None:
        named = own_batch(*lengths[prompt_id], k, bundle.max_context)
    if named is None and prompt_id is not None:  # decoded alone
        members = [lengths[prompt_id]]
    else:
        members = batch_members(list(lengths.values()), named or MIXED, k, bundle.max_context, lambda length: length)
    return any(at_context_end(*length, k, bundle.max_context) for length in members)


def committed_prefix(request: Mapping[str, Any], start: int) -> list[int]:
    """The prompt and the tokens committed before the pass that started at output position `start`."""
    return [*request["prompt_ids"], *request["token_ids"][:start]]
