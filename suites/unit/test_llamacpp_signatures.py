"""The llama.cpp findings' signatures explain their own failures and nothing else (a changed token, an early stop
away from the context end, a wholly wrong drafter): a second bug in a watched test stays a failure."""

from __future__ import annotations

from types import SimpleNamespace

from harness.subjects.engines.findings import FailedCase
from harness.subjects.engines.llamacpp.signatures import cut_short_at_the_context_end

MODEL = SimpleNamespace(max_context=256)


def case(**records):
    return FailedCase("suites/x.py::t", "AssertionError", records, ("slug",), lambda: MODEL)


def divergence(prompt_length, index, actual, k=2):
    return {"index": index, "actual_token": actual, "num_draft_tokens": k, "prompt_ids": [1] * prompt_length}


def test_an_output_that_ends_early_at_the_context_end_is_the_dropped_tokens_finding():
    assert cut_short_at_the_context_end(case(divergence=divergence(232, 23, None)))
    assert not cut_short_at_the_context_end(case(divergence=divergence(100, 23, None)))  # far from the end
    assert not cut_short_at_the_context_end(case(divergence=divergence(232, 23, 42)))  # a changed token


def test_a_speculative_sample_cut_short_at_the_context_end_is_the_dropped_tokens_finding():
    request = {"prompt_ids": [1] * 232, "num_draft_tokens": 3}
    without = list(range(24))
    assert cut_short_at_the_context_end(
        case(speculation={"request": request, "without": without, "speculative": without[:23]})
    )
    changed = [*without[:22], 99]
    assert not cut_short_at_the_context_end(
        case(speculation={"request": request, "without": without, "speculative": changed})
    )
    early = {"prompt_ids": [1] * 100, "num_draft_tokens": 3}
    assert not cut_short_at_the_context_end(
        case(speculation={"request": early, "without": without, "speculative": without[:23]})
    )


def steps(tokens, drafts):
    return [
        {"start": i, "drafts": [d], "accepted": 0, "emitted": [t]}
        for i, (t, d) in enumerate(zip(tokens, drafts, strict=True))
    ]


# the passes llama.cpp made for long-01 (a 232-token prompt, max_new_tokens 24) at k = 4 with every position's draft
# rejected, on tiny-glm4-moe, in the batch at the context end (with long-02, 247 + 9 tokens): the pass at 8 lost its
# drafts to long-02's failed draft decode, the pass at 22 to its own (measured 2026-12-03)
LONG_01_DRAFTS = [0, 4, 4, 4, 4, 4, 4, 4, 0, *[4] * 11, 3, 2, 0, 0]


def forced_passes(drafts, prompt_id="long-01"):
    steps = [{"start": s, "drafts": [7] * n, "accepted": 0, "emitted": [1]} for s, n in enumerate(drafts)]
    return {"prompt_id": prompt_id, "num_draft_tokens": 4, "steps": steps, "expected": [[s, 1] for s in range(24)]}


def forced_case(batch, passes, **records):
    from harness.models.loading import bundle_for

    nodeid = f"greedy/test_forced_rejections.py::test_forced_rejections_keep_the_reference[{passes['prompt_id']}-k4-every-position-{batch}]"
    return FailedCase(
        nodeid,
        "AssertionError",
        {"passes": passes, **records},
        ("slug",),
        lambda: bundle_for("tiny-glm4-moe", "cpu", "float32"),
    )


def test_passes_short_of_drafts_beside_a_request_past_its_context_end_are_the_drafts_past_the_limit_finding():
    from harness.subjects.engines.llamacpp.signatures import drafts_lost_to_a_slot_past_its_context_end as explains

    assert explains(forced_case("separated", forced_passes(LONG_01_DRAFTS)))
    assert explains(forced_case("mixed", forced_passes(LONG_01_DRAFTS)))
    # near misses: a changed token; more short passes than the batch's failing draft steps (long-01 and long-02: one
    # each); a short pass in a batch where no request drafts past its context end (natural-01's own batch)
    assert not explains(forced_case("separated", forced_passes(LONG_01_DRAFTS), divergence={"index": 3}))
    three_short = [0, 4, 0, 4, 4, 4, 4, 4, 0, *[4] * 11, 3, 2, 0, 0]
    assert not explains(forced_case("separated", forced_passes(three_short)))
    natural = [0, 4, 4, 0, *[4] * 16, 3, 2, 1, 0]
    assert not explains(forced_case("separated", forced_passes(natural, "natural-01")))
    assert explains(forced_case("mixed", forced_passes(natural, "natural-01")))  # the mixed batch holds long-01/02
