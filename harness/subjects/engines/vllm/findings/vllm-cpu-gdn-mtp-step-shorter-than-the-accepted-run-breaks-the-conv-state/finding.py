"""vllm-cpu-gdn-mtp-step-shorter-than-the-accepted-run-breaks-the-conv-state: on CPU, a hybrid model's (Qwen3-Next)
gated-DeltaNet layer kills the engine when a request's speculative step is shorter than the run it accepted at its
previous step (its drafts cut at the context end after a full acceptance): the convolution's rolling buffer is rolled
as if every step fed k + 1 tokens.

Its record (FINDING: where it was found, the tests it fails, its signature in words) and its signature, the predicate
`conv_state_rolled_past_its_buffer`. Beside it: its fix (fix.py) and its standalone reproducer (reproducer.py); its
write-up is docs/findings/vllm-cpu-gdn-mtp-step-shorter-than-the-accepted-run-breaks-the-conv-state.md."""

from __future__ import annotations

from harness.subjects.engines.findings import FailedCase, Finding
from harness.subjects.engines.vllm.findings.common import BOTH_RUNNERS, FOUND_IN

NATIVE_REFUSAL = "causal_conv1d_update_cpu: num_accepted_tokens must be in [1, seqlen]"
ROLL_COPY = "B.copy_(new_B)"
SIZE_MISMATCH = "must match the size of tensor"


def conv_state_rolled_past_its_buffer(case: FailedCase) -> bool:
    """The engine died in the CPU gated-DeltaNet's speculative path (vllm/model_executor/layers/mamba/ops/cpu/
    gdn_attention.py `_spec_forward`): its native convolution kernel refusing a step shorter than the accepted run
    (`causal_conv1d_update_cpu: num_accepted_tokens must be in [1, seqlen]`), or its fallback's roll copying a
    buffer sliced past its end (`B.copy_(new_B)`: `The size of tensor a (..) must match the size of tensor b (..)`).
    The error arrives as the text of the decode call's EngineError. Or its silent form
    (`diverged_after_a_short_step`)."""
    message = case.message
    crashed = NATIVE_REFUSAL in message or (ROLL_COPY in message and SIZE_MISMATCH in message)
    return crashed or diverged_after_a_short_step(case)


def diverged_after_a_short_step(case: FailedCase) -> bool:
    """The silent form: a greedy divergence at an output position after a decode pass (not the prefill) that fed
    fewer than k + 1 tokens (its drafts cut at the context end), which the speculative path rolled by k + 1 all the
    same, so that every later pass read a convolution window shifted by the drafts not fed (measured on V2,
    tiny-qwen3-next-hd64 in bf16, 2026-12-07: long-01 and long-02 at k = 2 diverged one pass after a one-draft pass,
    and decoded as the reference beneath this finding's fix alone). Read from the case's divergence record: a near-tie
    or an output cut short is not explained, nor a divergence with no short pass before it."""
    divergence = case.records.get("divergence")
    if not divergence or not divergence.get("num_draft_tokens") or divergence.get("actual_token") is None:
        return False
    if divergence.get("near_tie"):
        return False
    k, index = int(divergence["num_draft_tokens"]), int(divergence["index"])
    return any(0 < step["start"] < index and len(step["drafts"]) < k for step in divergence.get("steps") or ())


FINDING = Finding(
    slug="vllm-cpu-gdn-mtp-step-shorter-than-the-accepted-run-breaks-the-conv-state",
    title="on CPU, a hybrid model's (Qwen3-Next) gated-DeltaNet layer kills the engine when a request's speculative "
    "step is shorter than the run it accepted at its previous step (its drafts cut at the context end after a full "
    "acceptance): the convolution's rolling buffer is rolled as if every step fed k + 1 tokens",
    engine="vllm",
    decoders=("vllm-mtp",),  # speculation's rolling buffer: without it the layer keeps width - 1 inputs
    found_in=FOUND_IN,
    runners=BOTH_RUNNERS,  # model code (the CPU attention op) that both runners call
    flavours=("cpu",),  # the CPU build's op; CUDA runs Triton's causal_conv1d_update (not measured)
    failing={},
    # whether a request accepted its whole run just before its cut step depends on its drafts: measured failing, the
    # forced-rejection cases of the mixed batch (which holds the prompts that decode to the context end) beneath the
    # prefix-caching finding's fix; a pass elsewhere proves no fix
    may_fail={"tiny-qwen3-next-hd64": ("*",)},
    signature="the engine's error is the CPU gated-DeltaNet's speculative convolution failing on a step shorter than "
    "the accepted run: `causal_conv1d_update_cpu: num_accepted_tokens must be in [1, seqlen]`, or `B.copy_(new_B)` "
    "with `The size of tensor a (..) must match the size of tensor b (..)`, in the decode call's EngineError; or, "
    "silently, a greedy divergence after a decode pass that proposed fewer than k drafts (a near-tie, an output cut "
    "short or a divergence with no such pass before it is not explained)",
    explains=conv_state_rolled_past_its_buffer,
)
