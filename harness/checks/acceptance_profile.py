"""How often the target accepts the MTP heads' drafts, what the heads cost, and how far a head's proposal is
from the target's own conditional on the same prefix (head fidelity: the evidence that drafts are drafts).

Per-depth acceptance: a_j = (passes where draft j was accepted) / (passes where draft j was verified, i.e.
drafts 0..j-1 were accepted). Head fidelity of depth d over positions i of teacher-forced sequences:
    KL(p || q_d) = sum_x p(x) log(p(x) / q_d(x)),   TV = 1/2 sum_x |p(x) - q_d(x)|
with p the target's distribution for token i+d+1 given t_0..t_{i+d} and q_d what depth d proposes there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from harness.contract.decoder import DecodeResult
from harness.models.loading import ModelBundle
from harness.models.teacher_forcing import mtp_forward, target_forward


def accepted_share(results: Sequence[DecodeResult]) -> float:
    """Accepted drafts over drafts verified, over every pass of `results` (0 where nothing was drafted)."""
    drafted = sum(len(step.drafts) for result in results for step in result.steps)
    return sum(step.accepted for result in results for step in result.steps) / max(1, drafted)


def pass_statistics(results: Sequence[DecodeResult], k: int) -> dict[str, object]:
    """Accepted drafts per verification pass (histogram over 0..k), tokens per pass, per-depth acceptance."""
    histogram = [0] * (k + 1)
    verified, accepted = [0] * k, [0] * k
    passes = tokens = 0
    for result in results:
        for step in result.steps:
            if not step.drafts:
                continue
            passes += 1
            tokens += len(step.emitted)
            histogram[min(step.accepted, k)] += 1
            for j in range(min(len(step.drafts), k)):
                verified[j] += 1
                if step.accepted <= j:
                    break
                accepted[j] += 1
    return {
        "k": k,
        "passes": passes,
        "accepted_histogram": histogram,
        "tokens_per_pass": tokens / passes if passes else math.nan,
        "per_depth_acceptance": [a / v if v else math.nan for a, v in zip(accepted, verified, strict=True)],
    }


@torch.no_grad()
def head_fidelity(bundle: ModelBundle, sequences: Sequence[Sequence[int]]) -> list[dict[str, float]]:
    """Per depth: mean KL(p || q_d) and TV(p, q_d) over every position of the teacher-forced sequences."""
    kl_sum = [0.0] * len(bundle.depths)
    tv_sum = [0.0] * len(bundle.depths)
    positions = [0] * len(bundle.depths)
    for sequence in sequences:
        ids = torch.tensor([list(sequence)], device=bundle.device)
        hidden, logits = target_forward(bundle.target, ids)
        log_p = torch.log_softmax(logits[0].double(), dim=-1)
        for d, depth_logits in enumerate(mtp_forward(bundle.target, bundle.depths, ids, hidden), start=1):
            log_q = torch.log_softmax(depth_logits[0].double(), dim=-1)
            span = min(log_q.shape[0], log_p.shape[0] - d)
            target_log_p, head_log_q = log_p[d : d + span], log_q[:span]
            p = target_log_p.exp()
            kl_sum[d - 1] += float((p * (target_log_p - head_log_q)).sum())
            tv_sum[d - 1] += float(0.5 * (p - head_log_q.exp()).abs().sum())
            positions[d - 1] += span
    return [
        {"depth": d, "kl": kl_sum[d - 1] / n, "tv": tv_sum[d - 1] / n, "positions": n}
        for d, n in enumerate(positions, start=1)
        if n
    ]
