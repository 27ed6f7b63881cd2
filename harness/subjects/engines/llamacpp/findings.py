"""Bugs the suites found in llama.cpp (write-ups in docs/findings/), with the tests each one fails and the signature
that tells its failure from another bug's (harness/subjects/engines/llamacpp/signatures.py).

The drafting ones are watched as `may_fail`, each for the reason written beside it: whether a case shows them depends
on the drafts, and llama.cpp's drafts depend on the state its slot kept from what it decoded before (the second
finding), which the order pytest-xdist gives the tests decides; one that passes is not taken for a fix. The logprobs
one fails every case it watches (`failing`). A watched case that fails must be explained by a signature, which
predicts from the case's record what the bug produces there (the stale state's drafts from the pairings the
instrumented build reports, the probability-1 tokens from the passes). Each fix is a patch built into llama.cpp's source
(`--engine-fixes`), and the runs beneath them judge what the findings would mask."""

from __future__ import annotations

import harness.subjects.engines.llamacpp.signatures as signatures
from harness.subjects.engines.findings import Finding
from harness.subjects.engines.watched_tests import (
    BATCH_ALONE,
    CHUNKED,
    CONFORMANCE,
    FORCED,
    NATURAL,
    PREFIX_AGAIN,
    PREFIX_SHARED,
    QUEUED,
    RANDOM_REJECTIONS,
    RNG_ISOLATION,
    SPECULATION,
)

FOUND_IN = "2026.10.11549"  # the xllamacpp release (llama.cpp tree) these were found in; it reports b0-unknown

ACCEPTED_TOKENS_DROPPED_AT_THE_CONTEXT_END = Finding(
    slug="llamacpp-draft-mtp-drops-accepted-tokens-at-the-context-end",
    title="with draft-mtp, a pass whose accepted drafts reach the end of the slot's context emits only part of what "
    "it accepted: the output stops up to k tokens short of the same request without speculation",
    engine="llama.cpp",
    decoders=("llamacpp-mtp",),
    found_in=FOUND_IN,
    flavours=("cpu",),
    failing={},
    # forced rejections and random ones reach the context end with the long prompts (the build from source)
    may_fail={
        "*": (
            f"{NATURAL}[long-*]",
            f"{BATCH_ALONE}[*]",
            f"{SPECULATION}[*]",
            f"{FORCED}[long-*]",
            f"{RANDOM_REJECTIONS}[*]",
        )
    },
    signature="an output that is a proper prefix of the right one (finish 'length'), exactly as long as llama.cpp's "
    "context check cuts it given the decode's passes: the first pass whose accepted (or, on a hybrid, replayed) "
    "tokens reach the last position emits one token; no changed token",
    explains=signatures.cut_short_at_the_context_end,
)

FIRST_TOKEN_PAIRED_WITH_A_STALE_HIDDEN_STATE = Finding(
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
    explains=signatures.drafts_as_the_stale_pairings_predict,
)

DRAFTS_PAST_THE_SLOTS_LIMIT = Finding(
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
    explains=signatures.drafts_lost_to_a_slot_past_its_context_end,
)

# the features suite's logprob checks: greedy requests asking for the top 5, and sampled ones with greedy drafts
GREEDY_LOGPROBS = "features/test_feature_greedy.py::test_greedy_output_under_the_feature[logprobs-top-5-*]"
SAMPLED_LOGPROBS = "features/test_logprobs.py::test_logprobs_are_the_targets[logprobs-*-greedy-*]"

SPECULATIVE_TOKENS_REPORT_PROBABILITY_1 = Finding(
    slug="llamacpp-speculative-tokens-report-probability-1",
    title="asked for token probabilities (n_probs), the server reports every token a speculative verification pass "
    "emits (accepted drafts, the correction, the bonus token) with probability 1 (logprob 0) and no top tokens, "
    "instead of the target's probabilities; only tokens sampled outside a pass get theirs",
    engine="llama.cpp",
    decoders=("llamacpp-mtp",),
    found_in=FOUND_IN,
    flavours=("cpu",),
    # fails, not may fail: every case drafts in its first request, and each drafted pass's tokens mismatch
    failing={"*": (GREEDY_LOGPROBS, SAMPLED_LOGPROBS)},
    signature="a logprobs record whose mismatches are each a token emitted by a verification pass (a pass with "
    "drafts, or on a hybrid the replay's further token after a rejection) reported with logprob 0 and no top tokens, "
    "and with top tokens asked for, every such token mismatches; a mismatch at a token sampled outside a pass, a "
    "wrong nonzero logprob or a wrong top list is not explained",
    explains=signatures.probability_1_at_every_verified_token,
)

FINDINGS: tuple[Finding, ...] = (
    ACCEPTED_TOKENS_DROPPED_AT_THE_CONTEXT_END,
    FIRST_TOKEN_PAIRED_WITH_A_STALE_HIDDEN_STATE,
    DRAFTS_PAST_THE_SLOTS_LIMIT,
    SPECULATIVE_TOKENS_REPORT_PROBABILITY_1,
)
