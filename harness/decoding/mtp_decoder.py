"""MTP-assisted speculative decoding, assembled from replaceable parts:

    proposer          MTPProposer: the MTP depths chained into k drafts and their laws q
    acceptance rules  greedy_accept (temperature 0) and speculative_accept (sampling): pure functions
    draft law         the_law_drawn_from: the q verification sees for each draft
    stop rules        stop_at_first_eos, stop_at_first_stop: how much of (accepted drafts + the target's
                      token) is committed
    request history   prefix_drafts: which drafts each verification position counts as output before it (penalties,
                      min_tokens); the_targets_logprobs: the log-probabilities a request's logprobs report;
                      mask_logits: a structured output's mask at every verification position (grammar.py);
                      sample_requests: the one-sample requests a request for n samples is drawn as
    cache manager     CacheManager: verification positions and the rollback after each pass: the target
                      keeps every committed token but the newest (its recurrent layers resume from the
                      state recorded after that token); each depth keeps entries made from committed inputs

One pass, with L committed tokens t_0..t_{L-1} (the target cache holds t_0..t_{L-2}):
    1. propose drafts x_1..x_k for positions L..L+k-1 (forced drafts replace them, with a one-hot q);
    2. verify: the target reads [t_{L-1}, x_1..x_k] at positions L-1..L+k-1 -> p_1..p_{k+1};
    3. accept a prefix of the drafts and take the target's own next token (correction or bonus);
    4. commit them (EOS and max_new_tokens truncate), roll back everything else.
Requests are grouped by (k, draft_mode, sampling) and each group is decoded as one batch with ragged
acceptance; a row's result (tokens and steps) is the same as decoding it alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from harness.contract.decoder import (
    DecodeRequest,
    DecodeResult,
    PassObserver,
    PassSnapshot,
    SamplingConfig,
    sample_requests,
)
from harness.contract.features import FEATURES
from harness.contract.seeds import derive_seed, generator
from harness.decoding.acceptance import AcceptanceRule, PassPlace, greedy_accept, speculative_accept
from harness.decoding.batch import (
    BatchState,
    SamplesRule,
    StopRule,
    decode_in_groups,
    prefill_inputs,
    stop_at_first_eos,
)
from harness.decoding.forward import prefill, target_pass
from harness.decoding.grammar import GrammarRule, mask_logits
from harness.decoding.processors import CountedDrafts, TokenHistory, history_of_positions, prefix_drafts
from harness.decoding.proposer import NO_LIMIT, MTPProposer
from harness.decoding.sampling import one_hot, probability_dtype, process_logits, raw_logprobs, sample_from, uniforms
from harness.decoding.slots import SlotCache
from harness.decoding.stops import StopsRule, stop_at_first_stop
from harness.models.loading import ModelBundle
from harness.models.recurrent_state import RestoreRule, restore_after_kept_inputs

COMPACT_BELOW = 0.75  # drop finished rows from the batch once fewer than this fraction are still decoding
ProposerFactory = Callable[[ModelBundle, int], MTPProposer]
# (q the draft was drawn from [B, V], the depth's logits [B, V], sampling, draft mode) -> q given to verification
DraftLaw = Callable[[torch.Tensor, torch.Tensor, SamplingConfig, str], torch.Tensor]
# (the verification logits [B, k+1, V], sampling, each position's history) -> the target's processed p [B, k+1, V]
VerifyLaw = Callable[[torch.Tensor, SamplingConfig, TokenHistory | None], torch.Tensor]
# (the target's raw log-probabilities [B, k+1, V], the drafts' laws q [B, k, V], accepted [B]) -> what the committed
# tokens' logprobs report [B, k+1, V]
LogprobRule = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def the_law_drawn_from(
    q: torch.Tensor, logits: torch.Tensor, sampling: SamplingConfig, draft_mode: str
) -> torch.Tensor:
    """Verification must see exactly the law each draft was drawn from (one-hot for greedy drafts)."""
    return q


def the_targets_logprobs(target: torch.Tensor, q: torch.Tensor, accepted: torch.Tensor) -> torch.Tensor:
    """A committed token's logprob is the target's at its position, whether it was an accepted draft, a correction
    or a bonus token."""
    return target


class CacheManager:
    """Positions and rollback: where a pass writes, and what it keeps once the target has verified.

    Convention: the target cache holds every committed token except the newest. A pass with L committed
    tokens feeds [t_{L-1}, x_1..x_k] at positions L-1..L+k-1; afterwards the target keeps positions < L'-1
    (L' = the new committed length) and each MTP depth keeps the entries made from committed tokens.
    A recurrent layer of the target cannot drop entries: it resumes from the state its forward recorded
    after the last kept input (recurrent_rule; harness/models/recurrent_state.py).
    """

    recurrent_rule: RestoreRule = staticmethod(restore_after_kept_inputs)

    def verify_positions(self, state: BatchState, k: int) -> torch.Tensor:
        """Position ids [B, k+1] of the verification inputs: L-1, L, ..., L+k-1."""
        return state.lengths[:, None] - 1 + torch.arange(k + 1, device=state.lengths.device)[None, :]

    def rollback_target(self, slots: SlotCache, committed_lengths: torch.Tensor, active: torch.Tensor) -> None:
        slots.keep_below(torch.where(active, committed_lengths - 1, NO_LIMIT), self.recurrent_rule)

    def rollback_mtp(self, proposer: MTPProposer, pass_lengths: torch.Tensor, drafting: torch.Tensor) -> None:
        proposer.commit(pass_lengths, drafting)


class MTPDecoder:
    """MTP-assisted decoding whose output must equal target-only decoding (greedy) or its law (sampling)."""

    name = "mtp"
    unsupported: frozenset[str] = frozenset()
    features = frozenset(FEATURES)

    def __init__(
        self,
        bundle: ModelBundle,
        proposer: ProposerFactory = MTPProposer,
        greedy_rule: AcceptanceRule = greedy_accept,
        sampling_rule: AcceptanceRule = speculative_accept,
        cache_manager: CacheManager | None = None,
        stop_rule: StopRule = stop_at_first_eos,
        draft_law: DraftLaw = the_law_drawn_from,
        observer: PassObserver | None = None,
        counted_drafts: CountedDrafts = prefix_drafts,
        verify_law: VerifyLaw = process_logits,
        stop_sequence_rule: StopsRule = stop_at_first_stop,
        logprob_rule: LogprobRule = the_targets_logprobs,
        grammar_rule: GrammarRule = mask_logits,
        samples_rule: SamplesRule = sample_requests,
    ) -> None:
        self.bundle = bundle
        self.proposer = proposer
        self.cache_manager = cache_manager or CacheManager()
        self.stop_rule = stop_rule
        self.draft_law = draft_law
        self.greedy_rule = greedy_rule
        self.sampling_rule = sampling_rule
        self.observer = observer
        self.counted_drafts = counted_drafts
        self.verify_law = verify_law
        self.stop_sequence_rule = stop_sequence_rule
        self.logprob_rule = logprob_rule
        self.grammar_rule = grammar_rule
        self.samples_rule = samples_rule

    @torch.no_grad()
    def decode(self, requests: Sequence[DecodeRequest]) -> list[DecodeResult]:
        return decode_in_groups(
            requests,
            self.bundle.vocab_size,
            self.bundle.max_context,
            lambda r: (r.num_draft_tokens, r.draft_mode, r.sampling),
            lambda group, indices: _Batch(self, group, indices).run(),
            samples=self.samples_rule,
        )


class _Batch:
    """One group of requests with the same k, draft mode and sampling settings, decoded together."""

    def __init__(self, decoder: MTPDecoder, requests: list[DecodeRequest], indices: list[int]) -> None:
        self.decoder = decoder
        self.bundle = bundle = decoder.bundle
        self.requests = requests
        self.indices = indices
        first = requests[0]
        self.k, self.draft_mode, self.sampling = first.num_draft_tokens, first.draft_mode, first.sampling
        self.state = BatchState(requests, bundle.device, lookahead=self.k, text=bundle)
        size = len(requests)
        self.target_slots = SlotCache(
            bundle.new_target_cache(), range(bundle.config.num_hidden_layers), size, bundle.device
        )
        self.proposer = decoder.proposer(bundle, size)
        self.draft_generators = [generator(derive_seed(r.seed, "draft"), bundle.device) for r in requests]
        self.verify_generators = [generator(derive_seed(r.seed, "verify"), bundle.device) for r in requests]
        self.drafting: torch.Tensor = torch.zeros(size, dtype=torch.bool, device=bundle.device)
        self.pass_index = 0
        self.rows_with_forced_drafts = [row for row, r in enumerate(requests) if r.forced_drafts]
        self.history: TokenHistory | None = None  # the history at each row's next position, during a pass
        self.pass_drafts: list[torch.Tensor] = []  # the drafts this pass has proposed so far, step by step

    def run(self) -> list[DecodeResult]:
        ids, positions, valid = prefill_inputs(self.state)
        if ids.shape[1]:
            hidden = prefill(self.bundle, self.target_slots, ids, positions, valid)
            self.proposer.add_target_hidden(hidden, valid.sum(dim=1))
        while self.state.any_active():
            self.one_pass()
            self.drop_finished_rows()
        return self.state.results()

    def drop_finished_rows(self) -> None:
        """Once a quarter of the batch has finished, stop computing for it (caches, state and all)."""
        active = self.state.active
        if int(active.sum()) > COMPACT_BELOW * len(active) or not bool(active.any()):
            return
        keep = active.nonzero().squeeze(-1)
        kept = keep.tolist()
        self.state.select_rows(keep)
        self.target_slots.select_rows(keep)
        self.proposer.select_rows(keep)
        self.draft_generators = [self.draft_generators[r] for r in kept]
        self.verify_generators = [self.verify_generators[r] for r in kept]
        self.requests = [self.requests[r] for r in kept]
        self.rows_with_forced_drafts = [row for row, r in enumerate(self.requests) if r.forced_drafts]

    def one_pass(self) -> None:
        bundle, state = self.bundle, self.state
        active = state.active
        lengths = state.lengths.clone()
        # a row drafts once it has a target hidden state to draft from (its committed length is >= 2)
        self.drafting = active & (lengths >= 2)
        k = self.k if bool(self.drafting.any()) else 0
        self.history = state.history(self.sampling, bundle.vocab_size)
        self.pass_drafts = []
        if k:
            drafts, q = self.proposer.propose(state.sequence, lengths, self.drafting, k, self.choose)
        else:
            drafts = torch.zeros(len(self.requests), 0, dtype=torch.long, device=bundle.device)
            q = torch.zeros(len(self.requests), 0, bundle.vocab_size, dtype=torch.float64, device=bundle.device)
        row_k = torch.where(self.drafting, k, 0)
        verify_ids = torch.cat([state.last_tokens()[:, None], drafts], dim=1)
        offsets = torch.arange(k + 1, device=bundle.device)[None, :]
        positions = self.decoder.cache_manager.verify_positions(state, k)
        valid = active[:, None] & (offsets <= row_k[:, None])
        hidden, logits = target_pass(bundle, self.target_slots, verify_ids, positions, valid)
        if state.grammars:
            logits = self.decoder.grammar_rule(logits, state.grammar_allowed(drafts, row_k))
        history = None
        if self.history is not None:
            history = history_of_positions(self.history, drafts, row_k, self.decoder.counted_drafts)
        p = self.decoder.verify_law(logits, self.sampling, history)
        accepted = torch.zeros(len(self.requests), dtype=torch.long, device=bundle.device)
        next_token = torch.zeros_like(accepted)
        for group_k in sorted(set(row_k[active].tolist())):
            rows = (active & (row_k == group_k)).nonzero().squeeze(-1)
            accepted[rows], next_token[rows] = self.verify(
                rows, p[rows, : group_k + 1], q[rows, :group_k], drafts[rows, :group_k]
            )
        logprobs = None
        if state.logprobs:
            logprobs = self.decoder.logprob_rule(raw_logprobs(logits), q, accepted)
        state.commit(
            active,
            drafts,
            row_k,
            accepted,
            next_token,
            stop_rule=self.decoder.stop_rule,
            stop_sequence_rule=self.decoder.stop_sequence_rule,
            logprobs=logprobs,
        )
        self.rollback(lengths, active, hidden, k)
        if self.decoder.observer is not None:
            self.observe(active, positions, row_k)
        self.pass_index += 1

    def verify(
        self, rows: torch.Tensor, p: torch.Tensor, q: torch.Tensor, drafts: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if self.sampling.is_greedy:
            rule, drawn = self.decoder.greedy_rule, None
        else:
            rule = self.decoder.sampling_rule
            drawn = uniforms([self.verify_generators[r] for r in rows.tolist()], drafts.shape[1] + 1, p.dtype)
            drawn = drawn.to(p.device)
        if getattr(rule, "positioned", False):
            state = self.state
            place = PassPlace(state.lengths[rows], (state.max_new_tokens - state.generated_counts)[rows])
            return rule(p, q, drafts, drawn, place=place)
        return rule(p, q, drafts, drawn)

    def choose(self, step: int, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Draft for step `step` of every row from the depth's logits [B, V]: forced, argmax or sampled from q."""
        vocab = logits.shape[-1]
        dtype = probability_dtype(logits.dtype)
        if self.state.grammars:  # a draft is one the constraint allows after the committed output and the drafts before
            before = torch.stack(self.pass_drafts, dim=1) if self.pass_drafts else None
            logits = mask_logits(logits, self.state.grammar_allowed(before, self.drafting.long() * (step - 1))[:, -1])
        if self.draft_mode == "greedy":
            tokens = logits.argmax(dim=-1)
            q = one_hot(tokens, vocab, dtype)
        else:
            q = process_logits(logits, self.sampling, self.draft_step_history())
            rows = self.drafting.nonzero().squeeze(-1)
            tokens = q.argmax(dim=-1)
            if len(rows):
                drawn = uniforms([self.draft_generators[r] for r in rows.tolist()], 1, q.dtype)[:, 0]
                tokens[rows] = sample_from(q[rows], drawn.to(q.device))
        q = self.decoder.draft_law(q, logits, self.sampling, self.draft_mode)
        generated = self.state.generated_counts
        for row in self.rows_with_forced_drafts:
            position = int(generated[row]) + step - 1
            forced = self.requests[row].forced_drafts
            if position in forced and bool(self.drafting[row]):
                tokens[row] = forced[position]
                q[row] = one_hot(tokens[row], vocab, dtype)
        self.pass_drafts.append(tokens)
        return tokens, q

    def draft_step_history(self) -> TokenHistory | None:
        """The history at the position of this pass's next draft: the committed output and the drafts before it
        (what its verification position will read if they are accepted)."""
        if self.history is None:
            return None
        if not self.pass_drafts:
            return self.history
        history = self.history
        drafts = torch.stack(self.pass_drafts, dim=1)  # [B, s]: every one of them precedes the next draft
        vocab, dtype = history.output_counts.shape[-1], history.output_counts.dtype
        counts = history.output_counts + one_hot(drafts, vocab, dtype).sum(dim=1)
        return TokenHistory(counts, history.generated + drafts.shape[1], history.in_prompt, history.eos)

    def rollback(self, lengths: torch.Tensor, active: torch.Tensor, hidden: torch.Tensor, k: int) -> None:
        """Roll back the target and the depths (CacheManager); carry the new target hidden states to depth 1."""
        committed_lengths = self.state.lengths
        manager = self.decoder.cache_manager
        manager.rollback_target(self.target_slots, committed_lengths, active)
        if k:
            manager.rollback_mtp(self.proposer, lengths, self.drafting)
        # h^0 of the tokens now committed to the target cache: t_{L-1} and the committed drafts
        self.proposer.add_target_hidden(hidden, torch.where(active, committed_lengths - lengths, 0))

    def observe(self, active: torch.Tensor, positions: torch.Tensor, row_k: torch.Tensor) -> None:
        for row in active.nonzero().squeeze(-1).tolist():
            target_cache, target_positions = self.target_slots.row_view(row)
            depth_views = [slots.row_view(row) for slots in self.proposer.slots]
            self.decoder.observer(
                PassSnapshot(
                    request_index=self.indices[int(self.state.row_ids[row])],
                    pass_index=self.pass_index,
                    committed_ids=tuple(self.state.sequence[row, : int(self.state.lengths[row])].tolist()),
                    verify_position_ids=tuple(positions[row, : int(row_k[row]) + 1].tolist()),
                    target_cache=target_cache,
                    target_positions=target_positions,
                    mtp_caches=tuple(view[0][0] for view in depth_views),
                    mtp_positions=tuple(view[1] for view in depth_views),
                    mtp_hidden=tuple(buffer.data[row, : int(buffer.lengths[row])] for buffer in self.proposer.pending),
                    mtp_hidden_start=tuple(int(index[row]) for index in self.proposer.next_index),
                    next_position=int(self.state.lengths[row]) - 1,
                    target_recurrent=self.target_slots.recurrent.row_view(row),
                )
            )
