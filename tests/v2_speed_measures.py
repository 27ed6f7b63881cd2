"""Run with the vLLM environment's Python (tests/test_vllm_runner_v2.py does): the CPU shim's two speed measures
(cpu_triton.interpreter_speed_measures: the language patched once, the discarded overflow check not computed) leave
what Model Runner V2 computes as it was. One engine (tiny-mimo, MTP k = 2) decodes the same requests first with
Triton's interpreter as shipped, then with the measures: greedy requests with forced-free MTP drafts, seeded sampled
requests at temperature 1.0 (four of each, 32 tokens) with greedy and probabilistic drafts, each token's log-probability, and the engine's
speculative-decoding counters (drafts, accepted drafts per position). Prints one JSON line per decode and the seconds
each took; exit status 0 when every output is equal."""

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness" / "subjects" / "engines" / "vllm"))
import cpu_triton  # the harness's shim: standard library, numpy and Triton only

os.environ[cpu_triton.SPEED_VARIABLE] = "0"  # the interpreter as shipped first
os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "1"
cpu_triton.enable_model_runner_v2_on_cpu()

import numpy as np  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402 - after the shim: its kernels are interpreted
import triton.language as tl  # noqa: E402
from vllm import LLM, SamplingParams  # noqa: E402 - after the shim
from vllm.inputs import TokensPrompt  # noqa: E402

MODEL = Path(__file__).resolve().parents[1] / "fixtures" / "models" / "tiny-mimo"


@triton.jit
def _draw(out_ints, out_uniform, seed, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    first, second, third, fourth = tl.randint4x(seed, offsets)
    tl.store(out_ints + 4 * offsets, first)
    tl.store(out_ints + 4 * offsets + 1, second)
    tl.store(out_ints + 4 * offsets + 2, third)
    tl.store(out_ints + 4 * offsets + 3, fourth)
    tl.store(out_uniform + offsets, tl.rand(seed, offsets.to(tl.int64) * 2**33 + 5))  # high offset bits used


def draws(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Triton's Philox bits (four streams) and uniforms (64-bit offsets) for 2,048 offsets under one seed."""
    ints, uniform = torch.zeros(4 * 2048, dtype=torch.int32), torch.zeros(2048, dtype=torch.float32)
    _draw[(2048 // 256,)](ints, uniform, seed, BLOCK=256)
    return ints.numpy().copy(), uniform.numpy().copy()


# Philox on numpy (the measure) gives Triton's own bits: seeds small, large, past 32 bits, negative
seeds = [0, 1, 7, 2**31 - 1, 2**32 + 3, 2**62 + 12345, -5]
shipped_draws = [draws(seed) for seed in seeds]
cpu_triton.interpreter_speed_measures(True)
measured_draws = [draws(seed) for seed in seeds]
cpu_triton.interpreter_speed_measures(False)
same_bits = all(
    np.array_equal(a[0], b[0]) and np.array_equal(a[1].view(np.uint32), b[1].view(np.uint32))
    for a, b in zip(shipped_draws, measured_draws, strict=True)
)
print(json.dumps({"philox": "randint4x and rand", "seeds": len(seeds), "equal": same_bits}))


def counters(llm: LLM) -> dict[str, list[float]]:
    """vLLM's speculative-decoding counters so far (drafts, draft tokens, accepted tokens, accepted per position)."""
    found = {}
    for metric in llm.get_metrics():
        if "spec_decode" in metric.name:
            values = getattr(metric, "values", None)
            found[metric.name] = list(values) if values is not None else [getattr(metric, "value", 0)]
    return found


def decode(llm: LLM) -> dict:
    """Four greedy and four seeded sampled requests in one batch: their tokens, log-probabilities, and the counters."""
    prompts = [TokensPrompt(prompt_token_ids=[(7 * i + 3 * j) % 1000 + 5 for j in range(12 + i)]) for i in range(4)]
    greedy = SamplingParams(temperature=0.0, max_tokens=32, detokenize=False, ignore_eos=True, logprobs=1)
    sampled = [
        SamplingParams(temperature=1.0, seed=100 + i, max_tokens=32, detokenize=False, ignore_eos=True, logprobs=1)
        for i in range(len(prompts))
    ]
    before = counters(llm)
    started = time.perf_counter()
    outputs = llm.generate(prompts + prompts, [greedy] * len(prompts) + sampled, use_tqdm=False)
    seconds = round(time.perf_counter() - started, 3)
    after = counters(llm)
    completions = [output.outputs[0] for output in outputs]
    return {
        "tokens": [list(c.token_ids) for c in completions],
        "logprobs": [
            [step[token].logprob for step, token in zip(c.logprobs, c.token_ids, strict=True)] for c in completions
        ],
        "counters": {
            name: [b - a for a, b in zip(before.get(name, [0] * len(v)), v, strict=True)] for name, v in after.items()
        },
        "seconds": seconds,
    }


equal = same_bits
for draft in ("greedy", "probabilistic"):
    speculative = {"method": "mtp", "num_speculative_tokens": 2, "draft_sample_method": draft}
    llm = LLM(
        model=str(MODEL), dtype="float32", max_model_len=128, enforce_eager=True, speculative_config=speculative,
        seed=0, async_scheduling=False, max_num_seqs=32, kv_cache_memory_bytes=64 * 2**20, disable_log_stats=False,
    )  # fmt: skip
    shipped = decode(llm)
    cpu_triton.interpreter_speed_measures(True)
    measured = decode(llm)
    cpu_triton.interpreter_speed_measures(False)
    same = all(shipped[key] == measured[key] for key in ("tokens", "logprobs", "counters"))
    equal &= same and bool(shipped["counters"])
    print(json.dumps({"drafts": draft, "equal": same, "seconds": [shipped["seconds"], measured["seconds"]],
                      "counters": shipped["counters"]}))  # fmt: skip
    del llm
sys.exit(0 if equal else 1)
