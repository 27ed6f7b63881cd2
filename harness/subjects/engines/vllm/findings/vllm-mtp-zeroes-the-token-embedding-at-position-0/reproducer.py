"""Reproducer (vLLM alone): vLLM's MTP layer zeroes the token embedding of its position-0 entry, and that one
cache entry changes later drafts.

    python reproducer.py [MODEL_DIR] [--runner v1|v2]

Run it with the Python of a vLLM 0.32.0 environment (`mtp-harness engine install vllm` makes one on CPU).
MODEL_DIR: a GLM-4.5-style checkpoint (Glm4MoeForCausalLM with MTP layers); default: the harness fixture
fixtures/models/tiny-glm4-moe. --runner: vLLM's model runner, v1 (the default, the CPU build's) or v2
(model_runner.py, beside this file; the MTP layer is the same model code on both). The same prompts are decoded
greedily with k = 1 twice in one engine: as shipped, then with the masking line of
Glm4MoeMultiTokenPredictorLayer.forward removed (nothing else changed), and the drafts vLLM verified are compared
step by step. Exit status 1 and `BUG REPRODUCED` when a draft differs; 0 and `not reproduced` when vLLM's own MTP
layer computes what the unmasked one does.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # model_runner.py, shared by the vLLM findings
import model_runner

ARGS = model_runner.start(default_model=Path(__file__).resolve().parents[6] / "fixtures" / "models" / "tiny-glm4-moe")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

import torch  # noqa: E402 - after the model runner is prepared
from tokenizers import Tokenizer  # noqa: E402
from vllm import LLM, SamplingParams  # noqa: E402
from vllm.model_executor.models import glm4_moe_mtp  # noqa: E402

MODEL = ARGS.model
TEXTS = [
    "The import statement is used to",
    "When a class definition is executed, the",
    "An exception is raised when",
    "Names refer to objects. Names are introduced by",
    "The for statement is used to iterate over the elements of a sequence",
    "A function definition defines a user-defined function object",
    "If the syntax of the expression is",
    "def f(x):\n    return",
]

tokenizer = Tokenizer.from_file(str(Path(MODEL) / "tokenizer.json"))
prompts = [tokenizer.encode(text).ids for text in TEXTS]
llm = LLM(
    model=MODEL,
    dtype="float32",
    max_model_len=256,
    enforce_eager=True,
    seed=0,
    skip_tokenizer_init=True,
    async_scheduling=False,
    enable_prefix_caching=False,  # both runs compute every MTP cache entry afresh
    speculative_config={"method": "mtp", "num_speculative_tokens": 1},
)
model_runner.confirm(llm, ARGS.runner)
drafts: dict[str, list[list[int]]] = {}  # request number -> drafts per verify step


def decode() -> dict[int, list[list[int]]]:
    drafts.clear()
    params = SamplingParams(temperature=0.0, max_tokens=32, ignore_eos=True, detokenize=False)
    llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
    # request ids count up across generate calls: key the drafts by prompt index instead
    return {index: drafts[key] for index, key in enumerate(sorted(drafts, key=int))}


def forward_without_the_mask(self, input_ids, positions, previous_hidden_states, inputs_embeds=None, spec_step_index=0):  # noqa: ANN001, ANN201
    """Glm4MoeMultiTokenPredictorLayer.forward of vLLM 0.32.0 without its first statement (the position-0 mask)."""
    inputs_embeds = self.enorm(inputs_embeds)
    previous_hidden_states = self.hnorm(previous_hidden_states)
    hidden_states = self.eh_proj(torch.cat([inputs_embeds, previous_hidden_states], dim=-1))
    hidden_states, residual = self.mtp_block(positions=positions, hidden_states=hidden_states, residual=None)
    return residual + hidden_states


model_runner.record_verified_drafts(
    llm, ARGS.runner, lambda request_id, tokens: drafts.setdefault(request_id.split("-")[0], []).append(tokens)
)
shipped = decode()
glm4_moe_mtp.Glm4MoeMultiTokenPredictorLayer.forward = forward_without_the_mask
unmasked = decode()
steps = sum(len(v) for v in shipped.values())
differ = [
    (key, i, a, b)
    for key in shipped
    for i, (a, b) in enumerate(zip(shipped[key], unmasked[key], strict=False))
    if a != b
]
for key, step, a, b in differ:
    print(f"prompt {key}, step {step}: draft as shipped {a}, without the position-0 mask {b}")
print(f"{len(differ)} of {steps} verify steps got another draft from the masking line alone")
print("BUG REPRODUCED" if differ else "not reproduced")
sys.exit(1 if differ else 0)
