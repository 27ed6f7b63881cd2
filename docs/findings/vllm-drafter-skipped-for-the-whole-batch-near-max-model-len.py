"""Reproducer (vLLM alone): one request near max_model_len switches MTP drafting off for every request of the
batch, and the other requests draft worse even after it has finished.

    python vllm-drafter-skipped-for-the-whole-batch-near-max-model-len.py [MODEL_DIR]

Run it with the Python of a vLLM 0.32.0 environment (`mtp-harness engine install vllm` makes one on CPU).
MODEL_DIR: a checkpoint with MTP layers and max_position_embeddings 256; default: the harness fixture
fixtures/models/tiny-mimo. Request A (a short prompt, 24 greedy tokens) is decoded alone, then in one
batch with request B, whose prompt is 247 tokens long (9 tokens before max_model_len = 256). Exit status 1
and `BUG REPRODUCED` when any of A's verification steps got other drafts beside B; 0 and `not reproduced` else.
"""

import os
import sys
from pathlib import Path

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

from tokenizers import Tokenizer
from vllm import LLM, SamplingParams

MODEL = sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).parents[2] / "fixtures" / "models" / "tiny-mimo")
K = 2

tokenizer = Tokenizer.from_file(str(Path(MODEL) / "tokenizer.json"))
a = tokenizer.encode("When a class definition is executed, the").ids
b = (tokenizer.encode("The for statement is used to iterate over the elements of a sequence. " * 40).ids)[:247]

llm = LLM(
    model=MODEL,
    dtype="float32",
    max_model_len=256,
    enforce_eager=True,
    seed=0,
    skip_tokenizer_init=True,
    async_scheduling=False,
    speculative_config={"method": "mtp", "num_speculative_tokens": K},
)
drafts_of_a: list[list[int]] = []  # the drafts vLLM's scheduler sends to verification for request A, per step


def record_drafts(worker) -> None:  # noqa: ANN001 - runs inside vLLM's worker
    execute_model = worker.model_runner.execute_model

    def recorded(scheduler_output, *args, **kwargs):  # noqa: ANN001
        for request_id, drafts in scheduler_output.scheduled_spec_decode_tokens.items():
            if request_id.startswith("A-"):
                drafts_of_a.append(list(drafts))
        return execute_model(scheduler_output, *args, **kwargs)

    worker.model_runner.execute_model = recorded


llm.collective_rpc(record_drafts)
greedy_24 = SamplingParams(temperature=0.0, max_tokens=24, ignore_eos=True, detokenize=False)
greedy_9 = SamplingParams(temperature=0.0, max_tokens=9, ignore_eos=True, detokenize=False)
engine = llm.llm_engine


def decode(requests: dict) -> dict:
    drafts_of_a.clear()
    for request_id, (prompt, params) in requests.items():
        engine.add_request(request_id, {"prompt_token_ids": prompt}, params)
    outputs = {}
    while engine.has_unfinished_requests():
        outputs.update({o.request_id: o for o in engine.step() if o.finished})
    return {"tokens": list(outputs["A"].outputs[0].token_ids), "drafts": [list(d) for d in drafts_of_a]}


alone = decode({"A": (a, greedy_24)})
together = decode({"A": (a, greedy_24), "B": (b, greedy_9)})
print("A's tokens alone and beside B are equal:", alone["tokens"] == together["tokens"])
for step, (x, y) in enumerate(zip(alone["drafts"], together["drafts"], strict=False)):
    print(f"step {step:2d}: A's drafts alone {x}, beside B {y}{'   <- differ' if x != y else ''}")
differ = sum(x != y for x, y in zip(alone["drafts"], together["drafts"], strict=False))
print(f"{differ} of {len(alone['drafts'])} verify steps of A got other drafts because B shares the batch")
print("BUG REPRODUCED" if differ else "not reproduced")
sys.exit(1 if differ else 0)
