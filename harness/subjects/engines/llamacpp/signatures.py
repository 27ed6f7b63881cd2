"""What each llama.cpp finding's failure looks like: predicates over a failed case's records and message
(harness/subjects/engines/findings.py FailedCase). A failure the predicate of no watching finding accepts is a failure.

- accepted tokens dropped at the context end: an output that is a proper prefix of what it should be, exactly as
  long as llama.cpp's context check cuts it given the decode's own passes (context_end_cut: the first pass whose
  accepted drafts, or a hybrid's replayed tokens, reach the last position emits one token). Nothing else (a wrong
  token, a cut one token away from the predicted one, an early stop away from the context end) is explained;
- the first prompt token paired with a hidden state that does not exist: greedy tokens unchanged, and the drafts
  predicted pass by pass: the checkpoint's MTP computation with the stale pairings the instrumented build reports
  (a task's first batch, a hybrid's replay), the target's own hidden state everywhere else. Another drafting bug
  changes some pass's drafts away from that prediction and is not explained;
- drafts lost to a slot drafting past its context end: a forced-rejection case with the right tokens whose short
  passes (fewer drafts than planned) are exactly the drafted passes of the server iterations whose batched draft
  decode reached the context end, from the iterations the instrumented build reports (draft_batches.py);
- probability 1 at every token a verification pass emits: with logprobs asked for, every mismatch is a verified
  position (one a pass with drafts emitted, or on a hybrid the replay's further token after a rejection) reported
  with logprob 0 and no top tokens, and every verified position the check could catch is among them. A mismatch at a
  token sampled outside a pass, a wrong nonzero logprob or a wrong top list is not explained.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from harness.subjects.engines.findings import FailedCase

if TYPE_CHECKING:
    from harness.models.loading import ModelBundle


def _tokens(steps: Sequence[Mapping[str, Any]]) -> list[int]:
    return [token for step in steps for token in step["emitted"]]


def _is_proper_prefix(short: Sequence[int], long: Sequence[int]) -> bool:
    return len(short) < len(long) and list(long[: len(short)]) == list(short)


def _prompt_ids(case: FailedCase, prompt_id: str) -> list[int]:
    from harness.models.prompts import load_prompts

    bundle = case.model()
    prompt = next(p for p in load_prompts() if p.id == prompt_id)
    return list(prompt.encode(bundle.tokenizer))


def _prompt_length(case: FailedCase, prompt_id: str) -> int:
    return len(_prompt_ids(case, prompt_id))


def context_end_cut(
    prompt_length: int, steps: Sequence[Mapping[str, Any]], context: int, replays: bool = False
) -> int | None:
    """How many tokens llama.cpp's server emits for a speculative request whose passes reach the context end early,
    read from those passes; None where no pass is cut.

    After verifying a pass that starts with `start` tokens emitted and accepts `a` drafts, the server appends the a
    accepted drafts to the slot's prompt (tools/server/server-context.cpp:4499-4500: n_tokens = P + start + a), then
    emits the pass's tokens one by one. process_token stops the slot at the first of them when n_tokens + 1 >= n_ctx
    (server-context.cpp:2017), and the loop drops the rest of the pass. On a hybrid (`replays`) a pass that rejects
    a draft restores its checkpoint and emits nothing (:4445-4462); the next batch replays its a + 1 tokens as
    drafts, accepts them and the target's next token, and appends a + 1: n_tokens = P + start + a + 1 when the
    pass's tokens are emitted. The cut, with `held` = the tokens appended beyond P + start:

        the first pass with P + start + held + 1 >= n_ctx emits one token: the output is start + 1 long

    where it holds for held = 0 that is the plain stop at the last token that fits (no cut: None)."""
    for step in steps:
        start, accepted = int(step["start"]), int(step["accepted"])
        held = accepted + (1 if replays and accepted < len(step["drafts"]) else 0)
        if prompt_length + start + held + 1 >= context:
            return start + 1 if held >= 1 and prompt_length + start + 1 < context else None
    return None


def _cut_as_predicted(
    case: FailedCase, prompt_length: int, short: Sequence[int], right: Sequence[int], steps: Sequence[Mapping] | None
) -> bool:
    """`short` (decoded in `steps`) is a proper prefix of `right`, exactly as long as context_end_cut predicts."""
    if steps is None or not _is_proper_prefix(short, right):
        return False
    model = case.model()
    return len(short) == context_end_cut(prompt_length, steps, model.max_context, replays=model.is_hybrid)


def cut_short_at_the_context_end(case: FailedCase) -> bool:
    """The output stops early, a prefix of the right one, exactly where context_end_cut says llama.cpp's check
    stops it, from the decode's own passes: the greedy divergence (the output ended where the reference goes on),
    every seeded request that changed with speculation, or the shorter of two decodes of one request."""
    divergence = case.records.get("divergence")
    if divergence:
        if divergence.get("actual_token") is not None:  # a changed token is never this bug
            return False
        tokens = [t["id"] for t in divergence.get("actual_tokens") or []]
        right = [t["id"] for t in divergence.get("reference_tokens") or []]
        return int(divergence["index"]) == len(tokens) and _cut_as_predicted(
            case, len(divergence["prompt_ids"]), tokens, right, divergence.get("steps")
        )
    speculation = case.records.get("speculation")
    if speculation:
        changed = [speculation, *speculation.get("more", [])]
        return all(
            _cut_as_predicted(
                case, len(r["request"]["prompt_ids"]), r["speculative"], r["without"], r.get("speculative_steps")
            )
            for r in changed
        )
    passes = case.records.get("passes")
    if passes and passes.get("other_steps") is not None:
        decodes = [(_tokens(passes["steps"]), passes["steps"]), (_tokens(passes["other_steps"]), passes["other_steps"])]
        (short, steps), (right, _) = sorted(decodes, key=lambda decode: len(decode[0]))
        return _cut_as_predicted(case, _prompt_length(case, passes["prompt_id"]), short, right, steps)
    return False


def _predicted(
    bundle: ModelBundle, sequence_ids: Sequence[int], steps: Sequence[Mapping], pairings: Sequence[Mapping]
) -> bool:
    """Every drafted pass of one decode drafted what the MTP layer computes with the stale pairings the engine
    reported (harness/checks/paired_drafts.py), and the decode reported pairings to predict from (a build without
    the instrumentation reports none: nothing is predicted)."""
    from harness.checks.paired_drafts import paired_drafts, pairings_in_force, target_hidden_states
    from harness.contract.records import hidden_pairings_from_records

    if not pairings:
        return False
    reported = hidden_pairings_from_records(pairings)
    proposer = bundle.with_depths(1)  # llama.cpp's one NextN layer, reused for the later draft steps
    hidden = target_hidden_states(proposer, sequence_ids)
    prompt_length = len(sequence_ids) - sum(len(step["emitted"]) for step in steps)
    for index, step in enumerate(steps):
        if not step["drafts"]:
            continue
        length = prompt_length + int(step["start"])
        paired = pairings_in_force(reported, index)
        if list(paired_drafts(proposer, sequence_ids, hidden, length, len(step["drafts"]), paired)) != list(
            step["drafts"]
        ):
            return False
    return True


def _stale(pairings: Sequence[Mapping]) -> list[tuple[int, tuple[float, ...]]]:
    return [(int(p["position"]), tuple(p["hidden"])) for p in pairings if p["hidden"] is not None]


def drafts_as_the_stale_pairings_predict(case: FailedCase) -> bool:
    """Greedy and seeded tokens unchanged, and every drafted pass of the decodes the failure names drafted exactly
    what the checkpoint's MTP layer computes with the pairings llama.cpp reported where its kept state can be stale
    (a task's first batch, a hybrid's replay after a restored rejection: server.py hidden_pairings), the target's own
    hidden state everywhere else: draft conformance's involved requests, the two decodes of batch against alone, and
    the two decodes of RNG isolation with greedy drafts. With sampled drafts (RNG isolation, draft_mode "sample")
    llama.cpp's draft sampler is not modelled: the two decodes' tokens must be equal and their stale pairings differ,
    the only way this finding makes their drafts differ. Nothing is predicted without reported pairings."""
    divergence = case.records.get("divergence")
    if divergence and not divergence.get("near_tie"):
        return False
    bundle = case.model()
    conformance = case.records.get("conformance")
    if conformance:
        requests = conformance["requests"]
        return bool(conformance["mismatches"]) and all(
            _predicted(bundle, [*r["prompt_ids"], *r["token_ids"]], r["steps"], r.get("hidden_pairings", []))
            for r in requests
        )
    passes = case.records.get("passes")
    if passes and passes.get("other_steps") is not None:
        ours, theirs = _tokens(passes["steps"]), _tokens(passes["other_steps"])
        if ours != theirs:
            return False
        prompt = _prompt_ids(case, passes["prompt_id"])
        return _predicted(bundle, [*prompt, *ours], passes["steps"], passes.get("hidden_pairings", [])) and _predicted(
            bundle, [*prompt, *theirs], passes["other_steps"], passes.get("other_hidden_pairings", [])
        )
    isolation = case.records.get("isolation")
    if isolation:
        if isolation["alone"] != isolation["in_batch"] or "alone_steps" not in isolation:
            return False
        alone, in_batch = isolation.get("alone_hidden_pairings", []), isolation.get("in_batch_hidden_pairings", [])
        if isolation["request"].get("draft_mode") == "sample":
            return bool(alone) and bool(in_batch) and _stale(alone) != _stale(in_batch)
        sequence = [*isolation["request"]["prompt_ids"], *isolation["alone"]]
        return _predicted(bundle, sequence, isolation["alone_steps"], alone) and _predicted(
            bundle, sequence, isolation["in_batch_steps"], in_batch
        )
    return False


def drafts_lost_to_a_slot_past_its_context_end(case: FailedCase) -> bool:
    """A forced-rejection case with the right tokens whose short passes are exactly those llama.cpp's server
    iterations predict (draft_batches.py): a drafted pass holds fewer drafts than planned if and only if the draft
    decode of its iteration, batched over every slot drafting in it, reached the context end (the step fact
    draft_reach >= n_ctx: a slot's draft step found no memory cell, and every slot of the batch lost its drafts),
    and at least one did. Nothing is predicted without the iterations the instrumented build reports."""
    from harness.contract.decoder import VerifyStep
    from harness.models.loading import checkpoint_is_hybrid
    from harness.models.prompts import load_prompts
    from harness.subjects.engines.llamacpp.draft_batches import drafted_passes
    from harness.subjects.engines.llamacpp.environment import draft_room

    passes = case.records.get("passes")
    if case.records.get("divergence") or not passes or passes.get("expected") is None:
        return False  # a changed token is never this bug; the forced-rejection checks only
    steps, reach = passes["steps"], (passes.get("step_facts") or {}).get("draft_reach")
    if reach is None or len(reach) != len(steps):
        return False
    bundle = case.model()
    context, k = bundle.max_context, int(passes["num_draft_tokens"])
    prompt = next(p for p in load_prompts() if p.id == passes["prompt_id"])
    length, max_new = len(prompt.encode(bundle.tokenizer)), prompt.max_new_tokens
    verified = [VerifyStep(s["start"], tuple(s["drafts"]), s["accepted"], tuple(s["emitted"])) for s in steps]
    drafted = drafted_passes(verified, length, max_new, context, checkpoint_is_hybrid(bundle.path))
    short = {
        index
        for index, step in enumerate(steps)
        if drafted[index] and len(step["drafts"]) < min(k, draft_room(context, length, step["start"], max_new))
    }
    predicted = {index for index in range(len(steps)) if drafted[index] and reach[index] >= context}
    return bool(predicted) and short == predicted


def verified_positions(steps: Sequence[Mapping[str, Any]], hybrid: bool) -> set[int]:
    """The output positions llama.cpp's server emits from a speculative verification pass: every token of a pass
    that proposed drafts and, on a hybrid, the replay's further token after a rejected draft (the step without drafts
    that follows it: the replay batch verifies the restored tokens and samples that one too; server.py
    _steps_and_passes). The others (the prefill's first token, a pass without drafts) are sampled outside a pass."""
    positions: set[int] = set()
    after_a_rejection = False
    for step in steps:
        start, emitted = int(step["start"]), len(step["emitted"])
        if step["drafts"] or (hybrid and after_a_rejection):
            positions.update(range(start, start + emitted))
        after_a_rejection = bool(step["drafts"]) and int(step["accepted"]) < len(step["drafts"])
    return positions


def _reported_as_certain(mismatch: Mapping[str, Any]) -> bool:
    """The output token itself reported with logprob 0 (probability 1) and no top tokens."""
    token, asked = mismatch["token"], mismatch["asked_top"]
    as_the_token = mismatch["what"].startswith(f"logprob of token {token} is ")
    empty_top = mismatch["what"] == f"0 top tokens, asked for {asked}"
    return mismatch["reported"] == 0.0 and mismatch["reported_top"] == 0 and (as_the_token or empty_top)


def probability_1_at_every_verified_token(case: FailedCase) -> bool:
    """Every mismatching position of the logprobs record was emitted by a verification pass (verified_positions)
    and reports the output token with logprob 0 and no top tokens, as tools/server/server-context.cpp's speculative
    emit loop leaves them (`result.prob = 1.0f; // set later`, probs never set); and the prediction holds the other
    way: where top tokens were asked for, the empty list mismatches at every verified position, so the mismatches are
    exactly those positions; with none asked, a verified position passes the check only where the target's logprob
    is within the tolerance of 0, so the mismatches are among them."""
    record = case.records.get("logprobs")
    if not record or not record["mismatches"]:
        return False
    mismatches = record["mismatches"]
    verified = verified_positions(record["steps"], case.model().is_hybrid)
    if not all(m["position"] in verified and _reported_as_certain(m) for m in mismatches):
        return False
    mismatched = {int(m["position"]) for m in mismatches}
    return mismatched == verified if mismatches[0]["asked_top"] > 0 else mismatched <= verified
