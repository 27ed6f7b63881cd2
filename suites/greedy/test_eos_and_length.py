"""EOS and max_new_tokens at the edges of accepted runs: the output stops exactly there."""

from __future__ import annotations

import pytest

from harness.contract.decoder import DecodeRequest, cannot_serve, drafts_from

pytestmark = pytest.mark.greedy

BOUNDARY_PROMPTS = ["natural-01", "code-02", "repetitive-01"]


def _stop_candidates(reference, k):
    """A token of the reference that first occurs at position >= k (so a pass can reach it as an accepted draft)."""
    for position, token in enumerate(reference.tokens):
        if position >= k and token not in reference.tokens[:position]:
            return position, token
    return None


@pytest.mark.parametrize("k", [2, 3, 4], ids=lambda k: f"k{k}")
def test_eos_inside_an_accepted_run_ends_the_output_there(decoder, bundle, greedy_references, check_tokens, require, k):
    require("forced_drafts", num_draft_tokens=k)
    checked = 0
    for reference in greedy_references.values():
        found = _stop_candidates(reference, 1)
        if found is None or found[0] >= len(reference.tokens) - 1:
            continue
        position, eos = found
        # all drafts forced to the reference's tokens, so the EOS arrives as an accepted draft, mid-run
        forced = dict(enumerate(reference.tokens))
        request = DecodeRequest(
            reference.prompt_ids, len(reference.tokens), num_draft_tokens=k, eos_token_ids=(eos,), forced_drafts=forced
        )
        [result] = decoder.decode([request])
        checked += 1
        if check_tokens(reference, result, expected=reference.tokens[: position + 1], request=request):
            continue  # a bf16/fp16 near-tie before the EOS: the output rightly took another path
        assert result.finish_reason == "eos"
        if result.steps:
            containing = [s for s in result.steps if s.start <= position < s.start + len(s.emitted)]
            assert (
                containing
                and containing[0].emitted[-1] == eos
                and position - containing[0].start < containing[0].accepted + 1
            )
    assert checked >= 5


@pytest.mark.parametrize("k", [1, 2, 3, 4], ids=lambda k: f"k{k}")
def test_eos_as_the_bonus_token_ends_the_output(decoder, greedy_references, check_tokens, require, k):
    require("forced_drafts", "steps", num_draft_tokens=k)
    first = drafts_from(decoder)  # the first drafting pass starts there
    checked = 0
    for reference in greedy_references.values():
        bonus = first + k
        if len(reference.tokens) <= bonus or reference.tokens[bonus] in reference.tokens[:bonus]:
            continue
        eos = reference.tokens[bonus]  # the first drafting pass accepts k forced drafts; its bonus token is EOS
        request = DecodeRequest(
            reference.prompt_ids,
            len(reference.tokens),
            num_draft_tokens=k,
            eos_token_ids=(eos,),
            forced_drafts=dict(enumerate(reference.tokens)),
        )
        [result] = decoder.decode([request])
        checked += 1
        if check_tokens(reference, result, expected=reference.tokens[: bonus + 1], request=request):
            continue  # a bf16/fp16 near-tie before the bonus token: the output rightly took another path
        drafting = [step for step in result.steps if step.drafts]
        assert len(drafting) == 1 and result.finish_reason == "eos", result.steps
        assert (drafting[0].start, drafting[0].accepted, drafting[0].emitted[-1]) == (first, k, eos), drafting[0]
    assert checked >= 5


@pytest.mark.parametrize("k", [1, 2, 3, 4], ids=lambda k: f"k{k}")
@pytest.mark.parametrize("prompt_id", BOUNDARY_PROMPTS)
def test_max_new_tokens_at_every_value_up_to_k_plus_2(
    decoder, bundle, greedy_references, check_tokens, require, k, prompt_id
):
    require(num_draft_tokens=k)
    reference = greedy_references[prompt_id]
    # every draft accepted (forced to the reference's tokens): a pass would overshoot if unchecked; a decoder that
    # cannot be forced (llama.cpp) is checked with its own drafts
    forced = dict(enumerate(reference.tokens)) if cannot_serve(decoder, "forced_drafts") is None else {}
    for max_new_tokens in range(1, k + 3):
        expected = reference.tokens[:max_new_tokens]
        request = DecodeRequest(
            reference.prompt_ids, max_new_tokens, num_draft_tokens=k, eos_token_ids=reference.eos, forced_drafts=forced
        )
        [result] = decoder.decode([request])
        check_tokens(reference, result, expected=expected, request=request)
        assert len(result.token_ids) <= max_new_tokens
