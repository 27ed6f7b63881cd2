"""Fix of vllm-min-tokens-masks-the-bonus-token-by-the-committed-length.

With speculative decoding, Model Runner V1's rejection sampler applies min_tokens to the draft rows by position
(`MinTokensLogitsProcessor.apply_with_spec_decode` masks the stop tokens of the first
clamp(min_tokens - committed, 0, num_drafts) rows), but samples the bonus row with the plain sampler, whose
`MinTokensLogitsProcessor.apply` masks a request's stop tokens while committed < min_tokens
(vllm/v1/sample/logits_processor/builtin.py). The bonus row is output position committed + num_drafts, so where
committed < min_tokens <= committed + num_drafts its stop tokens are masked where target-only decoding allows them.
The bonus token is used only when every draft is accepted, so the fix masks the bonus row of a request iff

    committed + num_drafts < min_tokens

`RejectionSampler.forward` hands the min-tokens processor the pass's draft counts for the duration of the call, and
`apply` (which, inside that call, only the bonus sampler calls) masks by them. Every other call of `apply` (a pass
without speculation) is the shipped code.
"""

from collections.abc import Callable, Sequence
from types import ModuleType

import torch

PROCESSORS_MODULE = "vllm.v1.sample.logits_processor.builtin"
REJECTION_SAMPLER_MODULE = "vllm.v1.sample.rejection_sampler"


def patch_min_tokens(module: ModuleType) -> None:
    processor = module.MinTokensLogitsProcessor
    apply: Callable = processor.apply

    def apply_at_the_bonus_positions(self, logits: torch.Tensor) -> torch.Tensor:  # noqa: ANN001
        num_draft_tokens: Sequence[int] | None = getattr(self, "fix_bonus_num_draft_tokens", None)
        if num_draft_tokens is None or not self.min_toks:
            return apply(self, logits)
        rows, tokens, restore_rows, restore_tokens = [], [], [], []
        for row, (min_tokens, output_token_ids, stop_token_ids, uses_structured_output) in self.min_toks.items():
            # logits row `row` is request `row`'s bonus position: committed + num_drafts
            if len(output_token_ids) + num_draft_tokens[row] < min_tokens:
                rows += [row] * len(stop_token_ids)
                tokens += list(stop_token_ids)
                if uses_structured_output:
                    restore_rows += [row] * len(stop_token_ids)
                    restore_tokens += list(stop_token_ids)
        if rows:
            logits_slice = (self._device_tensor(rows, torch.int32), self._device_tensor(tokens, torch.int32))
            if restore_rows:
                restore_slice = (
                    self._device_tensor(restore_rows, torch.int32),
                    self._device_tensor(restore_tokens, torch.int32),
                )
                self._mask_stop_token_logits(logits, logits_slice, restore_slice)
            else:
                logits.index_put_(logits_slice, self.neg_inf_tensor)
        return logits

    processor.apply = apply_at_the_bonus_positions


def patch_rejection_sampler(module: ModuleType) -> None:
    sampler = module.RejectionSampler
    forward: Callable = sampler.forward

    def forward_with_the_draft_counts(self, metadata, draft_probs, logits, sampling_metadata):  # noqa: ANN001
        processors = [
            p
            for p in sampling_metadata.logitsprocs.non_argmax_invariant
            if isinstance(p, module.MinTokensLogitsProcessor)
        ]
        for processor in processors:
            processor.fix_bonus_num_draft_tokens = metadata.num_draft_tokens
        try:
            return forward(self, metadata, draft_probs, logits, sampling_metadata)
        finally:
            for processor in processors:
                processor.fix_bonus_num_draft_tokens = None

    sampler.forward = forward_with_the_draft_counts


PATCHES = {PROCESSORS_MODULE: patch_min_tokens, REJECTION_SAMPLER_MODULE: patch_rejection_sampler}
