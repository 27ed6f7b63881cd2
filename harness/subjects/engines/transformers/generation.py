"""External subjects: implementations no one here wrote, driven through the same Decoder contract.

    transformers-mtp        transformers' `generate(..., use_mtp=True)`: MTPCandidateGenerator + MtpModel
    transformers-assisted   transformers' `generate(..., assistant_model=draft)`, the draft being the
                            target's first decoder layer with its embedding, final norm and head (a
                            layer-skip draft built from the same checkpoint)

Both run one request at a time (transformers' assisted generation is batch-1 only). Forced drafts and the
verification passes come from wrapping the candidate generator transformers builds
(harness/subjects/engines/transformers/candidates.py). Both sample their drafts from the processed draft distribution
when the target samples (draft_mode "sample"). transformers samples from the global RNG, so each request runs
inside `torch.random.fork_rng()` seeded with the request's seed: the run is reproducible and leaves the
caller's global RNG state untouched.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Mapping, Sequence
from types import MappingProxyType

import torch
from transformers import GenerationConfig, PreTrainedModel

from harness.contract.decoder import DecodeRequest, DecodeResult, TokenLogprobs, validate_for_model
from harness.contract.errors import HarnessError
from harness.contract.features import refuse_unserved
from harness.decoding.batch import truncate
from harness.models.loading import ModelBundle
from harness.models.quiet import quiet_transformers
from harness.subjects.engines.transformers.candidates import instrument_generation
from harness.subjects.engines.transformers.use_mtp import enable_transformers_mtp, mtp_depths_in_use

# transformers samples its drafts from the processed draft distribution whenever the target samples
SAMPLED_DRAFTS_ONLY: Mapping[str, frozenset[object]] = MappingProxyType({"draft_mode": frozenset({"sample"})})


def mtp_serves(num_depths: int) -> dict[str, frozenset[object]]:
    """What transformers' MTP generation serves: one draft per MTP depth in use (k = 1 .. the checkpoint's depths),
    sampled drafts only."""
    return {**SAMPLED_DRAFTS_ONLY, "num_draft_tokens": frozenset(range(1, num_depths + 1))}


def _generation_config(request: DecodeRequest, pad_token_id: int, **extra: object) -> GenerationConfig:
    sampling = request.sampling
    settings: dict[str, object] = dict(
        max_new_tokens=request.max_new_tokens,
        do_sample=not sampling.is_greedy,
        eos_token_id=list(request.eos_token_ids) or None,
        pad_token_id=pad_token_id,
        **extra,
    )
    # Every field set explicitly: transformers fills fields left None from its global defaults (top_k = 50),
    # which would silently sample a different distribution than the request asks for. top_k 0 = off.
    if not sampling.is_greedy:
        settings.update(temperature=sampling.temperature, top_k=sampling.top_k, top_p=sampling.top_p)
    else:
        settings.update(temperature=1.0, top_k=0, top_p=1.0)
    # the request features transformers serves in the contract's order (its processors: sequence bias, repetition
    # penalty, min_new_tokens, then the warpers); each left at transformers' "off" when unused
    settings.update(
        repetition_penalty=sampling.repetition_penalty,
        sequence_bias=[[[token], bias] for token, bias in sampling.logit_bias] or None,
        min_new_tokens=sampling.min_tokens or None,
        # StopStringCriteria: generate() is given the tokenizer with them (_TransformersGenerateDecoder._decode_one)
        stop_strings=list(request.stop_strings) or None,
    )
    return GenerationConfig(**settings)


# transformers' generate() passes these on (_generation_config; logprobs from its output_logits, token_logprobs); the
# others, and why not
SERVED_FEATURES = frozenset({"repetition_penalty", "logit_bias", "min_tokens", "stop_strings", "logprobs"})
WHY_NOT_SERVED = MappingProxyType(
    {
        "min_p": "transformers applies min-p after top-k and top-p (MinPLogitsWarper last), the contract before them",
        "frequency_penalty": "transformers' generate() has no frequency penalty",
        "presence_penalty": "transformers' generate() has no presence penalty",
        "stop_sequences": "transformers stops on strings and EOS ids, not token sequences",
        "structured_regex": "transformers' generate() has no structured outputs",
        "structured_json_schema": "transformers' generate() has no structured outputs",
        "structured_gbnf": "transformers' generate() has no structured outputs",
        "n": "transformers' assisted generation (MTP's too) refuses num_return_sequences > 1: "
        "'num_return_sequences has to be 1 when doing assisted generate' (generation/utils.py:1886 in 5.25.0)",
    }
)


class _TransformersGenerateDecoder:
    """Shared loop: one `generate` call per request, inside a forked and seeded global RNG."""

    name = "transformers"
    serves: Mapping[str, frozenset[object]] = SAMPLED_DRAFTS_ONLY
    features = SERVED_FEATURES
    why_unsupported = WHY_NOT_SERVED
    # generate() casts the model's logits to float32 before processing them ("needed to retain precision for later
    # logits manipulations", generation/utils.py:4109-4111 in 5.25.0): its output_logits, and so its logprobs, are
    # float32 values in a float64 run (measured: 1e-9 to 4e-7 from the float64 target's on tiny-deepseek-v3)
    logprobs_dtype = "float32"

    def __init__(self, bundle: ModelBundle) -> None:
        self.bundle = bundle
        self.model = bundle.target

    def generation_settings(self, request: DecodeRequest) -> dict[str, object]:
        """Extra GenerationConfig fields."""
        return {}

    def generate_kwargs(self, request: DecodeRequest) -> dict[str, object]:
        """Extra generate() arguments that are not generation settings."""
        return {}

    def configured(self, request: DecodeRequest) -> contextlib.AbstractContextManager[None]:
        """Set up the model for `request` for the duration of its `generate` call."""
        return contextlib.nullcontext()

    @torch.no_grad()
    def decode(self, requests: Sequence[DecodeRequest]) -> list[DecodeResult]:
        refuse_unserved(self, requests)  # generate() is given only the features it serves (_generation_config)
        for index, request in enumerate(requests):
            validate_for_model(request, self.bundle.vocab_size, self.bundle.max_context, index)
        return [self._decode_one(request) for request in requests]

    def _decode_one(self, request: DecodeRequest) -> DecodeResult:
        device = self.bundle.device
        prompt = torch.tensor([request.prompt_ids], device=device)
        pad = request.eos_token_ids[0] if request.eos_token_ids else 0
        devices = [device] if device.type == "cuda" else []
        # logprobs: transformers' raw logits of each output token (output_logits), as the contract's raw logprobs
        outputs = {"return_dict_in_generate": True, "output_logits": True} if request.logprobs is not None else {}
        with (
            torch.random.fork_rng(devices=devices),
            quiet_transformers(),
            self.configured(request),
            instrument_generation(self.model, prompt.shape[1], request.forced_drafts) as passes,
        ):
            torch.manual_seed(request.seed)
            output = self.model.generate(
                prompt,
                attention_mask=torch.ones_like(prompt),
                generation_config=_generation_config(request, pad, **self.generation_settings(request), **outputs),
                **({"tokenizer": self.bundle.tokenizer} if request.stop_strings else {}),
                **self.generate_kwargs(request),
            )
        sequences = output.sequences if outputs else output
        generated = sequences[0, prompt.shape[1] :].tolist()
        tokens, finish = truncate(generated, request.max_new_tokens, request.eos_token_ids)
        # generate() stops before max_new_tokens without an EOS only on a stop string (its only other criterion)
        stopped = finish is None and bool(request.stop_strings)
        logprobs = token_logprobs(output.logits, tokens, request.logprobs) if outputs else ()
        return DecodeResult(
            tuple(tokens), tuple(passes.steps), "stop" if stopped else finish or "length", logprobs=logprobs
        )


def token_logprobs(logits: Sequence[torch.Tensor], tokens: Sequence[int], top: int) -> tuple[TokenLogprobs | None, ...]:
    """Each output token's raw log-probability and the `top` most likely tokens', from generate()'s output_logits
    (one [1, V] tensor per generated token: the model's logits before any logits processor):
        logprob(t) = log_softmax(logits)[t]
    None where transformers returned no logits for a token (reported as such, not filled in)."""
    entries: list[TokenLogprobs | None] = []
    for position, token in enumerate(tokens):
        if position >= len(logits):
            entries.append(None)
            continue
        log_probabilities = torch.log_softmax(logits[position][0].double(), dim=-1)
        best = log_probabilities.topk(top) if top else None
        pairs = tuple(zip(best.indices.tolist(), best.values.tolist(), strict=True)) if best is not None else ()
        entries.append(TokenLogprobs(token, float(log_probabilities[token]), pairs))
    return tuple(entries)


class TransformersMTPDecoder(_TransformersGenerateDecoder):
    """transformers' native MTP generation. It drafts one token per MTP depth in use: k = 1 .. the
    checkpoint's depths, by loading the first k depths (as a checkpoint configured with k depths would).
    Its prefill pass samples output token 0 without drafts."""

    name = "transformers-mtp"
    drafts_from = 1

    def __init__(self, bundle: ModelBundle) -> None:
        super().__init__(bundle)
        self.model = enable_transformers_mtp(bundle)
        self.serves = mtp_serves(bundle.layout.num_depths)

    def generation_settings(self, request: DecodeRequest) -> dict[str, object]:
        return {"use_mtp": True}

    def configured(self, request: DecodeRequest) -> contextlib.AbstractContextManager[None]:
        return mtp_depths_in_use(self.model, request.num_draft_tokens)


class TransformersAssistedDecoder(_TransformersGenerateDecoder):
    """transformers' assisted generation with a layer-skip draft model (num_draft_tokens drafts per pass)."""

    name = "transformers-assisted"
    drafter = "a layer-skip draft model (the target's first layer)"
    features = SERVED_FEATURES - {"stop_strings"}
    why_unsupported = MappingProxyType(
        {
            **WHY_NOT_SERVED,
            # measured on 5.25.0: generation/utils.py:1688, from the assistant's own generate() call
            "stop_strings": "transformers' assisted generation raises on stop strings: the candidate generator calls "
            "the draft model's generate() without the tokenizer ('we could not locate a tokenizer')",
        }
    )

    def __init__(self, bundle: ModelBundle) -> None:
        super().__init__(bundle)
        self.draft = first_layer_draft(bundle.target)

    def generate_kwargs(self, request: DecodeRequest) -> dict[str, object]:
        self.draft.generation_config.num_assistant_tokens = request.num_draft_tokens
        self.draft.generation_config.num_assistant_tokens_schedule = "constant"
        self.draft.generation_config.assistant_confidence_threshold = 0.0
        return {"assistant_model": self.draft}


def first_layer_draft(target: PreTrainedModel) -> PreTrainedModel:
    """A draft model: the target's embedding, first decoder layer, final norm and head (same weights)."""
    config = copy.deepcopy(target.config)
    config.num_hidden_layers = 1
    for field in ("layer_types", "mlp_layer_types"):
        if getattr(config, field, None) is not None:
            setattr(config, field, getattr(config, field)[:1])
    draft = type(target)(config).to(device=target.device, dtype=target.dtype)
    state = {
        k: v
        for k, v in target.state_dict().items()
        if not k.startswith("model.layers.") or k.startswith("model.layers.0.")
    }
    missing, unexpected = draft.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise HarnessError(
            f"cannot build the first-layer draft of {type(target).__name__}: missing {missing}, unexpected {unexpected}"
        )
    draft.generation_config = copy.deepcopy(target.generation_config)
    return draft.eval().requires_grad_(False)
