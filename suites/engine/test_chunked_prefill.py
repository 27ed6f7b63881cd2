"""Chunked prefill: prompts prefilled in chunks of a small token budget, beside requests that already decode. The
MTP layers' cache over a prompt is built chunk by chunk: at each chunk's end the layer pairs the last hidden state
with the next prompt token, which lies in the next chunk. Greedy output must equal the reference and the drafts
the checkpoint's MTP computation."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.engine


def test_prompts_prefilled_in_chunks_decode_as_the_reference(configured, engine_prompts, references_of, run_checked):
    decoder = configured("chunked-prefill")
    by_length = sorted(engine_prompts, key=lambda p: p.seed)  # short and long prompts mixed, in a fixed order
    run_checked(decoder, references_of(by_length))
