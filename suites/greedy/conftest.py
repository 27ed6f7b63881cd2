"""Greedy suites: the reference of each prompt fixture and the batches of them (the references themselves and the
token comparison are in suites/conftest.py)."""

from __future__ import annotations

import pytest

from harness.checks.batches import batch_members
from harness.checks.references import GreedyReference
from harness.models.loading import ModelBundle
from harness.models.prompts import Prompt


@pytest.fixture
def reference(greedy_references: dict[str, GreedyReference], prompt: Prompt) -> GreedyReference:
    return greedy_references[prompt.id]


@pytest.fixture(scope="session")
def greedy_batch(bundle: ModelBundle, greedy_references: dict[str, GreedyReference]):
    """greedy_batch(batch, k) -> the references of `batch` (harness/checks/batches.py), in fixture order."""

    def members(batch: str, k: int) -> list[GreedyReference]:
        references = list(greedy_references.values())
        return batch_members(references, batch, k, bundle.max_context, reference_lengths)

    return members


def reference_lengths(reference: GreedyReference) -> tuple[int, int]:
    return len(reference.prompt_ids), reference.prompt.max_new_tokens
