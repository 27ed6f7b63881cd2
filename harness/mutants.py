"""The mutant catalogue: the correct MTPDecoder with exactly one part replaced by a known real-world bug.

Each is registered as `mutant:<name>`; the suites must fail on every one of them. The docstring of
each replacement says which failure it models (see ../shared/REFERENCES.md section 5).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from harness.acceptance import greedy_accept, speculative_accept
from harness.api import Decoder
from harness.batch import BatchState
from harness.models import ModelBundle
from harness.mtp_decoder import CacheManager, MTPDecoder
from harness.proposer import MTPProposer
from harness.registry import register_decoder
from harness.slots import RaggedBuffer, SlotCache

MUTANT_PREFIX = "mutant:"
MUTANTS: dict[str, Callable[[ModelBundle], MTPDecoder]] = {}


def mutant(name: str) -> Callable[[Callable[[ModelBundle], MTPDecoder]], Callable[[ModelBundle], MTPDecoder]]:
    """Register `build(bundle) -> MTPDecoder` as the decoder `mutant:<name>`."""

    def register(build: Callable[[ModelBundle], MTPDecoder]) -> Callable[[ModelBundle], MTPDecoder]:
        MUTANTS[name] = build

        @register_decoder(MUTANT_PREFIX + name)
        def factory(bundle: ModelBundle, device: torch.device, dtype: torch.dtype) -> Decoder:
            decoder = build(bundle)
            decoder.name = MUTANT_PREFIX + name
            return decoder

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


@mutant("commit-heads-unverified")
def commit_heads_unverified(bundle: ModelBundle) -> MTPDecoder:
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


@mutant("stale-drafts-after-reject")
def stale_drafts_after_reject(bundle: ModelBundle) -> MTPDecoder:
    return MTPDecoder(
        bundle, greedy_rule=keep_stale_drafts(greedy_accept), sampling_rule=keep_stale_drafts(speculative_accept)
    )


# --- cache-manager mutants ------------------------------------------------------------------------------------
class NoTargetRollback(CacheManager):
    """Bug class 3: rejected drafts stay in the target KV cache (vLLM PR 56734): later passes attend to them."""

    def rollback_target(self, slots: SlotCache, committed_lengths: torch.Tensor, active: torch.Tensor) -> None:
        slots.trim()


@mutant("no-target-rollback")
def no_target_rollback(bundle: ModelBundle) -> MTPDecoder:
    return MTPDecoder(bundle, cache_manager=NoTargetRollback())


class PositionsAdvancedByDraftLength(CacheManager):
    """Bug class 5: each pass advances the position counter by the k+1 tokens it fed, not by the tokens it
    committed (M-RoPE slot bug, vLLM 54498): after a rejection the positions drift past the sequence."""

    def verify_positions(self, state: BatchState, k: int) -> torch.Tensor:
        start = state.prompt_lengths - 1 + state.passes * (k + 1)
        return start[:, None] + torch.arange(k + 1, device=start.device)[None, :]


@mutant("position-offset")
def position_offset(bundle: ModelBundle) -> MTPDecoder:
    return MTPDecoder(bundle, cache_manager=PositionsAdvancedByDraftLength())


# --- proposer mutants -----------------------------------------------------------------------------------------
class NoMTPRollback(MTPProposer):
    """Bug class 4: the MTP layers' own KV caches keep the entries built from rejected drafts (vLLM 14649):
    later drafts attend to a continuation that never happened. Greedy output is unchanged; acceptance drops."""

    def rollback_depth(self, d: int, limit: torch.Tensor) -> None:
        self.slots[d].trim()


@mutant("no-mtp-rollback")
def no_mtp_rollback(bundle: ModelBundle) -> MTPDecoder:
    return MTPDecoder(bundle, proposer=NoMTPRollback)


class StaleMTPHidden(MTPProposer):
    """Bug class 4 (review of vLLM PR 33561): the hidden state a depth hands to the next one is taken one index
    too late: from the last position it computed, which was built from a draft that may have been rejected."""

    def carry(self, outputs: RaggedBuffer, start: torch.Tensor, stop: torch.Tensor) -> RaggedBuffer:
        return outputs.slice(start + 1, (stop + 1).clamp(max=outputs.lengths))


@mutant("stale-mtp-hidden")
def stale_mtp_hidden(bundle: ModelBundle) -> MTPDecoder:
    return MTPDecoder(bundle, proposer=StaleMTPHidden)


# --- stop-rule mutants ----------------------------------------------------------------------------------------
def stop_at_eos_only_at_the_end(
    proposed: torch.Tensor, count: torch.Tensor, eos_table: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Bug class 12: EOS is only looked for in the last token a pass commits (the target's own token), so an
    EOS inside an accepted run of drafts is emitted and decoding runs on (SGLang 31599)."""
    last = (count - 1).clamp(min=0)
    token = proposed.gather(1, last[:, None])
    ends = (token == eos_table).any(-1) & (count > 0)
    return count, ends


@mutant("eos-ignored")
def eos_ignored(bundle: ModelBundle) -> MTPDecoder:
    return MTPDecoder(bundle, stop_rule=stop_at_eos_only_at_the_end)
