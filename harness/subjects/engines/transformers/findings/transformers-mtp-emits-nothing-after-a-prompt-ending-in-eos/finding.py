"""transformers-mtp-emits-nothing-after-a-prompt-ending-in-eos: before 5.18.0, MTP generation on a prompt whose last
token is an EOS id returns no token at all: its first pass, which has no drafts, asks the stopping criteria of the
prompt, finds the EOS and takes back the one token it sampled.

Its record (FINDING: where it was found, the tests it fails, its signature in words) and its signature, the predicate
`no_token_after_a_prompt_ending_in_eos`. Beside it: its standalone reproducer (reproducer.py) and the releases it was
measured on (versions.json); its write-up is
docs/findings/transformers-mtp-emits-nothing-after-a-prompt-ending-in-eos.md.
"""

from __future__ import annotations

from harness.subjects.engines.findings import FailedCase, Finding


def no_token_after_a_prompt_ending_in_eos(case: FailedCase) -> bool:
    """The greedy check's divergence at output index 0 with no token at all, the prompt's last token one of the
    request's EOS ids, and the decoder's only pass a draftless one that emitted nothing with accepted = -1: what
    `_assisted_decoding` before 5.18.0 leaves when `is_done_candidate = stopping_criteria(candidate_input_ids, None)`
    (generation/utils.py:3857, 5.17.0; :3696 in 5.15.1) reads the prompt's EOS on a candidate without drafts and
    `n_matches -= 1` (:3938-3939; :3777-3778) drops the sampled token. An empty output on another prompt, or with a
    token, is not explained."""
    record = case.records.get("divergence") or {}
    prompt, eos = record.get("prompt_ids") or [], record.get("eos_token_ids") or []
    steps = record.get("steps") or []
    return (
        record.get("index") == 0
        and record.get("actual_tokens") == []
        and bool(prompt)
        and prompt[-1] in eos
        and len(steps) == 1
        and not steps[0].get("drafts")
        and not steps[0].get("emitted")
        and steps[0].get("accepted") == -1
    )


FINDING = Finding(
    slug="transformers-mtp-emits-nothing-after-a-prompt-ending-in-eos",
    title="before 5.18.0, MTP generation returns no token for a prompt that ends with an EOS id: its draftless first "
    "pass asks the stopping criteria of the prompt itself and drops the token it sampled",
    engine="transformers",
    decoders=("transformers-mtp",),
    found_in="5.15.1",
    flavours=("cpu", "cuda"),
    # the EOS tests pick an output token as the EOS id; on tiny-deepseek-v3 the bonus-token case at k = 1 picks 12 on
    # repetitive-03, whose prompt ends with 12, and that request returns nothing (measured on 5.15.1)
    failing={"tiny-deepseek-v3": ("greedy/test_eos_and_length.py::test_eos_as_the_bonus_token_ends_the_output[k1]",)},
    signature="a greedy divergence at output index 0 with no token, the prompt ending with one of the request's EOS "
    "ids, and a single draftless pass that emitted nothing with accepted = -1",
    explains=no_token_after_a_prompt_ending_in_eos,
)
