"""The sampling suite's case grid and how one case is run: samples from the decoder under test, tallied
against the exact target law (first L tokens), or turned into PIT values over whole sequences."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from harness.api import Decoder, DecodeRequest, SamplingConfig
from harness.models import ModelBundle
from harness.sampling import process_logits
from harness.stats import GoodnessOfFit, Uniformity, goodness_of_fit, randomized_pit, uniformity
from harness.target_law import OTHER, TargetLaw, target_law
from harness.teacher_forcing import target_forward

LAW_LENGTH = 2  # tokens whose joint law is enumerated
PIT_LENGTH = 48  # tokens per sequence for the whole-sequence (PIT) cases
PIT_SEQUENCES = 160
PRUNE_MASS = 1e-4


@dataclass(frozen=True)
class SamplingCase:
    """One case: a prompt, target sampling settings, k, draft mode, and optional adversarial forced drafts."""

    id: str
    prompt_id: str
    sampling: SamplingConfig
    k: int
    draft_mode: str
    kind: str = "law"  # "law": first-L-token law; "pit": whole-sequence PIT
    forced: dict[int, int] = field(default_factory=dict)

    @property
    def seed(self) -> int:
        return zlib.crc32(self.id.encode())

    def needs(self) -> tuple[tuple[str, ...], dict[str, object]]:
        """(capabilities, request values) a decoder must serve to run this case; see `api.cannot_serve`."""
        capabilities = ("forced_drafts",) if self.forced else ()
        return capabilities, {"num_draft_tokens": self.k, "draft_mode": self.draft_mode}


def case_grid() -> list[SamplingCase]:
    """Temperature x filters x draft mode at k = 2; k = 1..4 at temperature 1; adversarial forced drafts; PIT."""
    cases = []
    filters = {"nofilter": (0, 1.0), "topk50-topp0.9": (50, 0.9)}
    prompts = ["natural-02", "code-01"]
    for t_index, temperature in enumerate((0.7, 1.0, 1.3)):
        for f_index, (name, (top_k, top_p)) in enumerate(filters.items()):
            for draft_mode in ("greedy", "sample"):
                sampling = SamplingConfig(temperature=temperature, top_k=top_k, top_p=top_p)
                prompt = prompts[(t_index + f_index) % 2]
                cases.append(
                    SamplingCase(f"T{temperature}-{name}-k2-{draft_mode}-{prompt}", prompt, sampling, 2, draft_mode)
                )
    for k in (1, 3, 4):
        for draft_mode in ("greedy", "sample"):
            cases.append(
                SamplingCase(
                    f"T1.0-nofilter-k{k}-{draft_mode}-natural-02", "natural-02", SamplingConfig(1.0), k, draft_mode
                )
            )
    for k in (1, 2):
        # drafts forced to low-probability tokens: the residual path carries most of the mass
        forced = {0: 999, 1: 998}
        cases.append(
            SamplingCase(
                f"T1.0-nofilter-k{k}-forced-low-natural-02",
                "natural-02",
                SamplingConfig(1.0),
                k,
                "sample",
                forced=forced,
            )
        )
    for k, draft_mode in ((1, "greedy"), (2, "sample"), (4, "greedy")):
        cases.append(
            SamplingCase(
                f"pit-T1.0-k{k}-{draft_mode}-natural-03", "natural-03", SamplingConfig(1.0), k, draft_mode, kind="pit"
            )
        )
    return cases


def p_values_per_case(case: SamplingCase) -> int:
    return 2  # chi-square + G for law cases; KS + binned chi-square for PIT cases


@dataclass(frozen=True)
class LawOutcome:
    case: SamplingCase
    law: TargetLaw
    fit: GoodnessOfFit


@dataclass(frozen=True)
class PitOutcome:
    case: SamplingCase
    test: Uniformity


_LAWS: dict[tuple, TargetLaw] = {}


def law_samples(
    decoder: Decoder,
    bundle: ModelBundle,
    prompt_ids: tuple[int, ...],
    case: SamplingCase,
    n: int,
    seed_offset: int = 0,
) -> tuple[TargetLaw, list[tuple]]:
    """The exact target law of the case (memoised) and the cells of n samples through the decoder
    (request i seeded case.seed + seed_offset + i)."""
    key = (id(bundle), prompt_ids, case.sampling)
    if key not in _LAWS:
        _LAWS[key] = target_law(bundle, prompt_ids, case.sampling, LAW_LENGTH, PRUNE_MASS)
    law = _LAWS[key]
    requests = [
        DecodeRequest(
            prompt_ids,
            LAW_LENGTH,
            sampling=case.sampling,
            seed=case.seed + seed_offset + i,
            num_draft_tokens=case.k,
            draft_mode=case.draft_mode,
            eos_token_ids=bundle.eos_token_ids,
            forced_drafts=case.forced,
        )
        for i in range(n)
    ]
    return law, [law.cell_of(result.token_ids) for result in decoder.decode(requests)]


def run_law_case(
    decoder: Decoder, bundle: ModelBundle, prompt_ids: tuple[int, ...], case: SamplingCase, n: int
) -> LawOutcome:
    law, samples = law_samples(decoder, bundle, prompt_ids, case, n)
    return LawOutcome(case, law, goodness_of_fit({**law.cells, OTHER: law.other}, samples, OTHER))


def run_pit_case(
    decoder: Decoder,
    bundle: ModelBundle,
    prompt_ids: tuple[int, ...],
    case: SamplingCase,
    sequences: int = PIT_SEQUENCES,
) -> PitOutcome:
    requests = [
        DecodeRequest(
            prompt_ids,
            PIT_LENGTH,
            sampling=case.sampling,
            seed=case.seed + i,
            num_draft_tokens=case.k,
            draft_mode=case.draft_mode,
            eos_token_ids=bundle.eos_token_ids,
        )
        for i in range(sequences)
    ]
    results = decoder.decode(requests)
    return PitOutcome(
        case, uniformity(pit_values(bundle, prompt_ids, [r.token_ids for r in results], case.sampling, case.seed))
    )


def pit_values(
    bundle: ModelBundle,
    prompt_ids: tuple[int, ...],
    continuations: Sequence[tuple[int, ...]],
    sampling: SamplingConfig,
    seed: int,
) -> np.ndarray:
    """Randomized PIT of every generated token under the target's processed conditional (one batched forward)."""
    generator = torch.Generator().manual_seed(seed)
    values = []
    width = max(len(c) for c in continuations)
    padded = [list(prompt_ids) + list(c) + [0] * (width - len(c)) for c in continuations]
    with torch.no_grad():
        _, logits = target_forward(bundle.target, torch.tensor(padded, device=bundle.device))
    start = len(prompt_ids) - 1
    probs = process_logits(logits[:, start : start + width], sampling).double().cpu()
    cdf = probs.cumsum(-1)
    for row, continuation in enumerate(continuations):
        tokens = torch.tensor(continuation, dtype=torch.long)
        p = probs[row, : len(continuation)].gather(-1, tokens[:, None]).squeeze(-1)
        before = cdf[row, : len(continuation)].gather(-1, tokens[:, None]).squeeze(-1) - p
        v = torch.rand(len(continuation), generator=generator, dtype=torch.float64)
        values.append(randomized_pit(before.numpy(), p.numpy(), v.numpy()))
    return np.clip(np.concatenate(values), 0.0, 1.0)
