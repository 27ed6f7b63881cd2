"""llama.cpp as a subject: `llamacpp-mtp` (llama.cpp's own MTP drafting, `--spec-type draft-mtp`) and `llamacpp`
(llama.cpp without speculation).

llama.cpp runs in its own environment (`mtp-harness engine install llama.cpp`: the xllamacpp wheel, llama.cpp's
native server built for CPU) and is driven out of process through harness/subjects/engines/llamacpp_server.py, on
the GGUF beside the checkpoint (`model.gguf`; the fixtures' are built by fixtures/build_gguf.py). One server per
k, started on first use and kept for the decoder's lifetime; a batch is decoded in the server's parallel slots.

What llama.cpp serves here, and what it cannot:
- k = num_draft_tokens is the draft length (`n_max` = `n_min` = k, `p_min` 0: k drafts whenever the slot has
  room; fewer only where the context or max_new_tokens leaves less). Its MTP graphs hold one NextN layer and
  draft steps 2..k reuse it on its own output (`drafter_depths` = 1).
- Drafts are the NextN layer's argmax (draft_mode "greedy"); llama.cpp verifies by sampling the target's token
  and accepting a draft only if it is that token, exact for any draft. It has no sampled-draft mode in this
  configuration (its probabilistic drafting is off by default): draft_mode "sample" is not served.
- Forced drafts: llama.cpp has no way to propose a token of the caller's choosing without changing its code, so
  the forced-rejection cases are skipped with that reason.
- EOS: llama.cpp ends a request at its vocabulary's end-of-generation tokens and has no per-request EOS ids;
  requests must ask for the checkpoint's EOS ids.
- The prefill samples output token 0 without drafts (`drafts_from` = 1).

Deployed configurations (harness/subjects/engines/configurations.py LLAMACPP_CONFIGURATIONS: prompt cache reuse,
prompts processed in small batches, the server's own queue) are variants of the subject: `engine_config` names the
one its servers run with, `configured(name)` is a fresh decoder under another, and `take_evidence()` returns the
server's own counters (from its responses and its log) since the last take.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import torch

from harness.contract.decoder import DecodeRequest, DecodeResult, InvalidRequest
from harness.contract.errors import HarnessError
from harness.decoding.batch import decode_in_groups
from harness.models.loading import ModelBundle
from harness.subjects.engines.configurations import DEFAULT, LLAMACPP_CONFIGURATIONS, configuration_names
from harness.subjects.engines.llamacpp_environment import LLAMACPP, SERVER, gguf_of, missing_gguf
from harness.subjects.engines.process import EnginePool, EngineProcess

PARALLEL_SLOTS = int(os.environ.get("MTP_HARNESS_LLAMACPP_SLOTS", "4"))
SHIFTED_CONTEXTS = 4  # under context shift, how many contexts' worth a request may ask for
WHY_UNSUPPORTED = {
    "forced_drafts": "llama.cpp has no way to propose a token of the caller's choosing without changing its code",
    "draft_mode": "llama.cpp's draft-mtp drafts the NextN layer's argmax; it has no sampled-draft mode here",
    "num_draft_tokens": "llama.cpp without speculation drafts nothing",
}


class LlamaCppDecoder:
    """llama.cpp's server with draft-mtp speculation (or without speculation, speculative=False)."""

    drafts_from = 1  # the prefill samples output token 0 without drafts
    drafter_depths = 1  # llama.cpp's MTP graphs hold one NextN layer; draft steps 2..k reuse it

    engine_configurations = LLAMACPP_CONFIGURATIONS

    def __init__(self, bundle: ModelBundle, speculative: bool = True, engine_config: str = DEFAULT) -> None:
        if engine_config not in LLAMACPP_CONFIGURATIONS:
            known = configuration_names(LLAMACPP_CONFIGURATIONS)
            raise HarnessError(f"llama.cpp has no engine configuration {engine_config!r}; known: {known}")
        if bundle.dtype != torch.float32 or bundle.device.type != "cpu":
            raise HarnessError(
                "llama.cpp runs here on CPU with the GGUF's float32 weights: run it with --dtype float32 on cpu"
            )
        gguf = gguf_of(bundle.path)
        if gguf is None:
            raise HarnessError(missing_gguf(bundle.path))
        self.bundle = bundle
        self.gguf = gguf
        self.speculative = speculative
        self.configuration = LLAMACPP_CONFIGURATIONS[engine_config]  # the deployed configuration its engines run under
        self.name = "llamacpp-mtp" if speculative else "llamacpp"
        cannot = {"forced_drafts"} if speculative else {"num_draft_tokens", "draft_mode", "forced_drafts"}
        self.unsupported = frozenset(cannot)
        self.serves = {"draft_mode": {"greedy"}} if speculative else {}
        self.why_unsupported = WHY_UNSUPPORTED
        if not speculative:
            self.plain_twin = None  # no speculation: nothing to compare with
        self.pool = EnginePool()

    @property
    def engine_version(self) -> str | None:
        return LLAMACPP.installed_version("cpu")

    def decode(self, requests: Sequence[DecodeRequest]) -> list[DecodeResult]:
        eos = self.bundle.eos_token_ids
        for index, request in enumerate(requests):
            if tuple(request.eos_token_ids) != tuple(eos):
                raise InvalidRequest(
                    f"request {index}: llama.cpp ends generation at its vocabulary's end-of-generation tokens "
                    f"{list(eos)} only and has no per-request EOS ids; the request asks for "
                    f"{list(request.eos_token_ids)}"
                )

        def decode_group(group: list[DecodeRequest], indices: list[int]) -> list[DecodeResult]:
            key = self._engine_key(group[0])
            return self.pool.get(key, lambda: self._start(key)).decode(group)

        bundle = self.bundle
        # under context shift a slot discards the older half of a full context and goes on: a request may outgrow it
        limit = bundle.max_context * (SHIFTED_CONTEXTS if self.configuration.settings.get("ctx_shift") else 1)
        return decode_in_groups(requests, bundle.vocab_size, limit, self._engine_key, decode_group)

    def close(self) -> None:
        self.pool.close()

    def configured(self, engine_config: str) -> LlamaCppDecoder:
        """The same subject under another deployed configuration, with servers of its own."""
        return LlamaCppDecoder(self.bundle, self.speculative, engine_config)

    def without_speculation(self) -> LlamaCppDecoder:
        """llama.cpp without speculation, under the same configuration, with servers of its own."""
        return LlamaCppDecoder(self.bundle, False, self.configuration.name)

    # the contract's name for the same engine: a seeded sampled request must give the same tokens (see the module)
    plain_twin = without_speculation

    def prompt_logprobs(self, prompts: Sequence[Sequence[int]], top: int) -> list[list[dict[int, float] | None]]:
        """Per prompt and position: llama.cpp's log-probabilities of the prompt token there and of the `top` most
        likely tokens, from its next-token log-probabilities of each prefix (None at position 0); from this
        decoder's server at k = 1 (none without speculation)."""
        key = 1 if self.speculative else 0
        server = self.pool.get(key, lambda: self._start(key))
        vocab = self.bundle.vocab_size
        rows = server.call("next_token_logprobs", {"prompts": [list(p) for p in prompts], "vocab_size": vocab}, "")
        out: list[list[dict[int, float] | None]] = []
        for prompt, prefixes in zip(prompts, rows, strict=True):
            entries: list[dict[int, float] | None] = [None]
            for position in range(1, len(prompt)):
                row = prefixes[position - 1]
                chosen = sorted(range(vocab), key=lambda t: -row[t])[:top]
                entries.append({t: row[t] for t in {*chosen, int(prompt[position])}})
            out.append(entries)
        return out

    def take_evidence(self) -> dict[str, int]:
        """llama.cpp's own counters of what its server did since the last take (configurations.EVIDENCE)."""
        return self.pool.take_evidence()

    def _engine_key(self, request: DecodeRequest) -> int:
        return request.num_draft_tokens if self.speculative else 0

    def engine_config(self, k: int, draft_mode: str = "greedy") -> dict[str, object]:
        """The configuration the server builds its llama.cpp server from (llamacpp_server.py, Engine); llama.cpp
        drafts greedily whatever `draft_mode` (the signature every engine subject's has, for triage)."""
        return {
            "gguf": str(self.gguf.resolve()),
            "n_ctx": self.bundle.max_context,
            "parallel": PARALLEL_SLOTS,
            "num_draft_tokens": k,
            "threads": int(os.environ.get("MTP_HARNESS_ENGINE_THREADS", "1")),
            **self.configuration.settings,
        }

    def _start(self, k: int) -> EngineProcess:
        label = f"{self.name}-{self.bundle.name}-k{k}" if self.speculative else f"llamacpp-{self.bundle.name}"
        label += "" if self.configuration.name == DEFAULT else f"-{self.configuration.name}"
        return EngineProcess(LLAMACPP.python("cpu"), SERVER, self.engine_config(k), {}, label)
