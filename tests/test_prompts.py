"""The prompt fixtures, and clear errors for malformed prompt files."""

from __future__ import annotations

import json

import pytest

from harness.contract.errors import FixtureError
from harness.contract.paths import DEFAULT_PROMPTS
from harness.models.prompts import KINDS, load_prompts


def test_bundled_prompts_cover_every_kind_with_unique_ids_and_seeds(fixture_bundle):
    prompts = load_prompts()
    assert len(prompts) >= 24
    assert {p.kind for p in prompts} == set(KINDS)
    assert len({p.id for p in prompts}) == len(prompts)
    assert len({p.seed for p in prompts}) == len(prompts)
    bundle = fixture_bundle("tiny-deepseek-v3")
    for prompt in prompts:
        ids = prompt.encode(bundle.tokenizer)
        assert ids and max(ids) < bundle.vocab_size, prompt.id
        assert len(ids) + prompt.max_new_tokens <= bundle.max_context, prompt.id


def test_long_prompts_reach_the_max_context_exactly(fixture_bundle):
    bundle = fixture_bundle("tiny-deepseek-v3")
    long = [p for p in load_prompts() if p.kind == "long"]
    assert long and all(len(p.encode(bundle.tokenizer)) + p.max_new_tokens == bundle.max_context for p in long)


def _write(tmp_path, prompts):
    path = tmp_path / "prompts.json"
    path.write_text(json.dumps({"version": 1, "prompts": prompts}))
    return path


GOOD = {"id": "p-1", "kind": "natural", "text": "hello", "seed": 1, "max_new_tokens": 4}


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({**GOOD, "kind": "poetry"}, r"entry 1 \('p-1'\): kind 'poetry' is not one of natural"),
        ({**GOOD, "seed": "7"}, r"entry 1 \('p-1'\): field 'seed' must be a int, got '7'"),
        ({**GOOD, "max_new_tokens": 0}, r"entry 1 \('p-1'\): max_new_tokens must be >= 1"),
        ({**GOOD, "token_ids": [1, 2]}, r"entry 1 \('p-1'\): needs exactly one of 'text' or 'token_ids'"),
        (
            {k: v for k, v in GOOD.items() if k != "text"} | {"token_ids": [1, -2]},
            r"entry 1 \('p-1'\): 'token_ids' must be .*non-negative integers",
        ),
        ({**GOOD, "colour": "red"}, r"entry 1 \('p-1'\): unknown fields \['colour'\]"),
        ({k: v for k, v in GOOD.items() if k != "id"}, r"entry 1 \('no id'\): field 'id' must be a str"),
        ("just a string", r"entry 1: expected an object, got str"),
    ],
)
def test_malformed_entry_is_named_with_file_and_index(tmp_path, entry, message):
    path = _write(tmp_path, [{**GOOD, "id": "p-0"}, entry])
    with pytest.raises(FixtureError, match=rf"{path}: {message}"):
        load_prompts(path)


def test_duplicate_ids_name_both_entries(tmp_path):
    path = _write(tmp_path, [GOOD, GOOD])
    with pytest.raises(FixtureError, match=r"entry 1 \('p-1'\) repeats the id of entry 0"):
        load_prompts(path)


def test_invalid_json_names_line_and_column(tmp_path):
    path = tmp_path / "prompts.json"
    path.write_text('{"prompts": [\n  {"id": "x",,}\n]}')
    with pytest.raises(FixtureError, match=rf"{path}: invalid JSON at line 2 column"):
        load_prompts(path)


def test_missing_prompt_file_is_named(tmp_path):
    with pytest.raises(FixtureError, match="prompt fixture file not found"):
        load_prompts(tmp_path / "nope.json")


def test_bundled_prompt_file_is_the_default():
    assert load_prompts() == load_prompts(DEFAULT_PROMPTS)
