"""The reference: target-only decoding with a KV cache, one token per forward pass.

Each request samples from its own torch.Generator(seed); greedy (temperature 0) is argmax. Requests with
the same sampling settings are decoded as one batch; a row's output does not depend on the batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from harness.contract.decoder import DecodeRequest, DecodeResult, SamplingConfig
from harness.contract.features import FEATURES
from harness.contract.seeds import generator
from harness.decoding.batch import BatchState, decode_in_groups, prefill_inputs
from harness.decoding.forward import prefill, target_pass
from harness.decoding.grammar import mask_logits
from harness.decoding.sampling import process_logits, raw_logprobs, sample_from, uniforms
from harness.decoding.slots import SlotCache
from harness.models.loading import ModelBundle


class TargetOnlyDecoder:
    """Target-only KV-cached incremental decoding: the reference every other decoder must reproduce."""

    name = "target"
    unsupported = frozenset({"num_draft_tokens", "draft_mode", "forced_drafts"})  # no drafts: nothing to force
    features = frozenset(FEATURES)

    def __init__(self, bundle: ModelBundle) -> None:
        self.bundle = bundle

    @torch.no_grad()
    def decode(self, requests: Sequence[DecodeRequest]) -> list[DecodeResult]:
        return decode_in_groups(
            requests,
            self.bundle.vocab_size,
            self.bundle.max_context,
            lambda r: r.sampling,
            lambda group, indices: self._decode_batch(group, group[0].sampling),
        )

    def _decode_batch(self, requests: list[DecodeRequest], sampling: SamplingConfig) -> list[DecodeResult]:
        bundle = self.bundle
        state = BatchState(requests, bundle.device, lookahead=0, text=bundle)
        slots = SlotCache(
            bundle.new_target_cache(), range(bundle.config.num_hidden_layers), len(requests), bundle.device
        )
        generators = [generator(r.seed, bundle.device) for r in requests]
        ids, positions, valid = prefill_inputs(state)
        if ids.shape[1]:
            prefill(bundle, slots, ids, positions, valid)
        while state.any_active():
            active = state.active
            _, logits = target_pass(
                bundle, slots, state.last_tokens()[:, None], (state.lengths - 1)[:, None], active[:, None]
            )
            logits = mask_logits(logits, state.grammar_allowed()) if state.grammars else logits
            probs = process_logits(logits[:, 0], sampling, state.history(sampling, bundle.vocab_size))
            if sampling.is_greedy:
                tokens = probs.argmax(dim=-1)
            else:
                rows = active.nonzero().squeeze(-1)
                drawn = uniforms([generators[r] for r in rows.tolist()], 1, probs.dtype)[:, 0].to(probs.device)
                tokens = torch.zeros(len(requests), dtype=torch.long, device=bundle.device)
                tokens[rows] = sample_from(probs[rows], drawn)
            no_drafts = torch.zeros(len(requests), 0, dtype=torch.long, device=bundle.device)
            zeros = torch.zeros_like(tokens)
            logprobs = raw_logprobs(logits) if state.logprobs else None
            state.commit(active, no_drafts, zeros, zeros, tokens, record=False, logprobs=logprobs)
        return state.results()
