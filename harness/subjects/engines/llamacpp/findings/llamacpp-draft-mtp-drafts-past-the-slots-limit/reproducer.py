"""llama.cpp draft-mtp: the MTP drafter drafts k tokens whatever the slot's own draft limit, so near the slot's
context end it decodes draft steps past it; that decode fails, for every slot drafting in the same step.

Standalone: llama.cpp alone (the xllamacpp wheel, 2026.10.11549, or a build of its sdist), no harness import. Run it
with the Python of llama.cpp's environment (`mtp-harness engine install llama.cpp`):

    python reproducer.py [model.gguf]

(default: the mtp-harness fixture fixtures/models/tiny-glm4-moe/model.gguf beside this folder). Two slots of 256
tokens, draft-mtp at k = 4, greedy:
- request A fills its slot exactly: a 232-token prompt and n_predict 24 (232 + 24 = 256). Near the end the server
  asks for fewer drafts (n_draft_max = n_ctx - n_tokens - 2 and n_remaining - 1), but the MTP drafter stops at k
  only, so its last drafting pass decodes a step at position 256, past the slot's 256 cells: llama.cpp logs
  `decode: failed to find a memory slot` and `draft: llama_process[3] returned 1`;
- request B (20-token prompt, n_predict 200) alone, then beside A, several times: where B drafts in the failing step
  it loses the drafts of that pass (llama.cpp verifies what the drafter had made before the failure).

Each run is a child process whose log (verbosity 3) is read. Prints BUG REPRODUCED and exits 1 when a draft decode
fails for A alone; prints B's drafted and accepted counts alone and beside A (timing decides how often B shares
the failing step). A correct engine never decodes a draft the slot has no room for: `not reproduced`, exit 0.
"""

import subprocess
import sys
import threading
from pathlib import Path

N_CTX, K = 256, 4
GGUF = str(Path(__file__).resolve().parents[6] / "fixtures/models/tiny-glm4-moe/model.gguf")
FAILED = "failed to find a memory slot"
TEXT = [  # the harness's prompt fixture long-01 as tiny-glm4-moe's tokenizer encodes it: 232 tokens
    51, 80, 515, 280, 414, 827, 199, 828, 352, 199, 199, 33, 394, 449, 617, 273, 299, 540, 888, 371, 358, 989, 761,
    325, 399, 1018, 199, 83, 764, 347, 621, 383, 377, 261, 317, 304, 275, 661, 888, 366, 698, 685, 725, 320, 295, 667,
    290, 9, 399, 199, 988, 290, 718, 397, 1018, 827, 14, 640, 292, 688, 477, 83, 261, 441, 350, 818, 310, 199, 10, 79,
    417, 537, 832, 322, 65, 513, 875, 1001, 290, 909, 310, 432, 69, 268, 522, 271, 87, 78, 336, 876, 643, 278, 199,
    895, 313, 450, 328, 310, 607, 301, 413, 867, 908, 83, 14, 221, 694, 503, 12, 434, 261, 394, 432, 425, 199, 65,
    414, 419, 68, 374, 851, 955, 320, 269, 88, 2, 292, 297, 503, 308, 574, 394, 12, 199, 400, 78, 269, 88, 59, 73, 61,
    2, 292, 221, 350, 829, 348, 750, 73, 770, 277, 298, 310, 269, 820, 8, 88, 9, 437, 851, 483, 88, 12, 270, 324, 14,
    199, 37, 88, 581, 307, 913, 372, 78, 282, 325, 12, 408, 266, 327, 609, 310, 579, 266, 297, 509, 353, 562, 297,
    199, 391, 439, 594, 654, 261, 441, 350, 80, 317, 337, 414, 292, 650, 347, 637, 80, 825, 514, 199, 2, 33, 84, 436,
    567, 2, 366, 269, 984, 567, 2, 516, 199, 199, 51, 69, 84, 725, 261, 1018, 414, 310, 269,
]  # fmt: skip


def child(gguf: str, which: str) -> None:
    """Serve `which` (A, B or AB, at once on two slots) and print each request's drafted and accepted counts."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = gguf
    params.n_ctx, params.n_parallel = N_CTX * 2, 2  # 256 tokens per slot
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = 1
    params.cache_type_k = params.cache_type_v = xllamacpp.ggml_type.GGML_TYPE_F32
    params.flash_attn_type = xllamacpp.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_DISABLED
    params.warmup, params.fit_params, params.cache_ram_mib, params.verbosity = False, False, 0, 3
    params.speculative.types = [xllamacpp.common_speculative_type.COMMON_SPECULATIVE_TYPE_DRAFT_MTP]
    params.speculative.draft.n_max = params.speculative.draft.n_min = K
    params.speculative.draft.p_min = 0.0
    params.speculative.draft.cache_type_k = params.speculative.draft.cache_type_v = params.cache_type_k
    server = xllamacpp.Server(params)
    prompt = TEXT
    requests = {
        "A": {"prompt": prompt, "n_predict": N_CTX - len(prompt), "id_slot": 0},
        "B": {"prompt": prompt[:20], "n_predict": 200, "id_slot": 1},
    }
    out = {}

    def run(name: str) -> None:
        request = {**requests[name], "temperature": 0.0, "cache_prompt": False, "verbose": True}
        out[name] = server.handle_completions(request)["__verbose"]["timings"]

    threads = [threading.Thread(target=run, args=(name,)) for name in which]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for name in which:
        print(f"{name} drafted {out[name]['draft_n']} accepted {out[name]['draft_n_accepted']}")


def serve(gguf: str, which: str) -> tuple[str, int]:
    done = subprocess.run([sys.executable, __file__, "--child", gguf, which], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the {which} run failed:\n{done.stderr[-2000:]}")
    return done.stdout.strip(), done.stderr.count(FAILED)


def main() -> int:
    gguf = sys.argv[1] if len(sys.argv) > 1 else GGUF
    alone, failures = serve(gguf, "A")
    print(f"A alone (232 + 24 = 256 tokens, k = {K}): {alone}; failed draft decodes: {failures}")
    b_alone, _ = serve(gguf, "B")
    print(f"B alone: {b_alone}")
    for attempt in range(3):
        together, shared = serve(gguf, "AB")
        print(f"A and B at once, run {attempt + 1}: {together.replace(chr(10), '; ')}; failed draft decodes: {shared}")
    if failures:
        print(
            "BUG REPRODUCED: the MTP drafter decoded a draft step past the slot's context end (its draft decode "
            "failed); a slot drafting in the same step loses the rest of its drafts"
        )
        return 1
    print("not reproduced: no draft decode failed")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
    else:
        sys.exit(main())
