"""The sampling suite's case grid and how one case is run: samples from the decoder under test, tallied
against the exact target law (first L tokens), or tested as whole sequences against the target's
conditionals (harness/stats/sequence.py): the probability-ordered PIT and the log-likelihood, pooled and at
each of the PIT_LENGTH output positions, so a bias confined to one position (the last token, the token
after a KV block boundary, the token a max_new_tokens truncation emits) is not diluted by the others."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import torch

from harness.contract.decoder import Decoder, DecodeRequest, DecodeResult, SamplingConfig
from harness.contract.seeds import DEFAULT_SEED, SEED_MODULUS, mixed_seed, session_shifted
from harness.decoding.sampling import process_logits
from harness.decoding.target_decoder import TargetOnlyDecoder
from harness.models.loading import ModelBundle
from harness.models.teacher_forcing import target_forward
from harness.stats.goodness_of_fit import GoodnessOfFit, goodness_of_fit
from harness.stats.sequence import (
    PositionTests,
    cumulants,
    log_likelihood_terms,
    position_tests,
    probability_ordered_pit,
)
from harness.stats.target_law import OTHER, TargetLaw, target_law
from harness.stats.uniformity import Uniformity, uniformity

LAW_LENGTH = 2  # tokens whose joint law is enumerated
PIT_LENGTH = 48  # tokens per sequence for the whole-sequence (PIT) cases: crosses two KV blocks of 16
PRUNE_MASS = 1e-4
CHUNK = 128  # sequences per target forward when scoring whole sequences


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
    """Law cases: chi-square and G. PIT cases: pooled KS, binned chi-square and log-likelihood, then KS and
    log-likelihood at each output position."""
    return 2 if case.kind == "law" else 3 + 2 * PIT_LENGTH


def family_size(cases: Sequence[SamplingCase]) -> int:
    """m: the number of p-values the cases put in the Holm family."""
    return sum(p_values_per_case(case) for case in cases)


@dataclass(frozen=True)
class LawOutcome:
    case: SamplingCase
    law: TargetLaw
    fit: GoodnessOfFit


@dataclass(frozen=True)
class PitOutcome:
    case: SamplingCase
    test: Uniformity  # pooled probability-ordered PIT: KS and binned chi-square
    pooled: PositionTests  # pooled log-likelihood (and KS, the same as test's)
    positions: tuple[PositionTests, ...]  # output positions 0 .. PIT_LENGTH - 1
    prompt_length: int
    truncated: int  # sequences whose last pass was cut by max_new_tokens (an accepted run truncated)

    def p_values(self) -> tuple[float, ...]:
        """In the order of pit_test_names()."""
        return (
            self.test.ks_p,
            self.test.chi2_p,
            self.pooled.z_p,
            *(position.ks_p for position in self.positions),
            *(position.z_p for position in self.positions),
        )


def pit_test_names() -> tuple[str, ...]:
    positions = range(PIT_LENGTH)
    return (
        "KS",
        "binned chi-square",
        "log-likelihood",
        *(f"KS at {t}" for t in positions),
        *(f"log-likelihood at {t}" for t in positions),
    )


class TargetScorer(Protocol):
    """Where a sampling case's truth comes from: the exact law of the first tokens and the whole-sequence statistics'
    terms. `HarnessScorer` computes them on the harness's own copy of the checkpoint; under --reference engine the
    engine computes them in its own process (harness/checks/engine_reference.py EngineReference)."""

    def target_law(
        self, prompt_ids: tuple[int, ...], sampling: SamplingConfig, length: int, prune_mass: float
    ) -> TargetLaw: ...

    def sequence_terms(
        self, prompt_ids: tuple[int, ...], continuations: Sequence[Sequence[int]], sampling: SamplingConfig, seed: int
    ) -> SequenceTerms: ...


class HarnessScorer:
    """The sampling suite's truth from the harness's own copy of the checkpoint (float64 on CPU)."""

    def __init__(self, bundle: ModelBundle) -> None:
        self.bundle = bundle

    def target_law(
        self, prompt_ids: tuple[int, ...], sampling: SamplingConfig, length: int, prune_mass: float
    ) -> TargetLaw:
        return target_law(self.bundle, prompt_ids, sampling, length, prune_mass)

    def sequence_terms(
        self, prompt_ids: tuple[int, ...], continuations: Sequence[Sequence[int]], sampling: SamplingConfig, seed: int
    ) -> SequenceTerms:
        return sequence_terms(self.bundle, prompt_ids, continuations, sampling, seed)


_LAWS: dict[tuple, TargetLaw] = {}


def law_samples(
    decoder: Decoder,
    bundle: ModelBundle,
    prompt_ids: tuple[int, ...],
    case: SamplingCase,
    n: int | Callable[[TargetLaw], int],
    seed_offset: int = 0,
    session_seed: int = DEFAULT_SEED,
    scorer: TargetScorer | None = None,
) -> tuple[TargetLaw, list[tuple]]:
    """The exact target law of the case (memoised; from `scorer`, the harness's own model by default) and the cells
    of n samples through the decoder (request i seeded case.seed + seed_offset + i, moved by the session seed:
    harness/contract/seeds.py session_shifted); `n` may be a function of the law (its N from the omnibus tests'
    power at the law's own degrees of freedom: harness/stats/power.py law_sample_size)."""
    key = (id(scorer) if scorer is not None else id(bundle), prompt_ids, case.sampling)
    if key not in _LAWS:
        _LAWS[key] = (scorer or HarnessScorer(bundle)).target_law(prompt_ids, case.sampling, LAW_LENGTH, PRUNE_MASS)
    law = _LAWS[key]
    n = n(law) if callable(n) else n
    requests = [
        DecodeRequest(
            prompt_ids,
            LAW_LENGTH,
            sampling=case.sampling,
            seed=session_shifted(case.seed + seed_offset + i, session_seed),
            num_draft_tokens=case.k,
            draft_mode=case.draft_mode,
            eos_token_ids=bundle.eos_token_ids,
            forced_drafts=case.forced,
        )
        for i in range(n)
    ]
    return law, [law.cell_of(result.token_ids) for result in decoder.decode(requests)]


def run_law_case(
    decoder: Decoder,
    bundle: ModelBundle,
    prompt_ids: tuple[int, ...],
    case: SamplingCase,
    n: int | Callable[[TargetLaw], int],
    session_seed: int = DEFAULT_SEED,
    scorer: TargetScorer | None = None,
) -> LawOutcome:
    law, samples = law_samples(decoder, bundle, prompt_ids, case, n, session_seed=session_seed, scorer=scorer)
    return LawOutcome(case, law, goodness_of_fit({**law.cells, OTHER: law.other}, samples, OTHER))


def pit_requests(
    bundle: ModelBundle, prompt_ids: tuple[int, ...], case: SamplingCase, sequences: int, seed: int
) -> list[DecodeRequest]:
    """The case's whole-sequence requests: PIT_LENGTH tokens each, request i seeded seed + i."""
    return [
        DecodeRequest(
            prompt_ids,
            PIT_LENGTH,
            sampling=case.sampling,
            seed=(seed + i) % SEED_MODULUS,
            num_draft_tokens=case.k,
            draft_mode=case.draft_mode,
            eos_token_ids=bundle.eos_token_ids,
        )
        for i in range(sequences)
    ]


def run_pit_case(
    decoder: Decoder,
    bundle: ModelBundle,
    prompt_ids: tuple[int, ...],
    case: SamplingCase,
    sequences: int,
    session_seed: int = DEFAULT_SEED,
    scorer: TargetScorer | None = None,
) -> PitOutcome:
    [outcome] = run_pit_cases(decoder, bundle, prompt_ids, [case], sequences, session_seed, scorer)
    return outcome


def run_pit_cases(
    decoder: Decoder,
    bundle: ModelBundle,
    prompt_ids: tuple[int, ...],
    cases: Sequence[SamplingCase],
    sequences: int,
    session_seed: int = DEFAULT_SEED,
    scorer: TargetScorer | None = None,
) -> list[PitOutcome]:
    """Whole-sequence cases of one prompt (each with its own seeds), their requests decoded in one batch."""
    seeds = [session_shifted(case.seed, session_seed) for case in cases]
    requests = [
        request
        for case, seed in zip(cases, seeds, strict=True)
        for request in pit_requests(bundle, prompt_ids, case, sequences, seed)
    ]
    results = decoder.decode(requests)
    outcomes = []
    scorer = scorer or HarnessScorer(bundle)
    for index, (case, seed) in enumerate(zip(cases, seeds, strict=True)):
        own = results[index * sequences : (index + 1) * sequences]
        continuations = [result.token_ids for result in own]
        uniforms_seed = mixed_seed(seed, "pit uniforms")  # a stream apart from the requests' (mixed_seed)
        terms = scorer.sequence_terms(prompt_ids, continuations, case.sampling, uniforms_seed)
        truncated = sum(1 for result in own if len(result.token_ids) == PIT_LENGTH and cut_by_the_length(result))
        outcomes.append(pit_outcome(case, terms, len(own), len(prompt_ids), truncated))
    return outcomes


def pit_outcome(
    case: SamplingCase, terms: SequenceTerms, count: int, prompt_length: int, truncated: int = 0
) -> PitOutcome:
    """The case's statistics over its first `count` sequences (all of them in the suite; growing prefixes in
    harness/mutation/position_efficiency.py)."""
    u, centred, variance = terms.u[:count], terms.centred[:count], terms.variance[:count]
    if len(terms.sequence_tables) != len(terms.u) and count != len(terms.u):
        raise ValueError("cumulant tables summed over every sequence (an engine's) judge all of them, not a prefix")
    tables = terms.sequence_tables[:count].sum(0)
    present = ~np.isnan(u)
    pooled_u = u[present]
    positions = tuple(
        position_tests(u[present[:, t], t], centred[present[:, t], t], variance[present[:, t], t], tables[t])
        for t in range(PIT_LENGTH)
    )
    return PitOutcome(
        case,
        uniformity(pooled_u),
        position_tests(pooled_u, centred[present], variance[present], tables.sum(0)),
        positions,
        prompt_length,
        truncated,
    )


def cut_by_the_length(result: DecodeResult) -> bool:
    """The last pass emitted fewer tokens than it verified (accepted drafts + 1): max_new_tokens cut it."""
    return bool(result.steps) and len(result.steps[-1].emitted) < result.steps[-1].accepted + 1


def processed_conditionals(
    bundle: ModelBundle, prompt_ids: tuple[int, ...], continuations: Sequence[Sequence[int]], sampling: SamplingConfig
) -> torch.Tensor:
    """The target's processed conditional (temperature, top-k, top-p) before each generated token, float64
    [n, PIT_LENGTH, V]; rows past a continuation's end are padding (never read)."""
    width = PIT_LENGTH
    padded = [list(prompt_ids) + list(c) + [0] * (width - len(c)) for c in continuations]
    with torch.no_grad():
        _, logits = target_forward(bundle.target, torch.tensor(padded, device=bundle.device))
    start = len(prompt_ids) - 1
    return process_logits(logits[:, start : start + width], sampling).double().cpu()


@dataclass(frozen=True)
class SequenceTerms:
    """Per sequence i and output position t (NaN after a sequence's end): the probability-ordered randomized
    PIT u, the centred log-likelihood X = l - mu and its conditional variance s2, and X's cumulant table
    [n, PIT_LENGTH, G, 3] (zero after a sequence's end; harness/stats/sequence.py), or, computed by an engine, the
    tables summed over the n sequences [1, PIT_LENGTH, G, 3]."""

    u: np.ndarray
    centred: np.ndarray
    variance: np.ndarray
    sequence_tables: np.ndarray


def sequence_terms(
    bundle: ModelBundle,
    prompt_ids: tuple[int, ...],
    continuations: Sequence[Sequence[int]],
    sampling: SamplingConfig,
    seed: int,
) -> SequenceTerms:
    """The terms of the whole-sequence statistics; the PIT's uniforms come from a generator seeded `seed`."""
    generator = torch.Generator().manual_seed(seed)
    shape = (len(continuations), PIT_LENGTH)
    u, centred, variance = np.full(shape, np.nan), np.full(shape, np.nan), np.full(shape, np.nan)
    tables = []
    for start in range(0, len(continuations), CHUNK):
        chunk = continuations[start : start + CHUNK]
        probs = processed_conditionals(bundle, prompt_ids, chunk, sampling)
        tokens = torch.tensor([list(c) + [0] * (PIT_LENGTH - len(c)) for c in chunk], dtype=torch.long)
        uniforms = torch.rand(tokens.shape, generator=generator, dtype=torch.float64)
        chunk_u = probability_ordered_pit(probs, tokens, uniforms).numpy()
        chunk_centred, chunk_variance = (t.numpy() for t in log_likelihood_terms(probs, tokens))
        present = torch.tensor([[t < len(c) for t in range(PIT_LENGTH)] for c in chunk])
        tables.append(cumulants(probs) * present[..., None, None])
        for row, continuation in enumerate(chunk):
            length = len(continuation)
            u[start + row, :length] = chunk_u[row, :length]
            centred[start + row, :length] = chunk_centred[row, :length]
            variance[start + row, :length] = chunk_variance[row, :length]
    return SequenceTerms(u, centred, variance, torch.cat(tables).numpy())


def target_conditionals(
    bundle: ModelBundle, prompt_ids: tuple[int, ...], sampling: SamplingConfig, n: int, seed: int
) -> Iterator[torch.Tensor]:
    """The target's processed conditionals along n continuations sampled from the target itself (requests
    seeded seed + i, no EOS: the contexts a PIT case sees on a correct decoder), CHUNK continuations at a
    time: [c, PIT_LENGTH, V] float64."""
    requests = [DecodeRequest(prompt_ids, PIT_LENGTH, sampling=sampling, seed=seed + i) for i in range(n)]
    continuations = [result.token_ids for result in TargetOnlyDecoder(bundle).decode(requests)]
    for start in range(0, n, CHUNK):
        yield processed_conditionals(bundle, prompt_ids, continuations[start : start + CHUNK], sampling)
