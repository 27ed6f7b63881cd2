"""The mutant catalogue: the correct MTPDecoder with exactly one part replaced by a known real-world bug.

Each is a decoder named `mutant:<name>` (harness/subjects/decoder_registry.py); the suites must fail on every one of
them. The docstring of each replacement says which failure it models (see ../shared/REFERENCES.md section 5).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import torch

from harness.contract.decoder import DecodeRequest, SamplingConfig
from harness.contract.suites import CATALOGUE_SUITES
from harness.decoding.acceptance import PassPlace, accepted_prefix, greedy_accept, residual, speculative_accept
from harness.decoding.batch import BatchState, stop_at_first_eos
from harness.decoding.mtp_decoder import CacheManager, MTPDecoder
from harness.decoding.processors import TokenHistory
from harness.decoding.proposer import MTPProposer
from harness.decoding.sampling import process_logits, sample_from
from harness.decoding.slots import KV_BLOCK, RaggedBuffer, SlotCache
from harness.decoding.stops import Stops, stop_at_first_stop
from harness.models.loading import ModelBundle

MUTANTS: dict[str, Callable[[ModelBundle], MTPDecoder]] = {}

# What the suites must do with each mutant. "caught": at least one suite fails on it. "exact": the change
# provably keeps the output law (a control: every suite must pass). "below-resolution": the shift it causes
# is provably smaller than any feasible sample can show on the bundled fixtures (see its docstring).
EXPECTED_VERDICT: dict[str, str] = {}
VERDICTS = ("caught", "exact", "below-resolution")
# The suite aimed at the part each mutant replaces (acceptance rules and draft laws: sampling; caches and
# positions: invariants; stop rules and greedy verification: greedy): the catalogue runs it first.
TARGET_SUITE: dict[str, str] = {}


def mutant(
    name: str, targets: str, expected: str = "caught"
) -> Callable[[Callable[[ModelBundle], MTPDecoder]], Callable[[ModelBundle], MTPDecoder]]:
    """Register `build(bundle) -> MTPDecoder` as the decoder `mutant:<name>`; `targets` is the suite aimed
    at the replaced part, `expected` one of VERDICTS."""
    if expected not in VERDICTS or targets not in CATALOGUE_SUITES:
        raise ValueError(
            f"mutant {name!r}: targets in {CATALOGUE_SUITES}, expected in {VERDICTS}; got {targets}, {expected}"
        )

    def register(build: Callable[[ModelBundle], MTPDecoder]) -> Callable[[ModelBundle], MTPDecoder]:
        MUTANTS[name] = build
        EXPECTED_VERDICT[name] = expected
        TARGET_SUITE[name] = targets
        return build

    return register


# --- acceptance-rule mutants ----------------------------------------------------------------------------------
def accept_everything(
    p: torch.Tensor, q: torch.Tensor, drafts: torch.Tensor, uniforms: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Bug class 1: the MTP heads' tokens are committed without verification (argmax of the heads), then
    the target's token after the last draft."""
    k = drafts.shape[1]
    accepted = torch.full((drafts.shape[0],), k, dtype=torch.long, device=drafts.device)
    return accepted, p[:, k].argmax(dim=-1)


@mutant("commit-heads-unverified", "greedy")
def commit_heads_unverified(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 1: the MTP heads' drafts are committed without verification (see accept_everything)."""
    return MTPDecoder(bundle, greedy_rule=accept_everything, sampling_rule=accept_everything)


def keep_stale_drafts(rule: Callable) -> Callable:
    """Bug class 2: after rejecting draft j the decoder writes the target's correction in its place but keeps
    emitting drafts j+1.. (A B' C D after B was rejected): drafts made in a continuation that never happened."""

    def stale(
        p: torch.Tensor, q: torch.Tensor, drafts: torch.Tensor, uniforms: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        accepted, correction = rule(p, q, drafts, uniforms)
        k = drafts.shape[1]
        rejected = accepted < k
        rows = rejected.nonzero().squeeze(-1)
        drafts[rows, accepted[rows]] = correction[rows]  # the correction replaces the rejected draft...
        all_accepted = torch.full_like(accepted, k)
        # ...and the stale drafts after it are kept, followed by the target's token after the last one
        return torch.where(rejected, all_accepted, accepted), torch.where(rejected, p[:, k].argmax(-1), correction)

    return stale


@mutant("stale-drafts-after-reject", "greedy")
def stale_drafts_after_reject(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 2: drafts after a rejected one are kept, from a continuation that never happened."""
    return MTPDecoder(
        bundle, greedy_rule=keep_stale_drafts(greedy_accept), sampling_rule=keep_stale_drafts(speculative_accept)
    )


def _speculative_with(
    residual_law: Callable = residual,
    bonus_offset: int = 0,
    accept_if_equal: bool = False,
    sampler: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = sample_from,
) -> Callable:
    """speculative_accept with one piece changed (see the mutants below); the rest exactly as the real rule."""

    def rule(
        p: torch.Tensor, q: torch.Tensor, drafts: torch.Tensor, uniforms: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        batch, k = drafts.shape
        p_of_draft = p[:, :k].gather(-1, drafts[..., None]).squeeze(-1)
        q_of_draft = q.gather(-1, drafts[..., None]).squeeze(-1)
        if accept_if_equal:
            target_samples = sample_from(p[:, :k], uniforms[:, :k])
            accepts = target_samples == drafts
        else:
            accepts = uniforms[:, :k] < torch.clamp(p_of_draft / q_of_draft, max=1.0)
        accepted = accepted_prefix(accepts)
        rows = torch.arange(batch, device=p.device)
        q_padded = torch.cat([q, torch.zeros_like(q[:, :1])], dim=1)
        position = torch.where(accepted == k, (accepted - bonus_offset).clamp(min=0), accepted)
        correction = residual_law(p[rows, position], q_padded[rows, accepted])
        return accepted, sampler(correction, uniforms[:, k])

    return rule


def _residual_is_p(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    return p


@mutant("residual-from-p", "sampling")
def residual_from_p(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 7: after a rejection the correction is drawn from p instead of norm(max(p - q, 0))."""
    return MTPDecoder(bundle, sampling_rule=_speculative_with(_residual_is_p))


FILTER_LEAK = 0.05  # the share of a correction's mass left to the tokens the filter removed


def _residual_leaking_past_the_filter(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """r' = (1 - FILTER_LEAK) r + FILTER_LEAK * 1[p = 0] / #{p = 0}, r = norm(max(p - q, 0)): the residual with a
    floor on every token the filter removed (where the filter removed none, r itself)."""
    r = residual(p, q)
    removed = (p == 0).to(r.dtype)
    count = removed.sum(dim=-1, keepdim=True)
    leaked = (1 - FILTER_LEAK) * r + FILTER_LEAK * removed / count.clamp(min=1)
    return torch.where(count > 0, leaked, r)


@mutant("correction-leaks-past-the-filter", "sampling")
def correction_leaks_past_the_filter(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 9, the filters under speculation: the correction after a rejection is drawn from a residual whose
    filtered-out tokens keep a floor (a mask filled with a finite value in place of -inf), so a token the filter
    removed is emitted 5% of the times a draft is rejected. Restricted to the filter's support the law is exact: a
    goodness-of-fit test that drops the observations of zero-mass cells passes it; the observations are impossible."""
    return MTPDecoder(bundle, sampling_rule=_speculative_with(_residual_leaking_past_the_filter))


@mutant("accept-if-equal", "sampling")
def accept_if_equal(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 6 (mlx-swift-lm PR 459): in sampling mode a draft is accepted when it equals a token sampled
    from p (probability sum p q instead of sum min(p, q)), while rejections still use the residual."""
    return MTPDecoder(bundle, sampling_rule=_speculative_with(residual, accept_if_equal=True))


@mutant("bonus-wrong-position", "sampling")
def bonus_wrong_position(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 11: when every draft is accepted, the bonus token is drawn from p at the last draft's
    position instead of the position after it (an off-by-one in the verify logits)."""
    return MTPDecoder(bundle, sampling_rule=_speculative_with(residual, bonus_offset=1))


def drop_the_bonus(
    p: torch.Tensor, q: torch.Tensor, drafts: torch.Tensor, uniforms: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Bug class 11, first half: when all k drafts are accepted, no bonus token is emitted (x_k is committed
    as the pass's last token). This loses throughput, not exactness: the suites show it stays exact."""
    accepted, next_token = speculative_accept(p, q, drafts, uniforms)
    k = drafts.shape[1]
    all_accepted = accepted == k
    return torch.where(all_accepted, accepted - 1, accepted), torch.where(all_accepted, drafts[:, -1], next_token)


@mutant("no-bonus", "sampling", expected="exact")
def no_bonus(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 11, control: no bonus token after k accepted drafts; slower, still exact (see drop_the_bonus)."""
    return MTPDecoder(bundle, sampling_rule=drop_the_bonus)


# --- position-confined mutants: wrong at a few output positions only (the last token, a KV block start) ---------
def commit_unverified_drafts_when_truncated(rule: Callable) -> Callable:
    """A pass that max_new_tokens will cut keeps its first `remaining` drafts without verifying them
    ("truncation discards the rest anyway"): the last tokens of a length-capped output come from the draft law."""

    def truncated(p, q, drafts, uniforms, place: PassPlace):  # noqa: ANN001
        accepted, next_token = rule(p, q, drafts, uniforms)
        k = drafts.shape[1]
        cut = place.remaining < k + 1
        return torch.where(cut, torch.full_like(accepted, k), accepted), next_token

    truncated.positioned = True
    return truncated


@mutant("truncation-commits-unverified-drafts", "sampling")
def truncation_commits_unverified_drafts(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 13 meeting class 1: truncation at max_new_tokens emits unverified drafts (token accounting for
    the last block): the pass that reaches the length limit keeps its
    drafts without verification (see commit_unverified_drafts_when_truncated); wrong only at the last k
    output positions of a length-capped output."""
    return MTPDecoder(
        bundle,
        greedy_rule=commit_unverified_drafts_when_truncated(greedy_accept),
        sampling_rule=commit_unverified_drafts_when_truncated(speculative_accept),
    )


def residual_from_p_at_block_starts(p, q, drafts, uniforms, place: PassPlace):  # noqa: ANN001, ANN201
    """speculative_accept, except that a correction token falling on the first index of a KV block is drawn
    from p instead of norm(max(p - q, 0)) (a rejection handled by a second code path at a block boundary)."""
    accepted, next_token = speculative_accept(p, q, drafts, uniforms)
    k = drafts.shape[1]
    at_block_start = ((place.first_index + accepted) % KV_BLOCK == 0) & (accepted < k)
    rows = torch.arange(drafts.shape[0], device=p.device)
    from_p = sample_from(p[rows, accepted], uniforms[:, k])
    return accepted, torch.where(at_block_start, from_p, next_token)


residual_from_p_at_block_starts.positioned = True


@mutant("block-start-residual-from-p", "sampling")
def block_start_residual_from_p(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 7 confined to KV block boundaries: a correction at the first index of a block of 16 is
    drawn from p, not from the residual (see residual_from_p_at_block_starts)."""
    return MTPDecoder(bundle, sampling_rule=residual_from_p_at_block_starts)


def truncated_run_ends_in_a_correction(p, q, drafts, uniforms, place: PassPlace):  # noqa: ANN001, ANN201
    """speculative_accept, except that when max_new_tokens cuts a pass inside its accepted drafts, the cut is
    handled as a rejection there: the last kept token is redrawn from norm(max(p - q, 0)) at its position
    instead of keeping the accepted draft."""
    accepted, next_token = speculative_accept(p, q, drafts, uniforms)
    cut_inside = place.remaining <= accepted
    last = (place.remaining - 1).clamp(min=0, max=drafts.shape[1] - 1)
    rows = torch.arange(drafts.shape[0], device=p.device)
    redrawn = sample_from(residual(p[rows, last], q[rows, last]), uniforms[:, drafts.shape[1]])
    return torch.where(cut_inside, last, accepted), torch.where(cut_inside, redrawn, next_token)


truncated_run_ends_in_a_correction.positioned = True


@mutant("truncated-run-ends-in-a-correction", "sampling")
def truncated_run_ends_in_a_correction_mutant(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 13 meeting class 7: a pass cut by max_new_tokens inside its accepted drafts ends in a residual
    draw (the cut treated as a rejection; see truncated_run_ends_in_a_correction): wrong at the last output
    position only."""
    return MTPDecoder(bundle, sampling_rule=truncated_run_ends_in_a_correction)


# --- draft-law mutants ----------------------------------------------------------------------------------------
def _unprocessed_q(q: torch.Tensor, logits: torch.Tensor, sampling: SamplingConfig, draft_mode: str) -> torch.Tensor:
    """Bug class 9 (vLLM 9834, transformers 47932): drafts are sampled from the processed q (temperature,
    top-k, top-p) but verified against the raw softmax of the head."""
    if draft_mode != "sample":
        return q
    return torch.softmax(logits.to(q.dtype), dim=-1)


@mutant("unprocessed-q", "sampling")
def unprocessed_q(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 9 (vLLM 9834, transformers 47932): drafts sampled from processed q, verified against raw q."""
    return MTPDecoder(bundle, draft_law=_unprocessed_q)


def _softmax_q_for_greedy_draft(
    q: torch.Tensor, logits: torch.Tensor, sampling: SamplingConfig, draft_mode: str
) -> torch.Tensor:
    """Bug class 8 (transformers 32867): a greedy (argmax) draft is verified with the head's softmax as q
    instead of a one-hot: p(x) = 0.3, q(x) = 0.5 gives P(x) = 0.6."""
    if draft_mode != "greedy" or sampling.is_greedy:
        return q
    return process_logits(logits, sampling).to(q.dtype)


@mutant("softmax-q-for-greedy-draft", "sampling")
def softmax_q_for_greedy_draft(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 8 (transformers 32867): an argmax draft verified with the head's softmax as q."""
    return MTPDecoder(bundle, draft_law=_softmax_q_for_greedy_draft)


# --- cache-manager mutants ------------------------------------------------------------------------------------
class NoTargetRollback(CacheManager):
    """Bug class 3: rejected drafts stay in the target KV cache (vLLM PR 56734): later passes attend to them."""

    def rollback_target(self, slots: SlotCache, committed_lengths: torch.Tensor, active: torch.Tensor) -> None:
        slots.trim()


@mutant("no-target-rollback", "invariants")
def no_target_rollback(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 3 (vLLM PR 56734): rejected drafts stay in the target KV cache."""
    return MTPDecoder(bundle, cache_manager=NoTargetRollback())


class PositionsAdvancedByDraftLength(CacheManager):
    """Bug class 5: each pass advances the position counter by the k+1 tokens it fed, not by the tokens it
    committed (M-RoPE slot bug, vLLM 54498): after a rejection the positions drift past the sequence."""

    def verify_positions(self, state: BatchState, k: int) -> torch.Tensor:
        start = state.prompt_lengths - 1 + state.passes * (k + 1)
        return start[:, None] + torch.arange(k + 1, device=start.device)[None, :]


@mutant("position-offset", "invariants")
def position_offset(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 5 (vLLM 54498): positions advance by k+1 per pass, not by the committed tokens."""
    return MTPDecoder(bundle, cache_manager=PositionsAdvancedByDraftLength())


# --- proposer mutants -----------------------------------------------------------------------------------------
class NoMTPRollback(MTPProposer):
    """Bug class 4: the MTP layers' own KV caches keep the entries built from rejected drafts (vLLM 14649):
    later drafts attend to a continuation that never happened. Greedy output is unchanged; acceptance drops."""

    def rollback_depth(self, d: int, limit: torch.Tensor) -> None:
        self.slots[d].trim()


@mutant("no-mtp-rollback", "invariants")
def no_mtp_rollback(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 4 (vLLM 14649): rejected drafts stay in the MTP depths' own KV caches."""
    return MTPDecoder(bundle, proposer=NoMTPRollback)


class StaleMTPHidden(MTPProposer):
    """Bug class 4 (review of vLLM PR 33561): the hidden state a depth hands to the next one is taken one index
    too late: from the last position it computed, which was built from a draft that may have been rejected."""

    def carry(self, outputs: RaggedBuffer, start: torch.Tensor, stop: torch.Tensor) -> RaggedBuffer:
        return outputs.slice(start + 1, (stop + 1).clamp(max=outputs.lengths))


@mutant("stale-mtp-hidden", "invariants")
def stale_mtp_hidden(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 4 (vLLM PR 33561 review): the hidden state handed between depths is one index late."""
    return MTPDecoder(bundle, proposer=StaleMTPHidden)


# --- recurrent-state mutants (hybrid models: Qwen3-Next's Gated DeltaNet layers) -----------------------------
# Each replaces only the rule picking which recorded state a row resumes from (harness/models/recurrent_state.py):
# (inputs of the pass kept, valid inputs of the pass) -> (conv state index, recurrent state index).
RECURRENT_MUTANTS: set[str] = set()


def state_after_every_input(kept: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Both states stay where the verification pass left them: after the rejected drafts too."""
    return valid, valid


def conv_restored_recurrent_kept(kept: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The conv state is cut back, the recurrent state is not: transformers' LinearAttentionCacheLayerMixin.crop
    slices conv_states only."""
    return kept, valid


def state_one_input_late(kept: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Resume from the slot one past the right one (an accepted count used where accepted - 1 was meant):
    the first rejected draft stays folded in."""
    late = torch.minimum(kept + 1, valid)
    return late, late


def _restoring_with(rule: Callable) -> CacheManager:
    manager = CacheManager()
    manager.recurrent_rule = rule  # type: ignore[method-assign]
    return manager


def recurrent_mutant(name: str) -> Callable[[Callable[[ModelBundle], MTPDecoder]], Callable[[ModelBundle], MTPDecoder]]:
    """A mutant of the recurrent-state rollback: meaningful (and caught) only on a hybrid model."""
    RECURRENT_MUTANTS.add(name)
    return mutant(name, "invariants")


@recurrent_mutant("recurrent-state-not-restored")
def recurrent_state_not_restored(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 18 (a vLLM TPU PR: the state "silently kept the effect of rejected draft tokens"): after a
    rejection the linear-attention layers keep the state the verification pass ended in."""
    return MTPDecoder(bundle, cache_manager=_restoring_with(state_after_every_input))


@recurrent_mutant("conv-restored-recurrent-kept")
def conv_restored_recurrent_kept_mutant(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 18 (transformers 5.24 LinearAttentionCacheLayerMixin.crop): the conv state is rolled back,
    the recurrent state keeps the rejected drafts."""
    return MTPDecoder(bundle, cache_manager=_restoring_with(conv_restored_recurrent_kept))


@recurrent_mutant("recurrent-state-one-late")
def recurrent_state_one_late(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 18 (off-by-one state slot, the class of the TensorRT-LLM and TPU rollback-kernel fixes): the
    state is restored to the snapshot one input after the last committed one."""
    return MTPDecoder(bundle, cache_manager=_restoring_with(state_one_input_late))


# --- stop-rule mutants ----------------------------------------------------------------------------------------
def stop_at_eos_only_at_the_end(
    proposed: torch.Tensor, offered: torch.Tensor, remaining: torch.Tensor, eos_table: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Bug class 12: EOS is only looked for in the last token a pass commits (the target's own token), so an
    EOS inside an accepted run of drafts is emitted and decoding runs on (SGLang 31599)."""
    count = torch.minimum(offered, remaining)
    last = (count - 1).clamp(min=0)
    token = proposed.gather(1, last[:, None])
    ends = (token == eos_table).any(-1) & (count > 0)
    return count, ends


@mutant("eos-ignored", "greedy")
def eos_ignored(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 12 (SGLang 31599): EOS inside an accepted run of drafts is not honoured."""
    return MTPDecoder(bundle, stop_rule=stop_at_eos_only_at_the_end)


def commit_the_whole_accepted_block(
    proposed: torch.Tensor, offered: torch.Tensor, remaining: torch.Tensor, eos_table: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Bug class 13: the accepted block is committed whole, past max_new_tokens (token accounting per pass,
    not per token); EOS is still honoured."""
    return stop_at_first_eos(proposed, offered, torch.maximum(remaining, offered), eos_table)


@mutant("max-tokens-overshoot", "greedy")
def max_tokens_overshoot(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 13: the accepted block is committed whole, past max_new_tokens."""
    return MTPDecoder(bundle, stop_rule=commit_the_whole_accepted_block)


class MisreportedAcceptance(MTPDecoder):
    """The correct decoder whose pass records say one accepted draft fewer than the pass accepted (an adapter's
    off-by-one reading an engine's accepted count): the tokens are right, the record of the passes is not."""

    def decode(self, requests: Sequence[DecodeRequest]) -> list:
        results = super().decode(list(requests))
        return [
            replace(result, steps=tuple(replace(s, accepted=s.accepted - 1) if s.accepted else s for s in result.steps))
            for result in results
        ]


@mutant("accepted-count-off-by-one", "invariants")
def accepted_count_off_by_one(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 13: wrong token accounting for accepted blocks, in the record of the passes: each pass reports one
    accepted draft fewer than it accepted, so every check that reads positions from the passes would judge the wrong
    ones; the pass contract, checked where results enter the harness, refuses it (see MisreportedAcceptance)."""
    return MisreportedAcceptance(bundle)


def one_uniform_for_every_draft(rule: Callable) -> Callable:
    """Bug class 10 (re-seeding inside the loop, LLMSpeculativeSampling): the same uniform tests every draft
    of a pass, so acceptances are correlated: P(accept 2 | accept 1) = min(1, a2 / a1) instead of a2."""

    def shared(
        p: torch.Tensor, q: torch.Tensor, drafts: torch.Tensor, uniforms: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        k = drafts.shape[1]
        reused = torch.cat([uniforms[:, :1].expand(-1, k), uniforms[:, k:]], dim=1)
        return rule(p, q, drafts, reused)

    return shared


@mutant("shared-uniform", "sampling")
def shared_uniform(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 10: one uniform tests every draft of a pass (correlated acceptances)."""
    return MTPDecoder(bundle, sampling_rule=one_uniform_for_every_draft(speculative_accept))


def typical_acceptance(
    p: torch.Tensor,
    q: torch.Tensor,
    drafts: torch.Tensor,
    uniforms: torch.Tensor | None,
    epsilon: float = 0.3,
    delta: float = 0.09,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Bug class 15 (Medusa typical acceptance; TensorRT-LLM relaxed acceptance): a draft is accepted when
    p(x) > min(epsilon, delta exp(-H(p))): lossy by design; on rejection the target samples from p."""
    k = drafts.shape[1]
    p_of_draft = p[:, :k].gather(-1, drafts[..., None]).squeeze(-1)
    entropy = -(p[:, :k] * torch.log(p[:, :k].clamp(min=1e-30))).sum(-1)
    accepted = accepted_prefix(p_of_draft > torch.clamp(delta * torch.exp(-entropy), max=epsilon))
    rows = torch.arange(drafts.shape[0], device=p.device)
    return accepted, sample_from(p[rows, accepted], uniforms[:, k])


@mutant("typical-acceptance", "sampling")
def typical_acceptance_mutant(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 15 (Medusa, TensorRT-LLM relaxed acceptance): threshold acceptance, lossy by design."""
    return MTPDecoder(bundle, sampling_rule=typical_acceptance)


# --- low-precision samplers (bug class 14) --------------------------------------------------------------------
FP32_EXPONENTIAL_FLOOR = 2.0**-24  # smallest Exp(1) sample fp32 noise produces (vLLM PR 43150, measured on H100)


def fp32_exponential_race(probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Gumbel-max as serving engines write it: argmax(probs / E), E ~ Exp(1) in fp32 (vLLM V1 sampler and
    rejection-sampler recovery). fp32 noise never goes below 2^-24, so a token with probs_i < 2^-24 * max
    (score) can never win: the far tail is truncated. Each row's V exponentials come from a generator seeded
    by that row's uniform, so the draw stays a function of the request's own randomness.

    Exact law when E is not floored; floored, the law moves by at most P(some E_i < 2^-24) <= V 2^-24.
    """
    tokens = torch.empty(probs.shape[:-1], dtype=torch.long, device=probs.device)
    for row, u in enumerate(uniforms.reshape(-1).tolist()):
        generator = torch.Generator().manual_seed(int(u * 2**62))
        fp32_uniform = torch.rand(probs.shape[-1], generator=generator, dtype=torch.float32)
        exponential = (-torch.log1p(-fp32_uniform)).clamp(min=FP32_EXPONENTIAL_FLOOR)
        tokens.view(-1)[row] = (probs.reshape(-1, probs.shape[-1])[row].float().cpu() / exponential).argmax()
    return tokens


def bf16_cdf_inverse(probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF sampling over a cumulative sum held in bf16 (Megatron-LM PR 7182: softmax().cumsum() in
    bf16 saturates before the tail is accumulated). With 8 mantissa bits the CDF steps by 2^-9 below 1:
    tokens whose mass does not move the rounded CDF are never drawn, and the CDF reaches 1 before the tail."""
    cdf = probs.float().cumsum(dim=-1).to(torch.bfloat16).to(probs.dtype)
    target = (uniforms.to(cdf.dtype) * cdf[..., -1]).unsqueeze(-1)
    return torch.searchsorted(cdf, target, right=True).squeeze(-1).clamp(max=probs.shape[-1] - 1)


@mutant("fp32-tail-truncation", "sampling", expected="below-resolution")
def fp32_tail_truncation(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 14 (vLLM PR 43150): recovery and bonus tokens drawn by an exponential race with fp32 noise
    floored at 2^-24. The law moves by at most V 2^-24 in total variation: 6.1e-5 for the fixtures' 1,024-token
    vocabulary (billions of samples to see), 0.8% for DeepSeek-V3's 129,280 (nightly, on a real checkpoint).
    The same mechanism at a precision the fixtures resolve is `bf16-tail-truncation`."""
    return MTPDecoder(bundle, sampling_rule=_speculative_with(sampler=fp32_exponential_race))


@mutant("bf16-tail-truncation", "sampling")
def bf16_tail_truncation(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 14 (Megatron-LM PR 7182): recovery and bonus tokens drawn by inverse CDF over a bf16
    cumulative sum, which drops tokens too small to move it and the tail after it saturates."""
    return MTPDecoder(bundle, sampling_rule=_speculative_with(sampler=bf16_cdf_inverse))


# --- request-feature mutants (the features suite) ---------------------------------------------------------------
def every_draft_counted(drafts: torch.Tensor, drafted: torch.Tensor) -> torch.Tensor:
    """Every draft the pass proposed counts as output before every verification position: the penalty state is
    updated when the drafts are proposed and not rolled back, so the correction after a rejection is penalised
    for the rejected drafts too (the class of TensorRT-LLM's and SGLang's penalty-under-speculation bugs)."""
    k = drafts.shape[1]
    real = torch.arange(k, device=drafts.device)[None, :] < drafted[:, None]
    return real[:, None, :].expand(-1, k + 1, -1)


@mutant("penalty-counts-rejected-drafts", "features")
def penalty_counts_rejected_drafts(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 19 (penalties under speculation, TensorRT-LLM and SGLang): penalties count every draft of the
    pass, the rejected ones included (every_draft_counted)."""
    return MTPDecoder(bundle, counted_drafts=every_draft_counted)


def stop_checked_at_the_pass_end(
    output: Sequence[int], new: Sequence[int], stops: Stops, min_tokens: int
) -> int | None:
    """Stops are looked for once per pass, over everything it commits: a stop sequence or string completed inside
    an accepted run of drafts ends the output at the end of the pass, the tokens after the stop kept (vLLM's stop
    strings in the MTP path, before its detokenizer learnt to drop them)."""
    return len(new) if stop_at_first_stop(output, new, stops, min_tokens) is not None else None


@mutant("stop-checked-per-pass", "features")
def stop_checked_per_pass(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 20 (stop strings in vLLM's MTP path): stop sequences and strings checked per pass instead of per
    token (stop_checked_at_the_pass_end)."""
    return MTPDecoder(bundle, stop_sequence_rule=stop_checked_at_the_pass_end)


def the_drafts_logprobs(target: torch.Tensor, q: torch.Tensor, accepted: torch.Tensor) -> torch.Tensor:
    """An accepted draft's logprobs come from the law it was drawn from, log q (one-hot for a greedy draft: 0 for
    the draft), not from the target that verified it; corrections and bonus tokens keep the target's."""
    k = q.shape[1]
    draft_columns = torch.arange(k + 1, device=q.device)[None, :] < accepted.clamp(max=k)[:, None]
    log_q = torch.cat([q.clamp(min=torch.finfo(q.dtype).tiny).log(), target[:, k:]], dim=1)
    return torch.where(draft_columns[..., None], log_q.to(target.dtype), target)


@mutant("logprob-of-the-draft", "features")
def logprob_of_the_draft(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 21 (logprobs under speculation): accepted drafts report the draft's log-probabilities
    (the_drafts_logprobs)."""
    return MTPDecoder(bundle, logprob_rule=the_drafts_logprobs)


def min_tokens_at_the_first_position_only(
    logits: torch.Tensor, sampling: SamplingConfig, history: TokenHistory | None
) -> torch.Tensor:
    """min_tokens masks EOS at a pass's first verification position only (the logits processor sees the
    next-token row, not the draft rows): an EOS drafted before min_tokens and accepted inside a run ends the
    output early."""
    p = process_logits(logits, sampling, history)
    if not sampling.min_tokens:
        return p
    unmasked = process_logits(logits, replace(sampling, min_tokens=0), history)
    return torch.cat([p[:, :1], unmasked[:, 1:]], dim=1)


@mutant("min-tokens-ignored-inside-a-run", "features")
def min_tokens_ignored_inside_a_run(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 22 (min_tokens under speculation): min_tokens is ignored at the drafts' positions after the first
    (min_tokens_at_the_first_position_only)."""
    return MTPDecoder(bundle, verify_law=min_tokens_at_the_first_position_only)


def grammar_on_the_drafts_only(logits: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """The constraint masks the drafts (the proposer's logits) but not the target's logits at verification: every
    accepted draft obeys it, while a correction or a bonus token the target emits itself may not."""
    return logits


@mutant("grammar-skips-the-correction", "features")
def grammar_skips_the_correction(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 23 (structured output under speculation, vLLM and SGLang): the grammar mask applied to the drafts but
    not to the token the target emits itself (grammar_on_the_drafts_only)."""
    return MTPDecoder(bundle, grammar_rule=grammar_on_the_drafts_only)


def samples_sharing_the_seed(request: DecodeRequest) -> list[DecodeRequest]:
    """A request's n samples all drawn with the request's own seed: n copies of one draw."""
    return [replace(request, n=1)] * request.n


@mutant("samples-share-the-seed", "features")
def samples_share_the_seed(bundle: ModelBundle) -> MTPDecoder:
    """Bug class 24 (n > 1 under speculation): every sample of a request seeded alike, so its n samples are one draw
    repeated (samples_sharing_the_seed)."""
    return MTPDecoder(bundle, samples_rule=samples_sharing_the_seed)
