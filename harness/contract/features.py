"""Request features: the parts of a DecodeRequest beyond temperature / top-k / top-p that real traffic carries, and
which of them a decoder serves.

A decoder serves a feature only where it says so (attribute `features`, a set of the names below; absent: none),
with the engine's own reason for the others (attribute `why_unsupported`, keyed by feature name). A decoder written
before a feature existed would otherwise receive it and ignore it: the features suite skips the features it does not
declare, and a decoder that cannot pass one on refuses the request (`refuse_unserved`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from harness.contract.decoder import STRUCTURED_KINDS, Decoder, DecodeRequest, InvalidRequest

FEATURES: dict[str, str] = {
    "repetition_penalty": "repetition_penalty: tokens of the prompt or the output before are scaled toward 0",
    "frequency_penalty": "frequency_penalty: a token's logit drops by the penalty times its count in the output before",
    "presence_penalty": "presence_penalty: a token's logit drops by the penalty once it occurs in the output before",
    "min_p": "min_p: tokens below min_p times the most likely token's probability are dropped",
    "logit_bias": "logit_bias: token id -> a bias added to its logit",
    "min_tokens": "min_tokens: no EOS before the output holds min_tokens tokens",
    "stop_sequences": "stop_sequences: the output ends with the token that completes one of them",
    "stop_strings": "stop_strings: the output ends with the token that completes one of them in the output's text",
    "structured_regex": "structured_output (regex): every output token keeps the text a prefix of a match",
    "structured_json_schema": "structured_output (JSON schema): every output token keeps the text a prefix of an "
    "instance",
    "structured_gbnf": "structured_output (GBNF grammar): every output token keeps the text a prefix of a sentence",
    "n": "n: several samples of one request, sample i seeded seed + i, each an independent draw of the target's law",
    "logprobs": "logprobs: the target's raw log-probabilities of each output token and its top tokens",
}


def requested_features(request: DecodeRequest) -> frozenset[str]:
    """The features `request` uses (a field at its default value is not a use)."""
    sampling = request.sampling
    used = {
        "repetition_penalty": sampling.repetition_penalty != 1.0,
        "frequency_penalty": sampling.frequency_penalty != 0.0,
        "presence_penalty": sampling.presence_penalty != 0.0,
        "min_p": sampling.min_p > 0.0,
        "logit_bias": bool(sampling.logit_bias),
        "min_tokens": sampling.min_tokens > 0,
        "stop_sequences": bool(request.stop_sequences),
        "stop_strings": bool(request.stop_strings),
        **{
            f"structured_{kind}": request.structured_output is not None and request.structured_output.kind == kind
            for kind in STRUCTURED_KINDS
        },
        "n": request.n > 1,
        "logprobs": request.logprobs is not None,
    }
    return frozenset(name for name, is_used in used.items() if is_used)


def served_features(decoder: Decoder) -> frozenset[str]:
    """The features `decoder` declares it serves (attribute `features`; none by default)."""
    declared = frozenset(getattr(decoder, "features", ()))
    unknown = declared - set(FEATURES)
    if unknown:
        raise InvalidRequest(
            f"decoder {decoder.name!r} declares unknown features {sorted(unknown)}: known {list(FEATURES)}"
        )
    return declared


def cannot_serve_features(decoder: Decoder, features: Iterable[str]) -> str | None:
    """Why `decoder` cannot serve requests using `features`, naming the first it lacks and its reason; None when it
    serves them all."""
    lacking = sorted(set(features) - served_features(decoder))
    if not lacking:
        return None
    reasons = dict(getattr(decoder, "why_unsupported", {}))
    because = f": {reasons[lacking[0]]}" if lacking[0] in reasons else " (it does not declare it in `features`)"
    return f"decoder {decoder.name!r} does not serve the request feature {', '.join(lacking)}{because}"


def refuse_unserved(decoder: Decoder, requests: Sequence[DecodeRequest]) -> None:
    """Raise InvalidRequest for the first request using a feature `decoder` does not serve: a feature it would
    silently drop must not be reported as served."""
    for index, request in enumerate(requests):
        reason = cannot_serve_features(decoder, requested_features(request))
        if reason:
            raise InvalidRequest(f"request {index}: {reason}")
