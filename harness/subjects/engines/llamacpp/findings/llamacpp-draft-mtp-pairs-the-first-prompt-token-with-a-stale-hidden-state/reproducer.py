"""llama.cpp draft-mtp: a request's drafts depend on what its slot decoded before.

Standalone: llama.cpp alone (the xllamacpp wheel, 2026.10.11549), no harness import. Run it with the Python of
llama.cpp's environment (`mtp-harness engine install llama.cpp`):

    python reproducer.py [model.gguf]

(default: the mtp-harness fixture fixtures/models/tiny-glm4-moe/model.gguf beside this folder). The MTP layer's
input for the prompt's first token is paired with `pending_h`, the slot's last hidden state, which is zero on a
fresh slot and is never reset between requests (common/speculative.cpp:1494, 1592). Each greedy request is
decoded on a fresh server, and again on the same slot right after another request. The drafts llama.cpp logs
(verbosity 5: `draft candidate 0, pos i: token (probability)`) must be the same both times: a request's drafts are
a function of its own tokens. Prints BUG REPRODUCED and exits 1 when they differ.
"""

import os
import re
import sys
import tempfile
import time
from pathlib import Path

import xllamacpp

K = 2
GGUF = (
    sys.argv[1]
    if len(sys.argv) > 1
    else str(Path(__file__).resolve().parents[6] / "fixtures/models/tiny-glm4-moe/model.gguf")
)
CANDIDATE = re.compile(r"draft candidate +0, pos +(\d+): +(\d+) \( *([0-9.]+)\)")
PROMPTS = [[5, 100, 200, 300, 7, 8], [9, 10, 11, 12], [33, 78, 505, 292, 871, 14, 199], [341, 703, 545, 467, 292]]
OTHER = [51, 80, 515, 280, 414, 827, 199, 828, 352]  # decoded first on the same slot


def server() -> xllamacpp.Server:
    params = xllamacpp.CommonParams()
    params.model.path = GGUF
    params.n_ctx, params.n_parallel = 256, 1
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = 1
    params.cache_type_k = params.cache_type_v = xllamacpp.ggml_type.GGML_TYPE_F32
    params.flash_attn_type = xllamacpp.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_DISABLED
    params.warmup, params.fit_params, params.cache_ram_mib, params.verbosity = False, False, 0, 5
    params.speculative.types = [xllamacpp.common_speculative_type.COMMON_SPECULATIVE_TYPE_DRAFT_MTP]
    params.speculative.draft.n_max = params.speculative.draft.n_min = K
    params.speculative.draft.p_min = 0.0
    params.speculative.draft.cache_type_k = params.speculative.draft.cache_type_v = params.cache_type_k
    return xllamacpp.Server(params)


def drafts(srv: xllamacpp.Server, prompt: list[int], log: Path) -> tuple[list[int], list[tuple[str, str]]]:
    """The request's tokens, and every draft (token, probability) llama.cpp logged while decoding it."""
    start = log.stat().st_size
    request = {
        "prompt": prompt,
        "n_predict": 12,
        "temperature": 0.0,
        "cache_prompt": False,
        "verbose": True,
        "return_tokens": True,
        "id_slot": 0,
    }
    tokens = srv.handle_completions(request)["__verbose"]["tokens"]
    time.sleep(0.5)  # llama.cpp writes its log from a thread of its own
    with log.open(errors="replace") as stream:
        stream.seek(start)
        return tokens, [(m[2], m[3]) for m in CANDIDATE.finditer(stream.read())]


log = Path(tempfile.mkstemp(suffix=".log")[1])
os.dup2(os.open(log, os.O_WRONLY | os.O_APPEND), 2)  # llama.cpp logs to file descriptor 2
differ = []
for prompt in PROMPTS:
    fresh = drafts(server(), prompt, log)
    srv = server()
    drafts(srv, OTHER, log)
    after = drafts(srv, prompt, log)
    if fresh[0] != after[0]:
        print(f"prompt {prompt[:4]}...: other tokens after another request ({fresh[0]} / {after[0]})")
    if fresh[1] != after[1]:
        first = next(i for i, (a, b) in enumerate(zip(fresh[1], after[1], strict=False)) if a != b)
        differ.append(prompt)
        print(
            f"prompt {prompt[:4]}...: draft {first} (token, probability) on a fresh slot {fresh[1][first]}, after "
            f"another request {after[1][first]}"
        )
if differ:
    print(f"BUG REPRODUCED: {len(differ)} of {len(PROMPTS)} requests drafted differently after another request")
    sys.exit(1)
print("not reproduced: every request drafted the same on a fresh slot and after another request")
