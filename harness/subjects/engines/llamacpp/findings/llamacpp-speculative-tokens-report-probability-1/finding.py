"""llamacpp-speculative-tokens-report-probability-1: asked for token probabilities (n_probs), the server reports every
token a speculative verification pass emits (accepted drafts, the correction, the bonus token) with probability 1
(logprob 0) and no top tokens, instead of the target's probabilities; only tokens sampled outside a pass get theirs.

Its record (FINDING: where it was found, the tests it fails, its signature in words) and its signature, the predicate
`probability_1_at_every_verified_token`. Beside it: its fix (fix.patch), its standalone reproducer (reproducer.py) and
the releases its reproducer was measured on (versions.json); its write-up is
docs/findings/llamacpp-speculative-tokens-report-probability-1.md."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from harness.subjects.engines.findings import FailedCase

if TYPE_CHECKING:
    pass
from harness.subjects.engines.findings import Finding
from harness.subjects.engines.llamacpp.findings.common import FOUND_IN, GREEDY_LOGPROBS, SAMPLED_LOGPROBS


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


FINDING = Finding(
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
    explains=probability_1_at_every_verified_token,
)
