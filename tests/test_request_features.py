"""The request features' contract and maths: validation at the door, each processor's formula on hand-computed
values, the history a verification position reads, stop sequences, which decoders serve what, and the wire."""

from __future__ import annotations

import math
from types import MappingProxyType

import pytest
import torch

from harness.contract.decoder import (
    DecodeRequest,
    DecodeResult,
    InvalidRequest,
    SamplingConfig,
    StructuredOutput,
    TokenLogprobs,
    sample_requests,
    with_samples,
)
from harness.contract.features import FEATURES, cannot_serve_features, refuse_unserved, requested_features
from harness.decoding.processors import (
    TokenHistory,
    apply_before_temperature,
    history_of_sequences,
    prefix_drafts,
)
from harness.decoding.sampling import process_logits
from harness.decoding.stops import Stops, stop_at_first_stop
from harness.subjects.engines.wire import parse_request, parse_result, request_message, result_message


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"repetition_penalty": 0.0}, "repetition_penalty"),
        ({"repetition_penalty": float("nan")}, "repetition_penalty"),
        ({"frequency_penalty": "1"}, "frequency_penalty"),
        ({"presence_penalty": float("inf")}, "presence_penalty"),
        ({"min_p": 1.5}, "min_p"),
        ({"min_tokens": -1}, "min_tokens"),
        ({"logit_bias": {-1: 1.0}}, "logit_bias token id"),
        ({"logit_bias": {3: float("nan")}}, r"logit_bias\[3\]"),
        ({"logit_bias": [(3, 1.0), (3, 2.0)]}, "twice"),
        ({"logit_bias": "3:1"}, "logit_bias"),
    ],
)
def test_a_malformed_sampling_feature_is_refused_naming_it(fields, named):
    with pytest.raises(InvalidRequest, match=named):
        SamplingConfig(**fields)


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"stop_sequences": [[]]}, "empty"),
        ({"stop_sequences": "ab"}, "stop_sequences"),
        ({"stop_sequences": [[1, -2]]}, r"stop_sequences\[0\]"),
        ({"logprobs": 21}, "logprobs"),
        ({"logprobs": 1.5}, "logprobs"),
    ],
)
def test_a_malformed_request_feature_is_refused_naming_it(fields, named):
    with pytest.raises(InvalidRequest, match=named):
        DecodeRequest((1, 2), 4, **fields)


def test_a_logit_bias_mapping_is_kept_as_sorted_pairs_and_hashes():
    config = SamplingConfig(logit_bias={7: -1, 2: 0.5})
    assert config.logit_bias == ((2, 0.5), (7, -1.0))
    assert hash(config) == hash(SamplingConfig(logit_bias=[(7, -1.0), (2, 0.5)]))


def history(counts, generated, prompt, eos, vocab=4):
    in_prompt = torch.zeros(1, vocab, dtype=torch.bool)
    in_prompt[0, prompt] = True
    eos_mask = torch.zeros(1, vocab, dtype=torch.bool)
    eos_mask[0, eos] = True
    return TokenHistory(torch.tensor([counts], dtype=torch.float64), torch.tensor([generated]), in_prompt, eos_mask)


def test_each_processor_applies_its_formula():
    logits = torch.tensor([[2.0, -1.0, 0.5, 3.0]], dtype=torch.float64)
    seen = history([0, 2, 1, 0], generated=3, prompt=[0], eos=[3])
    # repetition 2 on the prompt's token 0 and the output's 1, 2: 2 / 2, -1 * 2, 0.5 / 2; token 3 untouched
    out = apply_before_temperature(logits, SamplingConfig(repetition_penalty=2.0), seen)
    assert out.tolist() == [[1.0, -2.0, 0.25, 3.0]]
    # frequency 0.5 and presence 1 over the output only: the prompt's token 0 untouched
    out = apply_before_temperature(logits, SamplingConfig(frequency_penalty=0.5, presence_penalty=1.0), seen)
    assert out.tolist() == [[2.0, -1.0 - 1.0 - 1.0, 0.5 - 0.5 - 1.0, 3.0]]
    # a bias adds; min_tokens 4 masks the EOS (3 generated before), min_tokens 3 does not
    out = apply_before_temperature(logits, SamplingConfig(logit_bias={1: 4.0}, min_tokens=4), seen)
    assert out.tolist() == [[2.0, 3.0, 0.5, -math.inf]]
    assert apply_before_temperature(logits, SamplingConfig(min_tokens=3), seen).tolist() == logits.tolist()


def test_min_p_keeps_the_tokens_within_its_share_of_the_best():
    logits = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05], dtype=torch.float64))
    probs = process_logits(logits, SamplingConfig(temperature=1.0, min_p=0.2))  # keeps p >= 0.1
    assert torch.allclose(probs, torch.tensor([0.5, 0.3, 0.15, 0.0], dtype=torch.float64) / 0.95)


def test_a_verification_position_counts_the_drafts_before_it_and_no_later_one():
    included = prefix_drafts(torch.tensor([[5, 6, 7]]), torch.tensor([2]))  # the third draft is padding
    assert included[0].int().tolist() == [[0, 0, 0], [1, 0, 0], [1, 1, 0], [1, 1, 0]]


def test_the_committed_history_counts_the_output_and_marks_the_prompt():
    sequence = torch.tensor([[1, 2, 3, 3, 0, 0]])
    seen = history_of_sequences(
        sequence, torch.tensor([2]), torch.tensor([4]), torch.tensor([[0, -1]]), 5, torch.float64
    )
    assert seen.output_counts.tolist() == [[0, 0, 0, 2, 0]]
    assert seen.in_prompt.tolist() == [[False, True, True, False, False]]
    assert seen.eos.tolist() == [[True, False, False, False, False]]
    assert seen.generated.tolist() == [2]


def test_a_stop_sequence_ends_the_output_at_the_token_completing_it_once_past_min_tokens():
    def stops(*sequences: tuple[int, ...]) -> Stops:
        return Stops(sequences=sequences)

    assert stop_at_first_stop([9, 1], [2, 3, 4], stops((1, 2)), 0) == 1  # completed across the boundary
    assert stop_at_first_stop([], [5, 1, 2, 3], stops((1, 2), (3,)), 0) == 3  # the first completion wins
    assert stop_at_first_stop([], [5, 1, 2, 3], stops((1, 2)), 3) is None  # at 3 tokens: not past min_tokens
    assert stop_at_first_stop([5], [1, 2], stops((1, 2)), 2) == 2  # 3 tokens > min_tokens 2


# token id -> bytes: 0 the EOS (no text), 1 "ab", 2 "c", 3 "d e", 4 "xyz", 5 the first byte of "é", 6 its second
TABLE = (b"", b"ab", b"c", b"d e", b"xyz", b"\xc3", b"\xa9")


def string_stops(*strings: str) -> Stops:
    return Stops(strings=tuple(text.encode() for text in strings), token_bytes=TABLE)


def test_a_stop_string_ends_the_output_at_the_token_whose_bytes_complete_it():
    assert stop_at_first_stop([], [1, 2, 3, 4], string_stops("bc"), 0) == 2  # "ab"+"c": completed by token 2
    assert stop_at_first_stop([], [1, 2, 3, 4], string_stops("cd"), 0) == 3  # ends inside "d e"
    assert stop_at_first_stop([1], [2, 3], string_stops("abcd e"), 0) == 2  # spans three tokens and a pass boundary
    assert stop_at_first_stop([], [4, 1, 2], string_stops("c", "za"), 0) == 2  # the first completion wins
    assert stop_at_first_stop([], [1, 2], string_stops("zz"), 0) is None
    assert stop_at_first_stop([], [1, 0, 2], string_stops("abc"), 0) == 3  # the EOS's empty text in between
    assert stop_at_first_stop([], [4, 5, 6], string_stops("é"), 0) == 3  # a character split over two tokens
    assert stop_at_first_stop([], [1, 2, 4], string_stops("ab"), 1) is None  # completed inside min_tokens
    assert stop_at_first_stop([], [1, 2, 4], string_stops("bc"), 1) == 2  # completed by token 2 > min_tokens 1


def test_a_stop_string_is_read_in_the_output_never_the_prompt():
    # the rule sees the output only: "ab" of a prompt ending in token 1 cannot complete "bc" with an output "c"
    assert stop_at_first_stop([], [2], string_stops("bc"), 0) is None


def test_a_stop_string_needs_the_token_bytes():
    with pytest.raises(ValueError, match="token bytes"):
        Stops.of(DecodeRequest((1,), 4, stop_strings=("x",)))


def test_requested_features_names_each_field_used_and_no_default():
    assert requested_features(DecodeRequest((1, 2), 3)) == frozenset()
    request = DecodeRequest(
        (1, 2),
        3,
        sampling=SamplingConfig(repetition_penalty=1.1, presence_penalty=0.1, logit_bias={1: 1.0}, min_tokens=1),
        stop_sequences=[[1]],
        stop_strings=["\n\n"],
        structured_output=StructuredOutput("regex", "[a-z]+"),
        eos_token_ids=(0,),
        logprobs=0,
    )
    expected = {
        *("repetition_penalty", "presence_penalty", "logit_bias", "min_tokens"),
        *("stop_sequences", "stop_strings", "structured_regex", "logprobs"),
    }
    assert requested_features(request) == expected
    assert set(FEATURES) >= expected


class Declares:
    name = "declares"
    features = frozenset({"logprobs"})
    why_unsupported = MappingProxyType({"min_p": "the engine refuses it"})

    def decode(self, requests):
        return []


def test_a_decoder_serves_only_the_features_it_declares_and_refuses_the_others_at_the_door():
    decoder = Declares()
    assert cannot_serve_features(decoder, ["logprobs"]) is None
    assert "the engine refuses it" in cannot_serve_features(decoder, ["min_p"])
    assert "does not declare it" in cannot_serve_features(decoder, ["logit_bias"])
    refuse_unserved(decoder, [DecodeRequest((1, 2), 3, logprobs=2)])
    with pytest.raises(InvalidRequest, match=r"request 1: .*min_p"):
        refuse_unserved(
            decoder, [DecodeRequest((1, 2), 3), DecodeRequest((1, 2), 3, sampling=SamplingConfig(1.0, min_p=0.1))]
        )


def test_the_wire_carries_every_request_feature_and_the_logprobs_back():
    request = DecodeRequest(
        (1, 2),
        5,
        sampling=SamplingConfig(
            0.7,
            5,
            0.9,
            min_p=0.1,
            repetition_penalty=1.2,
            frequency_penalty=-0.5,
            presence_penalty=0.25,
            logit_bias={3: -2.0},
            min_tokens=2,
        ),
        stop_sequences=[[4, 5], [6]],
        stop_strings=["</s>", "\u00e9\"'"],
        structured_output=StructuredOutput("json_schema", '{"type": "object"}'),
        eos_token_ids=(0,),
        logprobs=3,
    )
    assert parse_request(request_message(request), 1, "greedy") == request
    result = DecodeResult(
        (4, 5),
        (),
        "stop",
        logprobs=(TokenLogprobs(4, -0.5, ((4, -0.5), (1, -1.0))), TokenLogprobs(5, -0.25, ((5, -0.25),))),
    )
    assert parse_result(result_message(result), "test").logprobs == result.logprobs


def test_a_token_an_engine_gave_no_logprobs_for_travels_as_null_and_is_judged_missing():
    result = DecodeResult((4, 5), (), "length", logprobs=(None, TokenLogprobs(5, -0.25, ())))
    assert parse_result(result_message(result), "test").logprobs == result.logprobs
    from harness.subjects.engines.llamacpp.server import token_logprobs

    verbose = {"completion_probabilities": [{"id": 7, "logprob": -0.5, "top_logprobs": [{"id": 7, "logprob": -0.5}]}]}
    assert token_logprobs(verbose, [6, 7, 8], 1) == [None, [7, -0.5, [[7, -0.5]]], None]


def test_n_samples_stop_at_the_door_when_greedy_or_too_many():
    with pytest.raises(InvalidRequest, match="needs sampling"):
        DecodeRequest((1, 2), 3, n=2)
    with pytest.raises(InvalidRequest, match="n must be"):
        DecodeRequest((1, 2), 3, sampling=SamplingConfig(1.0), n=17)


def test_a_request_for_n_samples_stands_for_n_requests_seeded_seed_plus_i():
    request = DecodeRequest((1, 2), 3, sampling=SamplingConfig(1.0), seed=7, n=3)
    assert [(r.n, r.seed) for r in sample_requests(request)] == [(1, 7), (1, 8), (1, 9)]
    results = [DecodeResult((i,), (), "length") for i in range(3)]
    gathered = with_samples(results)
    assert gathered.token_ids == (0,) and gathered.samples == tuple(results)
    assert with_samples(results[:1]) == results[0] and not results[0].samples
