"""Reproducer (vLLM alone): GLM-4.5's MTP layer hands the next draft step the hidden state *before*
shared_head.norm, where vLLM's DeepSeek MTP layer hands over the normed one; drafts 2..k change.

    python reproducer.py [MODEL_DIR] [--runner v1|v2]

Run it with the Python of a vLLM 0.32.0 environment (`mtp-harness engine install vllm` makes one on CPU).
MODEL_DIR: a GLM-4.5-style checkpoint (Glm4MoeForCausalLM with MTP layers); default: the harness fixture
fixtures/models/tiny-glm4-moe. --runner: vLLM's model runner, v1 (the default, the CPU build's) or v2
(model_runner.py, beside this file). The same prompts are decoded greedily with k = 2 twice in one engine: as
shipped, then with Glm4MoeMultiTokenPredictorLayer returning (pre-norm hidden for the logits, normed hidden
for the next step) exactly as vLLM's DeepSeekMultiTokenPredictorLayer does, and the drafts vLLM verified
are compared step by step. V1's proposer takes a returned pair as such only for the architectures its
model_returns_tuple lists, so on v1 GLM-4.5's is listed too; V2's drafter takes any returned pair as (hidden for
the logits, hidden for the next step) itself. The first draft of a step never changes; the second does. Exit
status 1 and `BUG REPRODUCED` when a draft differs; 0 and `not reproduced` when vLLM's own layer already chains
from the normed hidden state.
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
from vllm.v1.spec_decode import llm_base_proposer  # noqa: E402 - Model Runner V1's proposer

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
    speculative_config={"method": "mtp", "num_speculative_tokens": 2},
)
model_runner.confirm(llm, ARGS.runner)
drafts: dict[str, list[list[int]]] = {}  # request number -> drafts per verify step


def decode() -> dict[int, list[list[int]]]:
    drafts.clear()
    params = SamplingParams(temperature=0.0, max_tokens=32, ignore_eos=True, detokenize=False)
    llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
    # request ids count up across generate calls: key the drafts by prompt index instead
    return {index: drafts[key] for index, key in enumerate(sorted(drafts, key=int))}


def forward_recycling_the_normed_hidden(
    self: torch.nn.Module,
    input_ids: torch.Tensor,
    positions: torch.Tensor,
    previous_hidden_states: torch.Tensor,
    inputs_embeds: torch.Tensor | None = None,
    spec_step_index: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Glm4MoeMultiTokenPredictorLayer.forward of vLLM 0.32.0, statement for statement, returning what vLLM's
    DeepSeek MTP layer returns: the pre-norm hidden for the logits (compute_logits applies shared_head) and the
    post-norm one for the next draft step (deepseek_mtp.py: "Recycle the post-final-norm hidden")."""
    inputs_embeds = torch.where(positions.unsqueeze(-1) == 0, 0, inputs_embeds)
    inputs_embeds = self.enorm(inputs_embeds)
    previous_hidden_states = self.hnorm(previous_hidden_states)
    hidden_states = self.eh_proj(torch.cat([inputs_embeds, previous_hidden_states], dim=-1))
    hidden_states, residual = self.mtp_block(positions=positions, hidden_states=hidden_states, residual=None)
    hidden_states = residual + hidden_states
    return hidden_states, self.shared_head(hidden_states)


def returns_tuple(self) -> bool:  # noqa: ANN001 - the proposer then reads the second element for the next step
    return self.method == "mtp"


model_runner.record_verified_drafts(
    llm, ARGS.runner, lambda request_id, tokens: drafts.setdefault(request_id.split("-")[0], []).append(tokens)
)
shipped = decode()
glm4_moe_mtp.Glm4MoeMultiTokenPredictorLayer.forward = forward_recycling_the_normed_hidden
if ARGS.runner == "v1":  # V2's drafter (TargetDependentARSpeculator._run_model) unpacks a returned pair by itself
    llm_base_proposer.SpecDecodeBaseProposer.model_returns_tuple = returns_tuple
normed = decode()
steps = sum(len(v) for v in shipped.values())
differ = [
    (key, i, a, b) for key in shipped for i, (a, b) in enumerate(zip(shipped[key], normed[key], strict=False)) if a != b
]
for key, step, a, b in differ:
    print(f"prompt {key}, step {step}: drafts as shipped {a}, chained from the normed hidden state {b}")
first_changed = sum(a[0] != b[0] for *_, a, b in differ)
print(f"{len(differ)} of {steps} verify steps got other drafts; first drafts changed in {first_changed}")
print("BUG REPRODUCED" if differ else "not reproduced")
sys.exit(1 if differ else 0)
