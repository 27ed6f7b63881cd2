"""llamacpp-draft-mtp-drafts-past-the-slots-limit: draft-mtp drafts k tokens whatever the slot's own draft limit: past
the slot's context end the MTP context's draft decode fails, and every slot drafting in that step loses the rest of
its drafts.

Its record (FINDING: where it was found, the tests it fails, its signature in words) and its signature, the predicate
`drafts_lost_to_a_slot_past_its_context_end`. Beside it: its fix (fix.patch), its standalone reproducer
(reproducer.py) and the releases its reproducer was measured on (versions.json); its write-up is
docs/findings/llamacpp-draft-mtp-drafts-past-the-slots-limit.md."""

from __future__ import annotations

from harness.checks.pass_records import judged_outside
from harness.subjects.engines.findings import FailedCase, Finding
from harness.subjects.engines.llamacpp.findings.common import FOUND_IN
from harness.subjects.engines.watched_tests import FORCED, RANDOM_REJECTIONS


def drafts_lost_to_a_slot_past_its_context_end(case: FailedCase) -> bool:
    """A forced-rejection case with the right tokens whose short passes are exactly those llama.cpp's server
    iterations predict (draft_batches.py): a drafted pass holds fewer drafts than planned if and only if the draft
    decode of its iteration, batched over every slot drafting in it, reached the context end (the step fact
    draft_reach >= n_ctx: a slot's draft step found no memory cell, and every slot of the batch lost its drafts),
    and at least one did; and everything outside those passes is judged and right (harness/checks/pass_records.py):
    every pass accepts exactly the drafts the target chose, every other pass's forced drafts are as forced, and the
    passes before the first short one are the case's plan. Nothing is predicted without the iterations the
    instrumented build reports."""
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
    if not predicted or short != predicted:
        return False
    return judged_outside(steps, predicted, passes.get("forced_drafts", {}), passes["expected"]) is None


FINDING = Finding(
    slug="llamacpp-draft-mtp-drafts-past-the-slots-limit",
    title="draft-mtp drafts k tokens whatever the slot's own draft limit: past the slot's context end the MTP "
    "context's draft decode fails, and every slot drafting in that step loses the rest of its drafts",
    engine="llama.cpp",
    decoders=("llamacpp-mtp",),
    found_in=FOUND_IN,
    flavours=("cpu",),
    failing={},
    # which passes of the other requests share the failing iteration depends on the threads' timing: a case may pass;
    # where one fails, its short passes are predicted exactly from the iterations the build records
    may_fail={"*": (f"{FORCED}[*-k4-*]", f"{RANDOM_REJECTIONS}[k4]")},
    signature="a forced-rejection case with the right tokens whose passes drafted fewer than planned exactly where "
    "their server iteration's batched draft decode reached the context end (the iterations the instrumented build "
    "records; draft_batches.py), at least one; a pass short of drafts anywhere else is not explained",
    explains=drafts_lost_to_a_slot_past_its_context_end,
)
