"""Statistical efficiency of the sampling suite: how many samples it needs to reject a biased decoder,
against what an ideal test of the same shift would need.

For a mutant and the law case that caught it, S independent sample streams are drawn from the mutant; in
each, the suite's tests (chi-square and G over Cochran-pooled cells) run on growing prefixes and the first
prefix length with min p <= alpha = FAMILY_ALPHA / m (the first Holm step for the suite's m p-values) is the
stream's first rejection. The median over streams is set against two ideals at the same alpha, power 1/2
(the median, like the observed figure), from the mutant law r estimated on all streams vs the exact law p:

    likelihood ratio (Neyman-Pearson, known alternative), per-sample LLR l = log(r/p):
        N_LR = (z_{1-alpha} sd_p(l) / (E_r[l] - E_p[l]))^2
    the suite's own omnibus test (noncentral chi-square, df = cells - 1):
        N_chi2 solves P(ncx2(df, N d) > chi2_{1-alpha}(df)) = 1/2,  d = sum (r - p)^2 / p - (cells - 1) / n_r
where the last term removes the estimation noise of r (n_r samples) from the plug-in chi-square divergence.
The ratio reported is first rejection / max(N_LR, FIRST_PREFIX): the scan's first look is at FIRST_PREFIX.
Note the observed figure is a first crossing over many looks (optional stopping makes it earlier than a
fixed-N test's median), and the ideals use cells pooled for all the streams' samples (finer than the
suite's cells at small N).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

from harness.models.loading import ModelBundle
from harness.stats.goodness_of_fit import goodness_of_fit, pool_cells
from harness.stats.multiple_testing import FAMILY_ALPHA
from harness.stats.power import sample_size
from harness.stats.target_law import OTHER, TargetLaw

STREAMS = 3
STREAM_FACTOR = 1  # each stream holds the suite's N samples: a stream that does not reject by then is None
GRID_RATIO = 1.1  # prefix lengths grow geometrically from FIRST_PREFIX
FIRST_PREFIX = 50
SUITE_TV = 0.05


@dataclass(frozen=True)
class Efficiency:
    mutant: str
    case: str
    first_rejection_n: int | None  # median over streams; None when a stream never rejected
    ideal_lr_n: int
    ideal_chi2_n: int
    ratio: float | None  # first_rejection_n / max(ideal_lr_n, FIRST_PREFIX)
    tv: float
    kl: float
    streams: tuple[int | None, ...]


def prefix_lengths(limit: int) -> list[int]:
    lengths, n = [], float(FIRST_PREFIX)
    while n < limit:
        lengths.append(int(n))
        n *= GRID_RATIO
    return [*lengths, limit]


def first_rejection(probabilities: dict, samples: list, alpha: float) -> int | None:
    """The first prefix length at which min(chi-square p, G p) <= alpha."""
    for n in prefix_lengths(len(samples)):
        fit = goodness_of_fit(probabilities, samples[:n], OTHER)
        if min(fit.chi2_p, fit.g_p) <= alpha:
            return n
    return None


def ideal_sample_sizes(p: np.ndarray, r: np.ndarray, n_r: int, alpha: float) -> tuple[int, int]:
    """(N_LR, N_chi2) at power 1/2 for null p and alternative r over the same cells (see the module doc)."""
    z = stats.norm.ppf(1 - alpha)
    llr = np.log(r / p)
    separation = float(np.dot(r, llr) - np.dot(p, llr))
    spread = float(np.sqrt(np.dot(p, (llr - np.dot(p, llr)) ** 2)))
    n_lr = math.ceil((z * spread / separation) ** 2) if separation > 0 else 10**12
    df = len(p) - 1
    divergence = max(float(np.sum((r - p) ** 2 / p)) - df / n_r, 1e-12)
    critical = stats.chi2.ppf(1 - alpha, df)

    def power_gap(n: float) -> float:
        return stats.ncx2.sf(critical, df, n * divergence) - 0.5

    if power_gap(1.0) >= 0:  # one sample already rejects half the time
        n_chi2 = 1
    elif power_gap(1e12) <= 0:  # no detectable shift
        n_chi2 = 10**12
    else:
        n_chi2 = math.ceil(optimize.brentq(power_gap, 1.0, 1e12))
    return n_lr, n_chi2


def estimate(law: TargetLaw, streams: list[list], total: int) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Exact law p and smoothed mutant law r over cells pooled for `total` samples; TV and KL(r || p)."""
    probabilities = {**law.cells, OTHER: law.other}
    pooled = Counter(cell for stream in streams for cell in stream)
    _, counts, expected = pool_cells(probabilities, pooled, total, OTHER)
    p = expected / expected.sum()
    r = (counts + 0.5) / (counts.sum() + 0.5 * len(counts))  # Jeffreys smoothing: no empty cell
    return p, r, float(0.5 * np.abs(r - p).sum()), float(np.sum(r * np.log(r / p)))


def measure(mutant: str, case_id: str, bundle: ModelBundle, family_size: int) -> Efficiency:
    """Samples to first rejection (median of STREAMS) vs the ideal tests, for one mutant on one law case."""
    from harness.checks.sampling_cases import case_grid, law_samples
    from harness.models.prompts import load_prompts
    from harness.subjects.mutant_decoders import MUTANTS

    case = {c.id: c for c in case_grid()}[case_id]
    prompt = {p.id: p for p in load_prompts()}[case.prompt_id]
    decoder = MUTANTS[mutant](bundle)
    alpha = FAMILY_ALPHA / family_size
    stream_length = STREAM_FACTOR * sample_size(SUITE_TV, alpha)
    prompt_ids = tuple(prompt.encode(bundle.tokenizer))
    streams, law = [], None
    for stream in range(STREAMS):
        law, samples = law_samples(decoder, bundle, prompt_ids, case, stream_length, seed_offset=stream * 10**7)
        streams.append(samples)
    probabilities = {**law.cells, OTHER: law.other}
    firsts = tuple(first_rejection(probabilities, samples, alpha) for samples in streams)
    observed = None if None in firsts else int(statistics.median(firsts))
    total = STREAMS * stream_length
    p, r, tv, kl = estimate(law, streams, total)
    n_lr, n_chi2 = ideal_sample_sizes(p, r, total, alpha)
    # the scan starts at FIRST_PREFIX samples: an ideal below that is compared with the first look
    ratio = observed / max(n_lr, FIRST_PREFIX) if observed is not None else None
    return Efficiency(mutant, case_id, observed, n_lr, n_chi2, ratio, tv, kl, firsts)
