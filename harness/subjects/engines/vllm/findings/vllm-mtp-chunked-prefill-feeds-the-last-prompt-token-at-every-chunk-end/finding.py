"""vllm-mtp-chunked-prefill-feeds-the-last-prompt-token-at-every-chunk-end: with chunked prefill, the MTP layer's cache
entry at the end of every prefill chunk that ends inside the prompt pairs the chunk's last hidden state with the
prompt's last token instead of the next prompt token (the proposer's 'backup' token for a discarded chunk), so drafts
differ for the rest of the request.

Its record (FINDING: where it was found, the tests it fails, its signature in words) and its signature, the predicate
`drafts_with_the_last_prompt_token_at_chunk_ends`. Beside it: its fix (fix.py), its standalone reproducer
(reproducer.py) and the releases its reproducer was measured on (versions.json); its write-up is
docs/findings/vllm-mtp-chunked-prefill-feeds-the-last-prompt-token-at-every-chunk-end.md."""

from __future__ import annotations

from harness.subjects.engines.findings import FailedCase, Finding
from harness.subjects.engines.vllm.findings.common import FOUND_IN, V1_ONLY
from harness.subjects.engines.vllm.signatures import CHUNK_END_TOKEN, conformance_explained_by
from harness.subjects.engines.watched_tests import CHUNKED, CONFORMANCE


def drafts_with_the_last_prompt_token_at_chunk_ends(case: FailedCase) -> bool:
    """Every draft mismatch explained by the watching findings together, some of them by the MTP layer's cache built
    with the prompt's last token at the end of each prefill chunk the engine reported for the request."""
    return CHUNK_END_TOKEN in conformance_explained_by(case)


FINDING = Finding(
    slug="vllm-mtp-chunked-prefill-feeds-the-last-prompt-token-at-every-chunk-end",
    title="with chunked prefill, the MTP layer's cache entry at the end of every prefill chunk that ends inside the "
    "prompt pairs the chunk's last hidden state with the prompt's last token instead of the next prompt token (the "
    "proposer's 'backup' token for a discarded chunk), so drafts differ for the rest of the request",
    signature="draft mismatches whose drafts equal those of the harness's proposer with the MTP layer's entry at "
    "each prefill chunk end the engine reported fed the prompt's last token, every other mismatch explained by the "
    "other findings watching the test; greedy tokens unchanged",
    explains=drafts_with_the_last_prompt_token_at_chunk_ends,
    engine="vllm",
    decoders=("vllm-mtp",),
    found_in=FOUND_IN,
    runners=V1_ONLY,
    flavours=("cpu",),  # measured on CPU; Model Runner V1's code (CUDA runs it with VLLM_USE_V2_MODEL_RUNNER=0)
    failing={"*": (CHUNKED,)},
    # any suite run under `--engine-config chunked-prefill`: the invariants' draft conformance meets the bug where a
    # prompt outgrows the chunk (the signature asks for the chunk ends the engine reported, so none elsewhere)
    may_fail={"*": (f"{CONFORMANCE}[k*]",)},
)
