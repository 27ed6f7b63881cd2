"""What a decoder declares it serves: capabilities it lacks, and the values of request fields it serves."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from harness.checks.sampling_cases import case_grid
from harness.contract.decoder import cannot_serve, served_values
from harness.contract.errors import HarnessError


@dataclass
class Declared:
    name: str = "engine"
    unsupported: frozenset[str] = frozenset()
    serves: dict[str, set[object]] = field(default_factory=dict)

    def decode(self, requests):
        raise AssertionError("never decoded here")


def test_a_decoder_that_declares_nothing_serves_everything():
    assert cannot_serve(Declared(), "forced_drafts", "steps", num_draft_tokens=8, draft_mode="sample") is None
    assert served_values(Declared()) == {}


def test_a_missing_capability_is_named():
    decoder = Declared(unsupported=frozenset({"steps", "forced_drafts"}))
    assert cannot_serve(decoder, "steps") == "decoder 'engine' declares it cannot honour steps"
    assert cannot_serve(decoder, "forced_drafts", "steps") == (
        "decoder 'engine' declares it cannot honour forced_drafts, steps"
    )
    assert cannot_serve(decoder, num_draft_tokens=3) is None


def test_a_value_outside_the_served_ones_is_named_with_the_values_served():
    decoder = Declared(serves={"num_draft_tokens": {2, 3}})
    assert cannot_serve(decoder, num_draft_tokens=2) is None
    assert cannot_serve(decoder, num_draft_tokens=4) == "decoder 'engine' serves num_draft_tokens in {2, 3}, not 4"
    assert cannot_serve(decoder, draft_mode="sample") is None


def test_a_field_named_unsupported_serves_its_default_only():
    decoder = Declared(unsupported=frozenset({"num_draft_tokens", "draft_mode"}))
    assert served_values(decoder) == {"num_draft_tokens": {1}, "draft_mode": {"greedy"}}
    assert cannot_serve(decoder, num_draft_tokens=1, draft_mode="greedy") is None
    assert cannot_serve(decoder, num_draft_tokens=2) == "decoder 'engine' serves num_draft_tokens in {1}, not 2"


def test_declarations_that_name_nothing_known_are_errors():
    with pytest.raises(HarnessError, match="unknown capabilities \\['beam_search'\\]"):
        cannot_serve(Declared(), "beam_search")
    with pytest.raises(HarnessError, match="served values of 'temperature', not a restrictable request field"):
        cannot_serve(Declared(serves={"temperature": {1.0}}), num_draft_tokens=1)


def test_sampling_cases_ask_for_their_k_draft_mode_and_forcing():
    cases = {case.id: case for case in case_grid()}
    decoder = Declared(serves={"num_draft_tokens": {2}, "draft_mode": {"sample"}})
    served = {
        case_id for case_id, case in cases.items() if cannot_serve(decoder, *case.needs()[0], **case.needs()[1]) is None
    }
    assert served and all(cases[c].k == 2 and cases[c].draft_mode == "sample" for c in served)
    assert len(served) == sum(case.k == 2 and case.draft_mode == "sample" for case in cases.values())
    assert all(case.needs()[1]["num_draft_tokens"] == case.k for case in cases.values())


def test_a_declared_reason_is_given_with_what_the_decoder_cannot_serve():
    decoder = Declared(unsupported=frozenset({"forced_drafts"}), serves={"draft_mode": {"greedy"}})
    decoder.why_unsupported = {"forced_drafts": "no draft hook", "draft_mode": "argmax drafts only"}
    assert (
        cannot_serve(decoder, "forced_drafts")
        == "decoder 'engine' declares it cannot honour forced_drafts: no draft hook"
    )
    assert cannot_serve(decoder, draft_mode="sample") == (
        "decoder 'engine' serves draft_mode in {'greedy'}, not 'sample': argmax drafts only"
    )
