"""llamacpp-draft-mtp-pairs-the-first-prompt-token-with-a-stale-hidden-state: draft-mtp enters the prompt's first token
into the MTP layer's cache paired with a hidden state that does not exist (zeros on a fresh slot, the slot's previous
request's last state after that): drafts differ from the checkpoint's MTP computation and depend on what the slot
decoded before.

Its record (FINDING: where it was found, the tests it fails, its signature in words) and its signature, the predicate
`drafts_as_the_stale_pairings_predict`. Beside it: its fix (fix.patch), its standalone reproducer (reproducer.py) and
the releases its reproducer was measured on (versions.json); its write-up is
docs/findings/llamacpp-draft-mtp-pairs-the-first-prompt-token-with-a-stale-hidden-state.md."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from harness.checks.pass_records import acceptance_problem
from harness.subjects.engines.findings import FailedCase, Finding
from harness.subjects.engines.llamacpp.findings.common import FOUND_IN
from harness.subjects.engines.llamacpp.signatures import _prompt_ids, _tokens
from harness.subjects.engines.watched_tests import (
    BATCH_ALONE,
    CHUNKED,
    CONFORMANCE,
    PREFIX_AGAIN,
    PREFIX_SHARED,
    QUEUED,
    RNG_ISOLATION,
)

if TYPE_CHECKING:
    from harness.models.loading import ModelBundle


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
    """Greedy and seeded tokens unchanged, every pass accepting exactly the drafts the target chose (batch against
    alone: harness/checks/pass_records.py), and every drafted pass of the decodes the failure names drafted exactly
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
        if ours != theirs or acceptance_problem(passes["steps"]) or acceptance_problem(passes["other_steps"]):
            return False  # the stale pairings move drafts: never tokens, nor what a pass accepts of its drafts
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


FINDING = Finding(
    slug="llamacpp-draft-mtp-pairs-the-first-prompt-token-with-a-stale-hidden-state",
    title="draft-mtp enters the prompt's first token into the MTP layer's cache paired with a hidden state that does "
    "not exist (zeros on a fresh slot, the slot's previous request's last state after that): drafts differ from the "
    "checkpoint's MTP computation and depend on what the slot decoded before",
    engine="llama.cpp",
    decoders=("llamacpp-mtp",),
    found_in=FOUND_IN,
    flavours=("cpu",),
    failing={},
    # may fail, not fail: a phantom entry moves a draft only where two candidates are close, and the state it pairs
    # with (zeros on a fresh slot, the previous task's last state) depends on which tests ran on the slot before; the
    # signature predicts each pass's drafts from the state llama.cpp reports, so what it explains is exact
    may_fail={
        "*": (
            f"{BATCH_ALONE}[*]",
            f"{RNG_ISOLATION}[*]",
            f"{CONFORMANCE}[*]",
            # the engine suite's draft conformance under prompt cache reuse, small prompt batches, the server's queue
            PREFIX_AGAIN,
            PREFIX_SHARED,
            CHUNKED,
            QUEUED,
        )
    },
    signature="greedy and seeded tokens unchanged, and every drafted pass of the decodes involved drafted exactly what "
    "the checkpoint's MTP layer computes with the stale pairings the instrumented build reports (a task's first "
    "batch, a hybrid's replay) and the target's own hidden state elsewhere; with sampled drafts, equal tokens and "
    "stale pairings that differ between the two decodes. Without reported pairings (the wheel) nothing is explained",
    explains=drafts_as_the_stale_pairings_predict,
)
