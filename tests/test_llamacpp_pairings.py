"""The stale-hidden-state finding's signature predicts llama.cpp's drafts from the pairings its instrumented build
reports (harness/subjects/engines/llamacpp/server.py hidden_pairings, harness/checks/paired_drafts.py,
signatures.drafts_as_the_stale_pairings_predict): the prediction with nothing paired is the harness proposer's own
computation, a record whose drafts the stale pairings give is explained, and a near miss (one draft of one pass
other than predicted, or no pairings reported) is not."""

from __future__ import annotations

import pytest
import torch

from harness.checks.conformance import harness_drafts
from harness.checks.paired_drafts import paired_drafts, pairings_in_force, target_hidden_states
from harness.contract.decoder import DecodeRequest, DecodeResult, HiddenPairing, VerifyStep
from harness.decoding.target_decoder import TargetOnlyDecoder
from harness.subjects.engines.findings import FailedCase, signature_module
from harness.subjects.engines.llamacpp.findings import FINDINGS as LLAMACPP_FINDINGS
from harness.subjects.engines.llamacpp.server import Engine, Pass, Task, hidden_pairings
from harness.subjects.engines.wire import EngineProtocolError, parse_result, result_message

drafts_as_the_stale_pairings_predict = signature_module(
    LLAMACPP_FINDINGS, "llamacpp-draft-mtp-pairs-the-first-prompt-token-with-a-stale-hidden-state"
).drafts_as_the_stale_pairings_predict

SEED = 20261222  # the generator of the prompts and stale states below (one where a phantom entry changes drafts)


def test_the_first_batch_of_a_task_and_a_hybrids_replay_carry_llama_cpps_state_and_nothing_else_does():
    zeros, stale, kept = [0.0] * 2, [9.0, 9.0], [1.0, 1.0]
    task = Task(
        -1,
        [
            Pass(emitted=[5], pairings=[(0, zeros), (4, kept)]),  # the prompt in two batches, then its token
            Pass(drafts=[7, 8], accepted=0, restored=True, pairings=[(5, kept)]),  # rejected on a hybrid
            Pass(emitted=[6, 3], pairings=[(5, stale)]),  # the replay: paired with the rejected draft's state
            Pass(drafts=[2], accepted=1, emitted=[2, 4], pairings=[(7, kept)]),
        ],
    )
    events, left = hidden_pairings(task, inherited={})
    assert [(e["step"], e["position"], e["hidden"]) for e in events] == [
        (1, 0, zeros),  # before step 1 (the first that drafted) ...
        (1, 4, None),  # a later prompt batch: the target's own state
        (2, 5, None),  # the restored pass's verification batch, after its own drafts
        (3, 5, stale),  # the replay, before step 3's drafts (step 2 is the replay's extra token)
        (4, 7, None),
    ]
    assert left == {0: zeros, 5: stale}


def test_a_cached_prefix_keeps_the_stale_pairings_below_the_tasks_first_position():
    task = Task(-1, [Pass(emitted=[5], pairings=[(3, [2.0])]), Pass(drafts=[1], emitted=[1, 2], pairings=[(4, [3.0])])])
    events, _ = hidden_pairings(task, inherited={0: [1.0], 3: [7.0]})
    assert [(e["position"], e["hidden"]) for e in events] == [(0, [1.0]), (3, [2.0]), (4, None)]


def test_the_pairings_in_force_are_the_last_written_at_or_below_each_position():
    pairings = [HiddenPairing(0, 0, (1.0,)), HiddenPairing(1, 5, (2.0,)), HiddenPairing(2, 3, None)]
    assert pairings_in_force(pairings, 0) == {0: (1.0,)}
    assert pairings_in_force(pairings, 1) == {0: (1.0,), 5: (2.0,)}
    assert pairings_in_force(pairings, 2) == {0: (1.0,)}  # the batch at 3 rewrote the cache from 3 on


@pytest.mark.parametrize("model", ["tiny-glm4-moe", "tiny-deepseek-v3", "tiny-qwen3-next"])
def test_with_nothing_paired_the_prediction_is_the_harness_proposers_drafts(fixture_bundle, model):
    bundle = fixture_bundle(model).with_depths(1)
    generator = torch.Generator().manual_seed(SEED)
    sequence = torch.randint(3, bundle.config.vocab_size, (40,), generator=generator).tolist()
    hidden = target_hidden_states(bundle, sequence)
    prefixes = [(tuple(sequence[:length]), (0,) * k) for length in (2, 17, 40) for k in (1, 3)]
    expected = harness_drafts(bundle, prefixes)
    for (prefix, drafts), ours in zip(prefixes, expected, strict=True):
        assert paired_drafts(bundle, sequence, hidden, len(prefix), len(drafts), {}) == ours


def decode_as_llama_cpp_with_a_phantom_entry(bundle, prompt, k, phantom, max_new_tokens=24):
    """The target's greedy tokens, in passes of k drafts each drafted as the finding predicts with a phantom entry
    (t_0, phantom) at position 0, every draft's acceptance decided against the greedy tokens: a record the stale
    hidden state alone explains."""
    [reference] = TargetOnlyDecoder(bundle).decode([DecodeRequest(tuple(prompt), max_new_tokens)])
    tokens = list(reference.token_ids)
    sequence = [*prompt, *tokens]
    hidden = target_hidden_states(bundle, sequence)
    steps, start = [{"start": 0, "drafts": [], "accepted": 0, "emitted": tokens[:1]}], 1
    while start < len(tokens):
        drafts = list(paired_drafts(bundle, sequence, hidden, len(prompt) + start, k, {0: phantom}))
        accepted = 0
        while accepted < k and start + accepted < len(tokens) - 1 and drafts[accepted] == tokens[start + accepted]:
            accepted += 1
        emitted = tokens[start : start + accepted + 1]
        steps.append({"start": start, "drafts": drafts, "accepted": accepted, "emitted": emitted})
        start += len(emitted)
    pairings = [{"step": 1, "position": 0, "hidden": list(phantom)}]
    return {
        "prompt_id": "p",
        "prompt_ids": list(prompt),
        "token_ids": tokens,
        "steps": steps,
        "hidden_pairings": pairings,
    }


def conformance_case(bundle, request, mismatched_start):
    record = {
        "num_draft_tokens": 2,
        "passes": len(request["steps"]) - 1,
        "mismatches": [{"request": 0, "start": mismatched_start, "drafts": [0, 0], "expected": [1, 1]}],
        "requests": [request],
    }
    return FailedCase("invariants/x.py::t", "AssertionError", {"conformance": record}, ("slug",), lambda: bundle)


def test_drafts_the_stale_pairing_gives_are_explained_and_a_near_miss_is_not(fixture_bundle):
    bundle = fixture_bundle("tiny-glm4-moe")
    generator = torch.Generator().manual_seed(SEED)
    prompt = torch.randint(3, bundle.config.vocab_size, (4,), generator=generator).tolist()
    phantom = (torch.randn(bundle.config.hidden_size, generator=generator, dtype=torch.float64) * 10).tolist()
    request = decode_as_llama_cpp_with_a_phantom_entry(bundle.with_depths(1), prompt, 2, phantom)
    hidden = target_hidden_states(bundle.with_depths(1), [*prompt, *request["token_ids"]])
    unpaired = [
        list(
            paired_drafts(
                bundle.with_depths(1), [*prompt, *request["token_ids"]], hidden, len(prompt) + s["start"], 2, {}
            )
        )
        for s in request["steps"][1:]
    ]
    changed = [s["start"] for s, ours in zip(request["steps"][1:], unpaired, strict=True) if s["drafts"] != ours]
    assert changed, "the phantom entry changed no draft: the record would test nothing"
    assert drafts_as_the_stale_pairings_predict(conformance_case(bundle, request, changed[0]))

    near_miss = {**request, "steps": [dict(s) for s in request["steps"]]}
    near_miss["steps"][-1]["drafts"] = [(d + 1) % bundle.config.vocab_size for d in near_miss["steps"][-1]["drafts"]]
    assert not drafts_as_the_stale_pairings_predict(conformance_case(bundle, near_miss, changed[0]))
    unreported = {key: value for key, value in request.items() if key != "hidden_pairings"}
    assert not drafts_as_the_stale_pairings_predict(conformance_case(bundle, unreported, changed[0]))


def test_reported_pairings_survive_the_wire_and_a_malformed_one_is_named():
    result = DecodeResult(
        (5, 6),
        (VerifyStep(0, (), 0, (5,)), VerifyStep(1, (6,), 1, (6,))),
        "length",
        hidden_pairings=(HiddenPairing(1, 0, (0.5, -1.0)), HiddenPairing(2, 3, None)),
    )
    assert parse_result(result_message(result), "here").hidden_pairings == result.hidden_pairings
    malformed = {**result_message(result), "hidden_pairings": [{"step": 1, "position": "0", "hidden": None}]}
    with pytest.raises(EngineProtocolError, match="here: hidden_pairings must be"):
        parse_result(malformed, "here")


def test_a_cached_prefix_comes_from_the_slots_own_state_or_else_the_one_that_keeps_most_of_the_prompt():
    engine = Engine.__new__(Engine)  # the bookkeeping only: no llama.cpp server
    engine.cached_states = [
        (0, (1, 2, 3, 4, 5), {0: [1.0]}),  # slot 0's first task
        (1, (1, 2, 9, 9), {0: [2.0]}),
        (0, (7, 7, 7), {0: [3.0]}),  # slot 0's last task: shares nothing with the prompt below
    ]
    prompt = (1, 2, 3, 4, 8)
    assert engine._cached_prefix_pairings(prompt, slot=0, first=4) == {0: [1.0]}  # restored from the RAM cache
    assert engine._cached_prefix_pairings((7, 7, 7, 1), slot=0, first=3) == {0: [3.0]}  # the slot's own
    assert engine._cached_prefix_pairings((1, 2, 9, 9, 9), slot=0, first=4) == {0: [2.0]}


def test_batch_against_alone_is_explained_only_where_every_pass_accepts_what_the_target_chose(
    fixture_bundle, monkeypatch
):
    """The stale pairings move drafts, never tokens nor what a pass accepts of its drafts: two decodes whose drafts
    the pairings predict are explained; the same with one pass of the decode alone accepting one draft fewer than
    the target chose is not (the signature before issue 62 compared drafts and tokens only)."""
    module = signature_module(
        LLAMACPP_FINDINGS, "llamacpp-draft-mtp-pairs-the-first-prompt-token-with-a-stale-hidden-state"
    )
    bundle = fixture_bundle("tiny-glm4-moe")
    generator = torch.Generator().manual_seed(SEED)
    prompt = torch.randint(3, bundle.config.vocab_size, (4,), generator=generator).tolist()
    phantom = (torch.randn(bundle.config.hidden_size, generator=generator, dtype=torch.float64) * 10).tolist()
    request = decode_as_llama_cpp_with_a_phantom_entry(bundle.with_depths(1), prompt, 2, phantom)
    monkeypatch.setattr(module, "_prompt_ids", lambda case, prompt_id: prompt)

    def case(other_steps):
        passes = {
            "prompt_id": "random",
            "num_draft_tokens": 2,
            "forced_drafts": {},
            "expected": None,
            "steps": request["steps"],
            "hidden_pairings": request["hidden_pairings"],
            "other_steps": other_steps,
            "other_hidden_pairings": request["hidden_pairings"],
            "other": "alone",
        }
        batch_alone = "greedy/test_greedy_identity.py::test_a_batch_of_mixed_prompts_equals_each_prompt_alone[k2]"
        return FailedCase(batch_alone, "AssertionError", {"passes": passes}, ("slug",), lambda: bundle)

    assert module.drafts_as_the_stale_pairings_predict(case(request["steps"]))
    accepting = next(i for i, step in enumerate(request["steps"]) if step["accepted"] >= 1)
    fewer = [dict(step) for step in request["steps"]]
    fewer[accepting]["accepted"] -= 1  # it rejects a draft the target chose: the one it emits there
    assert not module.drafts_as_the_stale_pairings_predict(case(fewer))
