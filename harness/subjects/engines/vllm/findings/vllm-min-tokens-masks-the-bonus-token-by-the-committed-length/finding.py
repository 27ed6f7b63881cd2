"""vllm-min-tokens-masks-the-bonus-token-by-the-committed-length: with speculative decoding, Model Runner V1 masks
min_tokens' stop tokens at a pass's bonus position while the committed length is below min_tokens, though the bonus
position is committed + drafts: an EOS at the first position min_tokens allows is suppressed when it falls on the
bonus token of a fully accepted pass.

Its record (FINDING: where it was found, the tests it fails, its signature in words) and its signature, the predicate
`eos_masked_at_a_bonus_position`. Beside it: its fix (fix.py), its standalone reproducer (reproducer.py) and the
releases its reproducer was measured on (versions.json); its write-up is
docs/findings/vllm-min-tokens-masks-the-bonus-token-by-the-committed-length.md."""

from __future__ import annotations

from harness.subjects.engines.findings import FailedCase, Finding
from harness.subjects.engines.vllm.findings.common import FOUND_IN, V1_ONLY
from harness.subjects.engines.watched_tests import FEATURE_GREEDY


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


FINDING = Finding(
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
    explains=eos_masked_at_a_bonus_position,
)
