"""`mtp-harness bench`: throughput of the batched MTPDecoder against transformers' MTP generation loop.

Measured in one run, on one model and one prompt, at temperature 1 (the sampling suites' workload):
    - samples/s of MTPDecoder decoding N requests as one batch (distinct seeds);
    - samples/s of transformers' generate(use_mtp=True), one request at a time (M requests);
    - tokens committed per verification pass, and accepted drafts per pass;
    - the MTP heads' cost relative to the target: the time to propose k drafts (one query per depth)
      over the time of one target verification pass of k + 1 queries, same batch and cache length.
Timings are wall-clock medians of repeats on a possibly shared machine: compare ratios, not seconds.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
from transformers import DynamicCache

from harness.contract.decoder import DecodeRequest, SamplingConfig
from harness.decoding.forward import depth_pass, target_pass
from harness.decoding.mtp_decoder import MTPDecoder
from harness.decoding.slots import SlotCache
from harness.models.loading import ModelBundle
from harness.subjects.decoder_registry import make_decoder


@dataclass(frozen=True)
class BenchResult:
    model: str
    dtype: str
    prompt_tokens: int
    new_tokens: int
    k: int
    temperature: float
    mtp_requests: int
    mtp_seconds: float
    mtp_samples_per_second: float
    transformers_requests: int
    transformers_seconds: float
    transformers_samples_per_second: float
    speedup: float
    tokens_per_pass: float
    accepted_drafts_per_pass: float
    head_cost_vs_verify_pass: float
    torch_threads: int

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _median_seconds(work: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def head_cost_ratio(bundle: ModelBundle, prompt: list[int], batch: int, k: int, repeats: int = 5) -> float:
    """(k MTP depth passes of one query) / (one target pass of k + 1 queries), on a prefilled batch."""
    device = bundle.device
    ids = torch.tensor([prompt] * batch, device=device)
    positions = torch.arange(len(prompt), device=device)[None].expand(batch, -1)
    valid = torch.ones_like(ids, dtype=torch.bool)

    def prepared() -> tuple[SlotCache, torch.Tensor]:
        slots = SlotCache(bundle.new_target_cache(), range(bundle.config.num_hidden_layers), batch, device)
        hidden, _ = target_pass(bundle, slots, ids, positions, valid)
        return slots, hidden

    slots, hidden = prepared()
    verify_ids = ids[:, -1:].expand(-1, k + 1)
    verify_positions = len(prompt) + torch.arange(k + 1, device=device)[None].expand(batch, -1)

    def verify() -> None:
        target_pass(bundle, slots, verify_ids, verify_positions, torch.ones_like(verify_ids, dtype=torch.bool))
        slots.keep_below(torch.full((batch,), len(prompt), device=device))

    depth_slots = [SlotCache(DynamicCache(), [d], batch, device) for d in range(len(bundle.depths))]

    def propose() -> None:
        carried = hidden[:, -1:]
        for step in range(k):
            d = min(step, len(bundle.depths) - 1)
            position = torch.full((batch, 1), len(prompt) + step, device=device)
            carried = depth_pass(bundle, d, depth_slots[d], ids[:, -1:], carried, position, valid[:, :1])
            bundle.depths[d].head(carried)
        for cache in depth_slots:
            cache.keep_below(torch.zeros(batch, dtype=torch.long, device=device))

    with torch.no_grad():
        verify_seconds = _median_seconds(verify, repeats)
        propose_seconds = _median_seconds(propose, repeats)
    return propose_seconds / verify_seconds


def run_bench(
    bundle: ModelBundle,
    prompt: list[int],
    requests: int = 4096,
    new_tokens: int = 8,
    k: int = 2,
    temperature: float = 1.0,
    transformers_requests: int = 64,
) -> BenchResult:
    sampling = SamplingConfig(temperature=temperature)

    def make(count: int) -> list[DecodeRequest]:
        return [
            DecodeRequest(tuple(prompt), new_tokens, sampling=sampling, seed=seed, num_draft_tokens=k)
            for seed in range(count)
        ]

    mtp = MTPDecoder(bundle)
    mtp.decode(make(8))  # warm-up
    batch = make(requests)
    started = time.perf_counter()
    results = mtp.decode(batch)
    mtp_seconds = time.perf_counter() - started
    steps = [step for result in results for step in result.steps]
    reference = make_decoder("transformers-mtp", bundle)  # transformers' generate(use_mtp=True)
    reference.decode(make(2))  # warm-up
    started = time.perf_counter()
    reference.decode(make(transformers_requests))
    transformers_seconds = time.perf_counter() - started
    mtp_rate = requests / mtp_seconds
    transformers_rate = transformers_requests / transformers_seconds
    return BenchResult(
        model=bundle.name,
        dtype=str(bundle.dtype).removeprefix("torch."),
        prompt_tokens=len(prompt),
        new_tokens=new_tokens,
        k=k,
        temperature=temperature,
        mtp_requests=requests,
        mtp_seconds=mtp_seconds,
        mtp_samples_per_second=mtp_rate,
        transformers_requests=transformers_requests,
        transformers_seconds=transformers_seconds,
        transformers_samples_per_second=transformers_rate,
        speedup=mtp_rate / transformers_rate,
        tokens_per_pass=sum(len(s.emitted) for s in steps) / len(steps),
        accepted_drafts_per_pass=sum(s.accepted for s in steps) / len(steps),
        head_cost_vs_verify_pass=head_cost_ratio(bundle, prompt, min(requests, 256), k),
        torch_threads=torch.get_num_threads(),
    )
