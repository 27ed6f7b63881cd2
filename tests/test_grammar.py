"""Structured outputs: the contract's checks at the door, and the token masks of harness/decoding/grammar.py on the
fixtures' tokenizer (llguidance compiles the constraint)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
import torch

from harness.contract.decoder import DecodeRequest, InvalidRequest, StructuredOutput
from harness.decoding.grammar import Grammar, grammar_problem, mask_logits
from harness.models.grammar_tokenizer import grammar_tokenizer
from harness.models.loading import load_config, load_tokenizer

MODEL = Path(__file__).parents[1] / "fixtures" / "models" / "tiny-deepseek-v3"
EOS = 0
VOCAB = 1024


@cache
def tokenizer():
    return load_tokenizer(MODEL, load_config(MODEL))


def ids(text: str) -> list[int]:
    return list(tokenizer().encode(text, add_special_tokens=False))


def grammar(kind: str, spec: str) -> Grammar:
    return Grammar(StructuredOutput(kind, spec), grammar_tokenizer(tokenizer(), VOCAB), VOCAB, [EOS])


def allowed_texts(mask: torch.Tensor) -> set[str]:
    return {tokenizer().decode([token]) for token in mask.nonzero().squeeze(-1).tolist() if token != EOS}


@pytest.mark.parametrize(
    ("kind", "spec", "message"),
    [
        ("lark", "start: x", "kind must be one of"),
        ("regex", " ", "non-empty string"),
        ("json_schema", "{not json", "is not JSON"),
        ("json_schema", "[1]", "JSON object"),
    ],
)
def test_a_malformed_constraint_stops_at_the_door(kind, spec, message):
    with pytest.raises(InvalidRequest, match=message):
        StructuredOutput(kind, spec)


def test_a_constrained_request_needs_an_eos_and_a_constraint_that_compiles():
    with pytest.raises(InvalidRequest, match="needs eos_token_ids"):
        DecodeRequest((1,), 4, structured_output=StructuredOutput("regex", "a"))
    with pytest.raises(InvalidRequest, match="does not compile"):
        grammar("regex", "(unclosed")
    with pytest.raises(InvalidRequest, match="does not compile"):
        grammar("gbnf", "root ::= missing")


def test_the_mask_allows_what_keeps_the_text_a_prefix_of_a_match_and_the_eos_only_at_a_whole_match():
    words = grammar("regex", r"ab( ab)*\.")
    assert allowed_texts(words.allowed()) == {"a", "ab"}  # any spelling of the forced text, not only the canonical
    assert not bool(words.allowed()[EOS])
    words.commit(ids("ab."))
    assert bool(words.allowed()[EOS]) and allowed_texts(words.allowed()) == set()  # a whole match: only the EOS


def test_the_masks_along_a_pass_read_the_drafts_before_them_and_leave_the_matcher_as_it_was():
    digits = grammar("regex", r"[0-9]{3}")
    before = digits.allowed()
    drafts = ids("12") + ids("3")
    along = digits.allowed_along(drafts)
    assert torch.equal(along[0], before)
    assert bool(along[-1][EOS]) and allowed_texts(along[-1]) == set()  # three digits: only the EOS
    assert torch.equal(digits.allowed(), before)  # rolled back to the committed output


def test_a_refused_draft_leaves_the_positions_after_it_unmasked_and_the_matcher_unharmed():
    digits = grammar("regex", r"[0-9]+")
    along = digits.allowed_along([*ids("x"), *ids("1")])
    assert not bool(along[0][ids("x")[0]]) and bool(along[1].all()) and bool(along[2].all())
    assert not digits.matcher.is_error() and not bool(digits.allowed()[ids("x")[0]])


def test_masked_logits_are_minus_infinity_where_refused():
    logits = torch.zeros(2, 3, 4, dtype=torch.float64)
    allowed = torch.tensor([[True, False, True, True], [False, False, False, True]])
    masked = mask_logits(logits, allowed)
    assert torch.isinf(masked[0, :, 1]).all() and torch.isinf(masked[1, :, :3]).all()
    assert (masked[0, :, [0, 2, 3]] == 0).all() and (masked[1, :, 3] == 0).all()


def test_the_verdict_names_the_refused_token_or_the_early_eos():
    assert grammar_problem(grammar("regex", r"[a-z]+\."), ids("abc."), False) is None
    assert grammar_problem(grammar("regex", r"[a-z]+\."), [*ids("abc."), EOS], True) is None
    assert "position 0" in grammar_problem(grammar("regex", r"[a-z]+\."), ids("1"), False)
    assert "before its text is a whole match" in grammar_problem(grammar("regex", r"[a-z]+\."), [*ids("ab"), EOS], True)


def test_gbnf_and_json_schema_compile_through_llguidance():
    pairs = grammar("gbnf", 'root ::= pair ("; " pair)* "."\npair ::= [a-z]{1,8} "=" [0-9]{1,3}')
    assert grammar_problem(pairs, [*ids("ab=12; c=3."), EOS], True) is None
    record = grammar("json_schema", '{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}')
    assert grammar_problem(record, [*ids('{"n":12}'), EOS], True) is None
    spaced = grammar("json_schema", '{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}')
    assert "refused" in grammar_problem(spaced, [*ids('{"n": 12}'), EOS], True)  # compact: no whitespace
