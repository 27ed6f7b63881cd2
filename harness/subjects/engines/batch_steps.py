"""What ran beside each pass in its engine step, from the engine's own step numbers (DecodeResult.engine_steps): the
facts a decision the engine takes once for the whole batch reads, computed by the harness from the whole decode call's
requests and results (DecodeResult.step_facts). Each engine's decoder names the facts its findings need
(EngineDecoder.step_facts).

vLLM's model runner decides once per engine step whether its drafter runs, from the batch's longest sequence
(`_input_fits_in_drafter`: max_seq_len + k <= max_model_len, vllm/v1/worker/gpu_model_runner.py:4288), where a
request's sequence in a step is what it has computed plus what the step schedules for it:

    length(pass) = prompt length + start + len(drafts)    (the tokens before the pass, the last one fed again, + drafts)
    longest(step) = max length(pass) over the passes of the decode call verified in that engine step

A request in the middle of a chunked prefill is in the step too, with a sequence shorter than its prompt and no pass
to record: it is not counted (it can decide such a check only where prompt length + k > max_model_len).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from harness.contract.decoder import DecodeRequest, DecodeResult

# (the decode call's requests, their results) -> engine step -> the fact's value there, for every step of the results
StepFact = Callable[[Sequence[DecodeRequest], Sequence[DecodeResult]], dict[int, int]]


def pass_lengths(request: DecodeRequest, result: DecodeResult) -> list[int]:
    """The sequence length each of the request's passes gave its engine step: prompt + start + drafts."""
    return [len(request.prompt_ids) + step.start + len(step.drafts) for step in result.steps]


def longest_per_engine_step(requests: Sequence[DecodeRequest], results: Sequence[DecodeResult]) -> dict[int, int]:
    """Engine step -> the longest sequence among the passes of one decode call that the step verified."""
    longest: dict[int, int] = {}
    for request, result in zip(requests, results, strict=True):
        for engine_step, length in zip(result.engine_steps, pass_lengths(request, result), strict=True):
            longest[engine_step] = max(longest.get(engine_step, 0), length)
    return longest


def with_step_facts(
    requests: Sequence[DecodeRequest], results: Sequence[DecodeResult], facts: Mapping[str, StepFact]
) -> list[DecodeResult]:
    """The results of one decode call, each pass given each fact's value at its engine step (step_facts); the results
    unchanged where the engine reports no steps or the decoder names no facts."""
    if not facts or not any(result.engine_steps for result in results):
        return list(results)
    by_step = {name: fact(requests, results) for name, fact in facts.items()}
    return [
        replace(
            result, step_facts={name: tuple(values[s] for s in result.engine_steps) for name, values in by_step.items()}
        )
        for result in results
    ]
