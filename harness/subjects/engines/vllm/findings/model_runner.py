"""What every vLLM reproducer here shares: the model runner it runs vLLM on, and the drafts vLLM verified, read on
either runner. vLLM alone: this file imports nothing of the harness.

    python <reproducer>.py [MODEL_DIR] [--runner v1|v2]

- v1 (the default): Model Runner V1, vllm/v1/worker/gpu_model_runner.py (on CPU its subclass
  vllm/v1/worker/cpu_model_runner.py), what the CPU build runs by default;
- v2: Model Runner V2, vllm/v1/worker/gpu/model_runner.py (on CPU its subclass vllm/v1/worker/cpu/model_runner.py),
  what vLLM runs on CUDA. On a CPU its Triton kernels need Triton's interpreter: the harness's enabling shim
  (harness/subjects/engines/vllm/cpu_triton.py, standard library, numpy and Triton only; not a change to what vLLM
  computes) is executed from its file before vLLM is imported. V2 on a CPU is 10 to 50 times slower than V1.

The runner is set explicitly (VLLM_USE_V2_MODEL_RUNNER=1 or 0), and `confirm` checks the engine runs the one asked for.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[5]
SHIM = REPO / "harness" / "subjects" / "engines" / "vllm" / "cpu_triton.py"
RUNNERS = ("v1", "v2")


def start(default_model: Path | None) -> argparse.Namespace:
    """Parse [MODEL_DIR] (when the reproducer takes one) and --runner, and prepare the runner; call it before vLLM is
    imported. Returns the arguments: .runner, and .model (a str) when default_model is given."""
    parser = argparse.ArgumentParser(description=(sys.modules["__main__"].__doc__ or "").split("\n", 1)[0])
    if default_model is not None:
        parser.add_argument("model", nargs="?", default=str(default_model), metavar="MODEL_DIR")
    parser.add_argument("--runner", choices=RUNNERS, default="v1", help="vLLM's model runner (default: v1)")
    args = parser.parse_args()
    os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "1" if args.runner == "v2" else "0"
    if args.runner == "v2" and not on_cuda():
        spec = importlib.util.spec_from_file_location("cpu_triton", SHIM)
        shim = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(shim)
        shim.enable_model_runner_v2_on_cpu()
    print(f"model runner: {args.runner}")
    return args


def on_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def confirm(llm, runner: str) -> None:  # noqa: ANN001 - vLLM's LLM
    """Stop (exit status 2, no verdict) unless the engine runs the model runner asked for; V2 keeps its requests'
    state in `req_states`, V1 has none."""
    name, has_req_states = llm.collective_rpc(
        lambda worker: (type(worker.model_runner).__module__, hasattr(worker.model_runner, "req_states"))
    )[0]
    print(f"model runner class: {name}")
    if has_req_states != (runner == "v2"):
        sys.exit(f"asked for model runner {runner}, vLLM runs {name}")


def record_verified_drafts(llm, runner: str, note: Callable[[str, list[int]], None]) -> None:  # noqa: ANN001
    """Call note(request id, drafts) for every request with drafts at each verification pass, with the drafts vLLM
    verified. V1: the scheduler output's `scheduled_spec_decode_tokens`, as execute_model receives it. V2: there the
    scheduler holds only -1 placeholders (vllm/v1/worker/gpu/spec_decode/utils.py, DraftTokensHandler), so the runner's
    own drafts, `req_states.draft_tokens[slot, :n]` with n = `input_batch.num_draft_tokens_per_req[row]`, read as the
    runner's `sample` (the rejection sampler) is called, before the next proposal overwrites them."""

    def install_v1(worker) -> None:  # noqa: ANN001 - runs inside vLLM's worker
        execute_model = worker.model_runner.execute_model

        def recorded(scheduler_output, *args, **kwargs):  # noqa: ANN001
            for request_id, drafts in scheduler_output.scheduled_spec_decode_tokens.items():
                note(request_id, list(drafts))
            return execute_model(scheduler_output, *args, **kwargs)

        worker.model_runner.execute_model = recorded

    def install_v2(worker) -> None:  # noqa: ANN001 - runs inside vLLM's worker
        model_runner = worker.model_runner
        sample = model_runner.sample

        def recorded(hidden_states, input_batch, *args, **kwargs):  # noqa: ANN001
            counts = input_batch.num_draft_tokens_per_req  # None: no request of this pass has drafts
            if counts is not None:
                table = model_runner.req_states.draft_tokens  # [max_num_reqs, k], by request slot
                for row, request_id in enumerate(input_batch.req_ids):
                    if int(counts[row]):
                        slot = int(input_batch.idx_mapping_np[row])
                        note(request_id, [int(t) for t in table[slot, : int(counts[row])].tolist()])
            return sample(hidden_states, input_batch, *args, **kwargs)

        model_runner.sample = recorded

    llm.collective_rpc(install_v2 if runner == "v2" else install_v1)


def counted(owner: object, name: str) -> list:
    """Replace owner.name (a function or method) with one that records each call's result; returns the record, to
    show which of vLLM's code paths a run took."""
    function = getattr(owner, name)
    calls: list = []

    def counting(*args, **kwargs):
        result = function(*args, **kwargs)
        calls.append(result)
        return result

    setattr(owner, name, counting)
    return calls
