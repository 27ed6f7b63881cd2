"""llama.cpp as a subject: `llamacpp-mtp` (llama.cpp's own MTP drafting, `--spec-type draft-mtp`) and `llamacpp`
(llama.cpp without speculation).

llama.cpp runs in its own environment (`mtp-harness engine install llama.cpp`: the xllamacpp wheel, llama.cpp's
native server built for CPU) and is driven out of process through server.py, on the GGUF beside the checkpoint
(`model.gguf`; the fixtures' are built by fixtures/build_gguf.py). One server per k, started on first use and kept
for the decoder's lifetime (harness/subjects/engines/decoder.py, what every engine subject shares); a batch is
decoded in the server's parallel slots.

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

Deployed configurations (configurations.py: prompt cache reuse, prompts processed in small batches, the server's
own queue, context shift) are variants of the subject: `configuration` is the one its servers run with,
`configured(name)` is a fresh decoder under another, and `take_evidence()` returns the server's own counters (from
its responses and its log) since the last take.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

import torch

from harness.contract.decoder import DecodeRequest, InvalidRequest
from harness.contract.errors import HarnessError
from harness.models.loading import ModelBundle
from harness.subjects.engines.decoder import EngineDecoder, engine_threads
from harness.subjects.engines.llamacpp.environment import gguf_of, missing_gguf

PARALLEL_SLOTS = int(os.environ.get("MTP_HARNESS_LLAMACPP_SLOTS", "4"))
SHIFTED_CONTEXTS = 4  # under context shift, how many contexts' worth a request may ask for


class LlamaCppDecoder(EngineDecoder):
    """llama.cpp's server with draft-mtp speculation (or without speculation, speculative=False)."""

    drafter_depths = 1  # llama.cpp's MTP graphs hold one NextN layer; draft steps 2..k reuse it
    speculative_lacks: Mapping[str, str] = MappingProxyType(
        {
            "forced_drafts": "llama.cpp has no way to propose a token of the caller's choosing without changing its "
            "code",
            "draft_mode": "llama.cpp's draft-mtp drafts the NextN layer's argmax; it has no sampled-draft mode here",
        }
    )
    speculative_serves: Mapping[str, set[object]] = MappingProxyType({"draft_mode": {"greedy"}})

    def check_bundle(self, bundle: ModelBundle) -> None:
        if bundle.dtype != torch.float32 or bundle.device.type != "cpu":
            raise HarnessError(
                "llama.cpp runs here on CPU with the GGUF's float32 weights: run it with --dtype float32 on cpu"
            )
        if gguf_of(bundle.path) is None:
            raise HarnessError(missing_gguf(bundle.path))

    @property
    def plain_twin(self) -> Callable[[], LlamaCppDecoder] | None:
        """llama.cpp without speculation: a seeded sampled request must give the same tokens (see the module); none
        for the decoder without speculation (nothing to compare with)."""
        return self.without_speculation if self.speculative else None

    def check_requests(self, requests: Sequence[DecodeRequest]) -> None:
        eos = self.bundle.eos_token_ids
        for index, request in enumerate(requests):
            if tuple(request.eos_token_ids) != tuple(eos):
                raise InvalidRequest(
                    f"request {index}: llama.cpp ends generation at its vocabulary's end-of-generation tokens "
                    f"{list(eos)} only and has no per-request EOS ids; the request asks for "
                    f"{list(request.eos_token_ids)}"
                )

    @property
    def context_limit(self) -> int:
        # under context shift a slot discards the older half of a full context and goes on: a request may outgrow it
        return self.bundle.max_context * (SHIFTED_CONTEXTS if self.configuration.settings.get("ctx_shift") else 1)

    def prompt_logprobs(self, prompts: Sequence[Sequence[int]], top: int) -> list[list[dict[int, float] | None]]:
        """Per prompt and position: llama.cpp's log-probabilities of the prompt token there and of the `top` most
        likely tokens, from its next-token log-probabilities of each prefix (None at position 0); from this
        decoder's server at k = 1 (none without speculation)."""
        vocab = self.bundle.vocab_size
        rows = self.call("next_token_logprobs", {"prompts": [list(p) for p in prompts], "vocab_size": vocab}, "")
        out: list[list[dict[int, float] | None]] = []
        for prompt, prefixes in zip(prompts, rows, strict=True):
            entries: list[dict[int, float] | None] = [None]
            for position in range(1, len(prompt)):
                row = prefixes[position - 1]
                chosen = sorted(range(vocab), key=lambda t: -row[t])[:top]
                entries.append({t: row[t] for t in {*chosen, int(prompt[position])}})
            out.append(entries)
        return out

    def server_config(self, k: int, draft_mode: str) -> dict[str, object]:
        """The configuration the server builds its llama.cpp server from (server.py, Engine); llama.cpp drafts
        greedily whatever `draft_mode`."""
        return {
            "gguf": str(gguf_of(self.bundle.path).resolve()),
            "n_ctx": self.bundle.max_context,
            "parallel": PARALLEL_SLOTS,
            "num_draft_tokens": k,
            "threads": engine_threads(),
            **self.configuration.settings,
        }
