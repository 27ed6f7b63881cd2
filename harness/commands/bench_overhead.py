"""`mtp-harness bench --job vllm`: the harness's overhead on an engine, its speculating subject's decode (vllm-mtp)
against the engine's own generate call (vLLM's `LLM.generate`) for the same requests and engine settings.

Two engine processes of the same environment, built from the same configuration (the subject's `server_config` and
`server_env`, so the same model runner, dtype, threads, scheduler and speculative settings):
- the harness: the subject's `decode(requests)` as the suites call it, timed in the harness's process (the wire both
  ways, the hooks inside the engine, the per-pass records, parsing into DecodeResults);
- the engine alone (its record's `alone` script, vllm/generate_alone.py): its generate call on the same requests
  with no hook installed, timed inside its process (building the requests' parameters and the call).
Engine start is excluded: each engine decodes the requests once unmeasured, then the two alternate, `repeats`
times each (in turns: harness then engine, engine then harness), so drift on a shared machine falls on both. The
requests force no draft: the probe measures what every request pays, not the forcing suites' extra work. The figure
is the ratio of the medians:
    overhead = median(harness seconds) / median(LLM.generate seconds)      (goal: at most OVERHEAD_GOAL)
Greedy outputs must be equal on both paths (the same requests decoded), or the probe stops.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field

from harness.contract.decoder import DecodeRequest
from harness.contract.errors import HarnessError
from harness.contract.paths import resolve_model_path
from harness.models.loading import load_bundle
from harness.models.prompts import load_prompts
from harness.subjects.decoder_registry import make_decoder
from harness.subjects.engines.abilities import OverheadProbe
from harness.subjects.engines.decoder import EngineDecoder
from harness.subjects.engines.process import EngineProcess
from harness.subjects.engines.registry import engine_of_decoder
from harness.subjects.engines.wire import request_message

OVERHEAD_GOAL = 1.2  # issue 47: the harness at most 1.2x vLLM's own LLM.generate


@dataclass(frozen=True)
class OverheadResult:
    decoder: str
    model: str
    requests: int
    new_tokens: int
    k: int
    repeats: int
    engine_version: str | None
    harness_seconds: list[float] = field(default_factory=list)
    generate_seconds: list[float] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return statistics.median(self.harness_seconds) / statistics.median(self.generate_seconds)

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "ratio": self.ratio, "goal": OVERHEAD_GOAL}

    def summary(self) -> str:
        verdict = "within" if self.ratio <= OVERHEAD_GOAL else "over"
        harness, alone = statistics.median(self.harness_seconds), statistics.median(self.generate_seconds)
        return (
            f"{self.decoder}: the harness's decode {harness:.3f} s against the engine's own generate {alone:.3f} s "
            f"(medians of {self.repeats}; {self.requests} requests x {self.new_tokens} tokens, {self.model}, "
            f"k={self.k}, engine {self.engine_version}): {self.ratio:.2f}x, goal at most {OVERHEAD_GOAL}x ({verdict} "
            "the goal)"
        )


def probe_requests(prompts: list[list[int]], count: int, new_tokens: int, k: int) -> list[DecodeRequest]:
    """`count` greedy requests over the prompts in turn, each with its own seed and no EOS (all decode `new_tokens`)."""
    return [
        DecodeRequest(tuple(prompts[i % len(prompts)]), new_tokens, seed=i, num_draft_tokens=k) for i in range(count)
    ]


def measure_overhead(
    decoder_name: str = "vllm-mtp",
    model: str = "tiny-mimo",
    requests: int = 100,
    new_tokens: int = 32,
    k: int = 2,
    repeats: int = 5,
) -> OverheadResult:
    """Alternate the harness's decode and the engine's own generate, `repeats` times each after one unmeasured decode
    each (engine start and warm-up)."""
    if repeats < 1:
        raise HarnessError(f"repeats must be at least 1, got {repeats}")
    engine = engine_of_decoder(decoder_name)
    probe = engine.ability(OverheadProbe) if engine is not None else None
    if engine is None or probe is None or not engine.decoders[decoder_name]:
        raise HarnessError(
            f"decoder {decoder_name!r}: no overhead probe (an engine's speculating decoder with an "
            "overhead probe has one)"
        )
    bundle = load_bundle(resolve_model_path(model), device="cpu", dtype=engine.default_dtypes["cpu"])
    encoded = (prompt.encode(bundle.tokenizer) for prompt in load_prompts())
    prompts = [ids for ids in encoded if len(ids) + new_tokens <= bundle.max_context]  # those that fit the context
    batch = probe_requests(prompts, requests, new_tokens, k)
    decoder = make_decoder(decoder_name, bundle)
    if not isinstance(decoder, EngineDecoder):
        raise HarnessError(f"decoder {decoder_name!r} is not an engine's: no engine alone to compare it with")
    alone = EngineProcess(
        decoder.server_python(),
        probe.server,
        decoder.server_config(k, "greedy"),
        decoder.server_env(),
        f"{engine.name}-alone-{bundle.name}-k{k}",
    )
    messages = {"requests": [request_message(request) for request in batch]}
    harness_seconds: list[float] = []
    generate_seconds: list[float] = []
    try:
        for repeat in range(repeats + 1):
            if repeat % 2:  # the two paths' order alternates, so that neither always runs after the other
                generated = alone.call("generate", messages, f"{len(batch)} requests")
            started = time.perf_counter()
            results = decoder.decode(batch)
            harness = time.perf_counter() - started
            if not repeat % 2:
                generated = alone.call("generate", messages, f"{len(batch)} requests")
            theirs = generated["token_ids"]
            ours = [list(result.token_ids) for result in results]
            if ours != theirs:
                differ = sum(a != b for a, b in zip(ours, theirs, strict=True))
                raise HarnessError(
                    f"{decoder_name} overhead probe: {differ} of {len(batch)} outputs differ from the "
                    "engine's own generate"
                )
            if repeat:  # the first of each warms the engine
                harness_seconds.append(harness)
                generate_seconds.append(float(generated["seconds"]))
    finally:
        alone.close()
        decoder.close()
    return OverheadResult(
        decoder_name,
        bundle.name,
        requests,
        new_tokens,
        k,
        repeats,
        decoder.engine_version,
        harness_seconds,
        generate_seconds,
    )
