"""The overhead probe of `mtp-harness bench --job vllm` (harness/commands/bench_overhead.py): its requests, its
ratio, the decoders it refuses, and one small measurement against vLLM itself (needs the vLLM environment)."""

from __future__ import annotations

import pytest

from harness.commands.bench_overhead import OVERHEAD_GOAL, OverheadResult, measure_overhead, probe_requests
from harness.contract.errors import HarnessError
from harness.subjects.engines.vllm.environment import ENVIRONMENT as VLLM


def test_the_probe_decodes_every_prompt_in_turn_with_its_own_seed_and_no_eos():
    requests = probe_requests([[1, 2], [3], [4, 5, 6]], 7, 32, 2)
    assert [r.prompt_ids for r in requests] == [(1, 2), (3,), (4, 5, 6)] * 2 + [(1, 2)]
    assert [r.seed for r in requests] == list(range(7))
    assert {(r.max_new_tokens, r.num_draft_tokens, r.eos_token_ids, r.sampling.temperature) for r in requests} == {
        (32, 2, (), 0.0)
    }


def test_the_ratio_is_of_the_medians_and_the_summary_says_where_it_stands_against_the_goal():
    result = OverheadResult("vllm-mtp", "tiny-mimo", 100, 32, 2, 3, "0.32.0", [0.5, 0.4, 9.0], [0.1, 0.4, 0.3])
    assert result.ratio == pytest.approx(0.5 / 0.3)
    assert "1.67x" in result.summary() and f"goal at most {OVERHEAD_GOAL}x (over the goal)" in result.summary()
    fast = OverheadResult("vllm-mtp", "tiny-mimo", 100, 32, 2, 1, "0.32.0", [0.33], [0.3])
    assert "(within the goal)" in fast.summary() and fast.to_dict()["ratio"] == pytest.approx(1.1)


@pytest.mark.parametrize("decoder", ["mtp", "vllm", "llamacpp-mtp"])
def test_a_decoder_without_an_engine_alone_to_compare_with_is_refused_at_the_door(decoder):
    with pytest.raises(HarnessError, match=f"decoder '{decoder}': no overhead probe"):
        measure_overhead(decoder)


def test_repeats_below_one_are_refused():
    with pytest.raises(HarnessError, match="repeats must be at least 1, got 0"):
        measure_overhead(repeats=0)


@pytest.mark.xdist_group("vllm")
@pytest.mark.skipif(
    VLLM.installed_version("cpu") is None,
    reason="the vLLM environment is not installed: run `mtp-harness engine install vllm` (.ci/run does)",
)
def test_the_harness_and_vllm_alone_decode_the_same_tokens_and_both_are_timed():
    result = measure_overhead(requests=3, new_tokens=6, repeats=1)  # raises where the outputs differ
    assert (result.decoder, result.requests, result.engine_version) == ("vllm-mtp", 3, VLLM.installed_version("cpu"))
    assert len(result.harness_seconds) == len(result.generate_seconds) == 1
    assert min(result.harness_seconds + result.generate_seconds) > 0
