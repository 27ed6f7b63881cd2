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
- drafts lost to a slot drafting past its context end: a forced-rejection case with the right tokens whose passes
  drafted fewer than planned, no more of them than the other requests of its batch have draft steps past their
  context end (draft_steps_past_the_context_end, from their prompt lengths, max_new_tokens and k).
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


def draft_steps_past_the_context_end(prompt_length: int, max_new_tokens: int, k: int, context: int) -> int:
    """How many of a request's draft steps llama.cpp's MTP drafter decodes at or past its slot's context end, at
    most: it drafts k steps whatever the slot's limit (common/speculative.cpp:1765), step i of a pass at position
    pos0 + i, pos0 the slot's token count n_tokens; a pass drafts at all while n_tokens <= context - 3 and
    n_tokens <= prompt_length + max_new_tokens - 3 (n_draft_max >= 1, tools/server/server-context.cpp:527-531),
    and a step fails where pos0 + k - 1 >= context: the passes with n_tokens in [context - k + 1, that bound]."""
    last = min(context - 3, prompt_length + max_new_tokens - 3)
    return max(0, last - (context - k + 1) + 1)


def _batch_of(case: FailedCase, prompt_id: str, batch: str | None, k: int) -> list[tuple[int, int]]:
    """(prompt length, max_new_tokens) of the requests decoded in one engine call with the case's, its own first:
    every prompt fixture in the mixed batch, those on the case's side of the context end in its own batch
    (harness/checks/batches.py), itself alone (batch None)."""
    from harness.checks.batches import MIXED, own_batch
    from harness.models.prompts import load_prompts

    bundle = case.model()
    lengths = {p.id: (len(p.encode(bundle.tokenizer)), p.max_new_tokens) for p in load_prompts()}
    mine = own_batch(*lengths[prompt_id], k, bundle.max_context)
    others = [
        length
        for other, length in lengths.items()
        if batch is not None
        and other != prompt_id
        and (batch == MIXED or own_batch(*length, k, bundle.max_context) == mine)
    ]
    return [lengths[prompt_id], *others]


def drafts_lost_to_a_slot_past_its_context_end(case: FailedCase) -> bool:
    """A forced-rejection case whose tokens are right and whose passes drafted fewer than planned, in a batch with a
    request (itself or another) that drafts past its slot's context end (k >= 4, prompt + max_new_tokens + k >=
    context + 4): that request's failed draft decode drops the drafts of every slot drafting in the same step, its
    own included (what it had drafted is short of n_min = k, and dropped). Predicted per case: at most as many short
    passes as the batch's requests have draft steps past the context end (timing decides which of the case's passes
    share the step, not how many can)."""
    if case.records.get("divergence"):
        return False  # a changed token is never this bug
    passes = case.records.get("passes")
    params = case.nodeid.rsplit("[", 1)[-1].rstrip("]").split("-")
    if not passes or passes.get("expected") is None:
        return False
    batch = params[-1] if len(params) >= 4 else None  # the schedules' cases name their batch; random ones go alone
    k = int(passes["num_draft_tokens"])
    prompt_id = passes["prompt_id"]
    bundle = case.model()
    members = _batch_of(case, prompt_id, batch, k)  # the case's own request first
    budget = sum(draft_steps_past_the_context_end(length, new, k, bundle.max_context) for length, new in members)
    from harness.models.loading import checkpoint_is_hybrid
    from harness.subjects.engines.llamacpp.environment import draft_room

    length, max_new = members[0]
    hybrid = checkpoint_is_hybrid(bundle.path)  # its pass after a restored rejection drafts nothing (decoder.py)
    steps, short = passes["steps"], 0
    for index, step in enumerate(steps):
        after_restore = index > 0 and steps[index - 1]["accepted"] < len(steps[index - 1]["drafts"])
        planned = min(k, draft_room(bundle.max_context, length, step["start"], max_new))
        if step["start"] >= 1 and len(step["drafts"]) < planned and not (after_restore and hybrid):
            short += 1
    return 1 <= short <= budget
