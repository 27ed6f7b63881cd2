"""Reproducer (vLLM alone): with chunked prefill, vLLM's MTP layer caches the prompt's last token at the end of every
prefill chunk that ends inside the prompt, so a request whose prompt was split drafts otherwise than the same request
prefilled whole.

    python reproducer.py [MODEL_DIR] [--runner v1|v2]

Run it with the Python of a vLLM 0.32.0 environment (`mtp-harness engine install vllm` makes one on CPU).
MODEL_DIR: a checkpoint with MTP layers (MiMo, GLM-4.5, DeepSeek-V3 style); default: the harness fixture
fixtures/models/tiny-mimo. --runner: vLLM's model runner, v1 (the default, the CPU build's) or v2 (model_runner.py,
beside this file). One engine, chunked prefill with a budget of 32 tokens a step, prefix caching off, k = 2,
greedy. Each prompt fixture of up to 32 tokens (fixtures/prompts.json, read as data) is decoded alone (its prompt
fits one step: prefilled whole), then all of them as one batch behind a long prompt that takes most of the first
two steps' budget (their prompts are then prefilled in chunks, split at many positions). A greedy draft is a
function of the committed prefix, so a request's drafts must not depend on how its prompt was prefilled. Exit
status 1 and `BUG REPRODUCED` when the drafts of a request differ between the two decodes; 0 and `not reproduced`
when every request drafts the same (the output tokens are the same in both, as greedy verification guarantees).
It counts the calls of V1's proposer step at fault (SpecDecodeBaseProposer.prepare_next_token_ids_padded).
"""

import json
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
from vllm.v1.spec_decode import llm_base_proposer  # noqa: E402 - Model Runner V1's proposer

MODEL = ARGS.model
PROMPTS = (
    Path(__file__).resolve().parents[6] / "fixtures" / "prompts.json"
)  # the harness's prompt fixtures, read as data
BUDGET = 32  # tokens a step

tokenizer = Tokenizer.from_file(str(Path(MODEL) / "tokenizer.json"))
fixtures = json.loads(PROMPTS.read_text())["prompts"]
encoded = [f["token_ids"] if "token_ids" in f else tokenizer.encode(f["text"]).ids for f in fixtures]
short = [ids for ids in encoded if len(ids) <= BUDGET]  # prefilled whole when alone
long = [token for ids in encoded for token in ids][: 2 * BUDGET - 5]  # ahead of them: they start mid-step
backups = model_runner.counted(llm_base_proposer.SpecDecodeBaseProposer, "prepare_next_token_ids_padded")
llm = LLM(
    model=MODEL,
    dtype="float32",
    max_model_len=256,
    enforce_eager=True,
    seed=0,
    skip_tokenizer_init=True,
    async_scheduling=False,
    enable_prefix_caching=False,  # every prefill computes its MTP cache entries afresh
    enable_chunked_prefill=True,
    max_num_batched_tokens=BUDGET,
    max_num_seqs=8,
    speculative_config={"method": "mtp", "num_speculative_tokens": 2},
)
model_runner.confirm(llm, ARGS.runner)
drafts: dict[int, list[list[int]]] = {}  # request number -> the drafts of each verification pass
chunks: dict[int, list[int]] = {}  # request number -> prompt tokens scheduled at each step of its prefill


def record_chunks(worker) -> None:  # noqa: ANN001 - runs inside vLLM's worker (the scheduler's output)
    execute_model = worker.model_runner.execute_model

    def recorded(scheduler_output, *args, **kwargs):  # noqa: ANN001
        for new in scheduler_output.scheduled_new_reqs:
            chunks[int(new.req_id.split("-")[0])] = [scheduler_output.num_scheduled_tokens[new.req_id]]
        for request_id in scheduler_output.scheduled_cached_reqs.req_ids:
            number = int(request_id.split("-")[0])
            if number in chunks and sum(chunks[number]) < prompt_length[number]:
                chunks[number].append(scheduler_output.num_scheduled_tokens[request_id])
        return execute_model(scheduler_output, *args, **kwargs)

    worker.model_runner.execute_model = recorded


prompt_length: dict[int, int] = {}
next_number = 0


def decode(prompts: list[list[int]]) -> list[tuple[list[int], list[list[int]], list[int]]]:
    """(tokens, drafts per pass, prefill chunk sizes) of each prompt, decoded as one batch."""
    global next_number
    numbers = list(range(next_number, next_number + len(prompts)))  # vLLM numbers requests in order, across calls
    next_number += len(prompts)
    prompt_length.update(zip(numbers, map(len, prompts), strict=True))
    params = SamplingParams(temperature=0.0, max_tokens=24, ignore_eos=True, detokenize=False)
    outputs = llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
    return [
        (list(o.outputs[0].token_ids), drafts.get(n, []), chunks.get(n, []))
        for o, n in zip(outputs, numbers, strict=True)
    ]


llm.collective_rpc(record_chunks)
model_runner.record_verified_drafts(
    llm, ARGS.runner, lambda request_id, tokens: drafts.setdefault(int(request_id.split("-")[0]), []).append(tokens)
)
alone = [decode([prompt])[0] for prompt in short]
behind_the_long_prompt = decode([list(long), *short])[1:]
differ = 0
for index, ((tokens, whole, whole_chunks), (split_tokens, split, split_chunks)) in enumerate(
    zip(alone, behind_the_long_prompt, strict=True)
):
    assert tokens == split_tokens, f"prompt {index}: greedy output changed, {tokens} against {split_tokens}"
    changed = [i for i, (a, b) in enumerate(zip(whole, split, strict=False)) if a != b]
    differ += bool(changed)
    print(
        f"prompt {index} ({len(short[index])} tokens): prefilled in chunks of {whole_chunks} alone, {split_chunks} "
        f"behind the long prompt; drafts differ at {len(changed)} of {len(whole)} passes"
        + (f", first at pass {changed[0]}: {whole[changed[0]]} alone, {split[changed[0]]} split" if changed else "")
    )
split = sum(len(split_chunks) > 1 for *_, split_chunks in behind_the_long_prompt)
print(f"{differ} of {len(short)} requests drafted otherwise when their prompt was prefilled in chunks ({split} split)")
print(f"V1's prepare_next_token_ids_padded was called {len(backups)} times")
if not differ and ARGS.runner == "v2" and not backups and split:
    print(
        "on Model Runner V2: V1's proposer step is never called (0 calls above); V2's drafter takes the prompt token "
        "after a chunk that ends inside the prompt (vllm/v1/worker/gpu/input_batch.py, _prepare_prefill_inputs_kernel, "
        "next_prefill_tokens; vllm/v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py, "
        "_prepare_prefill_inputs_kernel), so a split prompt drafts as the whole one"
    )
print("BUG REPRODUCED" if differ else "not reproduced")
sys.exit(1 if differ else 0)
