"""llama.cpp speculative decoding: asked for token probabilities (n_probs), the server reports every token a
verification pass emits with probability 1 and no top tokens.

Standalone: llama.cpp alone (the xllamacpp wheel, 2026.10.11549, or a build of its sdist), no harness import. Run it
with the Python of llama.cpp's environment (`mtp-harness engine install llama.cpp`):

    python reproducer.py [model.gguf]

(default: the mtp-harness fixture fixtures/models/tiny-glm4-moe/model.gguf beside this folder). Each greedy request
(n_probs 5) is decoded by a server with draft-mtp (k = 3) and by one without speculation, and the per-token logprobs
of both are printed. Without speculation every token is sampled alone and gets the target's probabilities
(tools/server/server-context.cpp populate_token_probs); with it, the tokens a verification pass emits (accepted
drafts, the correction, the bonus token) keep `result.prob = 1.0f; // set later` and no top list. Up to where the
two outputs differ, both decode the same prefix, so a correct engine reports the same logprob there both ways.
Prints BUG REPRODUCED and exits 1 when the speculative server reports a token with logprob 0 and no top tokens where
the same prefix's logprob without speculation is not ~0; `not reproduced`, exit 0, otherwise.
"""

import math
import sys
from pathlib import Path

import xllamacpp

K, TOP, N_PREDICT = 3, 5, 16
CERTAIN = 1e-3  # a logprob within this of 0 is a probability of ~1 in its own right
GGUF = (
    sys.argv[1]
    if len(sys.argv) > 1
    else str(Path(__file__).resolve().parents[6] / "fixtures/models/tiny-glm4-moe/model.gguf")
)
PROMPTS = [[341, 703, 545, 467, 292, 548, 310], [5, 100, 200, 300, 7, 8], [33, 78, 505, 292, 871, 14, 199]]


def server(k: int) -> xllamacpp.Server:
    params = xllamacpp.CommonParams()
    params.model.path = GGUF
    params.n_ctx, params.n_parallel = 256, 1
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = 1
    params.cache_type_k = params.cache_type_v = xllamacpp.ggml_type.GGML_TYPE_F32
    params.flash_attn_type = xllamacpp.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_DISABLED
    params.warmup, params.fit_params, params.cache_ram_mib, params.verbosity = False, False, 0, 0
    if k:
        params.speculative.types = [xllamacpp.common_speculative_type.COMMON_SPECULATIVE_TYPE_DRAFT_MTP]
        params.speculative.draft.n_max = params.speculative.draft.n_min = k
        params.speculative.draft.p_min = 0.0
        params.speculative.draft.cache_type_k = params.speculative.draft.cache_type_v = params.cache_type_k
    return xllamacpp.Server(params)


def completion(srv: xllamacpp.Server, prompt: list[int]) -> tuple[list[tuple[int, float, int]], dict]:
    """Each output token as (token, logprob, how many top tokens), and the request's timings (draft counts)."""
    request = {
        "prompt": prompt,
        "n_predict": N_PREDICT,
        "temperature": 0.0,
        "n_probs": TOP,
        "cache_prompt": False,
        "verbose": True,
    }
    verbose = srv.handle_completions(request)["__verbose"]
    probs = [(e["id"], e["logprob"], len(e["top_logprobs"])) for e in verbose["completion_probabilities"]]
    return probs, verbose["timings"]


speculative, plain = server(K), server(0)
wrong, compared, largest = [], 0, 0.0
for number, prompt in enumerate(PROMPTS):
    with_spec, timings = completion(speculative, prompt)
    without, _ = completion(plain, prompt)
    print(
        f"prompt {prompt[:4]}...: draft-mtp k = {K} drafted {timings.get('draft_n')} accepted "
        f"{timings.get('draft_n_accepted')}"
    )
    show = number == 0  # the first prompt's tokens in full, the others' count
    if show:
        print("  pos  token  logprob with speculation (top n)    without speculation (top n)")
    lies = 0
    for position, (ours, theirs) in enumerate(zip(with_spec, without, strict=False)):
        if ours[0] != theirs[0]:
            print(f"  {position:3d}  the outputs differ here ({ours[0]} / {theirs[0]}): compared up to here")
            break
        lie = ours[1] == 0.0 and ours[2] == 0 and theirs[1] < -CERTAIN
        lies += lie
        compared, largest = compared + 1, max(largest, abs(ours[1] - theirs[1]))
        if show:
            print(
                f"  {position:3d}  {ours[0]:5d}  {ours[1]:9.5f} ({ours[2]}) p = {math.exp(ours[1]):.4f}     "
                f"{theirs[1]:9.5f} ({theirs[2]}) p = {math.exp(theirs[1]):.4f}{'   <- probability 1' if lie else ''}"
            )
    print(f"  {lies} of {len(with_spec)} tokens reported with probability 1 and no top tokens")
    wrong += [prompt] * lies
if wrong:
    print(
        f"BUG REPRODUCED: {len(wrong)} tokens reported with probability 1 and no top tokens under speculation, "
        "where the same prefix without speculation gives the target's probability below 1"
    )
    sys.exit(1)
print(
    f"not reproduced: no token reported with probability 1 where the target's is below 1 ({compared} tokens "
    f"compared; the largest logprob difference with and without speculation {largest:.2g})"
)
