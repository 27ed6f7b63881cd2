"""Reproducer (vLLM alone): with speculative decoding, Model Runner V1 masks the stop tokens of a pass's bonus
position by the request's committed length, not by the bonus position, so an EOS at exactly the first position
min_tokens allows is suppressed when that position is the bonus token of a pass whose drafts were all accepted.

    python reproducer.py [MODEL_DIR] [--runner v1|v2]

Run it with the Python of a vLLM 0.32.0 environment (`mtp-harness engine install vllm` makes one on CPU).
MODEL_DIR: a checkpoint with MTP layers; default: the harness fixture fixtures/models/tiny-mimo. --runner: vLLM's
model runner, v1 (the default, the CPU build's) or v2 (model_runner.py, beside this file).

End to end, greedy, on the prompt fixture natural-01 (fixtures/prompts.json, read as data): an engine with MTP
speculation (k = 3) decodes the plain greedy output R (24 tokens) and its passes (the drafts vLLM verified). Then,
for each position e whose token R[e] does not occur in R before e, the request is asked again with R[e] as its only
stop token (`stop_token_ids=[R[e]]`, `ignore_eos=True`, as the harness asks) and `min_tokens=e`: the stop token is
masked at positions 0..e-1, where it is not the argmax anyway, and allowed at e, so the output must be R[0..e] and
end there. Each such request runs on that engine and on an engine without speculation (the truth; started after the
first is shut down). Exit status 1 and `BUG REPRODUCED` when any e gives other tokens with speculation than
without; 0 and `not reproduced` when none does. It prints, for each e that differs, the pass that emitted position
e: the bug's are passes that started before e, had every draft accepted, and put their bonus token at e. Greedy
drafts on a fixed checkpoint are deterministic, so the positions it reaches are the same every run.
"""

import gc
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
from vllm.distributed import cleanup_dist_env_and_memory  # noqa: E402

MODEL = ARGS.model
PROMPTS = (
    Path(__file__).resolve().parents[6] / "fixtures" / "prompts.json"
)  # the harness's prompt fixtures, read as data
K = 3
NEW_TOKENS = 24

fixture = next(f for f in json.loads(PROMPTS.read_text())["prompts"] if f["id"] == "natural-01")
tokenizer = Tokenizer.from_file(str(Path(MODEL) / "tokenizer.json"))
prompt = {"prompt_token_ids": fixture["token_ids"] if "token_ids" in fixture else tokenizer.encode(fixture["text"]).ids}


def engine(speculative: bool) -> LLM:
    llm = LLM(
        model=MODEL,
        dtype="float32",
        max_model_len=256,
        enforce_eager=True,
        seed=0,
        skip_tokenizer_init=True,
        async_scheduling=False,
        speculative_config={"method": "mtp", "num_speculative_tokens": K} if speculative else None,
    )
    model_runner.confirm(llm, ARGS.runner)
    return llm


def greedy(min_tokens: int = 0, stop: int | None = None) -> SamplingParams:
    return SamplingParams(
        temperature=0.0,
        max_tokens=NEW_TOKENS,
        min_tokens=min_tokens,
        stop_token_ids=[] if stop is None else [stop],
        ignore_eos=True,  # only the request's own stop token ends it
        detokenize=False,
    )


def passes_of(drafts: list[list[int]], tokens: list[int]) -> list[tuple[int, list[int], int]]:
    """(start, drafts, accepted) of each verification pass: the prefill emits position 0; a pass starting at s
    accepts the drafts that are the output's next tokens and emits one more (the correction or the bonus)."""
    passes, start = [], 1
    for proposed in drafts:
        accepted = 0
        while (
            accepted < len(proposed)
            and start + accepted < len(tokens)
            and proposed[accepted] == tokens[start + accepted]
        ):
            accepted += 1
        passes.append((start, proposed, accepted))
        start += accepted + 1
    return passes


verified: list[list[int]] = []  # the drafts vLLM verified for the request, per pass
speculating = engine(speculative=True)
model_runner.record_verified_drafts(speculating, ARGS.runner, lambda request_id, drafts: verified.append(drafts))


def decode(llm: LLM, params: SamplingParams) -> tuple[list[int], list[tuple[int, list[int], int]]]:
    verified.clear()
    [output] = llm.generate([prompt], params, use_tqdm=False)
    tokens = list(output.outputs[0].token_ids)
    return tokens, passes_of(verified, tokens)


plain, plain_passes = decode(speculating, greedy())
print(f"R (k = {K}): {plain}")
print(f"its passes (start, drafts, accepted): {plain_passes}")
candidates = [e for e in range(1, NEW_TOKENS) if plain[e] not in plain[:e]]
print(f"asked with stop token R[e] and min_tokens e, for e in {candidates}")
with_speculation = {e: decode(speculating, greedy(e, plain[e])) for e in candidates}
del speculating
gc.collect()
cleanup_dist_env_and_memory()
target_only = engine(speculative=False)
truth = {e: decode(target_only, greedy(e, plain[e]))[0] for e in candidates}

differ = [e for e in candidates if with_speculation[e][0] != truth[e]]
for e in differ:
    tokens, passes = with_speculation[e]
    start, drafts, accepted = next((p for p in passes if p[0] <= e <= p[0] + p[2]), (None, [], 0))
    bonus = start is not None and accepted == len(drafts) and e == start + len(drafts)
    print(
        f"e = {e}, stop token {plain[e]}: without speculation {truth[e][e - 1 :]} (ends at e), with it "
        f"{tokens[e - 1 : e + 3]}... ({len(tokens)} tokens); position {e} emitted by the pass starting at {start}, "
        f"drafts {drafts}, {accepted} accepted: {'its bonus position' if bonus else 'not its bonus position'}"
    )
reproduced = bool(differ)
if not reproduced:
    print(f"every e of the {len(candidates)}: the same tokens with and without speculation")
elsewhere = [e for e in candidates if truth[e] != plain[: e + 1]]  # the truth is R[0..e]: min_tokens lifts at e
print(
    f"without speculation, every e ends at e with R's tokens: {not elsewhere}"
    + (f" (not {elsewhere})" if elsewhere else "")
)
print("BUG REPRODUCED" if reproduced else "not reproduced")
sys.exit(1 if reproduced else 0)
