"""What the sampling suite of a nightly costs on a real checkpoint under --reference engine, computed from the suite's
own N (harness/stats/power.py, the budget's TV shifts, the case grid) and a deployment's throughput, which the caller
states: the samples and tokens each budget decodes, what the engine scores for the truth, the engines it starts, and
the GPU-hours at that throughput.

    law cases:    N = omnibus_sample_size(tv, alpha / m) requests each at LAW_DF degrees of freedom (a real checkpoint's
                  law is not known before it is scored: LAW_DF is about the most the fixtures' laws pool to at the ci
                  budget; a flatter law pools to more cells and needs more), LAW_LENGTH tokens decoded per request
    PIT cases:    N = ks_sample_size(position_tv, alpha / m) sequences each, PIT_LENGTH tokens decoded per sequence,
                  each sequence then prefilled again (prompt + PIT_LENGTH) to score it inside the engine
    engines:      one per (k, draft mode) of the grid, and the reference without speculation
    hours:        decoded / decode_rate + scored / prefill_rate + engines x start_seconds, x GPUs

`python -m harness.commands.nightly_cost` prints the table for the deployments in DEPLOYMENTS; pass your own measured
rates with --decode --prefill --start --gpus.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from harness.checks.sampling_cases import LAW_LENGTH, PIT_LENGTH, case_grid, family_size
from harness.contract.budget import BUDGETS
from harness.stats.multiple_testing import FAMILY_ALPHA
from harness.stats.power import ks_sample_size, omnibus_sample_size

LAW_DF = 250  # the fixtures' first-token laws pool to 52..235 degrees of freedom at the ci budget
PROMPT_TOKENS = 16  # the sampling cases' prompts (natural-02, natural-03, code-01) are under 16 tokens each


@dataclass(frozen=True)
class Deployment:
    """A checkpoint as served: its GPUs and the throughput the caller states (aggregate over the batch)."""

    name: str
    gpus: int
    decode_tokens_per_second: float
    prefill_tokens_per_second: float
    start_seconds: float


# Stated assumptions, not measurements: replace them with your own engine's measured rates.
DEPLOYMENTS = (
    Deployment("MiMo-7B (bf16, 1 x H200)", 1, 20_000, 100_000, 120),
    Deployment("Qwen3-Next-80B-A3B (FP8, 4 x H200, TP 4)", 4, 10_000, 60_000, 300),
    Deployment("DeepSeek-V3 (FP8, 8 x H200, TP 8)", 8, 4_000, 30_000, 900),
)


@dataclass(frozen=True)
class SamplingCost:
    """One budget's sampling suite: requests, tokens decoded, tokens scored for the truth, engines started."""

    budget: str
    law_cases: int
    law_n: int
    pit_cases: int
    pit_n: int
    engines: int

    @property
    def samples(self) -> int:
        return self.law_cases * self.law_n + self.pit_cases * self.pit_n

    @property
    def decoded_tokens(self) -> int:
        return self.law_cases * self.law_n * LAW_LENGTH + self.pit_cases * self.pit_n * PIT_LENGTH

    @property
    def scored_tokens(self) -> int:
        return self.pit_cases * self.pit_n * (PROMPT_TOKENS + PIT_LENGTH)

    def gpu_hours(self, deployment: Deployment) -> float:
        # hours = (decoded / decode rate + scored / prefill rate + engines x start) / 3600, times the GPUs held
        seconds = (
            self.decoded_tokens / deployment.decode_tokens_per_second
            + self.scored_tokens / deployment.prefill_tokens_per_second
            + self.engines * deployment.start_seconds
        )
        return deployment.gpus * seconds / 3600


def sampling_cost(budget: str) -> SamplingCost:
    """The sampling suite's size at a budget, from the same formulas the suite sizes itself with
    (suites/sampling/conftest.py SamplingFamily.n and .pit_n)."""
    grid = case_grid()
    levels = BUDGETS[budget]
    alpha = FAMILY_ALPHA / family_size(grid)
    laws = [case for case in grid if case.kind == "law"]
    pits = [case for case in grid if case.kind == "pit"]
    engines = len({(case.k, case.draft_mode) for case in grid}) + 1  # and the reference without speculation
    return SamplingCost(
        budget,
        len(laws),
        omnibus_sample_size(levels.sampling_tv, alpha, lambda n: LAW_DF),
        len(pits),
        ks_sample_size(levels.position_tv, alpha),
        engines,
    )


def cost_table(deployments: tuple[Deployment, ...] = DEPLOYMENTS) -> str:
    """Markdown: per budget, the samples, tokens and engines, and the GPU-hours on each deployment."""
    header = ["budget", "samples", "tokens decoded", "tokens scored", "engine starts"]
    header += [f"GPU-hours, {d.name}" for d in deployments]
    rows = []
    for budget in BUDGETS:
        cost = sampling_cost(budget)
        cells = [budget, f"{cost.samples:,}", f"{cost.decoded_tokens:,}", f"{cost.scored_tokens:,}", str(cost.engines)]
        rows.append(cells + [f"{cost.gpu_hours(d):.2f}" for d in deployments])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--decode", type=float, help="decode tokens per second, aggregate (your measurement)")
    parser.add_argument("--prefill", type=float, help="prefill tokens per second, aggregate")
    parser.add_argument("--start", type=float, help="seconds to start one engine")
    parser.add_argument("--gpus", type=int, help="GPUs the engine holds")
    args = parser.parse_args()
    deployments = DEPLOYMENTS
    if None not in (args.decode, args.prefill, args.start, args.gpus):
        deployments = (Deployment("yours", args.gpus, args.decode, args.prefill, args.start),)
    print(cost_table(deployments))


if __name__ == "__main__":
    main()
