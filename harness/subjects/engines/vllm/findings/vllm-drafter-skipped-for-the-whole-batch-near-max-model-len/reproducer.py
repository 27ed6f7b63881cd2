"""Reproducer (vLLM alone): one request near max_model_len switches MTP drafting off for every request of the
batch, and the other requests draft worse even after it has finished.

    python reproducer.py [MODEL_DIR] [--runner v1|v2]

Run it with the Python of a vLLM 0.32.0 environment (`mtp-harness engine install vllm` makes one on CPU).
MODEL_DIR: a checkpoint with MTP layers and max_position_embeddings 256; default: the harness fixture
fixtures/models/tiny-mimo. --runner: vLLM's model runner, v1 (the default, the CPU build's) or v2
(model_runner.py, beside this file). Request A (a short prompt, 24 greedy tokens) is decoded alone, then in one
batch with request B, whose prompt is 247 tokens long (9 tokens before max_model_len = 256). Exit status 1
and `BUG REPRODUCED` when any of A's verification steps got other drafts beside B; 0 and `not reproduced` else.
It counts the calls of V1's per-batch check (GPUModelRunner._input_fits_in_drafter) and of the drafter.
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

from tokenizers import Tokenizer  # noqa: E402 - after the model runner is prepared
from vllm import LLM, SamplingParams  # noqa: E402
from vllm.v1.worker import gpu_model_runner  # noqa: E402 - Model Runner V1 (the CPU one subclasses it)

MODEL = ARGS.model
K = 2

tokenizer = Tokenizer.from_file(str(Path(MODEL) / "tokenizer.json"))
a = tokenizer.encode("When a class definition is executed, the").ids
b = (tokenizer.encode("The for statement is used to iterate over the elements of a sequence. " * 40).ids)[:247]

fits_in_drafter = model_runner.counted(gpu_model_runner.GPUModelRunner, "_input_fits_in_drafter")  # V1's check
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
model_runner.confirm(llm, ARGS.runner)
drafts_of_a: list[list[int]] = []  # the drafts vLLM verified for request A, per step
proposals: list[int] = []  # the drafter's runs (V1: drafter.propose, V2: speculator.propose)


def count_proposals(worker) -> None:  # noqa: ANN001 - runs inside vLLM's worker
    runner = worker.model_runner
    drafter = runner.speculator if ARGS.runner == "v2" else runner.drafter
    propose = drafter.propose

    def counted_propose(*args, **kwargs):
        proposals.append(1)
        return propose(*args, **kwargs)

    drafter.propose = counted_propose


def note(request_id: str, drafts: list[int]) -> None:
    if request_id.startswith("A-"):
        drafts_of_a.append(drafts)


model_runner.record_verified_drafts(llm, ARGS.runner, note)
llm.collective_rpc(count_proposals)
greedy_24 = SamplingParams(temperature=0.0, max_tokens=24, ignore_eos=True, detokenize=False)
greedy_9 = SamplingParams(temperature=0.0, max_tokens=9, ignore_eos=True, detokenize=False)
engine = llm.llm_engine


def decode(requests: dict) -> dict:
    drafts_of_a.clear()
    fits_in_drafter.clear()
    proposals.clear()
    for request_id, (prompt, params) in requests.items():
        engine.add_request(request_id, {"prompt_token_ids": prompt}, params)
    outputs, steps = {}, 0
    while engine.has_unfinished_requests():
        outputs.update({o.request_id: o for o in engine.step() if o.finished})
        steps += 1
    return {
        "tokens": list(outputs["A"].outputs[0].token_ids),
        "drafts": [list(d) for d in drafts_of_a],
        "steps": steps,
        "checks": list(fits_in_drafter),
        "proposals": len(proposals),
    }


alone = decode({"A": (a, greedy_24)})
together = decode({"A": (a, greedy_24), "B": (b, greedy_9)})
print("A's tokens alone and beside B are equal:", alone["tokens"] == together["tokens"])
for step, (x, y) in enumerate(zip(alone["drafts"], together["drafts"], strict=False)):
    print(f"step {step:2d}: A's drafts alone {x}, beside B {y}{'   <- differ' if x != y else ''}")
differ = sum(x != y for x, y in zip(alone["drafts"], together["drafts"], strict=False))
print(f"{differ} of {len(alone['drafts'])} verify steps of A got other drafts because B shares the batch")
print(
    f"beside B: {together['steps']} engine steps, the drafter ran at {together['proposals']}; V1's "
    f"_input_fits_in_drafter was called {len(together['checks'])} times, False (drafter skipped for the whole "
    f"batch) {together['checks'].count(False)} times"
)
if not differ and ARGS.runner == "v2" and not together["checks"]:
    print(
        "on Model Runner V2: V1's per-batch check is never called (0 calls above); V2's sample_tokens runs the "
        "speculator for every batch (vllm/v1/worker/gpu/model_runner.py, sample_tokens), so no request loses its "
        "drafts or its MTP cache entries because another is near max_model_len"
    )
print("BUG REPRODUCED" if differ else "not reproduced")
sys.exit(1 if differ else 0)
