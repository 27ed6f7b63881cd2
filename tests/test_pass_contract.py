"""The pass contract (harness/contract/passes.py) is checked where results enter the harness: every way a pass record
can fail to add up to its tokens is named; an in-process decoder's (the `accepted-count-off-by-one` mutant) and an
engine's wire's broken passes are refused wherever a check reads them, their tokens still judged first; a correct
decoder's passes keep it."""

from __future__ import annotations

import pytest

from harness.contract.decoder import DecodeRequest, DecodeResult, VerifyStep
from harness.contract.passes import (
    PassContractError,
    pass_contract_problem,
    pass_problem,
    reported_passes,
    with_pass_contract,
)
from harness.contract.paths import SUITES_DIR

pytest_plugins = ["pytester"]
CONTRACT_MUTANTS = ("accepted-count-off-by-one",)  # proven caught below

REQUEST = DecodeRequest((1, 2, 3), 6, num_draft_tokens=2)
RIGHT = DecodeResult(
    (5, 6, 7, 8, 9),
    (VerifyStep(0, (), 0, (5,)), VerifyStep(1, (6, 7), 2, (6, 7, 8)), VerifyStep(4, (4, 1), 0, (9,))),
    "length",
)


def broken(index: int, **change) -> DecodeResult:
    from dataclasses import replace

    steps = list(RIGHT.steps)
    steps[index] = replace(steps[index], **change)
    return replace(RIGHT, steps=tuple(steps))


@pytest.mark.parametrize(
    ("result", "named"),
    [
        (broken(1, accepted=1), "3 tokens emitted for 1 accepted drafts"),  # one accepted draft fewer
        (broken(2, accepted=1), "does not begin with its accepted drafts"),  # one more
        (broken(1, accepted=3), "3 accepted of 2 drafts"),
        (broken(1, start=2), "starts at 2, after 1 committed tokens"),
        (broken(1, drafts=(6, 7, 8)), "3 drafts, more than k = 2"),
        (broken(2, emitted=(10,)), "the passes emitted 5 tokens"),
    ],
)
def test_each_way_passes_can_fail_to_add_up_is_named(result, named):
    assert pass_problem(REQUEST, RIGHT) is None
    assert named in (pass_problem(REQUEST, result) or "")
    [entered] = with_pass_contract([REQUEST], [result], "x")
    assert entered.token_ids == result.token_ids and reported_passes(entered.steps) == result.steps
    assert "decoder x, request 0: its passes break the pass contract" in (pass_contract_problem(entered) or "")
    with pytest.raises(PassContractError, match="decoder x, request 0: its passes break the pass contract"):
        list(entered.steps)  # a check that reads them to judge


def test_n_samples_are_checked_one_by_one():
    from dataclasses import replace

    [entered] = with_pass_contract([REQUEST], [replace(RIGHT, samples=(RIGHT, broken(1, accepted=1)))], "x")
    assert entered.samples[0].steps == RIGHT.steps
    assert "decoder x, request 0, sample 1:" in (pass_contract_problem(entered) or "")


def test_a_decoder_without_passes_and_an_output_cut_inside_a_pass_keep_the_contract():
    assert pass_problem(REQUEST, DecodeResult((5, 6), (), "length")) is None
    cut = DecodeResult((5, 6), (VerifyStep(0, (), 0, (5,)), VerifyStep(1, (6, 7), 2, (6,))), "length")
    assert pass_problem(REQUEST, cut) is None


def test_an_in_process_decoder_that_misreports_its_accepted_count_is_refused_at_entry(fixture_bundle):
    from harness.subjects.decoder_registry import make_decoder

    bundle = fixture_bundle("tiny-deepseek-v3")
    request = DecodeRequest(tuple(range(5, 13)), 12, num_draft_tokens=2)
    assert make_decoder("mtp", bundle).decode([request])[0].steps  # the correct decoder keeps it
    [result] = make_decoder("mutant:accepted-count-off-by-one", bundle).decode([request])
    with pytest.raises(PassContractError, match="mutant:accepted-count-off-by-one, request 0"):
        len(result.steps)


def test_an_engines_results_are_checked_as_they_come_off_its_wire(fixture_bundle, monkeypatch):
    from harness.contract.run_options import EngineOptions
    from harness.subjects.engines import vllm
    from harness.subjects.engines.decoder import EngineDecoder

    class Process:  # an engine process whose adapter reads one accepted draft fewer
        def decode(self, group):
            return [broken(1, accepted=1) for _ in group]

    decoder = EngineDecoder(vllm.ENGINE, fixture_bundle("tiny-mimo"), True, EngineOptions())
    monkeypatch.setattr(decoder, "process", lambda key: Process())
    [result] = decoder.decode([DecodeRequest((1, 2, 3), 6, num_draft_tokens=2)])
    assert "decoder vllm-mtp, request 0" in (pass_contract_problem(result) or "")


def test_the_invariant_suite_fails_on_the_misreporting_mutant(pytester):
    result = pytester.runpytest_inprocess(
        str(SUITES_DIR / "invariants" / "test_acceptance_profile.py"),
        "-m",
        "invariants",
        "--harness-decoder=mutant:accepted-count-off-by-one",
        "-q",
    )
    assert result.parseoutcomes().get("failed", 0) == 1, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(["*its passes break the pass contract*"])
