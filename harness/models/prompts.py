"""Prompt fixtures: a JSON file of prompts with ids, kinds and fixed seeds.

    {"version": 1, "prompts": [
        {"id": "natural-01", "kind": "natural", "text": "...", "seed": 101, "max_new_tokens": 24},
        {"id": "soup-01", "kind": "soup", "token_ids": [5, 17, ...], "seed": 201, "max_new_tokens": 24}]}

Exactly one of `text` (encoded with the model's tokenizer, no special tokens added) or `token_ids`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import PreTrainedTokenizerBase

from harness.contract.errors import FixtureError
from harness.contract.paths import DEFAULT_PROMPTS

KINDS = ("natural", "code", "repetitive", "soup", "eos", "long")


@dataclass(frozen=True)
class Prompt:
    """One prompt fixture."""

    id: str
    kind: str
    seed: int
    max_new_tokens: int
    text: str | None = None
    token_ids: tuple[int, ...] | None = None

    def encode(self, tokenizer: PreTrainedTokenizerBase) -> list[int]:
        """The prompt's token ids under `tokenizer` (stored ids are returned as they are)."""
        if self.token_ids is not None:
            return list(self.token_ids)
        return list(tokenizer.encode(self.text, add_special_tokens=False))


def load_prompts(path: str | Path = DEFAULT_PROMPTS) -> list[Prompt]:
    """Read and validate a prompt fixture file; errors name the file and the offending entry."""
    file = Path(path)
    try:
        document = json.loads(file.read_text())
    except FileNotFoundError:
        raise FixtureError(f"{file}: prompt fixture file not found") from None
    except json.JSONDecodeError as error:
        raise FixtureError(f"{file}: invalid JSON at line {error.lineno} column {error.colno}: {error.msg}") from None
    if not isinstance(document, dict) or not isinstance(document.get("prompts"), list):
        raise FixtureError(f'{file}: expected an object with a "prompts" list')
    prompts = [_parse_entry(file, index, entry) for index, entry in enumerate(document["prompts"])]
    seen: dict[str, int] = {}
    for index, prompt in enumerate(prompts):
        if prompt.id in seen:
            raise FixtureError(f"{file}: entry {index} ({prompt.id!r}) repeats the id of entry {seen[prompt.id]}")
        seen[prompt.id] = index
    if not prompts:
        raise FixtureError(f"{file}: no prompts")
    return prompts


def _parse_entry(file: Path, index: int, entry: Any) -> Prompt:
    where = f"{file}: entry {index}"
    if not isinstance(entry, dict):
        raise FixtureError(f"{where}: expected an object, got {type(entry).__name__}")
    where = f"{file}: entry {index} ({entry.get('id', 'no id')!r})"
    unknown = set(entry) - {"id", "kind", "text", "token_ids", "seed", "max_new_tokens", "note"}
    if unknown:
        raise FixtureError(f"{where}: unknown fields {sorted(unknown)}")
    for field, kind in (("id", str), ("kind", str), ("seed", int), ("max_new_tokens", int)):
        value = entry.get(field)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise FixtureError(f"{where}: field {field!r} must be a {kind.__name__}, got {value!r}")
    if entry["kind"] not in KINDS:
        raise FixtureError(f"{where}: kind {entry['kind']!r} is not one of {', '.join(KINDS)}")
    if entry["max_new_tokens"] < 1:
        raise FixtureError(f"{where}: max_new_tokens must be >= 1, got {entry['max_new_tokens']}")
    if entry["seed"] < 0:
        raise FixtureError(f"{where}: seed must be >= 0, got {entry['seed']}")
    has_text, has_ids = "text" in entry, "token_ids" in entry
    if has_text == has_ids:
        raise FixtureError(f"{where}: needs exactly one of 'text' or 'token_ids'")
    if has_text and (not isinstance(entry["text"], str) or not entry["text"]):
        raise FixtureError(f"{where}: 'text' must be a non-empty string")
    token_ids = None
    if has_ids:
        ids = entry["token_ids"]
        if not isinstance(ids, list) or not ids or not all(isinstance(t, int) and t >= 0 for t in ids):
            raise FixtureError(f"{where}: 'token_ids' must be a non-empty list of non-negative integers")
        token_ids = tuple(ids)
    return Prompt(
        id=entry["id"],
        kind=entry["kind"],
        seed=entry["seed"],
        max_new_tokens=entry["max_new_tokens"],
        text=entry.get("text"),
        token_ids=token_ids,
    )
