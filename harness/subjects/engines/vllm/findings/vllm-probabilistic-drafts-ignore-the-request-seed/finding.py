"""vllm-probabilistic-drafts-ignore-the-request-seed: with draft_sample_method='probabilistic' the drafts are drawn with
noise from the global RNG, not the request's seeded generator, so a seeded request's output changes with its batch.

Its record (FINDING: where it was found, the tests it fails, its signature in words) and its signature, the predicate
`sampled_drafts_not_seeded`. Beside it: its fix (fix.py), its standalone reproducer (reproducer.py) and the releases
its reproducer was measured on (versions.json); its write-up is
docs/findings/vllm-probabilistic-drafts-ignore-the-request-seed.md."""

from __future__ import annotations

from harness.subjects.engines.findings import FailedCase, Finding
from harness.subjects.engines.vllm.findings.common import FOUND_IN, V1_ONLY
from harness.subjects.engines.watched_tests import RNG_ISOLATION


def sampled_drafts_not_seeded(case: FailedCase) -> bool:
    """A seeded sampled request with sampled drafts (draft_mode 'sample') whose output changed with its batch."""
    isolation = case.records.get("isolation")
    return bool(isolation) and isolation["request"]["draft_mode"] == "sample"


FINDING = Finding(
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
    explains=sampled_drafts_not_seeded,
)
