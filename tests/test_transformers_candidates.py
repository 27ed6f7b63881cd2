"""Forced drafts and verification passes of transformers' own assisted-generation loop, tested on
transformers' classes (MTPCandidateGenerator, AssistedCandidateGenerator) through the two subjects."""

from __future__ import annotations

import pytest
import torch
from transformers import LogitsProcessorList

from harness.contract.decoder import DecodeRequest, SamplingConfig, cannot_serve, drafts_from
from harness.contract.errors import HarnessError
from harness.decoding.target_decoder import TargetOnlyDecoder
from harness.subjects.engines.transformers.candidates import (
    ForcedDraftsProcessor,
    PassRecorder,
    TransformersLoopChanged,
    _instrument_generator,
    instrument_generation,
)
from harness.subjects.engines.transformers.generation import TransformersAssistedDecoder, TransformersMTPDecoder
from harness.subjects.engines.transformers.use_mtp import mtp_depths_in_use

SUBJECTS = {"transformers-mtp": TransformersMTPDecoder, "transformers-assisted": TransformersAssistedDecoder}


@pytest.fixture(scope="module")
def deepseek(fixture_bundle):
    return fixture_bundle("tiny-deepseek-v3")


@pytest.fixture(scope="module")
def subjects(deepseek):
    return {name: make(deepseek) for name, make in SUBJECTS.items()}


def greedy_reference(bundle, prompt_ids, length):
    return TargetOnlyDecoder(bundle).decode([DecodeRequest(prompt_ids, length)])[0].token_ids


def test_the_forcing_processor_makes_the_forced_position_one_hot_and_leaves_the_others():
    processor = ForcedDraftsProcessor(prompt_length=3, forced={2: 7})
    scores = torch.randn(1, 10)
    assert processor(torch.zeros(1, 4, dtype=torch.long), scores) is scores  # output position 1: not forced
    forced = processor(torch.zeros(1, 5, dtype=torch.long), scores)  # output position 2
    assert forced.softmax(-1)[0].tolist() == [0.0] * 7 + [1.0] + [0.0] * 2


class FakeGenerator:
    """A candidate generator that drafts the argmax of processed scores, as transformers' generators do."""

    def __init__(self) -> None:
        self.logits_processor = LogitsProcessorList()
        self.updates: list[int] = []

    def get_candidates(self, input_ids, **kwargs):
        scores = self.logits_processor(input_ids, torch.arange(10.0)[None, :])
        return torch.cat([input_ids, scores.argmax(-1, keepdim=True)], dim=1), scores[:, None, :]

    def update_candidate_strategy(self, input_ids, scores, num_matches):
        self.updates.append(num_matches)


def test_the_wrapped_generator_forces_through_its_own_processors_and_records_the_pass():
    generator, recorder = FakeGenerator(), PassRecorder(prompt_length=2)
    own = generator.logits_processor
    _instrument_generator(generator, recorder, ForcedDraftsProcessor(2, {1: 4}))
    candidates, logits = generator.get_candidates(torch.tensor([[5, 6, 9]]))
    assert candidates.tolist() == [[5, 6, 9, 4]] and logits.softmax(-1)[0, 0, 4] == 1.0
    assert generator.logits_processor is own and len(own) == 0  # the processor list is restored, never extended
    generator.update_candidate_strategy(torch.tensor([[5, 6, 9, 3]]), None, 0)
    assert generator.updates == [0]
    assert [(s.start, s.drafts, s.accepted, s.emitted) for s in recorder.steps] == [(1, (4,), 0, (3,))]
    with pytest.raises(TransformersLoopChanged, match="never asked"):
        generator.update_candidate_strategy(torch.tensor([[5, 6, 9, 3, 2]]), None, 0)


def test_a_generator_without_the_hooks_is_named_with_the_transformers_version():
    with pytest.raises(TransformersLoopChanged, match=r"transformers \d+\.\d+.*object has no get_candidates"):
        _instrument_generator(object(), PassRecorder(1), ForcedDraftsProcessor(1, {}))


def test_instrumentation_leaves_the_model_as_it_found_it(deepseek):
    model = deepseek.target
    assert "_get_candidate_generator" not in vars(model)
    with instrument_generation(model, 3, {}):
        assert "_get_candidate_generator" in vars(model)
    assert "_get_candidate_generator" not in vars(model)


@pytest.mark.parametrize("name", list(SUBJECTS))
@pytest.mark.parametrize("k", [1, 2])
def test_forced_drafts_are_proposed_where_forced_and_rejected_there(deepseek, subjects, prompts, name, k):
    """A wrong token forced at every position: every pass proposes it first and rejects it there, so each
    pass commits the target's own token alone, and the output is still the reference."""
    decoder = subjects[name]
    prompt_ids = tuple(prompts[0].encode(deepseek.tokenizer))
    reference = greedy_reference(deepseek, prompt_ids, 16)
    wrong = {p: (token + 1) % deepseek.vocab_size for p, token in enumerate(reference)}
    [result] = decoder.decode([DecodeRequest(prompt_ids, 16, num_draft_tokens=k, forced_drafts=wrong)])
    assert result.token_ids == reference
    first = drafts_from(decoder)
    assert [s.start for s in result.steps] == list(range(16))
    for step in result.steps[first:]:
        assert step.accepted == 0 and step.emitted == (reference[step.start],), step
        if not step.drafts:  # transformers' draft model drafts only while a bonus position is left
            assert name == "transformers-assisted" and step.start == 15, step
            continue
        assert step.drafts[0] == wrong[step.start] and len(step.drafts) <= k, step


@pytest.mark.parametrize("name", list(SUBJECTS))
def test_forcing_the_reference_tokens_accepts_every_draft(deepseek, subjects, prompts, name):
    decoder = subjects[name]
    prompt_ids = tuple(prompts[1].encode(deepseek.tokenizer))
    reference = greedy_reference(deepseek, prompt_ids, 12)
    [result] = decoder.decode(
        [DecodeRequest(prompt_ids, 12, num_draft_tokens=2, forced_drafts=dict(enumerate(reference)))]
    )
    assert result.token_ids == reference
    *drafting, last = [s for s in result.steps if s.drafts]
    assert drafting and all(s.accepted == len(s.drafts) for s in drafting), result.steps
    # the last pass may be cut by max_new_tokens (transformers then reports the drafts it committed there)
    assert last.emitted[: len(last.drafts)] == last.drafts[: len(last.emitted)], last
    assert last.accepted >= min(len(last.drafts), len(last.emitted) - 1), last


def test_a_forced_low_probability_draft_is_mostly_rejected_when_sampling(deepseek, subjects, prompts):
    """q one-hot on the forced token: accepted with probability p(token) = min(1, p/q). A forced token the
    target gives tiny probability is rejected nearly always (a q left unforced would accept it at p/q)."""
    decoder = subjects["transformers-mtp"]
    prompt_ids = tuple(prompts[0].encode(deepseek.tokenizer))
    sampling = SamplingConfig(temperature=1.0)
    reference = greedy_reference(deepseek, prompt_ids, 4)
    unlikely = (reference[1] + 500) % deepseek.vocab_size
    accepted = 0
    for seed in range(20):
        request = DecodeRequest(
            prompt_ids,
            4,
            sampling=sampling,
            seed=seed,
            num_draft_tokens=1,
            draft_mode="sample",
            forced_drafts={1: unlikely},
        )
        [result] = decoder.decode([request])
        [step] = [s for s in result.steps if s.start == 1]
        assert step.drafts == (unlikely,)
        accepted += step.accepted
    assert accepted <= 1


def test_mtp_subject_drafts_with_the_depths_a_request_asks_for(deepseek, subjects, prompts):
    decoder = subjects["transformers-mtp"]
    prompt_ids = tuple(prompts[2].encode(deepseek.tokenizer))
    for k in (1, 2):
        [result] = decoder.decode([DecodeRequest(prompt_ids, 10, num_draft_tokens=k)])
        assert {len(s.drafts) for s in result.steps[1:]} == {k} and result.steps[0].drafts == ()
    assert decoder.model.config.num_mtp_layers == 2  # restored after every request
    with pytest.raises(HarnessError, match=r"drafts with 1\.\.2 depths, not 3"), mtp_depths_in_use(decoder.model, 3):
        pass


def test_subjects_declare_the_values_they_serve(subjects):
    mtp, assisted = subjects["transformers-mtp"], subjects["transformers-assisted"]
    assert cannot_serve(mtp, "forced_drafts", "steps", num_draft_tokens=2) is None
    assert (
        cannot_serve(mtp, num_draft_tokens=3) == "decoder 'transformers-mtp' serves num_draft_tokens in {1, 2}, not 3"
    )
    assert cannot_serve(assisted, num_draft_tokens=8, draft_mode="sample") is None
    assert cannot_serve(assisted, draft_mode="greedy") == (
        "decoder 'transformers-assisted' serves draft_mode in {'sample'}, not 'greedy'"
    )


@pytest.mark.parametrize("subject", list(SUBJECTS))
def test_logprobs_are_the_raw_target_ones_at_float32s_precision(deepseek, subject):
    """Each output token's logprob and its top tokens' are log_softmax of the target's raw logits (teacher-forced in
    float64), to within float32's rounding: generate() casts the logits to float32 before processing them, which
    the subjects declare (logprobs_dtype), and which a float64 tolerance would call wrong."""
    from harness.checks.feature_cases import logprob_tolerance, raw_logits_of_each
    from harness.checks.feature_checks import logprob_mismatches

    decoder = SUBJECTS[subject](deepseek)
    request = DecodeRequest(
        tuple(deepseek.tokenizer.encode("The for statement is used to")),
        12,
        sampling=SamplingConfig(temperature=1.0),
        seed=11,
        num_draft_tokens=1,
        draft_mode="sample",
        logprobs=3,
        eos_token_ids=deepseek.eos_token_ids,
    )
    [result] = decoder.decode([request])
    [raw] = raw_logits_of_each(deepseek, request.prompt_ids, [result.token_ids])
    assert len(result.logprobs) == len(result.token_ids)
    assert decoder.logprobs_dtype == "float32"
    assert logprob_mismatches(result, raw, 3, logprob_tolerance(torch.float64, decoder)) == []
    assert logprob_mismatches(result, raw, 3, logprob_tolerance(torch.float64)), "float32's rounding went unseen"
    processed = [DecodeRequest(request.prompt_ids, 12, sampling=SamplingConfig(temperature=0.5), seed=11,
                               num_draft_tokens=1, draft_mode="sample", logprobs=3,
                               eos_token_ids=deepseek.eos_token_ids)]  # fmt: skip
    [hotter] = decoder.decode(processed)
    [raw_hotter] = raw_logits_of_each(deepseek, request.prompt_ids, [hotter.token_ids])
    assert logprob_mismatches(hotter, raw_hotter, 3, logprob_tolerance(torch.float64, decoder)) == [], (
        "at temperature 0.5 the logprobs must still be the raw (unprocessed) ones"
    )
