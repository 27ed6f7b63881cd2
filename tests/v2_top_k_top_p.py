"""Run with the vLLM environment's Python (tests/test_vllm_runner_v2.py does): V2's top-k/top-p Triton kernel
(vllm/v1/sample/ops/topk_topp_triton.py), run by Triton's interpreter through the harness's CPU shim, keeps exactly
the tokens vLLM's PyTorch implementation keeps (apply_top_k_top_p_pytorch), on seeded random logits. Prints one
JSON line per batch; exit status 0 when every mask is equal."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness" / "subjects" / "engines" / "vllm"))
import cpu_triton  # the harness's shim: standard library, numpy and Triton only

cpu_triton.enable_model_runner_v2_on_cpu()

import torch  # noqa: E402 - after the shim
from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p_pytorch  # noqa: E402
from vllm.v1.sample.ops.topk_topp_triton import apply_top_k_top_p_triton  # noqa: E402

generator = torch.Generator().manual_seed(20261203)
equal = True
for batch, top_k, top_p in ((4, 50, 0.9), (3, 5, 1.0), (5, 1024, 0.5), (2, 20, 0.3)):
    logits = torch.randn(batch, 1024, generator=generator)
    k = torch.full((batch,), top_k, dtype=torch.int32)
    p = torch.full((batch,), top_p)
    kernel = torch.isfinite(apply_top_k_top_p_triton(logits.clone(), k, p))
    pytorch = torch.isfinite(apply_top_k_top_p_pytorch(logits.clone(), k.long(), p))
    same = torch.equal(kernel, pytorch)
    equal &= same
    print(json.dumps({"batch": batch, "top_k": top_k, "top_p": top_p, "kept": kernel.sum(-1).tolist(), "equal": same}))
sys.exit(0 if equal else 1)
