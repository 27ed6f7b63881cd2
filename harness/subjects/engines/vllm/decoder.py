"""vLLM as a subject: `vllm-mtp` (vLLM's own MTP speculative decoding) and `vllm` (vLLM without speculation).

vLLM runs in its own environment (`mtp-harness engine install vllm`) and is driven out of process through server.py.
One engine process per (k, draft mode) of the bundle's model and dtype, started on first use and kept for the
decoder's lifetime (harness/subjects/engines/decoder.py, what every engine subject shares): a batch of requests
with mixed k is split by k, each part decoded as one batch by its engine.

What vLLM serves here:
- k = num_draft_tokens is vLLM's `num_speculative_tokens` (vLLM reuses its first MTP layer for every draft
  position beyond the checkpoint's MTP layers);
- draft_mode "greedy" is vLLM's default `draft_sample_method="greedy"` (argmax drafts, one-hot q); "sample"
  is `draft_sample_method="probabilistic"` (drafts drawn from the MTP head's temperature-scaled softmax,
  verified against it);
- vLLM's prefill samples the first output token without drafts, so its first drafted position is 1
  (`drafts_from`); forced drafts and rejection schedules start there.

Deployed configurations (configurations.py: prefix caching, chunked prefill, preemption, queueing, asynchronous
scheduling) are variants of the subject: `configuration` is the one every engine of the decoder runs with,
`configured(name)` is a fresh decoder under another, and `take_evidence()` returns the engine's own counters of what
its scheduler did since the last take.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

import torch

from harness.contract.decoder import SamplingConfig
from harness.contract.errors import HarnessError
from harness.models.loading import ModelBundle
from harness.subjects.engines.batch_steps import longest_per_engine_step
from harness.subjects.engines.decoder import EngineDecoder, engine_threads

ENGINE_DTYPES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}
SPECULATIVE_REFUSAL = (
    "vLLM refuses it with speculative decoding: 'The min_p and logit_bias sampling parameters are not yet supported "
    "with speculative decoding.' (vllm/sampling_params.py, _validate_spec_decode)"
)


class VLLMDecoder(EngineDecoder):
    """vLLM's speculative decoding with the checkpoint's MTP layers (or plain vLLM with speculative=False)."""

    # the longest sequence of each pass's engine step: what the drafter skip's per-batch condition reads
    step_facts = MappingProxyType({"longest": longest_per_engine_step})
    # SamplingParams' own fields (server.py sampling_params); logprobs are vLLM's default raw_logprobs
    engine_features = frozenset(
        {
            *("repetition_penalty", "frequency_penalty", "presence_penalty", "min_tokens", "stop_strings", "logprobs"),
            *("structured_regex", "structured_json_schema", "structured_gbnf", "n"),
        }
    )
    why_no_feature = MappingProxyType(
        {
            # vllm/sampling_params.py _validate_spec_decode (0.32.0), for every request of a speculative engine
            "min_p": SPECULATIVE_REFUSAL,
            "logit_bias": SPECULATIVE_REFUSAL,
            "stop_sequences": "vLLM stops on single token ids (stop_token_ids, which carry the request's EOS ids) or "
            "on strings (stop): it has no stop token sequences",
        }
    )

    def check_bundle(self, bundle: ModelBundle) -> None:
        if bundle.dtype not in ENGINE_DTYPES:
            raise HarnessError(
                f"vLLM has no {str(bundle.dtype).removeprefix('torch.')} path: run it with --dtype float32 "
                "(CPU) or --dtype bf16 (CUDA)"
            )

    def prompt_logprobs(self, prompts: Sequence[Sequence[int]], top: int) -> list[list[dict[int, float] | None]]:
        """vLLM's prompt log-probabilities (the prompt token's and the `top` most likely tokens' at each position, None
        at position 0), from this decoder's engine at k = 1 (none without speculation)."""
        message = {"prompts": [list(p) for p in prompts], "top": top}
        results = self.call("prompt_logprobs", message, "prompt logprobs")
        return [[None if row is None else {int(t): lp for t, lp in row.items()} for row in rows] for rows in results]

    def sequence_terms(
        self, prompt_length: int, sequences: Sequence[Sequence[int]], sampling: SamplingConfig
    ) -> dict[str, object]:
        """The whole-sequence statistics' per-token terms of each sequence's continuation, computed inside vLLM's
        process from its full logits (scoring.py)."""
        message = {
            "prompt_length": prompt_length,
            "sequences": [list(s) for s in sequences],
            "sampling": [sampling.temperature, sampling.top_k, sampling.top_p],
        }
        return self.call("sequence_terms", message, f"{len(sequences)} sequences")

    def next_token_laws(
        self, prefixes: Sequence[Sequence[int]], sampling: SamplingConfig, threshold: float
    ) -> list[tuple[dict[int, float], float]]:
        """The processed law of the token after each prefix, inside vLLM's process: its tokens of probability >=
        threshold, and the mass of the rest."""
        message = {
            "prefixes": [list(p) for p in prefixes],
            "sampling": [sampling.temperature, sampling.top_k, sampling.top_p],
            "threshold": threshold,
        }
        results = self.call("next_token_laws", message, f"{len(prefixes)} prefixes")
        return [({int(t): p for t, p in r["law"].items()}, float(r["rest"])) for r in results]

    def server_config(self, k: int, draft_mode: str) -> dict[str, object]:
        """The configuration the server builds its vLLM LLM from (server.py llm_arguments)."""
        bundle = self.bundle
        return {
            "model": str(bundle.path.resolve()),
            "dtype": ENGINE_DTYPES[bundle.dtype],
            "max_model_len": bundle.max_context,
            "num_draft_tokens": k,
            "draft_mode": draft_mode,
            "seed": 0,
            **self.configuration.settings,
            # CPU: eager (compiling every engine would take minutes on a small runner); CUDA: compiled with
            # CUDA graphs, as deployed, but for Model Runner V2, whose drafting and verification the hooks wrap run
            # inside the graphs it captures
            "enforce_eager": self.flavour == "cpu" or self.options.runner == "v2",
            "runner": self.options.runner,
            "platform": self.flavour,
            "engine_args": self.options.argument_values,  # vLLM's own arguments, as given (--engine-arg)
        }

    def server_preload(self, config: Mapping[str, object]) -> Mapping[str, object]:
        """The settings server.py's prepare_process reads before vLLM is imported: the model runner and the platform
        (V2 on a CPU needs its enabling shim first). Every vLLM start is forked from a zygote that imported vLLM
        (forked.py): 8 to 12 s of a 14 s start on 2 cores."""
        return {"runner": config.get("runner"), "platform": config.get("platform")}

    def server_env(self) -> dict[str, str]:
        return {
            "OMP_NUM_THREADS": str(engine_threads()),
            "VLLM_CPU_OMP_THREADS_BIND": "nobind",  # vLLM's default core binding is ~20x slower on a shared box
            "VLLM_ENABLE_V1_MULTIPROCESSING": "0",  # the engine core in the server process, where the hooks are
        }
