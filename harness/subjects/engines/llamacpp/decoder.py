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
- Forced drafts and pass records: the build from source (`--engine-runner source`, the default; build.py) has the
  harness's instrumentation compiled in: the request names its forced drafts and the response carries its passes.
  The published wheel (`--engine-runner wheel`) cannot propose a token of the caller's choosing, so there the
  forced-rejection cases are skipped with that reason, and its passes are parsed from its trace log.
- EOS: llama.cpp ends a request at its vocabulary's end-of-generation tokens and has no per-request EOS ids. The
  build from source takes a request's own EOS ids in their place (`harness_eos_ids`: the same stop, in
  process_token, that the vocabulary's tokens take); on the wheel requests must ask for the checkpoint's EOS ids.
- The prefill samples output token 0 without drafts (`drafts_from` = 1).

Deployed configurations (configurations.py: prompt cache reuse, prompts processed in small batches, the server's
own queue, context shift) are variants of the subject: `configuration` is the one its servers run with,
`configured(name)` is a fresh decoder under another, and `take_evidence()` returns the server's own counters (from
its responses and its log) since the last take.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

import torch

from harness.contract.decoder import DecodeRequest, InvalidRequest
from harness.contract.errors import HarnessError
from harness.models.loading import ModelBundle, checkpoint_is_hybrid
from harness.subjects.engines.batch_steps import StepFact
from harness.subjects.engines.decoder import EngineDecoder, engine_threads
from harness.subjects.engines.llamacpp.build import BuildSpec, build_info, build_spec, built_python
from harness.subjects.engines.llamacpp.draft_batches import reach_per_iteration
from harness.subjects.engines.llamacpp.environment import SOURCE, draft_room, gguf_of, missing_gguf
from harness.subjects.engines.llamacpp.server import BUILD_VARIABLE

PROMPT_COUNTED = (
    "llama.cpp counts the prompt's tokens too (its penalty window holds every token the slot's sampler accepted, the "
    "prompt's included: tools/server/server-context.cpp init_sampler); the contract counts the output's (OpenAI's, "
    "vLLM's)"
)
PARALLEL_SLOTS = int(os.environ.get("MTP_HARNESS_LLAMACPP_SLOTS", "4"))
SHIFTED_CONTEXTS = 4  # under context shift, how many contexts' worth a request may ask for


class LlamaCppDecoder(EngineDecoder):
    """llama.cpp's server with draft-mtp speculation (or without speculation, speculative=False)."""

    drafter_depths = 1  # llama.cpp's MTP graphs hold one NextN layer; draft steps 2..k reuse it
    # /completion's own parameters (server.py feature_parameters); logprobs are n_probs, the raw logits' softmax
    engine_features = frozenset(
        {"repetition_penalty", "min_p", "logit_bias", "stop_strings", "structured_gbnf", "logprobs"}
    )
    why_no_feature = MappingProxyType(
        {
            "frequency_penalty": PROMPT_COUNTED,
            "presence_penalty": PROMPT_COUNTED,
            "min_tokens": "llama.cpp's server has no minimum output length (tools/server/server-schema.cpp)",
            "stop_sequences": "llama.cpp stops on strings (`stop`), not on token sequences",
            "structured_regex": "llama.cpp's server constrains output by GBNF grammars and JSON schemas, not by "
            "regular expressions",
            "n": "the harness's llama.cpp package does not pass n_cmpl on yet: llama.cpp runs the extra samples on "
            "other slots, whose passes the harness would have to read from its log slot by slot",
            "structured_json_schema": "llama.cpp turns a JSON schema into GBNF with whitespace of its own "
            '(`space ::= | " " | "\\n"{1,2} [ \\t]{0,20}`, common/json-schema-to-grammar.cpp), not compact JSON',
        }
    )
    speculative_serves: Mapping[str, set[object]] = MappingProxyType({"draft_mode": {"greedy"}})

    @property
    def speculative_lacks(self) -> Mapping[str, str]:  # type: ignore[override]
        lacks = {
            "draft_mode": "llama.cpp's draft-mtp drafts the NextN layer's argmax; it has no sampled-draft mode here"
        }
        if not self.built:
            lacks["forced_drafts"] = (
                "llama.cpp's published wheel has no way to propose a token of the caller's choosing (the build from "
                "source, --engine-runner source, has it compiled in)"
            )
        return MappingProxyType(lacks)

    @property
    def undrafted_after_rejection(self) -> bool:
        """On a hybrid model llama.cpp cannot cut a recurrent state back: after a rejection it restores the pass's
        checkpoint and replays the accepted tokens and the target's, and that replay's verification also computes
        the next token, without drafts (tools/server/server-context.cpp, `(restore checkpoint)` and
        `spec_is_replay`)."""
        return checkpoint_is_hybrid(self.bundle.path)

    @property
    def step_facts(self) -> Mapping[str, StepFact]:  # type: ignore[override]
        """How far each server iteration's batched draft decode reached (draft_batches.py): what the drafts-past-the-
        slot's-limit finding's signature reads."""
        context, hybrid = self.bundle.max_context, checkpoint_is_hybrid(self.bundle.path)
        return MappingProxyType(
            {"draft_reach": lambda requests, results: reach_per_iteration(requests, results, context, hybrid)}
        )

    def max_drafts(self, prompt_length: int, start: int, max_new_tokens: int) -> int:
        """The most drafts llama.cpp proposes in a pass starting at output position `start` (environment.draft_room).
        As shipped the drafter drafts k and the server cuts the draft to this; a draft cut below n_min (k here) would
        be dropped, but the server's cut comes after that check (common/speculative.cpp:1812, :2920)."""
        return draft_room(self.bundle.max_context, prompt_length, start, max_new_tokens)

    @property
    def built(self) -> bool:
        """Whether this subject runs llama.cpp built from its source (with the harness's instrumentation)."""
        return (self.options.runner or SOURCE) == SOURCE

    @property
    def build_spec(self) -> BuildSpec:
        return build_spec(self.options.fixes, self.options.patches)

    def built_info(self) -> dict:
        """The record of the build this subject runs (build.py's engine.json); a HarnessError that says how to
        build it when it is not built."""
        spec = self.build_spec
        info = build_info(spec)
        if info is None:
            asked = "".join(
                [f" --fixes {','.join(self.options.fixes)}" if self.options.fixes else ""]
                + [f" --patch {p}" for p in self.options.patches]
            )
            raise HarnessError(
                f"llama.cpp built from source (build {spec.key}) is not built: run `mtp-harness engine install "
                f"llama.cpp --build{asked}` (mtp-harness run builds it itself)"
            )
        return info

    def server_python(self) -> Path:
        if not self.built:
            return super().server_python()
        self.built_info()  # built, or a HarnessError saying how
        return built_python(self.build_spec)

    def server_env(self) -> dict[str, str]:
        if not self.built:
            return {}
        return {BUILD_VARIABLE: json.dumps(self.built_info()["build"])}

    @property
    def engine_version(self) -> str | None:
        if not self.built:
            return super().engine_version
        info = build_info(self.build_spec)
        return None if info is None else str(info["version"])

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
        if self.built:
            return  # the build takes a request's own EOS ids (harness_eos_ids, patches/instrumentation.patch)
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
            "instrumented": self.built,
            "eos_token_ids": list(self.bundle.eos_token_ids),
            **self.configuration.settings,
        }
