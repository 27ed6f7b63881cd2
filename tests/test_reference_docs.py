"""The docs' generated parts (the run options' reference, the findings' tables in docs/findings/index.md and the
README) are what the code gives now: harness/commands/reference_docs.py writes them from the table of run options and
the findings' folders."""

from __future__ import annotations

import pytest

from harness.commands.reference_docs import PARTS, stale_pages, with_parts
from harness.contract.paths import REPO_ROOT

pytestmark = pytest.mark.skipif(REPO_ROOT is None, reason="the docs are the clone's")


def test_every_generated_part_of_the_docs_is_fresh():
    assert stale_pages(REPO_ROOT) == [], "stale: run python -m harness.commands.reference_docs"


def test_a_part_is_written_between_its_markers_and_the_prose_around_it_is_kept():
    page, part = next(iter(PARTS))
    text = (REPO_ROOT / page).read_text()
    begin = text.index(f"`: {part} -->")
    stale = (
        text[: begin + len(f"`: {part} -->\n")] + "| a stale row |\n" + text[text.index(f"<!-- end of {part} -->") :]
    )
    assert with_parts(page, stale, REPO_ROOT) == text
