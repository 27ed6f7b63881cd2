"""vLLM as a subject: `vllm-mtp` (vLLM's own MTP speculative decoding) and `vllm` (vLLM without speculation).

vLLM runs in its own environment (harness/subjects/engines/environments.py; `mtp-harness engine install vllm`) and is
driven out of process through harness/subjects/engines/vllm_server.py. One engine process per (k, draft mode) of the
bundle's model and dtype, started on first use and kept for the decoder's lifetime: a batch of requests
with mixed k is split by k, each part decoded as one batch by its engine.

What vLLM serves here:
- k = num_draft_tokens is vLLM's `num_speculative_tokens` (vLLM reuses its first MTP layer for every draft
  position beyond the checkpoint's MTP layers);
- draft_mode "greedy" is vLLM's default `draft_sample_method="greedy"` (argmax drafts, one-hot q); "sample"
  is `draft_sample_method="probabilistic"` (drafts drawn from the MTP head's temperature-scaled softmax,
  verified against it);
- vLLM's prefill samples the first output token without drafts, so its first drafted position is 1
  (`drafts_from`); forced drafts and rejection schedules start there.

Deployed configurations (harness/subjects/engines/configurations.py VLLM_CONFIGURATIONS: prefix caching, chunked
prefill, preemption, queueing, asynchronous scheduling) are variants of the subject: `engine_config` names the one
every engine of the decoder runs with, `configured(name)` is a fresh decoder under another, and `take_evidence()`
returns the engine's own counters of what its scheduler did since the last take.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import torch

from harness.contract.decoder import DecodeRequest, DecodeResult, SamplingConfig
from harness.contract.errors import HarnessError
from harness.decoding.batch import decode_in_groups
from harness.models.loading import ModelBundle
from harness.subjects.engines.configurations import DEFAULT, VLLM_CONFIGURATIONS, configuration_names
from harness.subjects.engines.process import EngineError, EnginePool, EngineProcess
from harness.subjects.engines.vllm_environment import FIXES, SERVER, VLLM

ENGINE_DTYPES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}


class VLLMDecoder:
    """vLLM's speculative decoding with the checkpoint's MTP layers (or plain vLLM with speculative=False)."""

    drafts_from = 1  # vLLM's prefill samples output token 0 without drafts

    engine_configurations = VLLM_CONFIGURATIONS

    def __init__(
        self,
        bundle: ModelBundle,
        speculative: bool = True,
        engine_fixes: Sequence[str] = (),
        engine_config: str = DEFAULT,
        engine_args: Mapping[str, object] | None = None,
    ) -> None:
        if engine_config not in VLLM_CONFIGURATIONS:
            raise HarnessError(
                f"vLLM has no engine configuration {engine_config!r}; known: {configuration_names(VLLM_CONFIGURATIONS)}"
            )
        if bundle.dtype not in ENGINE_DTYPES:
            raise HarnessError(
                f"vLLM has no {str(bundle.dtype).removeprefix('torch.')} path: run it with --dtype float32 "
                "(CPU) or --dtype bf16 (CUDA)"
            )
        self.bundle = bundle
        self.speculative = speculative
        self.name = "vllm-mtp" if speculative else "vllm"
        self.configuration = VLLM_CONFIGURATIONS[engine_config]  # the deployed configuration its engines run under
        lacking = set(self.configuration.lacks)
        if not speculative:
            lacking |= {"num_draft_tokens", "draft_mode", "forced_drafts"}
        self.unsupported = frozenset(lacking)
        self.why_unsupported = {
            **{name: "vLLM without speculation drafts nothing" for name in ("num_draft_tokens", "draft_mode")},
            "forced_drafts": "vLLM without speculation drafts nothing",
            **self.configuration.lacks,
        }
        self.flavour = "cuda" if bundle.device.type == "cuda" else "cpu"
        self.engine_fixes = tuple(sorted(engine_fixes))  # findings whose documented fix the engine runs with
        self.engine_args = dict(engine_args or {})  # vLLM's own arguments, passed through (--engine-arg)
        self.pool = EnginePool()

    @property
    def engine_version(self) -> str | None:
        return VLLM.installed_version(self.flavour)

    def decode(self, requests: Sequence[DecodeRequest]) -> list[DecodeResult]:
        def decode_group(group: list[DecodeRequest], indices: list[int]) -> list[DecodeResult]:
            key = self._engine_key(group[0])
            return self.pool.get(key, lambda: self._start(*key)).decode(group)

        bundle = self.bundle
        return decode_in_groups(requests, bundle.vocab_size, bundle.max_context, self._engine_key, decode_group)

    def close(self) -> None:
        self.pool.close()

    def configured(self, engine_config: str) -> VLLMDecoder:
        """The same subject (speculation, fixes) under another deployed configuration, with engines of its own."""
        return VLLMDecoder(self.bundle, self.speculative, self.engine_fixes, engine_config, self.engine_args)

    def without_speculation(self) -> VLLMDecoder:
        """vLLM without speculation, with the same fixes and configuration, with engines of its own."""
        return VLLMDecoder(self.bundle, False, self.engine_fixes, self.configuration.name, self.engine_args)

    def take_evidence(self) -> dict[str, int]:
        """vLLM's own counters of what its scheduler did since the last take (configurations.EVIDENCE)."""
        return self.pool.take_evidence()

    def prompt_logprobs(self, prompts: Sequence[Sequence[int]], top: int) -> list[list[dict[int, float] | None]]:
        """vLLM's prompt log-probabilities (the prompt token's and the `top` most likely tokens' at each position, None
        at position 0), from this decoder's engine at k = 1 (none without speculation)."""
        message = {"prompts": [list(p) for p in prompts], "top": top}
        results = self._scoring_engine().call("prompt_logprobs", message, "prompt logprobs")
        return [[None if row is None else {int(t): lp for t, lp in row.items()} for row in rows] for rows in results]

    def sequence_terms(
        self, prompt_length: int, sequences: Sequence[Sequence[int]], sampling: SamplingConfig
    ) -> dict[str, object]:
        """The whole-sequence statistics' per-token terms of each sequence's continuation, computed inside vLLM's
        process from its full logits (harness/subjects/engines/vllm_scoring.py)."""
        message = {
            "prompt_length": prompt_length,
            "sequences": [list(s) for s in sequences],
            "sampling": [sampling.temperature, sampling.top_k, sampling.top_p],
        }
        return self._scoring_engine().call("sequence_terms", message, f"{len(sequences)} sequences")

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
        results = self._scoring_engine().call("next_token_laws", message, f"{len(prefixes)} prefixes")
        return [({int(t): p for t, p in r["law"].items()}, float(r["rest"])) for r in results]

    def _scoring_engine(self) -> EngineProcess:
        key = (1, "greedy") if self.speculative else (0, "greedy")
        return self.pool.get(key, lambda: self._start(*key))

    def _engine_key(self, request: DecodeRequest) -> tuple[int, str]:
        if not self.speculative:
            return (0, "greedy")
        return (request.num_draft_tokens, request.draft_mode)

    def engine_config(self, k: int, draft_mode: str) -> dict[str, object]:
        """The configuration the server builds its vLLM LLM from (harness/subjects/engines/vllm_server.py)."""
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
            # CUDA graphs, as deployed
            "enforce_eager": self.flavour == "cpu",
            "engine_args": self.engine_args,  # vLLM's own arguments, as given (--engine-arg)
        }

    def _start(self, k: int, draft_mode: str) -> EngineProcess:
        bundle = self.bundle
        config = self.engine_config(k, draft_mode)
        threads = os.environ.get("MTP_HARNESS_ENGINE_THREADS", "1")
        env = {
            "OMP_NUM_THREADS": threads,  # the engine shares the machine with the harness and other engines
            "VLLM_CPU_OMP_THREADS_BIND": "nobind",  # vLLM's default core binding is ~20x slower on a shared box
            "VLLM_ENABLE_V1_MULTIPROCESSING": "0",  # the engine core in the server process, where the hooks are
        }
        if self.engine_fixes:  # the fixes' sitecustomize patches vLLM as it is imported (vllm_fixes/)
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(FIXES), os.environ.get("PYTHONPATH")]))
            env["MTP_HARNESS_ENGINE_FIXES"] = ",".join(self.engine_fixes)
        label = f"{self.name}-{bundle.name}-k{k}-{draft_mode}" if self.speculative else f"vllm-{bundle.name}"
        label += "" if self.configuration.name == DEFAULT else f"-{self.configuration.name}"
        engine = EngineProcess(VLLM.python(self.flavour), SERVER, config, env, label)
        applied = tuple(engine.info.get("fixes", ()))
        if applied != self.engine_fixes:
            engine.close()
            asked = list(self.engine_fixes)
            raise EngineError(f"engine {label}: asked for the fixes {asked}, it applied {list(applied)}")
        return engine
