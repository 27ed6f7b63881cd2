"""The llama.cpp findings' signatures explain their own failures and nothing else (a changed token, an early stop
away from the context end, a wholly wrong drafter): a second bug in a watched test stays a failure."""

from __future__ import annotations

from types import SimpleNamespace

from harness.subjects.engines.findings import FailedCase, signature_module
from harness.subjects.engines.llamacpp.findings import FINDINGS as LLAMACPP_FINDINGS

context_end_cut = signature_module(
    LLAMACPP_FINDINGS, "llamacpp-draft-mtp-drops-accepted-tokens-at-the-context-end"
).context_end_cut
cut_short_at_the_context_end = signature_module(
    LLAMACPP_FINDINGS, "llamacpp-draft-mtp-drops-accepted-tokens-at-the-context-end"
).cut_short_at_the_context_end

MODEL = SimpleNamespace(max_context=256, is_hybrid=False)
HYBRID = SimpleNamespace(max_context=256, is_hybrid=True)


def case(model=MODEL, **records):
    return FailedCase("suites/x.py::t", "AssertionError", records, ("slug",), lambda: model)


def passes(accepted, cut=True):
    """Passes emitting accepted + 1 tokens each, the last one cut to one token where `cut` (llama.cpp's stop)."""
    steps, start = [], 0
    for a in accepted:
        steps.append({"start": start, "drafts": [5] * max(a, 1), "accepted": a, "emitted": [7] * (a + 1)})
        start += a + 1
    if cut:
        steps[-1]["emitted"] = [7]
    return steps


# tiny-glm4-moe, long-01 (232 + 24 tokens of 256) at k = 1, every draft accepted: the pass at 22 accepts its draft,
# 232 + 22 + 1 + 1 = 256 reaches the context end, and llama.cpp emits the draft alone (as measured 2026-12-04)
EVERY_DRAFT_ACCEPTED = passes([1] * 12)


def divergence(prompt_length, steps, actual=None, reference_length=24):
    emitted = [t for step in steps for t in step["emitted"]]
    reference = [*emitted, *[8] * (reference_length - len(emitted))]
    index = len(emitted)
    return {
        "index": index,
        "actual_token": actual,
        "num_draft_tokens": 1,
        "prompt_ids": [1] * prompt_length,
        "actual_tokens": [{"id": t} for t in (emitted if actual is None else [*emitted, actual])],
        "reference_tokens": [{"id": t} for t in reference],
        "steps": steps,
    }


def test_the_cut_is_where_llamacpps_context_check_stops_the_first_pass_reaching_the_end():
    assert context_end_cut(232, EVERY_DRAFT_ACCEPTED, 256) == 23
    assert context_end_cut(232, passes([0] * 24, cut=False), 256) is None  # the plain stop at the last token
    assert context_end_cut(100, EVERY_DRAFT_ACCEPTED, 256) is None  # far from the end
    # a pass that accepts 2 at start 21 (232 + 21 + 2 + 1 = 256) is the one cut: 22 tokens
    assert context_end_cut(232, passes([2] * 7 + [2]), 256) == 22


def test_an_output_cut_where_llamacpp_cuts_it_is_the_dropped_tokens_finding():
    assert cut_short_at_the_context_end(case(divergence=divergence(232, EVERY_DRAFT_ACCEPTED)))
    # near misses: a changed token; a cut one pass early; a last pass that accepted nothing (no cut predicted); far
    # from the end; no passes recorded
    changed = divergence(232, EVERY_DRAFT_ACCEPTED[:-1], actual=42)
    assert not cut_short_at_the_context_end(case(divergence=changed))
    early = [*EVERY_DRAFT_ACCEPTED[:-2], {**EVERY_DRAFT_ACCEPTED[-2], "emitted": [7]}]
    assert not cut_short_at_the_context_end(case(divergence=divergence(232, early)))
    nothing_accepted = [*EVERY_DRAFT_ACCEPTED[:-1], {**EVERY_DRAFT_ACCEPTED[-1], "accepted": 0}]
    assert not cut_short_at_the_context_end(case(divergence=divergence(232, nothing_accepted)))
    assert not cut_short_at_the_context_end(case(divergence=divergence(100, EVERY_DRAFT_ACCEPTED)))
    unrecorded = {**divergence(232, EVERY_DRAFT_ACCEPTED), "steps": None}
    assert not cut_short_at_the_context_end(case(divergence=unrecorded))


# tiny-qwen3-next (a hybrid), long-02 (247 + 9 tokens of 256) at k = 1 with every draft rejected: each rejection
# restores the checkpoint and the next batch replays the target's token; the pass at 7 replays one token and would
# append it (247 + 7 + 1 + 1 = 256), so llama.cpp emits its first token alone (the run of 2026-12-04)
EVERY_DRAFT_REJECTED = [{"start": s, "drafts": [5] if s % 2 else [], "accepted": 0, "emitted": [7]} for s in range(8)]


def test_on_a_hybrid_the_replay_after_a_restored_rejection_is_cut_where_it_reaches_the_end():
    assert context_end_cut(247, EVERY_DRAFT_REJECTED, 256, replays=True) == 8
    assert context_end_cut(247, EVERY_DRAFT_REJECTED, 256) is None  # no replay: the plain stop after 9 tokens
    hybrid = divergence(247, EVERY_DRAFT_REJECTED, reference_length=9)
    assert cut_short_at_the_context_end(case(HYBRID, divergence=hybrid))
    assert not cut_short_at_the_context_end(case(MODEL, divergence=hybrid))


def test_every_seeded_sample_cut_where_llamacpp_cuts_it_is_the_dropped_tokens_finding():
    request = {"prompt_ids": [1] * 232, "num_draft_tokens": 1}
    without = list(range(24))
    cut = {"request": request, "without": without, "speculative": without[:23]}
    cut["speculative_steps"] = EVERY_DRAFT_ACCEPTED
    assert cut_short_at_the_context_end(case(speculation=cut))
    assert cut_short_at_the_context_end(case(speculation={**cut, "more": [cut]}))
    # near misses: a changed token; a second request cut one token early; no passes recorded
    changed = [*without[:22], 99]
    assert not cut_short_at_the_context_end(case(speculation={**cut, "speculative": changed}))
    one_early = {**cut, "speculative": without[:22]}
    assert not cut_short_at_the_context_end(case(speculation={**cut, "more": [one_early]}))
    unrecorded = {key: value for key, value in cut.items() if key != "speculative_steps"}
    assert not cut_short_at_the_context_end(case(speculation=unrecorded))


def steps(tokens, drafts):
    return [
        {"start": i, "drafts": [d], "accepted": 0, "emitted": [t]}
        for i, (t, d) in enumerate(zip(tokens, drafts, strict=True))
    ]


# the passes llama.cpp made for long-01 (a 232-token prompt, max_new_tokens 24) at k = 4 with every position's draft
# rejected, on tiny-glm4-moe, in the batch at the context end (with long-02, 247 + 9 tokens): the pass at 8 lost its
# drafts to long-02's failed draft decode, the pass at 22 to its own (measured 2026-12-03)
LONG_01_DRAFTS = [0, 4, 4, 4, 4, 4, 4, 4, 0, *[4] * 11, 3, 2, 0, 0]
CONTEXT = 256


def own_reach(prompt_length, start, k=4):
    """The last position a drafted pass's own draft decode feeds: n_tokens + k - 1 (draft_batches.draft_reach)."""
    return prompt_length + start - 1 + k - 1


# the draft reach of each pass's server iteration: its own, and at 8 long-02's pass at 7 (246 + 7 + 3 = 256), drafted
# in the same iteration; the prefill's pass and the last one (no room) drafted nothing
LONG_01_REACH = [-1, *(own_reach(232, s) for s in range(1, 23)), -1]
LONG_01_REACH[8] = CONTEXT


def forced_passes(drafts, prompt_id="long-01", reach=None):
    steps = [{"start": s, "drafts": [7] * n, "accepted": 0, "emitted": [1]} for s, n in enumerate(drafts)]
    record = {"prompt_id": prompt_id, "num_draft_tokens": 4, "steps": steps, "expected": [[s, 1] for s in range(24)]}
    if reach is not None:
        record["step_facts"] = {"draft_reach": reach}
    return record


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


def test_the_passes_short_of_drafts_are_exactly_those_of_the_iterations_whose_draft_decode_reached_the_context_end():
    """A record it must explain: long-01's passes at 8 (long-02's failed draft decode, the same iteration) and 22 (its
    own) hold no drafts. Near misses it must not: a changed token; a short pass in an iteration that stayed inside the
    context (another bug that drops drafts); a predicted pass that kept its drafts; a record without iterations."""
    from harness.subjects.engines.findings import signature_module
    from harness.subjects.engines.llamacpp.findings import FINDINGS as LLAMACPP_FINDINGS

    explains = signature_module(
        LLAMACPP_FINDINGS, "llamacpp-draft-mtp-drafts-past-the-slots-limit"
    ).drafts_lost_to_a_slot_past_its_context_end

    assert explains(forced_case("mixed", forced_passes(LONG_01_DRAFTS, reach=LONG_01_REACH)))
    assert not explains(
        forced_case("mixed", forced_passes(LONG_01_DRAFTS, reach=LONG_01_REACH), divergence={"index": 3})
    )
    one_more_short = list(LONG_01_DRAFTS)
    one_more_short[3] = 0
    assert not explains(forced_case("mixed", forced_passes(one_more_short, reach=LONG_01_REACH)))
    kept = list(LONG_01_DRAFTS)
    kept[8] = 4
    assert not explains(forced_case("mixed", forced_passes(kept, reach=LONG_01_REACH))), "pass 8 kept its drafts"
    assert not explains(forced_case("mixed", forced_passes(LONG_01_DRAFTS))), "no iterations: nothing predicted"
    # natural-01 (a short prompt) loses the drafts of one pass only in an iteration shared with a failing slot
    natural = [0, 4, 4, 0, *[4] * 16, 3, 2, 1, 0]
    beside_long, inside = [-1, *([100] * 22), -1], [-1, *([100] * 22), -1]
    beside_long[3] = CONTEXT
    assert explains(forced_case("mixed", forced_passes(natural, "natural-01", beside_long)))
    assert not explains(forced_case("mixed", forced_passes(natural, "natural-01", inside)))
    # the short passes where predicted, and one unrelated defect beside them: each refused (the signature before
    # issue 62 explained every one of them, judging the short passes only)
    under_accepting = forced_passes(LONG_01_DRAFTS, reach=LONG_01_REACH)
    under_accepting["steps"][3]["emitted"] = [7]  # pass 3 rejected its first draft, yet emitted it
    assert not explains(forced_case("mixed", under_accepting)), "a pass rejected the token it emitted"
    unforced = forced_passes(LONG_01_DRAFTS, reach=LONG_01_REACH)
    unforced["forced_drafts"] = {"3": 8}
    assert not explains(forced_case("mixed", unforced)), "a forced draft that is not the forced token"
    off_plan = forced_passes(LONG_01_DRAFTS, reach=LONG_01_REACH)
    off_plan["expected"][2] = [2, 2]
    assert not explains(forced_case("mixed", off_plan)), "the passes before the first short one are not the plan's"


# tiny-qwen3-next, greedy logprobs-top-5-accept-4-reject-1-k3-code-01 (the run of 2026-12-05): each rejection at 9 and
# 19 restores the hybrid's checkpoint, and the replay's verification emits the correction and the token after it
QWEN_STEPS = [
    {"start": start, "drafts": [5] * drafts, "accepted": accepted, "emitted": [7] * emitted}
    for start, drafts, accepted, emitted in [
        (0, 0, 0, 1), (1, 3, 3, 4), (5, 3, 3, 4), (9, 3, 0, 1), (10, 0, 0, 1),
        (11, 3, 3, 4), (15, 3, 3, 4), (19, 3, 0, 1), (20, 0, 0, 1), (21, 2, 2, 3),
    ]
]  # fmt: skip
EVERY_VERIFIED_POSITION = set(range(1, 24))  # all but the prefill's first token
DRAFTED_POSITIONS = EVERY_VERIFIED_POSITION - {10, 20}  # a non-hybrid samples those outside a pass


def mismatch(position, reported=0.0, top=0, asked=5, expected=-1.25, token=7, what=None):
    if what is None:
        what = f"logprob of token {token} is {reported:.6g}, the target's of {token} is {expected:.6g}"
    return {
        "position": position,
        "kind": "draft",
        "drafted_pass": position in DRAFTED_POSITIONS,
        "token": token,
        "reported": reported,
        "expected": expected,
        "reported_top": top,
        "asked_top": asked,
        "what": what,
    }


def logprobs_case(mismatches, model=HYBRID, steps=QWEN_STEPS):
    return case(model, logprobs={"seed": 0, "positions": 24, "steps": steps, "mismatches": mismatches})


def test_the_verified_positions_are_the_drafted_passes_and_a_hybrids_replay_after_a_rejection():
    from harness.subjects.engines.findings import signature_module
    from harness.subjects.engines.llamacpp.findings import FINDINGS as LLAMACPP_FINDINGS

    verified_positions = signature_module(
        LLAMACPP_FINDINGS, "llamacpp-speculative-tokens-report-probability-1"
    ).verified_positions

    assert verified_positions(QWEN_STEPS, hybrid=True) == EVERY_VERIFIED_POSITION
    assert verified_positions(QWEN_STEPS, hybrid=False) == DRAFTED_POSITIONS


def test_probability_1_at_exactly_the_verified_tokens_is_the_speculative_logprobs_finding():
    """Records it must explain: every verified token reported with logprob 0 and no top tokens (on a hybrid and on
    a non-hybrid), one of them whose target logprob is ~0 caught by its empty top list, and with no top tokens asked
    for, a verified token the check could not catch left out. Near misses it must not: a token sampled outside a
    pass reported so; a verified token with the target's logprob and top list (predicted wrong, reported right); a
    wrong nonzero logprob; a wrong top list; another token's logprob; no record."""
    from harness.subjects.engines.findings import signature_module
    from harness.subjects.engines.llamacpp.findings import FINDINGS as LLAMACPP_FINDINGS

    explains = signature_module(
        LLAMACPP_FINDINGS, "llamacpp-speculative-tokens-report-probability-1"
    ).probability_1_at_every_verified_token

    assert explains(logprobs_case([mismatch(p) for p in sorted(EVERY_VERIFIED_POSITION)]))
    drafted = [mismatch(p) for p in sorted(DRAFTED_POSITIONS)]
    assert explains(logprobs_case(drafted, model=MODEL))
    certain = mismatch(4, expected=-1e-7, what="0 top tokens, asked for 5")
    assert explains(logprobs_case([*drafted[:3], certain, *drafted[4:]], model=MODEL))
    no_top = [mismatch(p, asked=0) for p in sorted(DRAFTED_POSITIONS - {4})]
    assert explains(logprobs_case(no_top, model=MODEL))

    assert not explains(logprobs_case([mismatch(p) for p in sorted(EVERY_VERIFIED_POSITION)], model=MODEL))
    assert not explains(logprobs_case([mismatch(0), *drafted], model=MODEL)), "the prefill's token"
    assert not explains(logprobs_case(drafted[1:], model=MODEL)), "a drafted token reported right"
    wrong_value = [mismatch(1, reported=-0.5), *drafted[1:]]
    assert not explains(logprobs_case(wrong_value, model=MODEL))
    wrong_top = [mismatch(1, top=5, what="top 0 token 9 has logprob -1, the target's is -2 and its rank-0 logprob -1")]
    assert not explains(logprobs_case([*wrong_top, *drafted[1:]], model=MODEL))
    other_token = [mismatch(1, what="logprob of token 9 is 0, the target's of 7 is -1.25"), *drafted[1:]]
    assert not explains(logprobs_case(other_token, model=MODEL))
    assert not explains(case(MODEL))
