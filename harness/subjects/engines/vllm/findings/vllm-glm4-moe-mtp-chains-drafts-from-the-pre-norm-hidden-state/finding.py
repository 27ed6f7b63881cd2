"""vllm-glm4-moe-mtp-chains-drafts-from-the-pre-norm-hidden-state: GLM-4.5's MTP layer hands the hidden state before
shared_head.norm to the next draft step (vLLM's DeepSeek MTP was fixed to hand over the normed one), so drafts 2..k
differ.

Its record (FINDING: where it was found, the tests it fails, its signature in words) and its signature, the predicate
`drafts_chained_from_the_pre_norm_state`. Beside it: its fix (fix.py), its standalone reproducer (reproducer.py) and
the releases its reproducer was measured on (versions.json); its write-up is
docs/findings/vllm-glm4-moe-mtp-chains-drafts-from-the-pre-norm-hidden-state.md."""

from __future__ import annotations

from harness.subjects.engines.findings import FailedCase, Finding
from harness.subjects.engines.vllm.findings.common import BOTH_RUNNERS, FOUND_IN
from harness.subjects.engines.vllm.signatures import PRE_NORM_CHAIN, conformance_explained_by
from harness.subjects.engines.watched_tests import CONFORMANCE, ENGINE_CONFORMANCE


def drafts_chained_from_the_pre_norm_state(case: FailedCase) -> bool:
    """Every draft mismatch explained by the watching findings together, some of them by the MTP layer computed
    chaining its pre-norm hidden state into the next draft step."""
    return PRE_NORM_CHAIN in conformance_explained_by(case)


FINDING = Finding(
    slug="vllm-glm4-moe-mtp-chains-drafts-from-the-pre-norm-hidden-state",
    title="GLM-4.5's MTP layer hands the hidden state before shared_head.norm to the next draft step (vLLM's "
    "DeepSeek MTP was fixed to hand over the normed one), so drafts 2..k differ",
    signature="draft mismatches of draft 2..k whose drafts equal those of the harness's proposer chaining draft "
    "steps from the MTP layer's pre-norm hidden state, every other mismatch explained by the other findings "
    "watching the test",
    explains=drafts_chained_from_the_pre_norm_state,
    engine="vllm",
    decoders=("vllm-mtp",),
    found_in=FOUND_IN,
    runners=BOTH_RUNNERS,
    flavours=("cpu",),  # measured on CPU; the CUDA nightly shows whether the same tests fail there
    failing={"tiny-glm4-moe": (*(f"{CONFORMANCE}[k{k}-*]" for k in (2, 3)), *ENGINE_CONFORMANCE)},
)
