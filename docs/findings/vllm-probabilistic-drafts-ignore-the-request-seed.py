"""Reproducer (vLLM alone): with draft_sample_method="probabilistic", vLLM draws each draft token with noise from
the global RNG, not from the request's own seeded generator, so a seeded request's drafts (and its output) change
with whatever else drew random numbers before it: its batch, other requests, earlier steps.

    python vllm-probabilistic-drafts-ignore-the-request-seed.py

Run it with the Python of a vLLM 0.32.0 environment (`mtp-harness engine install vllm` makes one on CPU). It calls
the function that samples drafts, `compute_probs_and_sample_next_token` (vllm/v1/spec_decode/llm_base_proposer.py),
twice on the same draft logits for one request seeded 7 (a fresh generator each time, as vLLM builds from the
request's seed), after the global RNG was left in two different states, the way other requests leave it.
The request's own seed must decide its draft: equal drafts both times. Exit status 1 and `BUG REPRODUCED` when they
differ; 0 and `not reproduced` when the seed decides them. (End to end, the harness shows it as a seeded request
whose output changes with its batch; on CPU that also needs the expand-kernel finding fixed, which corrupts every
sampled request: the function-level check here does not.)
"""

import os
import sys

os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")

import torch
from vllm.v1.sample.logits_processor import LogitsProcessors
from vllm.v1.sample.metadata import SamplingMetadata
from vllm.v1.spec_decode import llm_base_proposer

VOCAB, SEED, DRAWS = 1024, 7, 16


def metadata(seed: int) -> SamplingMetadata:
    """One sampled request at temperature 1 with its own seed, as the model runner hands it to the proposer."""
    return SamplingMetadata(
        temperature=torch.ones(1),
        all_greedy=False,
        all_random=True,
        top_p=None,
        top_k=None,
        generators={0: torch.Generator().manual_seed(seed)},
        max_num_logprobs=None,
        no_penalties=True,
        prompt_token_ids=None,
        frequency_penalties=torch.zeros(1),
        presence_penalties=torch.zeros(1),
        repetition_penalties=torch.ones(1),
        output_token_ids=[[]],
        allowed_token_ids_mask=None,
        bad_words_token_ids={},
        logitsprocs=LogitsProcessors(),
    )


logits = torch.zeros(1, VOCAB)  # a flat draft law: every token a possible draft


def drafts_after_global_state(global_seed: int) -> list[int]:
    torch.manual_seed(global_seed)  # what other requests and earlier steps left in the global RNG
    sampling = metadata(SEED)
    return [
        int(llm_base_proposer.compute_probs_and_sample_next_token(logits.clone(), sampling)[0]) for _ in range(DRAWS)
    ]


first, second = drafts_after_global_state(1), drafts_after_global_state(2)
print(f"request seeded {SEED}, global RNG state 1: drafts {first}")
print(f"request seeded {SEED}, global RNG state 2: drafts {second}")
reproduced = first != second
print("BUG REPRODUCED" if reproduced else "not reproduced")
sys.exit(1 if reproduced else 0)
