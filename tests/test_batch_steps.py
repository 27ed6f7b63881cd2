"""What ran beside each pass in its engine step (harness/subjects/engines/batch_steps.py): each pass is given each
fact's value at its engine step, over the whole decode call; vLLM's fact is the step's longest sequence, prompt +
start + drafts."""

from harness.contract.decoder import DecodeRequest, DecodeResult, VerifyStep
from harness.subjects.engines.batch_steps import longest_per_engine_step, with_step_facts

LONGEST = {"longest": longest_per_engine_step}


def test_each_pass_gets_the_longest_sequence_of_the_engine_step_that_verified_it():
    short, long = DecodeRequest((1, 2, 3), 8, num_draft_tokens=2), DecodeRequest(tuple(range(1, 11)), 4)
    first = DecodeResult(
        (5, 6, 7, 8),
        (VerifyStep(0, (), 0, (5,)), VerifyStep(1, (6, 7), 2, (6, 7, 8))),
        "length",
        engine_steps=(4, 5),
    )
    second = DecodeResult(
        (9, 9), (VerifyStep(0, (), 0, (9,)), VerifyStep(1, (9,), 0, (9,))), "length", engine_steps=(5, 6)
    )
    assert longest_per_engine_step([short, long], [first, second]) == {4: 3, 5: 10, 6: 12}
    given = with_step_facts([short, long], [first, second], LONGEST)
    # step 5 verified the short request's second pass (3 + 1 + 2 = 6) beside the long one's prefill (10)
    assert [dict(r.step_facts) for r in given] == [{"longest": (3, 10)}, {"longest": (10, 12)}]
    assert given == [first, second], "the batch's facts are not part of the output"


def test_results_without_engine_steps_or_facts_are_returned_as_they_are():
    request = DecodeRequest((1, 2), 1)
    result = DecodeResult((3,), (VerifyStep(0, (), 0, (3,)),), "length")
    assert with_step_facts([request], [result], LONGEST)[0].step_facts == {}
    stepped = DecodeResult((3,), (VerifyStep(0, (), 0, (3,)),), "length", engine_steps=(0,))
    assert with_step_facts([request], [stepped], {})[0].step_facts == {}


def test_a_result_with_its_facts_pickles_as_before():
    """A result crosses processes (a user's adapter, the shared work of pytest-xdist's workers): its facts must not
    stop it pickling."""
    import pickle

    request = DecodeRequest((1, 2), 1)
    stepped = DecodeResult((3,), (VerifyStep(0, (), 0, (3,)),), "length", engine_steps=(0,))
    for result in (stepped, *with_step_facts([request], [stepped], LONGEST)):
        again = pickle.loads(pickle.dumps(result))
        assert again == result and dict(again.step_facts) == dict(result.step_facts)
