"""What each vLLM finding's failure looks like: predicates over a failed case's records and message
(harness/subjects/engines/findings.py FailedCase). A failure the predicate of no watching finding accepts is a failure.

Each predicate accepts only what its bug can produce, so that a different bug in the same test fails:
- the CPU expand kernel: a rejected sampling case whose first output token follows the target (the plain sampler
  draws it with the request's own parameters; only the rejection sampler reads the garbage), a seeded request whose
  output changes with its batch, the out-of-bounds top-k crash, or a constrained request vLLM terminates because its
  grammar refuses the token the rejection sampler drew. How far the law moves depends on what the
  uninitialised memory holds, so another sampling bug of the rejection sampler would look the same in the record:
  the run beneath the fixes (--engine-fixes) is what judges vLLM's rejection sampler and its per-request randomness;
- the drafter skip: the passes vLLM's per-batch condition skips, predicted from the engine steps (the pass after
  each step whose longest sequence + k passes max_model_len holds token 0 only, and no other pass holds unforced
  token-0 drafts), greedy tokens unchanged, and draft mismatches only at or after a request's first predicted skip
  (its MTP cache misses that step's positions);
- probabilistic drafts without the request's seed: a seeded request with sampled drafts whose output changes with
  its batch (the record cannot tell it from another RNG bug of the draft path; its reproducer can);
- a seeded request prefilled in chunks on CPU: the engine's own error, `CPU Generator does not use offset`, which
  torch raises only when a CPU generator is asked for a Philox offset (Model Runner V1's rewind after a discarded
  chunk is the one place vLLM asks);
- min_tokens at the bonus position: a greedy output under min_tokens that runs on where target-only decoding ends on
  an EOS, at a position min_tokens allows that is the bonus position of a pass that started below min_tokens and had
  every draft accepted (Model Runner V1 masks the bonus row by the committed length);
- position 0, GLM-4.5's pre-norm hand-over and the chunked prefill's last prompt token: the engine's drafts equal
  those of the harness's proposer computing the MTP layer as the findings describe it (the chunk ends as the engine
  reported them; harness/subjects/engines/vllm/drafting.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from harness.subjects.engines.findings import FailedCase

GRAMMAR_TERMINATED = "vLLM terminated a constrained request: its grammar refused a sampled token"  # vllm/server.py
OUT_OF_BOUNDS = re.compile(r"index -?\d+ is out of bounds for dimension \d+ with size \d+")
DRAFTER_SKIP = "vllm-drafter-skipped-for-the-whole-batch-near-max-model-len"
POSITION_ZERO = "vllm-mtp-zeroes-the-token-embedding-at-position-0"
PRE_NORM_CHAIN = "vllm-glm4-moe-mtp-chains-drafts-from-the-pre-norm-hidden-state"
CHUNK_END_TOKEN = "vllm-mtp-chunked-prefill-feeds-the-last-prompt-token-at-every-chunk-end"


# --- the CPU expand kernel ----------------------------------------------------------------------------------


def sampled_with_garbage_parameters(case: FailedCase) -> bool:
    """The out-of-bounds top-k crash; a constrained sampled request vLLM terminated because its grammar refused the
    token the rejection sampler drew from the garbage-processed law (vllm/server.py GRAMMAR_TERMINATED: the watched
    tests all sample); a rejected sampling case whose first output token is not rejected (a law case
    is two tokens long and its cells do not separate the first: any rejection); or a seeded sampled request whose
    output changes with its batch (its record present: the sampling parameters are read from uninitialised memory,
    which differs from batch to batch), or with its schedule or engine (a `repeat` record of a sampled request).

    The temperature, top-k and top-p the rejection sampler applies are whatever `new_empty` left in memory, so the
    law can move by any amount (TV 0.22 to 0.79 measured): no threshold on its size separates this bug from another.
    What the mechanism fixes is where it acts: the first token of every request is drawn before any draft exists, by
    vLLM's plain sampler with the request's own parameters, so a whole-sequence case rejected at output position 0
    is another bug. The record cannot tell this bug from another bug of the rejection sampler or of per-request
    randomness: the run beneath the fixes judges those."""
    if OUT_OF_BOUNDS.search(case.message) or GRAMMAR_TERMINATED in case.message:
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


# --- a seeded request prefilled in chunks on CPU ------------------------------------------------------------

CPU_GENERATOR_OFFSET = "CPU Generator does not use offset"


def cpu_generator_asked_for_its_offset(case: FailedCase) -> bool:
    """The engine died on torch's `RuntimeError: CPU Generator does not use offset`: Model Runner V1 rewinding a
    seeded request's CPU generator after a prefill chunk that ended inside its prompt
    (`GPUModelRunner._bookkeeping_sync`). The error arrives as the text of the decode call's EngineError."""
    return CPU_GENERATOR_OFFSET in case.message


# --- min_tokens at the bonus position -----------------------------------------------------------------------


def eos_masked_at_a_bonus_position(case: FailedCase) -> bool:
    """A features case whose output equals the target-only output up to the first index d where they differ, where
    the target-only token is one of the request's EOS ids and d >= min_tokens (the EOS is allowed there), and d is
    the bonus position of the pass that emitted it: a pass with drafts, every one accepted (d == start + drafts), that
    started below min_tokens. Model Runner V1 masks the stop tokens of a pass's bonus row while the committed length
    (the pass's start) is below min_tokens (`MinTokensLogitsProcessor.apply`), though the bonus position is
    start + drafts. A divergence at a draft or correction position, before min_tokens, or at a token that is not
    an EOS is another bug."""
    record = case.records.get("feature_output")
    if not record:
        return False
    expected, actual, min_tokens = record["expected"], record["actual"], record["min_tokens"]
    shared = min(len(expected), len(actual))
    d = next((i for i in range(shared) if expected[i] != actual[i]), shared)
    if d == shared or expected[d] not in record["eos_token_ids"] or d < min_tokens:
        return False  # one output a prefix of the other, a token that is not an EOS, or an EOS still masked there
    emitting = next((s for s in record["steps"] if s["start"] <= d < s["start"] + len(s["emitted"])), None)
    if emitting is None or not emitting["drafts"]:
        return False
    all_accepted = emitting["accepted"] == len(emitting["drafts"])
    return all_accepted and d == emitting["start"] + len(emitting["drafts"]) and emitting["start"] < min_tokens


# --- the drafter skip ---------------------------------------------------------------------------------------


def drafts_of_token_zero(case: FailedCase) -> bool:
    """Greedy tokens unchanged, and the broken passes are the drafter skip's, predicted pass by pass from the engine
    steps (drafter_skipped_passes): on the pass checks, every pass of k token-0 drafts the request never proposed is
    one the skip predicts, every predicted pass with drafts holds token 0 only, and at least one was predicted, in
    each decode the record holds; on draft conformance, every mismatch of a request at or after its first predicted
    skip (the skipped pass, then drafts made from an MTP cache with holes), every other mismatch explained by the
    other watching findings."""
    if case.records.get("divergence") and not case.records["divergence"].get("near_tie"):
        return False  # the skip costs drafts, never tokens
    passes = case.records.get("passes")
    if passes:
        k, context = int(passes["num_draft_tokens"]), case.model().max_context
        forced = passes["forced_drafts"]
        decodes = [(passes["steps"], longest_of(passes.get("step_facts")))]
        if passes.get("other_steps") is not None:
            decodes.append((passes["other_steps"], longest_of(passes.get("other_step_facts"))))
        skips = [skips_as_predicted(steps, longest, k, context, forced) for steps, longest in decodes]
        return all(skip is not None for skip in skips) and any(skips)
    return DRAFTER_SKIP in conformance_explained_by(case)


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


def skips_as_predicted(
    steps: Sequence[Mapping[str, Any]], batch_longest: Sequence[int], k: int, max_model_len: int, forced: Mapping
) -> list[int] | None:
    """The drafted passes (their indices) the skip made, where the decode's passes match the prediction: every
    predicted pass with drafts holds token 0 only, and every pass of token-0 drafts not forced to 0 was predicted;
    None where they do not match, or where the engine reported no steps to predict from."""
    if len(batch_longest) != len(steps):
        return None
    predicted = {i for i in drafter_skipped_passes(batch_longest, k, max_model_len) if i < len(steps)}
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
