"""The vLLM subject (harness/subjects/engines/vllm/decoder.py) against vLLM itself: forcing and step recording are the
adapter's only interventions, so they are checked on vLLM's own verification output. Needs the vLLM
environment (`mtp-harness engine install vllm`; .ci/run installs it)."""

from __future__ import annotations

import pytest
import torch

from harness.checks.schedules import expected_steps
from harness.contract.decoder import DecodeRequest, drafts_from
from harness.contract.run_options import EngineOptions
from harness.decoding.target_decoder import TargetOnlyDecoder
from harness.models.loading import bundle_for
from harness.models.prompts import load_prompts
from harness.models.teacher_forcing import target_forward
from harness.subjects.decoder_registry import make_decoder
from harness.subjects.engines.vllm.environment import ENVIRONMENT as VLLM

pytestmark = [
    pytest.mark.xdist_group("vllm"),
    pytest.mark.skipif(
        VLLM.installed_version("cpu") is None,
        reason="the vLLM environment is not installed: run `mtp-harness engine install vllm` (.ci/run does)",
    ),
]
MODEL = "tiny-mimo"


@pytest.fixture(scope="module")
def bundle():
    return bundle_for(MODEL, "cpu", "float32")


@pytest.fixture(scope="module", params=["v1", "v2"])
def vllm_mtp(bundle, request):
    """vLLM's MTP decoding on each of its model runners (V2 on this CPU: its Triton kernels in Triton's interpreter)."""
    decoder = make_decoder("vllm-mtp", bundle, EngineOptions(runner=request.param))
    yield decoder
    decoder.close()


def greedy_reference(bundle, prompt_ids, length):
    """Target-only greedy tokens and, at each position, the target's runner-up (a token it rejects)."""
    [result] = TargetOnlyDecoder(bundle).decode([DecodeRequest(prompt_ids, length)])
    _, logits = target_forward(bundle.target, torch.tensor([prompt_ids + result.token_ids]))
    runner_up = logits[0, len(prompt_ids) - 1 : -1].topk(2, dim=-1).indices[:, 1].tolist()
    return result.token_ids, runner_up


def test_forced_drafts_are_rejected_exactly_where_they_were_forced_in_vllms_own_verification(bundle, vllm_mtp):
    prompt_ids = tuple(load_prompts()[0].encode(bundle.tokenizer))
    tokens, runner_up = greedy_reference(bundle, prompt_ids, 20)
    rejected = {1, 4, 6, 11, 17}  # 4 and 17 fall on bonus positions (never drafted): they must not happen
    forced = {p: (runner_up[p] if p in rejected else t) for p, t in enumerate(tokens)}
    # a batch that forces nothing first, on the same engine: the draft sampler's wrapper then stands aside
    # (recorder.py `forcing`), and must force again for the next batch
    vllm_mtp.decode([DecodeRequest(prompt_ids, 4, num_draft_tokens=2)])
    [result] = vllm_mtp.decode([DecodeRequest(prompt_ids, 20, num_draft_tokens=2, forced_drafts=forced)])
    assert result.token_ids == tokens, "vLLM's greedy output changed under forced drafts"
    plan = expected_steps(20, 2, rejected, first=drafts_from(vllm_mtp))
    # the steps come from vLLM's rejection sampler output, recorded inside the engine
    assert [(s.start, len(s.emitted)) for s in result.steps] == [(e.start, e.emitted) for e in plan]
    happened = set()
    for step, expected in zip(result.steps, plan, strict=True):
        assert list(step.drafts) == [forced[step.start + i] for i in range(len(step.drafts))], step
        if expected.rejected_at is None:
            assert step.accepted == len(step.drafts), f"pass at {step.start} rejected a draft that was not forced"
        else:
            assert step.accepted == expected.rejected_at - step.start, f"forced rejection at {expected.rejected_at}"
            happened.add(expected.rejected_at)
    assert happened == {1, 6, 11}
    [engine] = vllm_mtp.pool._processes.values()
    assert engine.info["runner"] == vllm_mtp.options.runner


def test_unforced_requests_decode_the_target_only_reference_on_either_runner(bundle, vllm_mtp):
    prompts = load_prompts()[:4]
    requests = [
        DecodeRequest(tuple(p.encode(bundle.tokenizer)), 16, num_draft_tokens=2, eos_token_ids=bundle.eos_token_ids)
        for p in prompts
    ]
    results = vllm_mtp.decode(requests)
    reference = TargetOnlyDecoder(bundle).decode(requests)
    assert [r.token_ids for r in results] == [r.token_ids for r in reference]
    for result in results:  # every pass verified k drafts or none, and its tokens are the output's
        assert [t for step in result.steps for t in step.emitted] == list(result.token_ids)
        assert all(len(step.drafts) in (0, 2) and step.accepted <= len(step.drafts) for step in result.steps)


def test_plain_vllm_greedy_equals_the_harness_target_only_reference(bundle):
    decoder = make_decoder("vllm", bundle)
    try:
        requests = [
            DecodeRequest(tuple(p.encode(bundle.tokenizer)), p.max_new_tokens, eos_token_ids=bundle.eos_token_ids)
            for p in load_prompts()
        ]
        results = decoder.decode(requests)
    finally:
        decoder.close()
    reference = TargetOnlyDecoder(bundle).decode(requests)
    assert [r.token_ids for r in results] == [r.token_ids for r in reference]
    assert all(not step.drafts for r in results for step in r.steps), "vLLM without speculation verified drafts"


def test_vllm_refuses_float64_with_the_dtype_to_use():
    from harness.contract.errors import HarnessError

    with pytest.raises(HarnessError, match="vLLM has no float64 path: run it with --dtype float32"):
        make_decoder("vllm-mtp", bundle_for(MODEL, "cpu", "float64"))


def test_an_engine_argument_reaches_vllm_as_given(bundle):
    """--engine-arg passes vLLM's own arguments through: vLLM's effective configuration shows the value."""
    decoder = make_decoder("vllm", bundle, EngineOptions(arguments=(("max_logprobs", 31),)))
    try:
        prompt_ids = tuple(load_prompts()[0].encode(bundle.tokenizer))
        [result] = decoder.decode([DecodeRequest(prompt_ids, 2)])
        assert len(result.token_ids) == 2
        [engine] = decoder.pool._processes.values()
        assert engine.info["effective"]["max_logprobs"] == 31 and engine.config["engine_args"] == {"max_logprobs": 31}
    finally:
        decoder.close()


@pytest.mark.parametrize("runner", ["v1", "v2"])
def test_under_tensor_parallelism_the_hooks_force_record_and_score_on_vllms_own_workers(bundle, runner):
    """tensor_parallel_size=2 (vLLM's CPU build runs two worker processes) on each model runner: forced drafts are
    rejected exactly where forced, the passes are read back from the first worker, and the engine's scores (the
    scoring hook of --reference engine) are the harness's."""
    import numpy as np

    from harness.checks.engine_reference import EngineReference
    from harness.checks.sampling_cases import HarnessScorer
    from harness.contract.decoder import SamplingConfig
    from harness.models.card import load_card

    parallel = EngineOptions(arguments=(("tensor_parallel_size", 2),), runner=runner)
    decoder = make_decoder("vllm-mtp", bundle, parallel)
    prompt_ids = tuple(load_prompts()[0].encode(bundle.tokenizer))
    try:
        tokens, runner_up = greedy_reference(bundle, prompt_ids, 20)
        rejected = {1, 6, 11}
        forced = {p: (runner_up[p] if p in rejected else t) for p, t in enumerate(tokens)}
        [result] = decoder.decode([DecodeRequest(prompt_ids, 20, num_draft_tokens=2, forced_drafts=forced)])
        assert result.token_ids == tokens
        plan = expected_steps(20, 2, rejected, first=drafts_from(decoder))
        assert [(s.start, len(s.emitted)) for s in result.steps] == [(e.start, e.emitted) for e in plan]
    finally:
        decoder.close()
    card = load_card(bundle.path, dtype="float32")
    reference = EngineReference(make_decoder("vllm", card, parallel), card)
    try:
        continuations = [tokens, tokens[:7]]
        theirs = reference.sequence_terms(prompt_ids, continuations, SamplingConfig(1.0), seed=3)
        ours = HarnessScorer(bundle).sequence_terms(prompt_ids, continuations, SamplingConfig(1.0), seed=3)
        assert np.nanmax(np.abs(theirs.u - ours.u)) <= 1e-5
        assert np.nanmax(np.abs(theirs.centred - ours.centred)) <= 1e-4
    finally:
        reference.close()
