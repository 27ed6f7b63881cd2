"""Failure triage over results.json cases: signatures that name the cause and ignore what varies between
cases (prompt, k, schedule positions), groups largest first, the smallest case and its re-run command."""

from __future__ import annotations

from harness.contract.paths import DATA_ROOT
from harness.contract.run_options import RunOptions
from harness.triage.groups import divergence_place, failure_groups, normalised_message, signature

OPTIONS = RunOptions(decoder="mutant:x", model="/m/tiny", dtype="float64", seed=7)
RUN = {"decoder": "mutant:x", "model": "/m/tiny", "device": "cpu", "dtype": "float64", "session_seed": 7}
RUN["options"] = OPTIONS.to_record()


def step(start, drafts, accepted, emitted):
    return {"start": start, "drafts": drafts, "accepted": accepted, "emitted": emitted}


def greedy_case(nodeid, index, steps, forced=None, k=2, outcome="failed"):
    divergence = {
        "index": index,
        "near_tie": False,
        "steps": steps,
        "forced_drafts": forced or {},
        "num_draft_tokens": k,
        "reference_tokens": [{"id": 1, "text": "a"}] * 8,
    }
    return {"nodeid": nodeid, "suite": "greedy", "outcome": outcome, "message": "DIVERGENCE", "divergence": divergence}


def test_the_place_of_a_divergence_is_named_by_its_slot_in_the_pass():
    steps = [step(0, [], 0, [5]), step(1, [7, 8], 1, [7, 9]), step(3, [4, 4], 2, [4, 4, 6])]
    assert divergence_place({"index": 0, "steps": steps}) == "in a pass without drafts"
    assert divergence_place({"index": 1, "steps": steps}) == "at an accepted draft"
    assert divergence_place({"index": 2, "steps": steps, "forced_drafts": {"2": 8}}) == (
        "at the target's token after a rejected draft, where a draft was forced"
    )
    assert divergence_place({"index": 4, "steps": steps}) == "at an accepted draft, in the pass after a rejection"
    assert divergence_place({"index": 5, "steps": steps}) == (
        "at the bonus token after every draft was accepted, in the pass after a rejection"
    )
    assert divergence_place({"index": 6, "steps": steps}).startswith("past the decoder's last token")


def test_messages_lose_what_varies_between_cases():
    first = "prompt code-01, k=2, rejections at [0, 3]: passes (start, emitted) [(0, 1), (1, 2)] != expected [(0, 1)]"
    second = "prompt natural-07, k=3, rejections at [5]: passes (start, emitted) [(0, 4)] != expected [(0, 1), (1, 3)]"
    assert normalised_message(first) == normalised_message(second)
    assert normalised_message("assert 'x' == 'y'") == normalised_message("assert 'abc' == 'd'")


def test_failures_group_by_cause_not_by_prompt_or_k_and_the_smallest_case_is_picked():
    rejected = [step(0, [], 0, [1]), step(1, [9, 9], 0, [2])]
    cases = [
        greedy_case("suites/greedy/test_f.py::test_forced[code-01-k3-every]", 1, rejected, {"1": 9}, k=3),
        greedy_case("suites/greedy/test_f.py::test_forced[natural-02-k1-every]", 1, rejected, {"1": 9}, k=1),
        greedy_case("suites/greedy/test_f.py::test_forced[code-09-k2-last]", 1, rejected, {"1": 9}, k=2),
        greedy_case(
            "suites/greedy/test_f.py::test_forced[code-01-k2-none]", 2, [step(0, [], 0, [1]), step(1, [3], 1, [3, 4])]
        ),
        {"nodeid": "suites/greedy/test_f.py::test_ok[a]", "suite": "greedy", "outcome": "passed", "message": ""},
        {
            "nodeid": "suites/invariants/test_s.py::test_state[k2]",
            "suite": "invariants",
            "outcome": "failed",
            "message": "x",
            "invariants": {"passes": 4, "violations": [{"invariant": "positions", "where": "target"}]},
        },
    ]
    groups = failure_groups(cases, RUN)
    assert [g["count"] for g in groups] == [3, 1, 1]
    first = groups[0]
    assert first["signature"] == (
        "greedy: test_f.py::test_forced: greedy divergence at the target's token after a rejected draft, "
        "where a draft was forced"
    )
    assert first["smallest"] == "suites/greedy/test_f.py::test_forced[natural-02-k1-every]"  # k = 1
    assert first["rerun"].startswith(
        f"python -m pytest '{DATA_ROOT}/suites/greedy/test_f.py::test_forced[natural-02-k1-every]'"
    )
    assert "--harness-decoder=mutant:x" in first["rerun"] and "--harness-seed=7" in first["rerun"]
    assert {g["signature"] for g in groups[1:]} == {
        "greedy: test_f.py::test_forced: greedy divergence at the bonus token after every draft was accepted",
        "invariants: test_s.py::test_state: invariant 'positions' broken in target",
    }


def test_a_crash_is_its_own_cause():
    case = {
        "nodeid": "suites/greedy/t.py::test_a[x]",
        "suite": "greedy",
        "outcome": "error",
        "message": "E   RuntimeError: boom",
    }
    assert signature(case) == ("greedy", "t.py::test_a", "raised RuntimeError")


def sampling_case(cells=None, histogram=None, positions=None):
    sampling = {
        "rejected": True,
        "family_alpha": 0.01,
        "p_values": [{"test": "chi-square", "holm": 1e-6}, {"test": "G", "holm": 0.2}],
        "cells_table": cells or [],
        "pit_histogram": histogram,
        "positions": positions,
    }
    return {
        "nodeid": "suites/sampling/t.py::test_law[c]",
        "suite": "sampling",
        "outcome": "failed",
        "sampling": sampling,
    }


def test_a_sampling_signature_says_which_statistic_rejected_and_where_the_excess_sits():
    head_heavy = [
        {"label": "' the'", "observed": 700, "expected": 500},
        {"label": "' a'", "observed": 250, "expected": 300},
        {"label": "<other: pooled small cells and pruned branches>", "observed": 150, "expected": 200},
    ]
    assert signature(sampling_case(head_heavy))[2] == (
        "sampling law rejected by chi-square; the most likely continuation over-represented"
    )
    tail_lost = [dict(cell) for cell in head_heavy]
    tail_lost[0]["observed"], tail_lost[2]["observed"] = 520, 30
    assert signature(sampling_case(tail_lost))[2].endswith("the pooled tail under-represented")
    assert signature(sampling_case(histogram=[30, 20, 10, 10, 5, 5]))[2].endswith("PIT mass toward low u")


def test_a_whole_sequence_rejection_names_its_position_and_direction():
    def at(position, ks_holm, z_holm, z, what=""):
        return {"position": position, "what": what, "ks_holm": ks_holm, "z_holm": z_holm, "z": z, "u_moved": "toward 0"}

    positions = [at(t, 1.0, 1.0, 0.1) for t in range(47)] + [at(47, 1e-5, 1e-7, 6.2, "the last token")]
    assert signature(sampling_case(positions=positions))[2] == (
        "sampling law rejected by chi-square, KS at one position, log-likelihood at one position; at output "
        "position 47 (the last token): u toward 0, more likely tokens over-drawn"
    )


def test_groups_failing_the_same_way_in_different_tests_share_one_cause():
    from harness.triage.minimal_cases import mark_shared_causes

    def shrunk(k, new_tokens, prompt):
        case = {"num_draft_tokens": k, "forced_positions": [], "max_new_tokens": new_tokens, "prompt_ids": prompt}
        return {"reproduced": True, "minimal": case}

    groups = [
        {"group": 1, "suite": "greedy", "cause": "greedy divergence past the expected end"},
        {"group": 2, "suite": "greedy", "cause": "greedy divergence past the expected end"},
        {"group": 3, "suite": "greedy", "cause": "greedy divergence at an accepted draft"},
        {"group": 4, "suite": "greedy", "cause": "greedy divergence at the bonus token"},
        {"group": 5, "suite": "greedy", "cause": "greedy divergence at the bonus token"},
    ]
    found = {
        1: shrunk(1, 24, [5] * 50),
        2: shrunk(1, 6, [5] * 7),  # smaller: the cause's representative
        3: shrunk(2, 3, [9]),
        4: shrunk(2, 3, [9]),  # the same minimal case as group 3, another cause in words
        5: {"reproduced": False},
    }
    mark_shared_causes(groups, found)
    assert [found[n].get("same_as_group") for n in (1, 2, 3, 4)] == [2, None, None, 3]
    assert "same_as_group" not in found[5], "a group not reproduced alone is not merged"


def test_a_traceback_message_is_grouped_by_its_error_line_not_the_arguments_above_it():
    from harness.triage.groups import normalised_message

    first = "\ndecoder = <harness.decoding.mtp_decoder.MTPDecoder object at 0x7fb82b1fb1d0>\nk = 1\n\nE       AssertionError: 83 of 438 passes wrong\nE       assert not [(11, (878,))]\n"
    second = first.replace("0x7fb82b1fb1d0", "0x7fdea01").replace("83 of 438", "183 of 429")
    assert normalised_message(first) == normalised_message(second) == "AssertionError: N of N passes wrong"
