"""What several llama.cpp findings' signatures share (each finding's own predicate is in its folder's finding.py): the
tokens a decode's passes emitted, and a case's prompt ids read from the fixture's prompts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from harness.subjects.engines.findings import FailedCase

if TYPE_CHECKING:
    pass


def _tokens(steps: Sequence[Mapping[str, Any]]) -> list[int]:
    return [token for step in steps for token in step["emitted"]]


def _prompt_ids(case: FailedCase, prompt_id: str) -> list[int]:
    from harness.models.prompts import load_prompts

    bundle = case.model()
    prompt = next(p for p in load_prompts() if p.id == prompt_id)
    return list(prompt.encode(bundle.tokenizer))
