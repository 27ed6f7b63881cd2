"""vllm-cpu-expand-kernel-leaves-sampling-parameters-uninitialized: on CPU, speculative decoding divides the target
logits by uninitialised memory when any request samples (the expand kernel writes temperature, top-k and top-p into an
int64 copy).

Its record (FINDING: where it was found, the tests it fails, its signature in words) and its signature, the predicate
`sampled_with_garbage_parameters`. Beside it: its fix (fix.py), its standalone reproducer (reproducer.py) and the
releases its reproducer was measured on (versions.json); its write-up is
docs/findings/vllm-cpu-expand-kernel-leaves-sampling-parameters-uninitialized.md."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from harness.subjects.engines.findings import FailedCase, Finding
from harness.subjects.engines.vllm.findings.common import FOUND_IN, GBNF_LAW, V1_ONLY
from harness.subjects.engines.watched_tests import ENGINE_SEEDED, FEATURE_LAWS, RNG_ISOLATION

GRAMMAR_TERMINATED = "vLLM terminated a constrained request: its grammar refused a sampled token"  # vllm/server.py


OUT_OF_BOUNDS = re.compile(r"index -?\d+ is out of bounds for dimension \d+ with size \d+")


def sampled_with_garbage_parameters(case: FailedCase) -> bool:
    """The out-of-bounds top-k crash; a constrained sampled request vLLM terminated because its grammar refused the
    token the rejection sampler drew from the garbage-processed law (vllm/server.py GRAMMAR_TERMINATED: the watched
    tests all sample); a rejected sampling case whose first output token is not rejected (a law case
    is two tokens long and its cells do not separate the first: any rejection); or a seeded sampled request whose
    output changes with its batch (its record present: the sampling parameters are read from uninitialised memory,
    which differs from batch to batch), or with its schedule or engine (a `repeat` record of a sampled request).

    The temperature, top-k and top-p the rejection sampler applies are whatever `new_empty` left in memory, so the
    law can move by any amount (TV 0.22 to 0.79 measured): no threshold on its size separates this bug from another.
    What the mechanism fixes is where it acts: the first token of every request is drawn before any draft exists, by
    vLLM's plain sampler with the request's own parameters, so a whole-sequence case rejected at output position 0
    is another bug. The record cannot tell this bug from another bug of the rejection sampler or of per-request
    randomness: the run beneath the fixes judges those."""
    if OUT_OF_BOUNDS.search(case.message) or GRAMMAR_TERMINATED in case.message:
        return True
    sampling = case.records.get("sampling")
    if sampling:
        return bool(sampling["rejected"]) and first_token_follows_the_target(sampling)
    repeat = case.records.get("repeat")  # the same seeded request in two runs (the engine suite)
    if repeat:
        return repeat["request"]["temperature"] > 0
    return "isolation" in case.records


def first_token_follows_the_target(sampling: Mapping[str, Any]) -> bool:
    """Output position 0 of a whole-sequence case not rejected by either of its tests (KS, log-likelihood; Holm
    over the case's family at its family alpha). A law case's cells pair the first two tokens and pool the rare
    pairs, so they cannot judge the first token alone: true."""
    if sampling["kind"] == "law":
        return True
    first = next(p for p in sampling["positions"] if p["position"] == 0)
    return first["ks_holm"] > sampling["family_alpha"] and first["z_holm"] > sampling["family_alpha"]


FINDING = Finding(
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
    explains=sampled_with_garbage_parameters,
)
