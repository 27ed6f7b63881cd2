"""Fix of vllm-probabilistic-drafts-ignore-the-request-seed.

With `draft_sample_method="probabilistic"`, the proposer draws each draft from the draft law with exponential
noise from the global RNG (`compute_probs_and_sample_next_token`, vllm/v1/spec_decode/llm_base_proposer.py:
`q.exponential_()`, under "TODO(woosuk): Consider seeds."), so a seeded request's drafts, and with them its output,
depend on its batch. The fix is vLLM's own rule for sampled tokens (`random_sample`,
vllm/v1/sample/ops/topk_topp_sampler.py): a request with its own seed draws its noise from its own generator.
`_sample_from_logits` hands each row its request's generator (a request has k rows under parallel drafting);
everything else is the shipped code, statement for statement.
"""

import dataclasses
from types import ModuleType

import torch


def patch(module: ModuleType) -> None:
    def compute_probs_and_sample_next_token(
        logits: torch.Tensor, sampling_metadata: object, use_fp64_gumbel: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if sampling_metadata.all_greedy:
            return logits.argmax(dim=-1), logits
        temperature = sampling_metadata.temperature
        if not sampling_metadata.all_random:
            is_greedy = temperature < module._SAMPLING_EPS
            temperature = torch.where(is_greedy, 1.0, temperature)
        logits.div_(temperature.view(-1, 1))
        probs = logits.softmax(dim=-1, dtype=torch.float32)
        q = module.empty_exponential_noise_like(probs, use_fp64_gumbel)
        generators = sampling_metadata.generators  # row -> the generator of the request the row drafts for
        if len(generators) != probs.shape[0]:
            q.exponential_()
        for row, generator in generators.items():
            q[row].exponential_(generator=generator)
        next_token_ids = module.sample_with_exponential_noise(probs.clone(), q)
        if not sampling_metadata.all_random:
            greedy_token_ids = probs.argmax(dim=-1)
            next_token_ids = torch.where(is_greedy, greedy_token_ids, next_token_ids)
        return next_token_ids, probs

    def _sample_from_logits(
        self: object, logits: torch.Tensor, sampling_metadata: object
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        if not self._enable_probabilistic_draft_probs:
            return logits.argmax(dim=-1), None
        if sampling_metadata.all_greedy:
            return logits.argmax(dim=-1), None
        temperature = sampling_metadata.temperature
        factor = 1
        if temperature is not None and temperature.shape[0] != logits.shape[0]:
            assert logits.shape[0] % temperature.shape[0] == 0
            factor = logits.shape[0] // temperature.shape[0]
            sampling_metadata = dataclasses.replace(
                sampling_metadata, temperature=temperature.repeat_interleave(factor, dim=0)
            )
        rows = {
            request * factor + offset: generator
            for request, generator in sampling_metadata.generators.items()
            for offset in range(factor)
        }
        sampling_metadata = dataclasses.replace(sampling_metadata, generators=rows)
        return compute_probs_and_sample_next_token(logits, sampling_metadata, self.use_fp64_gumbel)

    module.compute_probs_and_sample_next_token = compute_probs_and_sample_next_token
    module.SpecDecodeBaseProposer._sample_from_logits = _sample_from_logits


PATCHES = {"vllm.v1.spec_decode.llm_base_proposer": patch}
