"""CUDA checks on the bundled default model: bf16 greedy identity up to numerical near-ties, per-request CUDA
generators, and batched float32 decoding that agrees with itself alone and with the CPU.

Every test needs CUDA and is skipped with that reason elsewhere. The checks are written as functions of the
device (`check_*`), so the same logic can be exercised on CPU; the tests call them with "cuda".
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import replace

import pytest
import torch

from harness.checks.divergence import GreedyCheck, NearTieWarning, check_against_target, describe_divergence
from harness.contract.decoder import DecodeRequest, DecodeResult, SamplingConfig
from harness.contract.records import Divergence
from harness.models.loading import ModelBundle, bundle_for
from harness.models.prompts import Prompt, load_prompts
from harness.subjects.decoder_registry import make_decoder

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs CUDA: torch.cuda.is_available() is False on this machine"
    ),
]

MODEL = "tiny-deepseek-v3"
DEVICE = "cuda"
# Two float32 runs through different kernels (CPU vs CUDA, batch of 27 vs 1) differ by a few float32 ulps of
# logits of magnitude ~10 (~1e-6 each); a greedy token may flip only to one within that of the precise best.
# 1e-3 leaves a wide safety factor: a token further from the precise best is a bug, not rounding.
FLOAT32_KERNEL_TIE = 1e-3


def greedy_requests(bundle: ModelBundle, prompts: Sequence[Prompt], **fields: object) -> list[DecodeRequest]:
    return [
        DecodeRequest(tuple(p.encode(bundle.tokenizer)), p.max_new_tokens, eos_token_ids=bundle.eos_token_ids, **fields)
        for p in prompts
    ]


def divergences(
    requests: Sequence[DecodeRequest],
    expected: Sequence[DecodeResult],
    actual: Sequence[DecodeResult],
    reference: ModelBundle,
    rescoring: ModelBundle,
    tolerance: float | None = None,
) -> list[GreedyCheck]:
    """Each actual result checked against its expected one: a divergence where the decoder's token is within the
    tolerance (the reference dtype's unless given) of the precise best is a near-tie, and the check goes on from
    the decoder's prefix (harness/checks/divergence.py check_against_target)."""
    return [
        check_against_target(reference, rescoring, request, want.token_ids, got.token_ids, tolerance)
        for request, want, got in zip(requests, expected, actual, strict=True)
        if want.token_ids != got.token_ids
    ]


def fail_unless_near_ties(found: list[GreedyCheck]) -> list[Divergence]:
    """Warn for each near-tie, fail listing the divergences that are not; returns the near-ties."""
    near_ties = [divergence for check in found for divergence in check.near_ties]
    for divergence in near_ties:
        warnings.warn(NearTieWarning(describe_divergence(divergence)), stacklevel=2)
    bugs = [check.failure for check in found if check.failure is not None]
    if bugs:
        pytest.fail("\n".join(describe_divergence(d) for d in bugs), pytrace=False)
    return near_ties


# --- (a) bf16 greedy identity up to near-ties -----------------------------------------------------------------


def check_bf16_greedy_mtp_matches_target_only(device: str, k: int) -> list[GreedyCheck]:
    """MTP and target-only greedy in bf16 on `device`, near-ties judged by a float32 target on the same device."""
    bundle = bundle_for(MODEL, device, "bfloat16")
    rescoring = bundle_for(MODEL, device, "float32")
    requests = greedy_requests(bundle, load_prompts())
    reference = make_decoder("target", bundle).decode(requests)
    mtp = make_decoder("mtp", bundle).decode([replace(r, num_draft_tokens=k) for r in requests])
    assert all(r.steps for r in mtp) and any(s.accepted for r in mtp for s in r.steps), "no draft was ever accepted"
    return divergences(requests, reference, mtp, bundle, rescoring)


@pytest.mark.parametrize("k", [1, 2, 4], ids=lambda k: f"k{k}")
def test_bf16_greedy_mtp_matches_target_only_up_to_near_ties(k):
    fail_unless_near_ties(check_bf16_greedy_mtp_matches_target_only(DEVICE, k))


# --- (b) per-request CUDA generators ----------------------------------------------------------------------------


def check_seeded_sampling_is_reproducible_and_batch_independent(device: str, decoder_name: str) -> None:
    """A seeded sampled request gives the same tokens twice, and alone the same as in a batch, on `device`.

    float32: batch and alone run different kernels, and the same uniform could only pick a different token
    within ~1e-7 of a CDF boundary; in bf16 the logits themselves can round differently (1 ulp ~ 0.06 at 10).
    """
    bundle = bundle_for(MODEL, device, "float32")
    decoder = make_decoder(decoder_name, bundle)
    prompts = load_prompts()
    fields = {"sampling": SamplingConfig(temperature=1.0, top_p=0.95)}
    if decoder_name == "mtp":
        fields.update(num_draft_tokens=2, draft_mode="sample")
    requests = [
        replace(r, seed=p.seed, max_new_tokens=min(r.max_new_tokens, 16))
        for p, r in zip(prompts, greedy_requests(bundle, prompts, **fields), strict=True)
    ]
    first = decoder.decode(requests)
    again = decoder.decode(requests)
    assert [r.token_ids for r in first] == [r.token_ids for r in again], "the same seeds sampled different tokens"
    for index in (0, len(requests) // 2, len(requests) - 1):
        [alone] = decoder.decode([requests[index]])
        assert alone.token_ids == first[index].token_ids, (
            f"request {index} alone: {alone.token_ids}, in the batch: {first[index].token_ids}"
        )
    assert len({r.token_ids for r in first}) > len(requests) // 2, "distinct seeds should give distinct samples"


def test_a_cuda_generator_replays_its_seed_on_the_device():
    from harness.contract.seeds import generator
    from harness.decoding.sampling import uniforms

    drawn = uniforms([generator(7, DEVICE), generator(8, DEVICE)], 4)
    assert drawn.device.type == "cuda"
    assert torch.equal(drawn, uniforms([generator(7, DEVICE), generator(8, DEVICE)], 4))
    assert not torch.equal(drawn[0], drawn[1])


@pytest.mark.parametrize("decoder_name", ["mtp", "target"])
def test_a_seeded_request_samples_the_same_tokens_twice_and_alone_as_in_a_batch(decoder_name):
    check_seeded_sampling_is_reproducible_and_batch_independent(DEVICE, decoder_name)


# --- (c) batched float32 on CUDA ----------------------------------------------------------------------------------


def check_float32_batch_equals_each_request_alone(device: str, k: int) -> list[GreedyCheck]:
    """Greedy MTP on `device` in float32: a mixed-length batch against each request decoded alone."""
    bundle = bundle_for(MODEL, device, "float32")
    decoder = make_decoder("mtp", bundle)
    requests = greedy_requests(bundle, load_prompts(), num_draft_tokens=k)
    assert len({len(r.prompt_ids) for r in requests}) > 1, "the batch must mix prompt lengths"
    batched = decoder.decode(requests)
    alone = [decoder.decode([request])[0] for request in requests]
    precise = bundle_for(MODEL, "cpu", "float64")
    return divergences(requests, alone, batched, bundle, precise, FLOAT32_KERNEL_TIE)


def check_float32_greedy_matches_cpu(device: str, decoder_name: str) -> list[GreedyCheck]:
    """Greedy on `device` in float32 against target-only greedy on CPU in float32 (near-ties judged in float64)."""
    here, cpu = bundle_for(MODEL, device, "float32"), bundle_for(MODEL, "cpu", "float32")
    requests = greedy_requests(cpu, load_prompts())
    fields = {"num_draft_tokens": 2} if decoder_name == "mtp" else {}
    reference = make_decoder("target", cpu).decode(requests)
    results = make_decoder(decoder_name, here).decode([replace(r, **fields) for r in requests])
    precise = bundle_for(MODEL, "cpu", "float64")
    return divergences(requests, reference, results, cpu, precise, FLOAT32_KERNEL_TIE)


@pytest.mark.parametrize("k", [1, 3], ids=lambda k: f"k{k}")
def test_a_float32_batch_of_mixed_prompts_equals_each_prompt_alone(k):
    fail_unless_near_ties(check_float32_batch_equals_each_request_alone(DEVICE, k))


@pytest.mark.parametrize("decoder_name", ["target", "mtp"])
def test_float32_greedy_on_cuda_matches_the_cpu_where_margins_exceed_float32_noise(decoder_name):
    fail_unless_near_ties(check_float32_greedy_matches_cpu(DEVICE, decoder_name))
