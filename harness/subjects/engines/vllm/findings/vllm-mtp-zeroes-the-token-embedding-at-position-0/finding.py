"""vllm-mtp-zeroes-the-token-embedding-at-position-0: the MTP layers zero the token embedding of the entry at position 0
('not needed by MTP'), so the MTP layer's cache differs from the trained computation and drafts differ.

Its record (FINDING: where it was found, the tests it fails, its signature in words) and its signature, the predicate
`drafts_with_position_zero_masked`. Beside it: its fix (fix.py), its standalone reproducer (reproducer.py) and the
releases its reproducer was measured on (versions.json); its write-up is
docs/findings/vllm-mtp-zeroes-the-token-embedding-at-position-0.md."""

from __future__ import annotations

from harness.subjects.engines.findings import FailedCase, Finding
from harness.subjects.engines.vllm.findings.common import BOTH_RUNNERS, ENGINE_CONFORMANCE_BUT_SHARED, FOUND_IN
from harness.subjects.engines.vllm.signatures import POSITION_ZERO, conformance_explained_by
from harness.subjects.engines.watched_tests import CONFORMANCE, PREFIX_SHARED


def drafts_with_position_zero_masked(case: FailedCase) -> bool:
    """Every draft mismatch explained by the watching findings together, some of them by the MTP layer computed
    with the position-0 embedding zeroed."""
    return POSITION_ZERO in conformance_explained_by(case)


FINDING = Finding(
    slug="vllm-mtp-zeroes-the-token-embedding-at-position-0",
    title="the MTP layers zero the token embedding of the entry at position 0 ('not needed by MTP'), so the "
    "MTP layer's cache differs from the trained computation and drafts differ",
    signature="draft mismatches whose drafts equal those of the harness's proposer with the token embedding of "
    "the MTP layer's entry at vLLM position 0 zeroed, every other mismatch explained by the other findings "
    "watching the test",
    explains=drafts_with_position_zero_masked,
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
