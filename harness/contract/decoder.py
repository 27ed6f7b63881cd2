"""The public decoder contract: what the harness asks a decoder to do and what the decoder reports back.

Notation everywhere: p is the target model's (processed) next-token distribution, q the draft's.
Output positions are 0-based indices into the generated tokens (not into prompt + generated).

Plug in your own decoder by implementing `Decoder` (a `name` and `decode(requests)`), and give the
harness a factory `factory(bundle, device, dtype) -> Decoder` as `--decoder your.module:factory`.
"""

from __future__ import annotations

import json
import math
import numbers
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Literal, Protocol, runtime_checkable

import torch

from harness.contract.errors import HarnessError
from harness.contract.seeds import SEED_MODULUS

DraftMode = Literal["greedy", "sample"]
FinishReason = Literal["eos", "length", "stop"]
MAX_DRAFT_TOKENS = 8
MAX_SAMPLES = 16  # the most samples (n) one request may ask for
MAX_LOGPROBS = 20  # the most top tokens a request may ask for at each position (OpenAI's and vLLM's default limit)


class InvalidRequest(HarnessError):
    """A DecodeRequest the decoder cannot serve (bad settings, or out of the model's vocab or context)."""


def integer(name: str, value: object, low: int, high: int | None = None) -> int:
    """`value` as an int in [low, high]; a bool, a float or anything else that is not an integer is refused,
    naming the field and the value (numpy and 0-d torch integers are integers)."""
    if isinstance(value, bool):
        raise InvalidRequest(f"{name} must be an integer, got the bool {value!r}")
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise InvalidRequest(f"{name} must be an integer, got {value!r} ({type(value).__name__})") from None
    if number < low or (high is not None and number > high):
        bounds = f">= {low}" if high is None else f"in {low}..{high}"
        raise InvalidRequest(f"{name} must be an integer {bounds}, got {number}")
    return number


def real(name: str, value: object) -> float:
    """`value` as a finite float; a bool, a string or anything else that is not a real number is refused."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise InvalidRequest(f"{name} must be a finite real number, got {value!r}")
    return float(value)


def token_ids(name: str, values: object) -> tuple[int, ...]:
    """A sequence of non-negative integer token ids (strings and mappings are not sequences of ids)."""
    if isinstance(values, str | bytes | Mapping) or not isinstance(values, Iterable):
        raise InvalidRequest(f"{name} must be a sequence of token ids, got {values!r}")
    return tuple(integer(f"{name}[{i}]", value, 0) for i, value in enumerate(values))


def logit_biases(values: object) -> tuple[tuple[int, float], ...]:
    """token id -> a finite bias (a mapping or (id, bias) pairs), as (id, bias) pairs sorted by id; an id given
    twice is refused."""
    pairs = values.items() if isinstance(values, Mapping) else values
    if isinstance(pairs, str | bytes) or not isinstance(pairs, Iterable):
        raise InvalidRequest(f"logit_bias must map token ids to biases, got {values!r}")
    biases: dict[int, float] = {}
    for pair in pairs:
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise InvalidRequest(f"logit_bias must map token ids to biases, got the entry {pair!r}")
        token = integer("logit_bias token id", pair[0], 0)
        if token in biases:
            raise InvalidRequest(f"logit_bias names token id {token} twice")
        biases[token] = real(f"logit_bias[{token}]", pair[1])
    return tuple(sorted(biases.items()))


@dataclass(frozen=True)
class SamplingConfig:
    """Target sampling settings: how the target's logits l [V] at an output position become the distribution p the
    token there is drawn from. Applied in this order (vLLM's; harness/decoding/processors.py, sampling.py):

        logit_bias          l[t] += bias[t]
        min_tokens          l[e] = -inf for every EOS id e while fewer than min_tokens tokens precede the position
        repetition_penalty  l[t] = l[t] / r if l[t] > 0 else l[t] * r, for t in the prompt or the output before
        frequency/presence  l[t] -= frequency * c[t] + presence * [c[t] > 0], c[t]: t's count in the output before
        temperature         greedy (0): the argmax of l; else softmax(l / T)
        min_p               keep the tokens with p[t] >= min_p * max p
        top-k, top-p        (see harness/decoding/sampling.py)

    "The output before" a position is every token generated before it (accepted drafts included, rejected drafts
    never). temperature 0 means greedy: the argmax of the processed logits (min_p / top-k / top-p change nothing).
    Off: top_k 0, top_p 1.0, min_p 0.0, repetition_penalty 1.0, frequency and presence penalties 0.0, no biases,
    min_tokens 0.
    """

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    logit_bias: tuple[tuple[int, float], ...] = ()
    min_tokens: int = 0

    def __post_init__(self) -> None:
        temperature = real("temperature", self.temperature)
        if temperature < 0:
            raise InvalidRequest(f"temperature must be a finite number >= 0, got {self.temperature}")
        object.__setattr__(self, "temperature", temperature)
        object.__setattr__(self, "top_k", integer("top_k", self.top_k, 0))  # 0 = off
        top_p = real("top_p", self.top_p)
        if not (0.0 < top_p <= 1.0):
            raise InvalidRequest(f"top_p must be in (0, 1], got {self.top_p}")
        object.__setattr__(self, "top_p", top_p)
        min_p = real("min_p", self.min_p)
        if not (0.0 <= min_p <= 1.0):
            raise InvalidRequest(f"min_p must be in [0, 1], got {self.min_p}")
        object.__setattr__(self, "min_p", min_p)
        repetition = real("repetition_penalty", self.repetition_penalty)
        if repetition <= 0.0:
            raise InvalidRequest(f"repetition_penalty must be > 0 (1 = off), got {self.repetition_penalty}")
        object.__setattr__(self, "repetition_penalty", repetition)
        object.__setattr__(self, "frequency_penalty", real("frequency_penalty", self.frequency_penalty))
        object.__setattr__(self, "presence_penalty", real("presence_penalty", self.presence_penalty))
        object.__setattr__(self, "logit_bias", logit_biases(self.logit_bias))
        object.__setattr__(self, "min_tokens", integer("min_tokens", self.min_tokens, 0))

    @property
    def is_greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def reads_history(self) -> bool:
        """Whether a position's distribution depends on the tokens before it (penalties, min_tokens)."""
        return (
            self.repetition_penalty != 1.0
            or self.frequency_penalty != 0.0
            or self.presence_penalty != 0.0
            or self.min_tokens > 0
        )


GREEDY = SamplingConfig()

StructuredKind = Literal["regex", "json_schema", "gbnf"]
STRUCTURED_KINDS: tuple[StructuredKind, ...] = ("regex", "json_schema", "gbnf")


@dataclass(frozen=True)
class StructuredOutput:
    """A constraint on the output's text: a regular expression the whole text must match, a JSON schema the text must
    be a compact instance of (no whitespace between tokens, separators "," and ":"), or a GBNF grammar (llama.cpp's
    notation, root rule `root`) the text must derive.

    At every output position only the tokens that keep the text a prefix of a match are allowed, and the request's
    EOS ids only where the text is a whole match; once no token can extend the match, only an EOS remains. The mask
    comes first, on the raw logits, before every other processor (harness/decoding/grammar.py: llguidance compiles it,
    the library of vLLM's `guidance` backend and llama.cpp's LLAMA_LLGUIDANCE)."""

    kind: StructuredKind
    spec: str

    def __post_init__(self) -> None:
        if self.kind not in STRUCTURED_KINDS:
            raise InvalidRequest(f"structured_output kind must be one of {STRUCTURED_KINDS}, got {self.kind!r}")
        if not isinstance(self.spec, str) or not self.spec.strip():
            raise InvalidRequest(f"structured_output spec must be a non-empty string, got {self.spec!r}")
        if self.kind == "json_schema":
            try:
                schema = json.loads(self.spec)
            except json.JSONDecodeError as error:
                raise InvalidRequest(f"structured_output json_schema is not JSON: {error}") from None
            if not isinstance(schema, dict):
                raise InvalidRequest(f"structured_output json_schema must be a JSON object, got {self.spec!r}")


@dataclass(frozen=True)
class DecodeRequest:
    """One decoding job.

    num_draft_tokens: k, drafts proposed per verification pass (1..8).
    draft_mode: "greedy" proposes the MTP head's argmax with a one-hot q (what vLLM does); "sample" draws
        the draft from the MTP head's processed distribution q.
    forced_drafts: output position -> token id. Whenever the decoder proposes a draft for that position it
        must propose this token, with a one-hot q. Suites use it to force rejections at chosen positions.
    stop_sequences: token id sequences; the output ends with the first token that completes one of them (that
        token included, finish reason "stop"), checked after every token, accepted drafts included. A sequence
        completed while the output holds min_tokens tokens or fewer does not end it (as an EOS cannot come then).
    stop_strings: text; the output ends with the first token whose bytes complete an occurrence of one of them in
        the output's text (the prompt's never counts), that token included, finish reason "stop", past min_tokens as
        the sequences (harness/decoding/stops.py). Reading text needs the tokenizer: engines detokenize.
    structured_output: None, or the StructuredOutput every output must satisfy (a prefix of a match where it ends by
        length), masked at every position, drafts and the target's own tokens alike.
    n: how many samples of the request to draw (1..16; more than 1 only when sampling): sample i is the request with
        n = 1 and seed + i (vLLM's and llama.cpp's fan-out), drawn independently; DecodeResult.samples holds them.
    logprobs: None, or how many of the most likely tokens to report at every output position besides the output's
        own (DecodeResult.logprobs): the target's raw log-probabilities, log_softmax of its logits before any
        processing (vLLM's default `raw_logprobs`), whichever pass emitted the token.

    Every field is checked when the request is made: a malformed one raises InvalidRequest naming it and its value.
    """

    prompt_ids: tuple[int, ...]
    max_new_tokens: int
    sampling: SamplingConfig = GREEDY
    seed: int = 0
    num_draft_tokens: int = 1
    draft_mode: DraftMode = "greedy"
    eos_token_ids: tuple[int, ...] = ()
    forced_drafts: Mapping[int, int] = field(default_factory=dict)
    stop_sequences: tuple[tuple[int, ...], ...] = ()
    stop_strings: tuple[str, ...] = ()
    structured_output: StructuredOutput | None = None
    n: int = 1
    logprobs: int | None = None

    def __post_init__(self) -> None:
        prompt_ids = token_ids("prompt_ids", self.prompt_ids)
        if not prompt_ids:
            raise InvalidRequest("prompt_ids is empty: a request needs at least one prompt token")
        object.__setattr__(self, "prompt_ids", prompt_ids)
        object.__setattr__(self, "eos_token_ids", token_ids("eos_token_ids", self.eos_token_ids))
        object.__setattr__(self, "max_new_tokens", integer("max_new_tokens", self.max_new_tokens, 1))
        object.__setattr__(self, "seed", integer("seed", self.seed, 0, SEED_MODULUS))
        k = integer("num_draft_tokens (k)", self.num_draft_tokens, 1, MAX_DRAFT_TOKENS)
        object.__setattr__(self, "num_draft_tokens", k)
        if not isinstance(self.sampling, SamplingConfig):
            raise InvalidRequest(f"sampling must be a SamplingConfig, got {self.sampling!r}")
        if self.draft_mode not in ("greedy", "sample"):
            raise InvalidRequest(f"draft_mode must be 'greedy' or 'sample', got {self.draft_mode!r}")
        if not isinstance(self.forced_drafts, Mapping):
            raise InvalidRequest(f"forced_drafts must map output positions to token ids, got {self.forced_drafts!r}")
        forced = {
            integer("forced_drafts position", position, 0): integer(f"forced_drafts[{position!r}]", token, 0)
            for position, token in self.forced_drafts.items()
        }
        object.__setattr__(self, "forced_drafts", MappingProxyType(forced))
        if isinstance(self.stop_sequences, str | bytes) or not isinstance(self.stop_sequences, Iterable):
            raise InvalidRequest(f"stop_sequences must be a sequence of token id sequences, got {self.stop_sequences}")
        stops = tuple(token_ids(f"stop_sequences[{i}]", stop) for i, stop in enumerate(self.stop_sequences))
        if any(not stop for stop in stops):
            raise InvalidRequest("stop_sequences holds an empty sequence: a stop sequence needs at least one token")
        object.__setattr__(self, "stop_sequences", stops)
        if isinstance(self.stop_strings, str | bytes) or not isinstance(self.stop_strings, Iterable):
            raise InvalidRequest(f"stop_strings must be a sequence of strings, got {self.stop_strings!r}")
        strings = tuple(self.stop_strings)
        if any(not isinstance(text, str) or not text for text in strings):
            raise InvalidRequest(f"stop_strings must be non-empty strings, got {strings!r}")
        object.__setattr__(self, "stop_strings", strings)
        if self.structured_output is not None and not isinstance(self.structured_output, StructuredOutput):
            raise InvalidRequest(f"structured_output must be a StructuredOutput, got {self.structured_output!r}")
        if self.structured_output is not None and not self.eos_token_ids:
            raise InvalidRequest("structured_output needs eos_token_ids: a finished match ends the output with an EOS")
        object.__setattr__(self, "n", integer("n", self.n, 1, MAX_SAMPLES))
        if self.n > 1 and self.sampling.is_greedy:
            raise InvalidRequest(f"n = {self.n} needs sampling (temperature > 0): greedy samples are all the same")
        if self.logprobs is not None:
            object.__setattr__(self, "logprobs", integer("logprobs", self.logprobs, 0, MAX_LOGPROBS))

    def __hash__(self) -> int:
        return hash((self.prompt_ids, self.max_new_tokens, self.sampling, self.seed, self.num_draft_tokens))


def validate_for_model(request: DecodeRequest, vocab_size: int, max_context: int, index: int = 0) -> None:
    """Checks that need the model: token ids inside the vocab, prompt + max_new_tokens inside the context."""
    where = f"request {index}"
    out_of_vocab = [t for t in request.prompt_ids if t >= vocab_size]
    if out_of_vocab:
        raise InvalidRequest(f"{where}: prompt token id {out_of_vocab[0]} is outside the vocab (size {vocab_size})")
    forced = {p: t for p, t in request.forced_drafts.items() if t >= vocab_size}
    if forced:
        raise InvalidRequest(f"{where}: forced_drafts token ids outside the vocab (size {vocab_size}): {forced}")
    eos = [t for t in request.eos_token_ids if t >= vocab_size]
    if eos:
        raise InvalidRequest(f"{where}: eos_token_ids outside the vocab (size {vocab_size}): {eos}")
    biased = [t for t, _ in request.sampling.logit_bias if t >= vocab_size]
    if biased:
        raise InvalidRequest(f"{where}: logit_bias token ids outside the vocab (size {vocab_size}): {biased}")
    stops = [t for stop in request.stop_sequences for t in stop if t >= vocab_size]
    if stops:
        raise InvalidRequest(f"{where}: stop_sequences token ids outside the vocab (size {vocab_size}): {stops}")
    total = len(request.prompt_ids) + request.max_new_tokens
    if total > max_context:
        raise InvalidRequest(
            f"{where}: prompt ({len(request.prompt_ids)} tokens) + max_new_tokens ({request.max_new_tokens}) = "
            f"{total} exceeds the model's context of {max_context}"
        )


@dataclass(frozen=True)
class VerifyStep:
    """One target verification pass.

    start: generated tokens committed before this pass. drafts: the tokens proposed (empty for a pass
    without drafts). accepted: how many drafts the target accepted (a prefix). emitted: the tokens this
    pass committed, after EOS / max_new_tokens truncation: accepted drafts, then the target's own token.
    """

    start: int
    drafts: tuple[int, ...]
    accepted: int
    emitted: tuple[int, ...]


@dataclass(frozen=True)
class HiddenPairing:
    """An engine's MTP layer took in the token at `position` paired with `hidden` (None: with the target's own
    hidden state at position - 1, the checkpoint's pairing), before the drafts of step `step` (an index into
    DecodeResult.steps; len(steps) when no later step drafted). The engine's own record (llama.cpp built with the
    harness's instrumentation); a later pairing at or below a position rewrites the MTP cache from there on."""

    step: int
    position: int
    hidden: tuple[float, ...] | None


@dataclass(frozen=True)
class TokenLogprobs:
    """The target's raw log-probability of the output token at one position, and of the `top` most likely tokens
    there (most likely first; as many as the request's logprobs asked for)."""

    token: int
    logprob: float
    top: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True)
class DecodeResult:
    """Generated tokens (EOS included when it ended the output), the verification passes, and why it stopped.

    prefill_chunk_ends: where an engine that prefills prompts in chunks ended each chunk but the last (the count of
    prompt tokens computed after it), as the engine reports it; empty for a whole prefill or an engine that does not
    say. hidden_pairings: the MTP layer's pairings an engine reports (HiddenPairing), in order; empty where it does
    not. engine_steps: for each pass of `steps`, the engine step that verified it, as the engine reports it (vLLM,
    llama.cpp built with the harness's instrumentation): passes of one decode call with the same number ran together.
    step_facts: name -> one value per pass, what the engine's decoder computed from the whole decode call about the
    step each pass ran in (harness/subjects/engines/batch_steps.py): what a decision the engine takes for the whole
    batch reads. logprobs: one TokenLogprobs per output token where the request asked for them (empty otherwise;
    None for a token an engine reported none for). budget_cut_drafts: (pass start, drafts kept) for each pass whose
    drafts the engine's scheduler cut to fit the step's token budget, as the engine reports it (vLLM trims a request's
    drafts to what is left of max_num_batched_tokens, vllm/v1/core/sched/scheduler.py:862-871 in 0.32.0); empty where
    none was cut or the engine does not say.
    None of these is part of the output: two results that differ only there are equal (logprobs are compared within
    the dtype's tolerance by the features suite)."""

    token_ids: tuple[int, ...]
    steps: tuple[VerifyStep, ...]
    finish_reason: FinishReason
    prefill_chunk_ends: tuple[int, ...] = field(default=(), compare=False)
    hidden_pairings: tuple[HiddenPairing, ...] = field(default=(), compare=False)
    engine_steps: tuple[int, ...] = field(default=(), compare=False)
    step_facts: Mapping[str, tuple[int, ...]] = field(default_factory=dict, compare=False)  # a dict: it pickles
    logprobs: tuple[TokenLogprobs | None, ...] = field(default=(), compare=False)
    budget_cut_drafts: tuple[tuple[int, int], ...] = field(default=(), compare=False)
    samples: tuple[DecodeResult, ...] = ()  # a request with n > 1: its n samples (its own fields are sample 0's)


def sample_requests(request: DecodeRequest) -> list[DecodeRequest]:
    """The n one-sample requests a request with n samples stands for: sample i is seeded seed + i."""
    if request.n == 1:
        return [request]
    return [replace(request, n=1, seed=(request.seed + i) % SEED_MODULUS) for i in range(request.n)]


def with_samples(results: Sequence[DecodeResult]) -> DecodeResult:
    """One request's result from its samples' (sample_requests): sample 0's fields, and all of them."""
    return results[0] if len(results) == 1 else replace(results[0], samples=tuple(results))


@runtime_checkable
class Decoder(Protocol):
    """What the harness drives. Implementations must honour every DecodeRequest field, or declare what they
    cannot serve, so that suites skip exactly those cases and name the reason.

    Optional attributes:
    - `unsupported`: capabilities the decoder lacks entirely: "forced_drafts" (it cannot propose a forced
      token), "steps" (it reports no verification passes). A request field named here ("num_draft_tokens",
      "draft_mode") is served at its default value only.
    - `serves`: request field -> the values the decoder serves, e.g. {"num_draft_tokens": {2}} for an engine
      whose k is fixed by its MTP depths, {"draft_mode": {"sample"}} for one that samples its drafts whenever
      the target samples. draft_mode only matters when the target samples: at temperature 0 a draft sampled
      from the processed q is its argmax, the greedy draft.
    - `why_unsupported`: capability or request field -> why the decoder cannot serve it, in words; the skip
      reason of every case it cannot serve says it.
    - `drafts_from`: the first output position the decoder drafts for: 0 by default; 1 for an engine whose
      prefill samples the first token without drafts, as vLLM's and transformers' MTP generation do.
    - `drafter`: what proposes the drafts: "mtp" (the checkpoint's MTP depths, the default) or a description
      of another drafter (a draft model); the draft-conformance check applies to "mtp" drafters only.
    - `plain_twin()`: the same engine without speculation, for an engine that promises that a seeded sampled
      request gives the same tokens with and without speculation (llama.cpp verifies by sampling the target's
      token with one random draw per emitted token, whatever the drafts); the suites then check that promise.
    - `drafter_depths`: how many of the checkpoint's MTP depths the drafter runs (default: all); draft steps
      beyond them reuse the last one on its own output, as llama.cpp's one-NextN-layer graphs do.
    - `observer`: the inspection hook, see PassSnapshot.
    - `logprobs_dtype`: the dtype (its torch name, e.g. "float32") the decoder computes the logprobs it reports in,
      where that is coarser than the run's: transformers' generate() casts the model's logits to float32 before its
      logits processors (generation/utils.py), so in a float64 run its logprobs carry float32's rounding; the
      logprob checks then allow that dtype's (harness/checks/feature_cases.py logprob_tolerance)."""

    name: str

    def decode(self, requests: Sequence[DecodeRequest]) -> list[DecodeResult]: ...


CAPABILITIES = ("forced_drafts", "steps")
_DEFAULTS: Mapping[str, object] = MappingProxyType({"num_draft_tokens": 1, "draft_mode": "greedy"})


def unsupported_fields(decoder: Decoder) -> frozenset[str]:
    """The capabilities and request fields a decoder declares it cannot honour (attribute `unsupported`)."""
    return frozenset(getattr(decoder, "unsupported", ()))


def served_values(decoder: Decoder) -> dict[str, frozenset[object]]:
    """Request field -> the values `decoder` serves, for the fields it restricts (absent: every valid value).
    From its `serves` attribute, and a field named in `unsupported` serves its default value only."""
    served = {name: frozenset({_DEFAULTS[name]}) for name in unsupported_fields(decoder) if name in _DEFAULTS}
    for name, values in dict(getattr(decoder, "serves", {})).items():
        if name not in _DEFAULTS:
            raise HarnessError(
                f"decoder {decoder.name!r} declares served values of {name!r}, not a restrictable request field "
                f"(one of {', '.join(_DEFAULTS)})"
            )
        served[name] = frozenset(values)
    return served


def cannot_serve(decoder: Decoder, *capabilities: str, **values: object) -> str | None:
    """Why `decoder` cannot serve a case that needs `capabilities` ("forced_drafts", "steps") and these request
    field values (e.g. num_draft_tokens=3), naming the exact capability or value; None when it can."""
    unknown = set(capabilities) - set(CAPABILITIES)
    if unknown:
        raise HarnessError(f"unknown capabilities {sorted(unknown)}: the known ones are {', '.join(CAPABILITIES)}")
    reasons = dict(getattr(decoder, "why_unsupported", {}))

    def because(name: str) -> str:
        return f": {reasons[name]}" if name in reasons else ""

    lacking = sorted(set(capabilities) & unsupported_fields(decoder))
    if lacking:
        return f"decoder {decoder.name!r} declares it cannot honour {', '.join(lacking)}{because(lacking[0])}"
    served = served_values(decoder)
    for name, value in values.items():
        if name in served and value not in served[name]:
            allowed = ", ".join(repr(v) for v in sorted(served[name], key=str))
            return f"decoder {decoder.name!r} serves {name} in {{{allowed}}}, not {value!r}{because(name)}"
    return None


def drafts_from(decoder: Decoder) -> int:
    """The first output position `decoder` proposes drafts for (attribute `drafts_from`, default 0). Forced
    drafts at earlier positions are never used: those positions come from passes without drafts."""
    return int(getattr(decoder, "drafts_from", 0))


def undrafted_after_rejection(decoder: Decoder) -> bool:
    """Whether `decoder` emits the position after a rejection without drafts (attribute `undrafted_after_rejection`,
    default False): an engine that restores a recurrent-state checkpoint after a rejection and replays the accepted
    tokens, whose replay also computes the next token (llama.cpp on a hybrid model). Forced drafts there are never
    used."""
    return bool(getattr(decoder, "undrafted_after_rejection", False))


def draft_cap(decoder: Decoder, request: DecodeRequest) -> Callable[[int], int] | None:
    """How many drafts `decoder` proposes at most in a pass starting at output position s, for `request`: its method
    `max_drafts(prompt_length, start, max_new_tokens)`, an engine's documented limit near the end of the context or
    of max_new_tokens (llama.cpp); None: k wherever it drafts."""
    limit = getattr(decoder, "max_drafts", None)
    if limit is None:
        return None
    return lambda start: int(limit(len(request.prompt_ids), start, request.max_new_tokens))


def with_budget_cuts(cap: Callable[[int], int] | None, result: DecodeResult, k: int) -> Callable[[int], int] | None:
    """A pass's most drafts, where the engine's scheduler cut a pass's drafts to its step's token budget (the result's
    budget_cut_drafts): the drafts it kept there, else `cap`'s (k where None)."""
    cuts = dict(result.budget_cut_drafts)
    if not cuts:
        return cap
    return lambda start: min(k if cap is None else cap(start), cuts.get(start, k))


def drafter(decoder: Decoder) -> str:
    """What proposes `decoder`'s drafts (attribute `drafter`): "mtp" for the checkpoint's MTP depths (default)."""
    return str(getattr(decoder, "drafter", "mtp"))


def drafter_depths(decoder: Decoder) -> int | None:
    """How many of the checkpoint's MTP depths `decoder` drafts with (attribute `drafter_depths`); None: all."""
    depths = getattr(decoder, "drafter_depths", None)
    return None if depths is None else int(depths)


# --- inspection hook ------------------------------------------------------------------------------------------
CacheLayerView = tuple[torch.Tensor, ...]  # one layer's cached tensors over the valid slots: [heads, slots, dim]


@dataclass(frozen=True)
class PassSnapshot:
    """A decoder's state for one request right after a verification pass, for invariant checks.

    Convention: the target cache holds every committed token except the newest, which the next pass
    feeds first; so len(target_positions) == len(committed_ids) - 1.
    committed_ids: prompt + generated tokens after this pass.
    verify_position_ids: position ids the verification pass used for its inputs.
    target_cache / target_positions: per layer, the cached tensors of the valid slots and each slot's position.
    mtp_caches / mtp_positions: the same for each MTP depth's own attention cache (one layer per depth).
    mtp_hidden / mtp_hidden_start: per level e (0 = the target's hidden state h^0 that depth 1 reads, e >= 1 = depth e's
        output), the committed hidden states h^e that depth e+1 has not consumed yet, for the indices
        starting at mtp_hidden_start[e] (index i = the position of the hidden state's own token).
    next_position: the position id the next pass will give its first input.
    target_recurrent: per recurrent (linear-attention) layer index of the target, its (conv state [C, K],
        recurrent state [heads, d_k, d_v]) after the rollback; empty for a model without such layers. Such a
        layer's entry in target_cache is empty.
    """

    request_index: int
    pass_index: int
    committed_ids: tuple[int, ...]
    verify_position_ids: tuple[int, ...]
    target_cache: tuple[CacheLayerView, ...]
    target_positions: tuple[int, ...]
    mtp_caches: tuple[CacheLayerView, ...]
    mtp_positions: tuple[tuple[int, ...], ...]
    mtp_hidden: tuple[torch.Tensor, ...]
    mtp_hidden_start: tuple[int, ...]
    next_position: int
    target_recurrent: dict[int, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)


PassObserver = Callable[[PassSnapshot], None]
