"""Bugs the suites found in vLLM (write-ups in docs/findings/), with the tests each one fails."""

from __future__ import annotations

from harness.subjects.findings import Finding

CPU_EXPAND_KERNEL = Finding(
    slug="vllm-cpu-expand-kernel-leaves-sampling-parameters-uninitialized",
    title="on CPU, speculative decoding divides the target logits by uninitialised memory when any request "
    "samples (the expand kernel writes temperature, top-k and top-p into an int64 copy)",
    engine="vllm",
    decoders=("vllm-mtp",),
    versions=("0.32.0",),
    flavours=("cpu",),
    failing={"*": ("sampling/test_target_distribution.py::*", "invariants/test_rng_isolation.py::*")},
    crashes=True,  # with top-k set, the uninitialised top-k indexes out of bounds and the engine stops
)

DRAFTER_SKIPPED_FOR_THE_WHOLE_BATCH = Finding(
    slug="vllm-drafter-skipped-for-the-whole-batch-near-max-model-len",
    title="when one request of the batch is within k tokens of max_model_len, no request of the batch is "
    "drafted for (token-0 placeholder drafts are verified instead) and the MTP layer's cache misses those steps",
    engine="vllm",
    decoders=("vllm-mtp",),
    versions=("0.32.0",),
    flavours=("cpu",),  # measured on CPU; the CUDA nightly shows whether the same tests fail there
    failing={
        "*": (
            *(
                f"greedy/test_forced_rejections.py::test_forced_rejections_keep_the_reference[*-k{k}-*]"
                for k in (2, 3, 4)
            ),
            *(
                f"greedy/test_greedy_identity.py::test_a_batch_of_mixed_prompts_equals_each_prompt_alone[k{k}]"
                for k in (2, 3, 4)
            ),
            *(
                f"invariants/test_draft_conformance.py::test_greedy_drafts_equal_the_harness_proposers[k{k}]"
                for k in (2, 3)
            ),
        )
    },
    # long-02 ends at the context edge itself: these schedules happen to keep its passes intact
    passing={
        "*": tuple(
            f"greedy/test_forced_rejections.py::test_forced_rejections_keep_the_reference[long-02-{case}]"
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
        )
    },
)

POSITION_ZERO_EMBEDDING_MASKED = Finding(
    slug="vllm-mtp-zeroes-the-token-embedding-at-position-0",
    title="the MTP layers zero the token embedding of the entry at position 0 ('not needed by MTP'), so the "
    "MTP layer's cache differs from the trained computation and drafts differ",
    engine="vllm",
    decoders=("vllm-mtp",),
    versions=("0.32.0",),
    flavours=("cpu",),  # measured on CPU; the CUDA nightly shows whether the same tests fail there
    failing={"*": ("invariants/test_draft_conformance.py::test_greedy_drafts_equal_the_harness_proposers[k*]",)},
)

GLM4_MOE_MTP_RECYCLES_PRE_NORM_HIDDEN = Finding(
    slug="vllm-glm4-moe-mtp-chains-drafts-from-the-pre-norm-hidden-state",
    title="GLM-4.5's MTP layer hands the hidden state before shared_head.norm to the next draft step (vLLM's "
    "DeepSeek MTP was fixed to hand over the normed one), so drafts 2..k differ",
    engine="vllm",
    decoders=("vllm-mtp",),
    versions=("0.32.0",),
    flavours=("cpu",),  # measured on CPU; the CUDA nightly shows whether the same tests fail there
    failing={
        "tiny-glm4-moe": tuple(
            f"invariants/test_draft_conformance.py::test_greedy_drafts_equal_the_harness_proposers[k{k}]"
            for k in (2, 3)
        )
    },
)

VLLM_FINDINGS = (
    CPU_EXPAND_KERNEL,
    DRAFTER_SKIPPED_FOR_THE_WHOLE_BATCH,
    POSITION_ZERO_EMBEDDING_MASKED,
    GLM4_MOE_MTP_RECYCLES_PRE_NORM_HIDDEN,
)
