"""llama.cpp draft-mtp: a pass whose accepted drafts reach the end of the slot's context emits only part of them.

Standalone: llama.cpp alone (the xllamacpp wheel, 2026.10.11549), no harness import. Run it with the Python of
llama.cpp's environment (`mtp-harness engine install llama.cpp`):

    python reproducer.py [model.gguf]

(default: the mtp-harness fixture fixtures/models/tiny-glm4-moe/model.gguf beside this folder). One slot of 256
tokens; prompts (prefixes of a Python-documentation text, as the fixture's tokenizer encodes it) that leave room
for exactly n_predict tokens, n_predict = 24..40; each request decoded greedily and seeded (temperature 1.3, top-p
0.9) by a server with draft-mtp (k = 3) and by one without speculation. llama.cpp samples the target's token
with one random draw per emitted token and accepts a draft only if it is that token, so both servers give the
same tokens; a correct engine returns n_predict tokens both ways. Prints BUG REPRODUCED and exits
1 when a speculative request stops short of the same request without speculation.
"""

import sys
from pathlib import Path

import xllamacpp

N_CTX, K = 256, 3
GGUF = (
    sys.argv[1]
    if len(sys.argv) > 1
    else str(Path(__file__).resolve().parents[6] / "fixtures/models/tiny-glm4-moe/model.gguf")
)


def server(k: int) -> xllamacpp.Server:
    params = xllamacpp.CommonParams()
    params.model.path = GGUF
    params.n_ctx, params.n_parallel = N_CTX, 1
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


def tokens(srv: xllamacpp.Server, prompt: list[int], setting: tuple[float, float, int]) -> list[int]:
    temperature, top_p, seed = setting
    request = {
        "prompt": prompt,
        "n_predict": N_CTX - len(prompt),
        "temperature": temperature,
        "top_k": 0,
        "top_p": top_p,
        "samplers": ["top_k", "temperature", "top_p"],
        "seed": seed,
        "cache_prompt": False,
        "verbose": True,
        "return_tokens": True,
    }
    return srv.handle_completions(request)["__verbose"]["tokens"]


TEXT = (  # the fixture prompt long-01: 232 tokens
    51,
    80,
    515,
    280,
    414,
    827,
    199,
    828,
    352,
    199,
    199,
    33,
    394,
    449,
    617,
    273,
    299,
    540,
    888,
    371,
    358,
    989,
    761,
    325,
    399,
    1018,
    199,
    83,
    764,
    347,
    621,
    383,
    377,
    261,
    317,
    304,
    275,
    661,
    888,
    366,
    698,
    685,
    725,
    320,
    295,
    667,
    290,
    9,
    399,
    199,
    988,
    290,
    718,
    397,
    1018,
    827,
    14,
    640,
    292,
    688,
    477,
    83,
    261,
    441,
    350,
    818,
    310,
    199,
    10,
    79,
    417,
    537,
    832,
    322,
    65,
    513,
    875,
    1001,
    290,
    909,
    310,
    432,
    69,
    268,
    522,
    271,
    87,
    78,
    336,
    876,
    643,
    278,
    199,
    895,
    313,
    450,
    328,
    310,
    607,
    301,
    413,
    867,
    908,
    83,
    14,
    221,
    694,
    503,
    12,
    434,
    261,
    394,
    432,
    425,
    199,
    65,
    414,
    419,
    68,
    374,
    851,
    955,
    320,
    269,
    88,
    2,
    292,
    297,
    503,
    308,
    574,
    394,
    12,
    199,
    400,
    78,
    269,
    88,
    59,
    73,
    61,
    2,
    292,
    221,
    350,
    829,
    348,
    750,
    73,
    770,
    277,
    298,
    310,
    269,
    820,
    8,
    88,
    9,
    437,
    851,
    483,
    88,
    12,
    270,
    324,
    14,
    199,
    37,
    88,
    581,
    307,
    913,
    372,
    78,
    282,
    325,
    12,
    408,
    266,
    327,
    609,
    310,
    579,
    266,
    297,
    509,
    353,
    562,
    297,
    199,
    391,
    439,
    594,
    654,
    261,
    441,
    350,
    80,
    317,
    337,
    414,
    292,
    650,
    347,
    637,
    80,
    825,
    514,
    199,
    2,
    33,
    84,
    436,
    567,
    2,
    366,
    269,
    984,
    567,
    2,
    516,
    199,
    199,
    51,
    69,
    84,
    725,
    261,
    1018,
    414,
    310,
    269,
)
SETTINGS = [(0.0, 1.0, 0)] + [(1.3, 0.9, seed) for seed in range(4)]  # (temperature, top-p, seed)
prompts = {n: list(TEXT[: N_CTX - n]) for n in range(24, 41)}  # the first 256 - n tokens
cases = [(n, setting) for n in prompts for setting in SETTINGS]
plain_server = server(0)
plain = {case: tokens(plain_server, prompts[case[0]], case[1]) for case in cases}
del plain_server
speculative_server = server(K)
short = []
for (n, setting), expected in plain.items():
    got = tokens(speculative_server, prompts[n], setting)
    if got != expected:
        short.append((n, setting, len(got), len(expected), got == expected[: len(got)]))
print(f"{len(cases)} requests of (256 - n) + n tokens in a {N_CTX}-token slot, n = 24..40, draft-mtp k = {K}:")
for n, (temperature, _, seed), got, expected, prefix in short[:5]:
    kind = "a prefix of it" if prefix else "other tokens"
    print(
        f"  n = {n}, temperature {temperature}, seed {seed}: {got} tokens with draft-mtp, {expected} without ({kind})"
    )
if short:
    print(f"BUG REPRODUCED: {len(short)} of {len(cases)} requests stop short with draft-mtp")
    sys.exit(1)
print("not reproduced: every request gives the same tokens with and without draft-mtp")
