"""The reference and the MTP decoder: greedy identity with transformers, batching, forced drafts, EOS,
max_new_tokens, seeds, and clear errors for bad requests."""

from __future__ import annotations

import pytest
import torch

from harness.contract.decoder import DecodeRequest, InvalidRequest, SamplingConfig
from harness.decoding.mtp_decoder import MTPDecoder
from harness.decoding.target_decoder import TargetOnlyDecoder
from harness.subjects.decoder_registry import DecoderFactoryError, UnknownDecoder, make_decoder

EOS = (0,)


@pytest.fixture(scope="module")
def deepseek(fixture_bundle):
    return fixture_bundle("tiny-deepseek-v3")


def _requests(bundle, prompts, **fields):
    return [
        DecodeRequest(tuple(p.encode(bundle.tokenizer)), p.max_new_tokens, eos_token_ids=EOS, **fields) for p in prompts
    ]


@pytest.fixture(scope="module")
def reference(deepseek, prompts):
    return TargetOnlyDecoder(deepseek).decode(_requests(deepseek, prompts))


def test_target_only_greedy_equals_transformers_generate_on_every_prompt(deepseek, prompts, reference):
    for prompt, result in zip(prompts, reference, strict=True):
        ids = torch.tensor([prompt.encode(deepseek.tokenizer)])
        expected = deepseek.target.generate(ids, max_new_tokens=prompt.max_new_tokens, do_sample=False, pad_token_id=0)
        assert list(result.token_ids) == expected[0, ids.shape[1] :].tolist(), prompt.id
        assert result.steps == ()


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_mtp_greedy_equals_target_only_batched_and_alone(deepseek, prompts, reference, k):
    requests = _requests(deepseek, prompts, num_draft_tokens=k)
    decoder = MTPDecoder(deepseek)
    batched = decoder.decode(requests)
    assert [r.token_ids for r in batched] == [r.token_ids for r in reference]
    for request, together in zip(requests, batched, strict=True):
        assert decoder.decode([request])[0] == together  # tokens, steps and finish reason


@pytest.mark.parametrize("name", ["tiny-mtp-prefix", "tiny-mimo"])
def test_mtp_greedy_equals_target_only_on_the_other_layouts(fixture_bundle, prompts, name):
    bundle = fixture_bundle(name)
    requests = _requests(bundle, prompts, num_draft_tokens=3)
    expected = TargetOnlyDecoder(bundle).decode(requests)
    assert [r.token_ids for r in MTPDecoder(bundle).decode(requests)] == [r.token_ids for r in expected]


def test_steps_account_for_every_token(deepseek, prompts):
    for result in MTPDecoder(deepseek).decode(_requests(deepseek, prompts, num_draft_tokens=3)):
        assert sum((s.emitted for s in result.steps), ()) == result.token_ids
        for before, step in zip(result.steps, result.steps[1:], strict=False):
            assert step.start == before.start + len(before.emitted)
        for step in result.steps:
            assert len(step.drafts) == 3 and 0 <= step.accepted <= 3
            assert step.emitted[: step.accepted] == step.drafts[: len(step.emitted[: step.accepted])]


def test_forced_drafts_are_proposed_and_rejected_without_changing_greedy_output(deepseek, prompts, reference):
    prompt, expected = prompts[0], reference[0]
    ids = prompt.encode(deepseek.tokenizer)
    # force, at every output position, a token the target does not choose there
    forced = {i: (t + 1) % deepseek.vocab_size for i, t in enumerate(expected.token_ids)}
    request = DecodeRequest(
        tuple(ids), prompt.max_new_tokens, num_draft_tokens=2, eos_token_ids=EOS, forced_drafts=forced
    )
    result = MTPDecoder(deepseek).decode([request])[0]
    assert result.token_ids == expected.token_ids
    for step in result.steps:
        assert step.drafts[0] == forced[step.start]  # the pass's first draft is the forced token
        assert step.accepted == 0  # and it was rejected


def test_eos_inside_an_accepted_run_ends_the_output_there(deepseek):
    prompt = (283, 334, 286, 257)
    free = TargetOnlyDecoder(deepseek).decode([DecodeRequest(prompt, 12)])[0].token_ids
    eos = (free[3],)  # declare the 4th greedy token an EOS
    expected = TargetOnlyDecoder(deepseek).decode([DecodeRequest(prompt, 12, eos_token_ids=eos)])[0]
    assert expected.token_ids == free[: free.index(eos[0]) + 1] and expected.finish_reason == "eos"
    forced = dict(enumerate(free))  # drafts = the target's own tokens: all accepted, EOS mid-run
    for k in (2, 3, 4):
        request = DecodeRequest(prompt, 12, num_draft_tokens=k, eos_token_ids=eos, forced_drafts=forced)
        result = MTPDecoder(deepseek).decode([request])[0]
        assert result.token_ids == expected.token_ids and result.finish_reason == "eos", k


@pytest.mark.parametrize("max_new_tokens", range(1, 7))
def test_max_new_tokens_is_never_exceeded(deepseek, max_new_tokens):
    prompt = (45, 262, 284, 365, 301)
    expected = TargetOnlyDecoder(deepseek).decode([DecodeRequest(prompt, max_new_tokens)])[0]
    forced = dict(enumerate(TargetOnlyDecoder(deepseek).decode([DecodeRequest(prompt, 12)])[0].token_ids))
    result = MTPDecoder(deepseek).decode(
        [DecodeRequest(prompt, max_new_tokens, num_draft_tokens=4, forced_drafts=forced)]
    )[0]
    assert result.token_ids == expected.token_ids and len(result.token_ids) == max_new_tokens
    assert result.finish_reason == "length"


def test_a_one_token_prompt_decodes(deepseek):
    expected = TargetOnlyDecoder(deepseek).decode([DecodeRequest((262,), 6)])[0]
    assert (
        MTPDecoder(deepseek).decode([DecodeRequest((262,), 6, num_draft_tokens=2)])[0].token_ids == expected.token_ids
    )


@pytest.mark.parametrize("draft_mode", ["greedy", "sample"])
def test_sampling_is_seeded_per_request_and_independent_of_the_batch(deepseek, prompts, draft_mode):
    sampling = SamplingConfig(temperature=1.0, top_k=50, top_p=0.9)
    requests = _requests(deepseek, prompts[:6], sampling=sampling, num_draft_tokens=2, draft_mode=draft_mode)
    requests = [
        DecodeRequest(r.prompt_ids, 16, sampling=sampling, seed=1000 + i, num_draft_tokens=2, draft_mode=draft_mode)
        for i, r in enumerate(requests)
    ]
    decoder = MTPDecoder(deepseek)
    batched = decoder.decode(requests)
    assert [decoder.decode([r])[0] for r in requests] == batched
    assert decoder.decode(requests) == batched
    reseeded = decoder.decode(
        [
            DecodeRequest(
                requests[0].prompt_ids, 16, sampling=sampling, seed=7, num_draft_tokens=2, draft_mode=draft_mode
            )
        ]
    )
    assert reseeded[0].token_ids != batched[0].token_ids


def test_target_only_sampling_is_seeded_per_request(deepseek):
    sampling = SamplingConfig(temperature=1.3)
    requests = [DecodeRequest((45, 262, 284), 12, sampling=sampling, seed=s) for s in (1, 2, 3)]
    together = TargetOnlyDecoder(deepseek).decode(requests)
    assert [TargetOnlyDecoder(deepseek).decode([r])[0] for r in requests] == together
    assert len({r.token_ids for r in together}) == 3


def test_the_global_rng_is_left_alone(deepseek):
    state = torch.random.get_rng_state()
    request = DecodeRequest((45, 262), 8, sampling=SamplingConfig(temperature=1.0), seed=3, num_draft_tokens=2)
    MTPDecoder(deepseek).decode([request])
    TargetOnlyDecoder(deepseek).decode([request])
    assert torch.equal(torch.random.get_rng_state(), state)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: DecodeRequest((), 4), "prompt_ids is empty"),
        (lambda: DecodeRequest((1, 2), 0), "max_new_tokens must be an integer >= 1, got 0"),
        (
            lambda: DecodeRequest((1, 2), 4, num_draft_tokens=0),
            r"num_draft_tokens \(k\) must be an integer in 1\.\.8, got 0",
        ),
        (
            lambda: DecodeRequest((1, 2), 4, num_draft_tokens=9),
            r"num_draft_tokens \(k\) must be an integer in 1\.\.8, got 9",
        ),
        (
            lambda: DecodeRequest((1, 2), 4, num_draft_tokens=2.5),
            r"num_draft_tokens \(k\) must be an integer, got 2\.5",
        ),
        (
            lambda: DecodeRequest((1, 2), 4, num_draft_tokens=True),
            r"num_draft_tokens \(k\) must be an integer, got the bool True",
        ),
        (lambda: DecodeRequest((1, 2), True), "max_new_tokens must be an integer, got the bool True"),
        (lambda: DecodeRequest((1, 2), 4.0), r"max_new_tokens must be an integer, got 4\.0"),
        (lambda: DecodeRequest((1, 2), 4, seed=1.5), r"seed must be an integer, got 1\.5"),
        (lambda: DecodeRequest((1, 2), 4, seed=-1), r"seed must be an integer in 0\.\.9223372036854775807, got -1"),
        (lambda: DecodeRequest((1, 2), 4, seed=2**63), r"seed must be an integer in 0\.\.9223372036854775807"),
        (lambda: DecodeRequest((1, -2), 4), r"prompt_ids\[1\] must be an integer >= 0, got -2"),
        (lambda: DecodeRequest((1, 2.5), 4), r"prompt_ids\[1\] must be an integer, got 2\.5"),
        (lambda: DecodeRequest((1, False), 4), r"prompt_ids\[1\] must be an integer, got the bool False"),
        (lambda: DecodeRequest("hello", 4), "prompt_ids must be a sequence of token ids, got 'hello'"),
        (lambda: DecodeRequest((1, 2), 4, eos_token_ids=(-1,)), r"eos_token_ids\[0\] must be an integer >= 0, got -1"),
        (lambda: DecodeRequest((1, 2), 4, eos_token_ids=7), "eos_token_ids must be a sequence of token ids, got 7"),
        (lambda: DecodeRequest((1, 2), 4, forced_drafts={0: -3}), r"forced_drafts\[0\] must be an integer >= 0"),
        (
            lambda: DecodeRequest((1, 2), 4, forced_drafts={1.5: 3}),
            r"forced_drafts position must be an integer, got 1\.5",
        ),
        (lambda: DecodeRequest((1, 2), 4, forced_drafts=[3]), r"forced_drafts must map output positions to token ids"),
        (lambda: DecodeRequest((1, 2), 4, sampling=0.7), "sampling must be a SamplingConfig, got 0.7"),
        (lambda: SamplingConfig(temperature="hot"), "temperature must be a finite real number, got 'hot'"),
        (lambda: SamplingConfig(temperature=float("nan")), "temperature must be a finite real number, got nan"),
        (lambda: SamplingConfig(top_k=2.0), r"top_k must be an integer, got 2\.0"),
        (lambda: SamplingConfig(top_p=True), "top_p must be a finite real number, got True"),
        (lambda: SamplingConfig(temperature=1.0, top_p=0.0), r"top_p must be in \(0, 1\], got 0\.0"),
        (lambda: SamplingConfig(temperature=1.0, top_p=1.5), r"top_p must be in \(0, 1\], got 1\.5"),
        (lambda: SamplingConfig(temperature=-0.5), "temperature must be a finite number >= 0, got -0.5"),
        (lambda: SamplingConfig(top_k=-1), "top_k must be an integer >= 0"),
        (lambda: DecodeRequest((1, 2), 4, draft_mode="beam"), "draft_mode must be 'greedy' or 'sample'"),
    ],
)
def test_bad_requests_are_refused_with_a_clear_message(make, message):
    with pytest.raises(InvalidRequest, match=message):
        make()


@pytest.mark.parametrize("decoder_name", ["target", "mtp", "transformers-mtp", "transformers-assisted"])
@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (DecodeRequest((1, 5000), 4), r"request 0: prompt token id 5000 is outside the vocab \(size 1024\)"),
        (DecodeRequest((1, 2), 4, forced_drafts={0: 1024}), r"forced_drafts token ids outside the vocab"),
        (DecodeRequest((1, 2), 4, eos_token_ids=(2, 1024)), r"eos_token_ids outside the vocab \(size 1024\): \[1024\]"),
        (
            DecodeRequest(tuple(range(1, 251)), 7),
            r"prompt \(250 tokens\) \+ max_new_tokens \(7\) = 257 exceeds the model's context of 256",
        ),
    ],
)
def test_requests_outside_the_model_are_refused_by_every_decoder(deepseek, decoder_name, request_, message):
    with pytest.raises(InvalidRequest, match=message):
        make_decoder(decoder_name, deepseek).decode([request_])


def test_a_user_decoder_runs_through_module_factory(deepseek, prompts, reference):
    decoder = make_decoder("example_decoder:make_decoder", deepseek)
    results = decoder.decode(_requests(deepseek, prompts, num_draft_tokens=2))
    assert decoder.calls == 1
    assert [r.token_ids for r in results] == [r.token_ids for r in reference]


def test_unknown_decoder_names_list_the_known_ones(deepseek):
    with pytest.raises(UnknownDecoder, match=r"unknown decoder 'mpt'\. Did you mean mtp") as raised:
        make_decoder("mpt", deepseek)
    for name in (
        "mtp",
        "target",
        "transformers-assisted",
        "transformers-mtp",
        "vllm-mtp",
        "llamacpp-mtp",
        "mutant:<name>",
    ):
        assert name in str(raised.value).partition("Known: ")[2]
    with pytest.raises(UnknownDecoder, match=r"Did you mean mutant:no-target-rollback") as raised:
        make_decoder("mutant:no-target-rolback", deepseek)
    assert "mutant:stale-mtp-hidden" in str(raised.value).partition("Known: ")[2], "a mutant's near miss lists them"
    with pytest.raises(UnknownDecoder, match=r"cannot import module 'no_such_engine'"):
        make_decoder("no_such_engine:factory", deepseek)
    with pytest.raises(UnknownDecoder, match=r"module 'example_decoder' has no 'missing'"):
        make_decoder("example_decoder:missing", deepseek)


def test_a_factory_that_raises_is_named_in_the_error(deepseek):
    with pytest.raises(
        DecoderFactoryError, match=r"'example_decoder:broken_factory' raised RuntimeError: engine failed to start"
    ):
        make_decoder("example_decoder:broken_factory", deepseek)
    with pytest.raises(DecoderFactoryError, match=r"returned object, which has no `name` and `decode\(requests\)`"):
        make_decoder("example_decoder:not_a_decoder", deepseek)


@pytest.mark.parametrize("name", ["transformers-mtp", "transformers-assisted"])
def test_external_subjects_reproduce_greedy_and_report_their_passes(deepseek, prompts, reference, name):
    decoder = make_decoder(name, deepseek)
    results = decoder.decode(_requests(deepseek, prompts[:8], num_draft_tokens=2))
    assert [r.token_ids for r in results] == [r.token_ids for r in reference[:8]]
    for result in results:
        assert sum((s.emitted for s in result.steps), ()) == result.token_ids


def test_external_subjects_sample_without_transformers_default_top_k(deepseek):
    """transformers fills unset generation fields from global defaults (top_k = 50); a request without top-k
    must reach generate() with top-k off, or the subject samples another distribution."""
    from harness.subjects.engines.transformers.generation import _generation_config

    config = _generation_config(DecodeRequest((1, 2), 4, sampling=SamplingConfig(temperature=1.0)), pad_token_id=0)
    assert config.top_k == 0 and config.top_p == 1.0 and config.temperature == 1.0 and config.do_sample
    processors = deepseek.target._get_logits_processor(
        generation_config=config,
        input_ids_seq_length=2,
        encoder_input_ids=torch.tensor([[1, 2]]),
        prefix_allowed_tokens_fn=None,
        logits_processor=None,
    )
    assert not any("TopK" in type(p).__name__ for p in processors)
