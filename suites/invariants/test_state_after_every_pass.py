"""After every verification pass (natural and forced rejections, k = 1..4, greedy and sampling, batched
and alone), the target cache, each MTP depth's cache and carried hidden state, the position ids and the
next-token logits equal a fresh target-only computation on the committed tokens (harness/checks/invariants.py)."""

from __future__ import annotations

import pytest

from harness.contract.decoder import DecodeRequest, SamplingConfig
from harness.contract.seeds import session_shifted

pytestmark = pytest.mark.invariants

SCENARIOS = {
    "greedy": dict(sampling=SamplingConfig(), draft_mode="greedy"),
    "sampling-greedy-drafts": dict(sampling=SamplingConfig(temperature=1.0), draft_mode="greedy"),
    "sampling-sampled-drafts": dict(
        sampling=SamplingConfig(temperature=0.8, top_k=40, top_p=0.95), draft_mode="sample"
    ),
}


def served_scenario(scenario: str) -> dict[str, object]:
    """The request values a decoder must serve for `scenario` (the draft mode matters only when sampling)."""
    settings = SCENARIOS[scenario]
    return {} if settings["sampling"].is_greedy else {"draft_mode": settings["draft_mode"]}


def _requests(bundle, prompts, k, scenario, session_seed, forced_every=None):
    requests = []
    for index, prompt in enumerate(prompts):
        forced = {}
        if forced_every:
            # low-probability drafts at every `forced_every`-th position: rejections the decoder did not choose
            forced = {p: (17 * p + 5) % bundle.vocab_size for p in range(0, prompt.max_new_tokens, forced_every)}
        requests.append(
            DecodeRequest(
                tuple(prompt.encode(bundle.tokenizer)),
                prompt.max_new_tokens,
                seed=session_shifted(prompt.seed + index, session_seed),
                num_draft_tokens=k,
                eos_token_ids=bundle.eos_token_ids,
                forced_drafts=forced,
                **SCENARIOS[scenario],
            )
        )
    return requests


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("k", [1, 2, 3, 4], ids=lambda k: f"k{k}")
def test_state_is_clean_after_every_pass_in_a_batch(
    bundle, inspect, assert_clean, invariant_prompts, require, harness_seed, k, scenario
):
    require(num_draft_tokens=k, **served_scenario(scenario))
    _, violations, snapshots = inspect(_requests(bundle, invariant_prompts, k, scenario, harness_seed))
    assert_clean(violations, snapshots)


@pytest.mark.parametrize("k", [2, 3], ids=lambda k: f"k{k}")
@pytest.mark.parametrize("every", [1, 3])
def test_state_is_clean_after_forced_rejections(
    bundle, inspect, assert_clean, invariant_prompts, harness_seed, k, every, require
):
    require("forced_drafts", num_draft_tokens=k, **served_scenario("sampling-sampled-drafts"))
    _, violations, snapshots = inspect(
        _requests(bundle, invariant_prompts, k, "sampling-sampled-drafts", harness_seed, every)
    )
    assert_clean(violations, snapshots)


@pytest.mark.parametrize("k", [1, 4], ids=lambda k: f"k{k}")
def test_state_is_clean_for_a_request_decoded_alone(
    bundle, inspect, assert_clean, invariant_prompts, require, harness_seed, k
):
    require(num_draft_tokens=k)
    for request in _requests(bundle, invariant_prompts[:3], k, "greedy", harness_seed):
        _, violations, snapshots = inspect([request])
        assert_clean(violations, snapshots)
