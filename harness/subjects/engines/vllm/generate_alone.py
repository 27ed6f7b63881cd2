"""vLLM alone, for the harness's overhead probe (`mtp-harness bench --job vllm`): the same engine as the harness's
server (server.py llm_arguments, the same environment variables and model runner), without any of the harness's
hooks, decoding the same requests with `LLM.generate`.

Run by the vLLM environment's Python through the servers' shared loop (server_loop.py), like server.py: the first
stdin line is the engine configuration; each `generate` operation decodes its requests (the wire's request form) as
one `LLM.generate` call and replies with the seconds it took (measured here: building the requests' parameters and
the call) and each request's output tokens, so the probe can check that both paths decoded the same thing.
"""

from __future__ import annotations

import os
import time

from server import finish_reason, llm_arguments, sampling_params  # beside this file


def main() -> None:
    from server_loop import serve  # on this process's PYTHONPATH (harness/subjects/engines/serving/)

    serve(Alone, {"generate": lambda engine, message: engine.generate(message["requests"])})


class Alone:
    """One vLLM LLM instance as server.py builds it, with no hook installed."""

    def __init__(self, config: dict) -> None:
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # as server.py: the engine core in this process
        runner = config.get("runner")
        if runner is not None:
            os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "1" if runner == "v2" else "0"
        if runner == "v2" and config.get("platform") == "cpu":
            from cpu_triton import enable_model_runner_v2_on_cpu  # beside this file; before vLLM is imported

            enable_model_runner_v2_on_cpu()
        import vllm
        from vllm import LLM

        self.version = vllm.__version__
        self.config = config
        self.llm = LLM(**llm_arguments(config))

    def describe(self) -> dict:
        return {"name": "vllm", "version": self.version, "config": self.config, "hooks": []}

    def take_evidence(self) -> dict:
        return {}

    def generate(self, requests: list[dict]) -> dict:
        started = time.perf_counter()  # building the requests' parameters is timed too, as in server.py's decode
        prompts = [{"prompt_token_ids": [int(t) for t in request["prompt_ids"]]} for request in requests]
        params = [sampling_params(request) for request in requests]  # server.py's, without the harness's extra_args
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        seconds = time.perf_counter() - started
        for output in outputs:
            finish_reason(output.outputs[0])  # raises on a finish reason the contract does not know
        return {"seconds": seconds, "token_ids": [[int(t) for t in output.outputs[0].token_ids] for output in outputs]}


if __name__ == "__main__":
    main()
