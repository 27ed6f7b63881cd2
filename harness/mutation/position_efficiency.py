"""Statistical efficiency of a whole-sequence (PIT) case on a mutant that is wrong at a few output positions:
the sequences the case needs to reject it, against an ideal test of the same shift.

For a mutant and a PIT case, STREAMS independent streams of the case's N sequences are decoded; in each,
the case's p-values (pooled and at every position) are computed on growing prefixes of its sequences and
the first prefix with min p <= alpha = FAMILY_ALPHA / m (Holm's first step) is the stream's first
rejection. The ideal, at the position whose PIT values depart most from U(0, 1) over all streams (largest
KS statistic): those values binned into PIT_BINS equal cells, r their law (Jeffreys-smoothed), p = 1 /
PIT_BINS; the likelihood-ratio test that knows r needs
    N_LR = (z_{1-alpha} sd_p(l) / (E_r[l] - E_p[l]))^2,   l = log(r / p)
sequences at power 1/2 (harness/efficiency.ideal_sample_sizes; also the noncentral chi-square N of the
binned test). It is the best test of that position's binned PIT with the alternative known: the evidence
the per-position tests see, without having to find the position among 48.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np
from scipy import stats

from harness.checks.sampling_cases import (
    SamplingCase,
    SequenceTerms,
    case_grid,
    pit_outcome,
    pit_requests,
    sequence_terms,
)
from harness.contract.budget import BUDGETS
from harness.contract.seeds import mixed_seed
from harness.models.loading import ModelBundle
from harness.mutation.efficiency import FIRST_PREFIX, STREAMS, ideal_sample_sizes, prefix_lengths
from harness.stats.multiple_testing import FAMILY_ALPHA
from harness.stats.power import ks_sample_size
from harness.stats.uniformity import PIT_BINS


@dataclass(frozen=True)
class PositionEfficiency:
    mutant: str
    case: str
    position: int  # the output position the ideal test looks at
    first_rejection_n: int | None  # sequences, median over streams; None when a stream never rejected
    ideal_lr_n: int
    ideal_chi2_n: int
    ratio: float | None  # first_rejection_n / max(ideal_lr_n, FIRST_PREFIX)
    streams: tuple[int | None, ...]


def first_rejection(case: SamplingCase, terms: SequenceTerms, prompt_length: int, alpha: float) -> int | None:
    """The first prefix of sequences at which any of the case's p-values is <= alpha."""
    for count in prefix_lengths(len(terms.u)):
        if min(pit_outcome(case, terms, count, prompt_length).p_values()) <= alpha:
            return count
    return None


def most_shifted_position(pit: np.ndarray) -> int:
    """The output position whose PIT values (all streams) have the largest KS distance from U(0, 1)."""
    distances = [stats.kstest(column[~np.isnan(column)], "uniform").statistic for column in pit.T]
    return int(np.argmax(distances))


def measure_position(
    mutant: str, case_id: str, bundle: ModelBundle, family_size: int, length: int | None = None
) -> PositionEfficiency:
    """Sequences to first rejection (median of STREAMS) vs the ideal test, for one mutant on one PIT case;
    each stream holds `length` sequences (default: the case's N at the ci budget)."""
    from harness.models.prompts import load_prompts
    from harness.subjects.mutant_decoders import MUTANTS

    case = {c.id: c for c in case_grid()}[case_id]
    prompt_ids = tuple({p.id: p for p in load_prompts()}[case.prompt_id].encode(bundle.tokenizer))
    decoder = MUTANTS[mutant](bundle)
    alpha = FAMILY_ALPHA / family_size
    length = length or ks_sample_size(BUDGETS["ci"].position_tv, alpha)
    firsts, columns = [], []
    for stream in range(STREAMS):
        seed = case.seed + stream * 10**7
        requests = pit_requests(bundle, prompt_ids, case, length, seed)
        continuations = [result.token_ids for result in decoder.decode(requests)]
        terms = sequence_terms(bundle, prompt_ids, continuations, case.sampling, mixed_seed(seed, "pit uniforms"))
        firsts.append(first_rejection(case, terms, len(prompt_ids), alpha))
        columns.append(terms.u)
    pit = np.concatenate(columns)
    position = most_shifted_position(pit)
    values = pit[:, position][~np.isnan(pit[:, position])]
    counts, _ = np.histogram(values, bins=PIT_BINS, range=(0.0, 1.0))
    r = (counts + 0.5) / (counts.sum() + 0.5 * PIT_BINS)
    n_lr, n_chi2 = ideal_sample_sizes(np.full(PIT_BINS, 1.0 / PIT_BINS), r, len(values), alpha)
    observed = None if None in firsts else int(statistics.median(firsts))
    ratio = observed / max(n_lr, FIRST_PREFIX) if observed is not None else None
    return PositionEfficiency(mutant, case_id, position, observed, n_lr, n_chi2, ratio, tuple(firsts))
