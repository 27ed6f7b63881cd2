"""The hybrid fixture (tiny-qwen3-next: Gated DeltaNet + full attention, MTP under mtp.*): the harness computes
what transformers computes, and the invariant suite catches every recurrent-state rollback mutant."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from harness.checks import invariants
from harness.contract.paths import FIXTURE_MODELS, SUITES_DIR
from harness.decoding.forward import target_pass
from harness.decoding.slots import SlotCache
from harness.models.attention import EXACT_ATTENTION
from harness.models.gated_deltanet import install_gated_deltanet_forward
from harness.models.loading import checkpoint_is_hybrid
from harness.models.numerics import use_float64_arithmetic
from harness.models.teacher_forcing import target_forward

pytest_plugins = ["pytester"]

HYBRID = "tiny-qwen3-next"
TEXT = "The for statement is used to iterate over the elements of a sequence"
# mutant -> what the failure report must name (invariant 6, the recurrent state, in a linear-attention layer)
RECURRENT_STATE_MUTANTS = {
    "recurrent-state-not-restored": "*6 recurrent state broken in target layer 0 conv state*",
    "conv-restored-recurrent-kept": "*6 recurrent state broken in target layer 0 recurrent state*",
    "recurrent-state-one-late": "*6 recurrent state broken in target layer 0 conv state*",
}


def _transformers_model() -> torch.nn.Module:
    return AutoModelForCausalLM.from_pretrained(
        FIXTURE_MODELS / HYBRID,
        dtype=torch.float64,
        attn_implementation=EXACT_ATTENTION,
        experts_implementation="eager",
    )


def test_only_a_hybrid_checkpoint_reads_as_one_without_loading_it(tmp_path):
    """`mtp-harness mutants` runs the recurrent-state mutants only where they can break something."""
    assert checkpoint_is_hybrid(FIXTURE_MODELS / HYBRID)
    assert not any(checkpoint_is_hybrid(FIXTURE_MODELS / name) for name in ("tiny-mimo", "tiny-deepseek-v3"))
    assert not checkpoint_is_hybrid(tmp_path)  # no config.json: not a hybrid (loading reports it, not this)


def test_the_fixture_is_a_hybrid_with_recurrent_layers_and_an_mtp_depth(fixture_bundle):
    bundle = fixture_bundle(HYBRID)
    assert type(bundle.target).__name__ == "Qwen3NextForCausalLM"
    assert bundle.is_hybrid and bundle.layout.name == "mtp-prefix" and len(bundle.depths) == 1
    assert bundle.config.layer_types == ["linear_attention", "full_attention"] * 2


@torch.no_grad()
def test_teacher_forced_logits_equal_transformers_forward_in_float64(fixture_bundle):
    """transformers' Qwen3NextForCausalLM reading the same checkpoint, with the harness's float64 arithmetic
    (its kernels and norms compute in float32), gives the harness's teacher-forced logits to 1e-10, whole
    and as a prefill continued from its cache; with transformers' float32 kernels they differ by float32
    rounding only."""
    bundle = fixture_bundle(HYBRID)
    ids = torch.tensor([bundle.tokenizer.encode(TEXT)])
    _, ours = target_forward(bundle.target, ids)
    model = _transformers_model()
    use_float64_arithmetic(model)
    float32_kernels = model(ids).logits
    assert 1e-10 < float((float32_kernels - ours).abs().max()) < 1e-3
    install_gated_deltanet_forward(model)
    torch.testing.assert_close(model(ids).logits, ours, rtol=1e-10, atol=1e-10)
    cache = bundle.new_target_cache()
    split = ids.shape[1] // 2
    first = model(ids[:, :split], cache=cache, use_cache=True).logits
    rest = model(ids[:, split:], cache=cache, use_cache=True).logits
    torch.testing.assert_close(torch.cat([first, rest], dim=1), ours, rtol=1e-10, atol=1e-10)


@torch.no_grad()
def test_the_cache_reads_as_long_as_its_attention_layers_after_the_harness_forward_and_a_rollback(fixture_bundle):
    """transformers >= 5.25 reads `Cache.get_seq_length()` from layer 0, here a linear-attention layer whose token
    count only transformers' own conv-state update advances and its `crop` rewinds: the harness's forward advances
    it and its slot rollback rewinds it, so it stays the attention layers' slot count (5.24 reads that directly).
    Read as (get_seq_length(), the first attention layer's length, the slots)."""
    bundle = fixture_bundle(HYBRID)
    attention = bundle.config.layer_types.index("full_attention")
    slots = SlotCache(bundle.new_target_cache(), range(bundle.config.num_hidden_layers), 2, bundle.device)
    ids = torch.tensor([bundle.tokenizer.encode(TEXT)] * 2, device=bundle.device)

    def lengths() -> tuple[int, int, int]:
        return int(slots.cache.get_seq_length()), int(slots.cache.get_seq_length(attention)), slots.num_slots

    def feed(start: int, stop: int) -> None:
        positions = torch.arange(start, stop, device=bundle.device)[None].expand(2, -1)
        target_pass(bundle, slots, ids[:, start:stop], positions, torch.ones_like(positions, dtype=torch.bool))

    feed(0, 6)
    assert lengths() == (6, 6, 6)
    feed(6, 10)
    assert lengths() == (10, 10, 10)
    slots.keep_below(torch.tensor([8, 7], device=bundle.device))  # row 0 keeps 6, 7; row 1 keeps 6: 2 slots dropped
    assert lengths() == (8, 8, 8)


def test_the_invariant_memo_keeps_the_committed_state_only_and_stays_within_its_bytes(fixture_bundle, monkeypatch):
    """A fresh state's recurrent entries are copies, not views into the state after every token of its prefill (on
    tiny-qwen3-next-hd64 a 100-token prefix kept 13.8 MB alive for 0.4 MB of state, and a run's memo grew to 16 GB);
    the memo of fresh states keeps within its bound in bytes."""
    bundle = fixture_bundle(HYBRID)
    ids = bundle.tokenizer.encode(TEXT * 4)[:60]
    state = invariants.fresh_state(bundle, ids)
    recurrent = [tensor for pair in state.recurrent.values() for tensor in pair]
    assert recurrent
    for tensor in recurrent:
        assert tensor.untyped_storage().nbytes() == tensor.numel() * tensor.element_size()
    monkeypatch.setattr(invariants, "_FRESH", {})
    monkeypatch.setattr(invariants, "_fresh_bytes", 0)
    monkeypatch.setattr(invariants, "FRESH_MEMO_BYTES", 3 * invariants.held_bytes(state))
    for length in range(20, 60, 4):
        invariants.fresh_state(bundle, ids[:length])
        assert invariants._fresh_bytes == sum(invariants.held_bytes(kept) for kept in invariants._FRESH.values())
        assert invariants._fresh_bytes <= invariants.FRESH_MEMO_BYTES
    assert 1 <= len(invariants._FRESH) < 10


def _invariant_run(pytester, decoder: str):
    return pytester.runpytest_inprocess(
        str(SUITES_DIR / "invariants" / "test_state_after_every_pass.py"),
        "-m",
        "invariants",
        f"--harness-model={HYBRID}",
        f"--harness-decoder={decoder}",
        "-q",
        "-k",
        "batch and greedy and not sampling and (k1 or k3)",
    )


def test_the_correct_decoder_keeps_the_recurrent_state_of_the_committed_tokens(pytester):
    result = _invariant_run(pytester, "mtp")
    assert result.parseoutcomes().get("passed", 0) == 2, result.stdout.str()[-2000:]


@pytest.mark.parametrize("mutant", RECURRENT_STATE_MUTANTS)
def test_the_invariant_suite_catches_the_recurrent_state_mutant(pytester, mutant):
    result = _invariant_run(pytester, f"mutant:{mutant}")
    assert result.parseoutcomes().get("failed", 0) == 2, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(["*invariant violations over*", RECURRENT_STATE_MUTANTS[mutant]])
    assert "Error" not in result.stdout.str(), "the mutant crashed instead of being caught"
