"""The engine as its own reference (`--reference engine`): for checkpoints the harness cannot hold beside the engine
(DeepSeek-V3, GLM-4.5, Qwen3-Next-80B on 8 GPUs), the truth a speculative engine is held to is the same engine
without speculation, same dtype and parallelism, and its own log-probabilities.

- The greedy reference of a prompt is the engine's greedy output without speculation, computed once per session.
- The runner-up a forced rejection forces is, at each output position, the engine's best token other than the
  reference's own: from its top-2 prompt log-probabilities of prompt + reference (teacher-forced, one call).
- A divergence is a near-tie when the decoder's token is within the dtype's tolerance of the engine's best there:
  log-probabilities differ from logits by one constant per position (log-softmax), so the gap
  max_v logprob(v) - logprob(x) is the logit gap max_v z_v - z_x. The engine returns its top tokens and the
  decoder's own token at that position; every other token's logit is -inf here, which is below any tolerance.
- After a near-tie the reference is continued from the decoder's own prefix by the engine without speculation.
- The sampling suite's truth is computed inside the engine's process from its full logits, with the harness's own
  code (harness/subjects/engines/vllm/scoring.py): the first tokens' law is enumerated from the processed
  conditionals the engine returns (tokens of probability >= the prune mass, and the mass of the rest), pruned as
  the harness prunes its own; the whole-sequence statistics' per-token terms (the PIT's parts, the centred
  log-likelihood and its variance) and the cumulant tables summed over the sequences come back, never V floats per
  position. The PIT's uniforms are drawn here, from the generator the harness's own computation draws them from.

The harness process reads no weight file (harness/models/card.py, harness/models/weights_guard.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np
import torch

from harness.checks.divergence import GreedyCheck, check_greedy, continued_by
from harness.checks.references import GreedyReference
from harness.checks.sampling_cases import CHUNK, PIT_LENGTH, SequenceTerms
from harness.contract.decoder import DecodeRequest, DecodeResult, SamplingConfig
from harness.contract.errors import HarnessError
from harness.models.card import ModelCard
from harness.models.prompts import Prompt
from harness.stats.kernels import SADDLE_GRID, pit_from_parts
from harness.stats.target_law import TargetLaw, enumerate_law

RUNNER_UP_TOP = 2  # the top-2 log-probabilities name the best token other than the reference's own
NEAR_TIE_TOP = 20  # vLLM's default max_logprobs: every token within a tolerance of the best, short of a 20-way tie


class ScoringEngine(Protocol):
    """An engine without speculation that decodes and scores prompts (vLLM: `VLLMDecoder(speculative=False)`)."""

    name: str

    def decode(self, requests: Sequence[DecodeRequest]) -> list[DecodeResult]: ...

    def prompt_logprobs(self, prompts: Sequence[Sequence[int]], top: int) -> list[list[dict[int, float] | None]]: ...

    def next_token_laws(
        self, prefixes: Sequence[Sequence[int]], sampling: SamplingConfig, threshold: float
    ) -> list[tuple[dict[int, float], float]]: ...

    def sequence_terms(
        self, prompt_length: int, sequences: Sequence[Sequence[int]], sampling: SamplingConfig
    ) -> dict[str, object]: ...


class EngineReferenceError(HarnessError):
    """The engine's scores of a sequence do not cover what the reference needs."""


class EngineReference:
    """The engine under test without speculation as the run's target-only reference (module docstring)."""

    def __init__(self, engine: ScoringEngine, card: ModelCard) -> None:
        self.engine, self.card = engine, card
        self.dtype = self.precise_dtype = card.dtype  # the engine's own: no more precise copy of the model here

    def greedy(self, prompts: Sequence[Prompt]) -> dict[str, GreedyReference]:
        """The engine's greedy output of each prompt without speculation (one batch), and the runner-up at each
        output position from its top-2 log-probabilities of prompt + output (one batch)."""
        eos = self.card.eos_token_ids
        requests = [
            DecodeRequest(tuple(p.encode(self.card.tokenizer)), p.max_new_tokens, eos_token_ids=eos) for p in prompts
        ]
        results = self.engine.decode(requests)
        scored = [(*r.prompt_ids, *result.token_ids) for r, result in zip(requests, results, strict=True)]
        rows = self.engine.prompt_logprobs(scored, RUNNER_UP_TOP)
        references = {}
        for prompt, request, result, scores in zip(prompts, requests, results, rows, strict=True):
            start = len(request.prompt_ids)
            runner_up = tuple(
                runner_up_of(scores[start + i], token, f"prompt {prompt.id}, output position {i}")
                for i, token in enumerate(result.token_ids)
            )
            references[prompt.id] = GreedyReference(prompt, request.prompt_ids, result.token_ids, runner_up, eos)
        return references

    def check(
        self, request: DecodeRequest, expected: Sequence[int], actual: Sequence[int], tolerance: float | None = None
    ) -> GreedyCheck:
        actual = list(actual)
        prompt_length = len(request.prompt_ids)

        def engine_logits(prefix: Sequence[int]) -> torch.Tensor:
            # the decoder's own next token is scored with the top ones, so that its gap is always known
            following = actual[len(prefix) - prompt_length]
            return self.next_token_logprobs(prefix, following, NEAR_TIE_TOP)

        continuation = continued_by(request, lambda follow: self.engine.decode([follow])[0].token_ids)
        return check_greedy(
            expected, actual, request.prompt_ids, self.dtype, self.decode_text, engine_logits, continuation, tolerance
        )

    def next_token_logprobs(self, prefix: Sequence[int], token: int, top: int) -> torch.Tensor:
        """The engine's log-probabilities [V] of the token after `prefix`: its `top` most likely and `token`'s,
        -inf elsewhere (float64)."""
        [rows] = self.engine.prompt_logprobs([[*prefix, token]], top)
        row = rows[len(prefix)]
        if row is None:
            raise EngineReferenceError(f"{self.engine.name} scored nothing after a prefix of {len(prefix)} tokens")
        # `token` is scored with the top ones, except at the context's last position (the engine scores a full
        # context's last position by its top tokens only): missing there, it is below the `top` most likely
        logprobs = torch.full((self.card.vocab_size,), float("-inf"), dtype=torch.float64)
        for candidate, value in row.items():
            logprobs[candidate] = value
        return logprobs

    def top_tokens(self, prefix: Sequence[int], count: int) -> list[tuple[int, float]]:
        """The engine's `count` most likely tokens after `prefix` and their probabilities (exp of its logprobs)."""
        if len(prefix) >= self.card.max_context:
            return []  # the context is full: there is no next token
        logprobs = self.next_token_logprobs(prefix, 0, count)  # token 0 stands in; only the top ones are kept
        top = logprobs.topk(count)
        return [(int(i), float(v.exp())) for v, i in zip(top.values, top.indices, strict=True) if v > float("-inf")]

    def decode_text(self, token_ids: list[int]) -> str:
        return self.card.tokenizer.decode(token_ids)

    def target_law(
        self, prompt_ids: tuple[int, ...], sampling: SamplingConfig, length: int, prune_mass: float
    ) -> TargetLaw:
        """The first `length` tokens' law, enumerated from the engine's processed conditionals (harness/stats/
        target_law.py enumerate_law): a token below the prune mass is pruned whatever its prefix's weight."""

        def next_laws(prefixes: Sequence[tuple[int, ...]]) -> Iterable[tuple[Iterable[tuple[int, float]], float]]:
            laws = self.engine.next_token_laws([(*prompt_ids, *p) for p in prefixes], sampling, prune_mass)
            return [(sorted(law.items()), rest) for law, rest in laws]

        return enumerate_law(next_laws, set(self.card.eos_token_ids), length, prune_mass)

    def sequence_terms(
        self, prompt_ids: tuple[int, ...], continuations: Sequence[Sequence[int]], sampling: SamplingConfig, seed: int
    ) -> SequenceTerms:
        """The whole-sequence statistics' terms, computed in the engine's process CHUNK sequences at a time; the
        PIT's uniforms from a generator seeded `seed`, drawn as harness/checks/sampling_cases.py sequence_terms
        draws them."""
        generator = torch.Generator().manual_seed(seed)
        shape = (len(continuations), PIT_LENGTH)
        u, centred, variance = np.full(shape, np.nan), np.full(shape, np.nan), np.full(shape, np.nan)
        tables = np.zeros((1, PIT_LENGTH, len(SADDLE_GRID), 3))
        for start in range(0, len(continuations), CHUNK):
            chunk = continuations[start : start + CHUNK]
            uniforms = torch.rand((len(chunk), PIT_LENGTH), generator=generator, dtype=torch.float64)
            reply = self.engine.sequence_terms(len(prompt_ids), [(*prompt_ids, *c) for c in chunk], sampling)
            for row, (continuation, terms) in enumerate(zip(chunk, reply["terms"], strict=True)):
                if len(terms) != len(continuation):
                    raise EngineReferenceError(
                        f"{self.engine.name} scored {len(terms)} of the {len(continuation)} tokens of sequence "
                        f"{start + row}"
                    )
                length = len(continuation)
                columns = torch.tensor(terms, dtype=torch.float64).reshape(length, 4)
                before, p_of_token, own_centred, own_variance = columns.unbind(-1)
                u[start + row, :length] = pit_from_parts(before, p_of_token, uniforms[row, :length]).numpy()
                centred[start + row, :length] = own_centred.numpy()
                variance[start + row, :length] = own_variance.numpy()
            summed = np.asarray(reply["tables"], dtype=np.float64)
            tables[0, : len(summed)] += summed
        return SequenceTerms(u, centred, variance, tables)

    def close(self) -> None:
        close = getattr(self.engine, "close", None)
        if close is not None:
            close()


def runner_up_of(scores: dict[int, float] | None, chosen: int, where: str) -> int:
    """The best-scored token other than `chosen` (ties: the lowest id, as argmax takes)."""
    others = {token: value for token, value in (scores or {}).items() if token != chosen}
    if not others:
        raise EngineReferenceError(f"the engine's top log-probabilities at {where} name no token but {chosen}")
    return min(others, key=lambda token: (-others[token], token))
