"""The wire format between the harness and an engine server running in its own environment.

JSON lines over the server's stdin and stdout (one message per line, UTF-8), protocol version 1:

    harness -> engine, first line:  the engine configuration (engine-specific, e.g. model directory, dtype,
                                    k, draft mode); data only, never code
    engine  -> harness:             {"ready": true, "protocol": 1, "engine": {"name", "version", ...}}
                                    or {"ready": false, "error": "...", "traceback": "..."}
    harness -> engine:              {"op": "decode", "id": n, "requests": [request, ...]}
    engine  -> harness:             {"id": n, "results": [result, ...], "evidence": {counter: int}}
                                    or {"id": n, "error": "...", "traceback": "...", "fatal": bool}
                                    (evidence: the engine's own counters of what it did during the call, e.g.
                                    prefix-cache hits; harness/subjects/engines/configurations.py EVIDENCE)
    harness -> engine:              an engine's own operations, e.g. {"op": "prompt_logprobs", "id": n,
                                    "prompts": [[int]], "top": int} (vLLM), {"op": "next_token_logprobs", ...}
                                    (llama.cpp); the reply's results are that operation's
                                    (fatal: the server exits after this reply; the next call starts a new one)
    harness -> engine:              {"op": "shutdown"}

    request = {"prompt_ids": [int], "max_new_tokens": int, "temperature": float, "top_k": int (0 = off),
               "top_p": float (1 = off), "seed": int, "eos_token_ids": [int],
               "forced_drafts": {"<output position>": token id},
               the request features (harness/contract/features.py), each at its default when unused:
               "min_p": float (0 = off), "repetition_penalty": float (1 = off), "frequency_penalty": float,
               "presence_penalty": float, "logit_bias": [[token id, bias]], "min_tokens": int,
               "stop_sequences": [[int]], "stop_strings": [str],
               "structured_output": {"kind": "regex" | "json_schema" | "gbnf", "spec": str} | null,
               "n": int (samples: sample i seeded seed + i), "logprobs": int | null}
    result  = {"token_ids": [int], "finish_reason": "eos" | "length" | "stop",
               "steps": [{"start": int, "drafts": [int], "accepted": int, "emitted": [int]}],
               "prefill_chunk_ends": [int] (optional: where the engine ended each prefill chunk but the last),
               "budget_cut_drafts": [[start, kept]] (optional: passes whose drafts the scheduler cut to its budget),
               "hidden_pairings": [{"step": int, "position": int, "hidden": [float] | null}] (optional: the MTP
               layer's pairings the engine reports, DecodeResult.hidden_pairings),
               "engine_steps": [int] (optional: the engine step that verified each of `steps`),
               "logprobs": [[token id, logprob, [[token id, logprob], ...]] | null] (where the request asked for them:
               one entry per output token, its raw logprob and the top tokens', null where the engine gave none),
               "samples": [result] (where the request asked for n > 1: the n samples' results, in order; the
               result's own fields are sample 0's)}

The fields are those of harness.contract.decoder's DecodeRequest / DecodeResult; num_draft_tokens and draft_mode are
engine configuration (an engine process serves one k and one draft mode), not request fields.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.contract.decoder import (
    DecodeRequest,
    DecodeResult,
    DraftMode,
    SamplingConfig,
    StructuredOutput,
    TokenLogprobs,
    VerifyStep,
)
from harness.contract.errors import HarnessError
from harness.contract.records import hidden_pairing_records, hidden_pairings_from_records, step_records


class EngineProtocolError(HarnessError):
    """An engine server sent a message that does not follow the wire format."""


def request_message(request: DecodeRequest) -> dict:
    """One DecodeRequest as its wire form."""
    return {
        "prompt_ids": list(request.prompt_ids),
        "max_new_tokens": request.max_new_tokens,
        "temperature": request.sampling.temperature,
        "top_k": request.sampling.top_k,
        "top_p": request.sampling.top_p,
        "seed": request.seed,
        "eos_token_ids": list(request.eos_token_ids),
        "forced_drafts": {str(position): token for position, token in request.forced_drafts.items()},
        "min_p": request.sampling.min_p,
        "repetition_penalty": request.sampling.repetition_penalty,
        "frequency_penalty": request.sampling.frequency_penalty,
        "presence_penalty": request.sampling.presence_penalty,
        "logit_bias": [[token, bias] for token, bias in request.sampling.logit_bias],
        "min_tokens": request.sampling.min_tokens,
        "stop_sequences": [list(stop) for stop in request.stop_sequences],
        "stop_strings": list(request.stop_strings),
        "structured_output": structured_message(request.structured_output),
        "n": request.n,
        "logprobs": request.logprobs,
    }


def structured_message(constraint: StructuredOutput | None) -> dict | None:
    return None if constraint is None else {"kind": constraint.kind, "spec": constraint.spec}


def parse_structured(message: Mapping | None) -> StructuredOutput | None:
    return None if message is None else StructuredOutput(message["kind"], message["spec"])


def parse_request(message: Mapping, num_draft_tokens: int, draft_mode: DraftMode) -> DecodeRequest:
    """A wire request as a DecodeRequest (for engine servers written in Python); k and draft mode come from
    the engine configuration."""
    return DecodeRequest(
        tuple(message["prompt_ids"]),
        message["max_new_tokens"],
        sampling=SamplingConfig(
            message["temperature"],
            message["top_k"],
            message["top_p"],
            min_p=message.get("min_p", 0.0),
            repetition_penalty=message.get("repetition_penalty", 1.0),
            frequency_penalty=message.get("frequency_penalty", 0.0),
            presence_penalty=message.get("presence_penalty", 0.0),
            logit_bias=[tuple(pair) for pair in message.get("logit_bias", [])],
            min_tokens=message.get("min_tokens", 0),
        ),
        seed=message["seed"],
        num_draft_tokens=num_draft_tokens,
        draft_mode=draft_mode,
        eos_token_ids=tuple(message["eos_token_ids"]),
        forced_drafts={int(position): token for position, token in message["forced_drafts"].items()},
        stop_sequences=message.get("stop_sequences", ()),
        stop_strings=message.get("stop_strings", ()),
        structured_output=parse_structured(message.get("structured_output")),
        n=message.get("n", 1),
        logprobs=message.get("logprobs"),
    )


def result_message(result: DecodeResult) -> dict:
    """A DecodeResult as its wire form."""
    return {
        "token_ids": list(result.token_ids),
        "finish_reason": result.finish_reason,
        "steps": step_records(result.steps),
        "prefill_chunk_ends": list(result.prefill_chunk_ends),
        "hidden_pairings": hidden_pairing_records(result.hidden_pairings),
        "engine_steps": list(result.engine_steps),
        "logprobs": logprob_records(result.logprobs),
        "budget_cut_drafts": [list(cut) for cut in result.budget_cut_drafts],
        **({"samples": [result_message(sample) for sample in result.samples]} if result.samples else {}),
    }


def logprob_records(logprobs: tuple[TokenLogprobs | None, ...]) -> list:
    return [
        None if entry is None else [entry.token, entry.logprob, [[token, value] for token, value in entry.top]]
        for entry in logprobs
    ]


def parse_logprobs(message: Mapping, where: str) -> tuple[TokenLogprobs | None, ...]:
    """The result's optional logprobs ([[token, logprob, [[token, logprob], ...]] or null, ...]: null where the engine
    reported none for that token)."""
    raw = message.get("logprobs") or []

    def entry(value: object) -> TokenLogprobs | None:
        if value is None:
            return None
        token, logprob, top = value  # type: ignore[misc]
        pairs = tuple((int(t), float(v)) for t, v in top)
        if not isinstance(token, int) or isinstance(logprob, bool) or not isinstance(logprob, int | float):
            raise ValueError(value)
        return TokenLogprobs(token, float(logprob), pairs)

    try:
        return tuple(entry(value) for value in raw)
    except (TypeError, ValueError) as error:
        raise EngineProtocolError(
            f"{where}: logprobs must be [[token, logprob, [[token, logprob]]]]: {error}"[:300]
        ) from None


def parse_result(message: object, where: str) -> DecodeResult:
    """A wire result as a DecodeResult; a malformed one raises EngineProtocolError naming `where` and the field."""
    if not isinstance(message, Mapping):
        raise EngineProtocolError(f"{where}: a result must be an object, got {type(message).__name__}")
    tokens = _int_list(message, "token_ids", where)
    finish = message.get("finish_reason")
    if finish not in ("eos", "length", "stop"):
        raise EngineProtocolError(f"{where}: finish_reason must be 'eos', 'length' or 'stop', got {finish!r}")
    raw_steps = message.get("steps", [])
    if not isinstance(raw_steps, list):
        raise EngineProtocolError(f"{where}: steps must be a list")
    steps = []
    for index, step in enumerate(raw_steps):
        at = f"{where}, step {index}"
        if not isinstance(step, Mapping):
            raise EngineProtocolError(f"{at}: a step must be an object")
        start, accepted = step.get("start"), step.get("accepted")
        if not isinstance(start, int) or not isinstance(accepted, int):
            raise EngineProtocolError(f"{at}: start and accepted must be integers, got {start!r}, {accepted!r}")
        steps.append(
            VerifyStep(start, tuple(_int_list(step, "drafts", at)), accepted, tuple(_int_list(step, "emitted", at)))
        )
    chunk_ends = _int_list(message, "prefill_chunk_ends", where) if "prefill_chunk_ends" in message else []
    engine_steps = _int_list(message, "engine_steps", where) if "engine_steps" in message else []
    if engine_steps and len(engine_steps) != len(steps):
        raise EngineProtocolError(f"{where}: engine_steps has {len(engine_steps)} entries for {len(steps)} steps")
    logprobs = parse_logprobs(message, where)
    if logprobs and len(logprobs) != len(tokens):
        raise EngineProtocolError(f"{where}: {len(logprobs)} logprobs for {len(tokens)} output tokens")
    return DecodeResult(
        tuple(tokens),
        tuple(steps),
        finish,
        tuple(chunk_ends),
        _pairings(message, where),
        tuple(engine_steps),
        logprobs=logprobs,
        budget_cut_drafts=_budget_cuts(message, where),
        samples=_samples(message, where),
    )


def _budget_cuts(message: Mapping, where: str) -> tuple[tuple[int, int], ...]:
    """The optional passes whose drafts the engine's scheduler cut to its token budget: [[start, kept], ...]."""
    raw = message.get("budget_cut_drafts", [])
    valid = isinstance(raw, list) and all(
        isinstance(cut, list) and len(cut) == 2 and all(isinstance(v, int) and v >= 0 for v in cut) for cut in raw
    )
    if not valid:
        raise EngineProtocolError(f"{where}: budget_cut_drafts must be [[start, kept], ...] of non-negative integers")
    return tuple((start, kept) for start, kept in raw)


def _samples(message: Mapping, where: str) -> tuple[DecodeResult, ...]:
    """The optional samples of a request with n > 1, each a result of its own (sample 0 equal to the result)."""
    raw = message.get("samples", [])
    if not isinstance(raw, list):
        raise EngineProtocolError(f"{where}: samples must be a list of results")
    return tuple(parse_result(sample, f"{where}, sample {index}") for index, sample in enumerate(raw))


def _pairings(message: Mapping, where: str) -> tuple:
    raw = message.get("hidden_pairings", [])
    well_formed = isinstance(raw, list) and all(
        isinstance(p, Mapping)
        and isinstance(p.get("step"), int)
        and isinstance(p.get("position"), int)
        and (p.get("hidden") is None or isinstance(p.get("hidden"), list))
        for p in raw
    )
    if not well_formed:
        raise EngineProtocolError(f"{where}: hidden_pairings must be a list of {{step, position, hidden}} objects")
    return hidden_pairings_from_records(raw)


def _int_list(message: Mapping, field: str, where: str) -> list[int]:
    value = message.get(field)
    # JSON's integers parse to int exactly (true/false to bool, which the set of types then holds): one pass in C
    if not isinstance(value, list) or not set(map(type, value)) <= {int}:
        raise EngineProtocolError(f"{where}: {field} must be a list of integers, got {value!r}"[:300])
    return value
