"""vllm-drafter-skipped-for-the-whole-batch-near-max-model-len: when one request of the batch is within k tokens of
max_model_len, no request of the batch is drafted for (token-0 placeholder drafts are verified instead) and the MTP
layer's cache misses those steps.

Its record (FINDING: where it was found, the tests it fails, its signature in words) and its signature, the predicate
`drafts_of_token_zero`. Beside it: its fix (fix.py), its standalone reproducer (reproducer.py) and the releases its
reproducer was measured on (versions.json); its write-up is
docs/findings/vllm-drafter-skipped-for-the-whole-batch-near-max-model-len.md."""

from __future__ import annotations

from harness.checks.pass_records import as_plan, judged_outside
from harness.subjects.engines.findings import FailedCase, Finding
from harness.subjects.engines.vllm.findings.common import FOUND_IN, V1_ONLY
from harness.subjects.engines.vllm.signatures import (
    DRAFTER_SKIP,
    conformance_explained_by,
    longest_of,
    predicted_skips,
    skips_as_predicted,
)
from harness.subjects.engines.watched_tests import BATCH_ALONE, CONFORMANCE, FORCED, RANDOM_REJECTIONS


def drafts_of_token_zero(case: FailedCase) -> bool:
    """Greedy tokens unchanged, and the broken passes are the drafter skip's, predicted pass by pass from the engine
    steps (drafter_skipped_passes), with everything outside them judged and right. On the pass checks, in each decode
    the record holds: every pass of k token-0 drafts the request never proposed is one the skip predicts, every
    predicted pass with drafts holds token 0 only, at least one was predicted; and outside the predicted passes
    (harness/checks/pass_records.py) every pass accepts exactly the drafts the target chose, every forced draft is the
    forced token, and the passes before the first predicted one are the case's plan (or, where the check compares
    two decodes of the request, the other decode's). On draft conformance, every mismatch of a request at or after
    its first predicted skip (the skipped pass, then drafts made from an MTP cache with holes), every other mismatch
    explained by the other watching findings."""
    if case.records.get("divergence") and not case.records["divergence"].get("near_tie"):
        return False  # the skip costs drafts, never tokens
    passes = case.records.get("passes")
    if not passes:
        return DRAFTER_SKIP in conformance_explained_by(case)
    k, context = int(passes["num_draft_tokens"]), case.model().max_context
    forced = passes["forced_drafts"]
    decodes = [(passes["steps"], longest_of(passes.get("step_facts")))]
    if passes.get("other_steps") is not None:
        decodes.append((passes["other_steps"], longest_of(passes.get("other_step_facts"))))
    skips = [skips_as_predicted(steps, longest, k, context, forced) for steps, longest in decodes]
    if any(skip is None for skip in skips) or not any(skips):
        return False
    predicted = [predicted_skips(steps, longest, k, context) for steps, longest in decodes]
    if len(decodes) == 1:
        return judged_outside(passes["steps"], predicted[0], forced, passes.get("expected")) is None
    first = min(predicted[0] | predicted[1], default=len(passes["steps"]))  # the two decodes agree until then
    (ours, _), (theirs, _) = decodes
    return all(
        judged_outside(steps, {*skipped, *range(first, len(steps))}, forced, as_plan(other)) is None
        for steps, skipped, other in ((ours, predicted[0], theirs), (theirs, predicted[1], ours))
    )


FINDING = Finding(
    slug="vllm-drafter-skipped-for-the-whole-batch-near-max-model-len",
    title="when one request of the batch is within k tokens of max_model_len, no request of the batch is "
    "drafted for (token-0 placeholder drafts are verified instead) and the MTP layer's cache misses those steps",
    signature="greedy tokens unchanged; the skipped passes predicted from the engine steps: the pass after each "
    "step whose longest sequence + k exceeds max_model_len holds token-0 drafts only, and no other pass holds "
    "token-0 drafts the request did not force (the pass checks, each decode the record holds); in draft conformance, "
    "every mismatch of a request at or after its first predicted skip (the MTP cache misses the skipped step)",
    explains=drafts_of_token_zero,
    engine="vllm",
    decoders=("vllm-mtp",),
    found_in=FOUND_IN,
    runners=V1_ONLY,
    flavours=("cpu",),  # measured on CPU; the CUDA nightly shows whether the same tests fail there
    failing={
        "*": (
            # the mixed batch holds the prompts at the context end: every prompt of it loses drafts
            *(f"{FORCED}[*-k{k}-*-mixed]" for k in (2, 3, 4)),
            # separated, only the prompts at the context end fail (those clear of it are judged as shipped)
            *(f"{FORCED}[long-0*-k{k}-*-separated]" for k in (2, 3, 4)),
            *(f"{BATCH_ALONE}[k{k}-{batch}]" for k in (2, 3, 4) for batch in ("mixed", "at-context-end")),
            # draft conformance in the batch of the prompts at the context end; the batch clear of it is judged
            # pass by pass (the signature explains nothing there)
            *(f"{CONFORMANCE}[k{k}-at-context-end]" for k in (2, 3)),
        )
    },
    # long-02 ends at the context edge itself: these schedules happen to keep its passes intact
    passing={
        "*": tuple(
            f"{FORCED}[long-02-{case}-{batch}]"
            for case in (
                "k2-first-drafted-position",
                "k2-final-position",
                "k2-last-draft-index",
                "k2-first-draft-after-full-acceptance",
                "k3-first-drafted-position",
                "k3-final-position",
                "k4-final-position",
                "k4-last-draft-index",
            )
            for batch in ("mixed", "separated")
        )
    },
    # a request alone loses its last drafts after a late rejection: the random schedules find it when their
    # draws reach that window (they did at the ci budget's default seed), so a pass there proves no fix
    may_fail={"*": tuple(f"{RANDOM_REJECTIONS}[k{k}]" for k in (2, 3, 4))},
)
