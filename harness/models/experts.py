"""MoE expert weights: the per-expert layout checkpoints ship, and the fused layout transformers 5.x runs.

checkpoint: <prefix>.experts.{j}.gate_proj.weight [I, H], .up_proj.weight [I, H], .down_proj.weight [H, I]
fused:      <prefix>.experts.gate_up_proj [E, 2I, H] (gate rows first), <prefix>.experts.down_proj [E, H, I]
"""

from __future__ import annotations

import re
from collections import defaultdict

import torch

_PER_EXPERT_RE = re.compile(r"^(?P<prefix>.*\.experts)\.(?P<j>\d+)\.(?P<proj>gate|up|down)_proj\.weight$")


def fuse_experts(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Per-expert tensors -> fused gate_up_proj / down_proj stacks; other tensors pass through."""
    out: dict[str, torch.Tensor] = {}
    grouped: dict[str, dict[int, dict[str, torch.Tensor]]] = defaultdict(lambda: defaultdict(dict))
    for name, tensor in tensors.items():
        match = _PER_EXPERT_RE.match(name)
        if match:
            grouped[match["prefix"]][int(match["j"])][match["proj"]] = tensor
        else:
            out[name] = tensor
    for prefix, experts in grouped.items():
        indices = sorted(experts)
        if indices != list(range(len(indices))):
            raise ValueError(f"{prefix}: expert indices must be 0..{len(indices) - 1}, found {indices}")
        for j in indices:
            missing = {"gate", "up", "down"} - experts[j].keys()
            if missing:
                raise ValueError(f"{prefix}.{j}: missing {', '.join(sorted(p + '_proj' for p in missing))}")
        out[f"{prefix}.gate_up_proj"] = torch.stack(
            [torch.cat([experts[j]["gate"], experts[j]["up"]]) for j in indices]
        )
        out[f"{prefix}.down_proj"] = torch.stack([experts[j]["down"] for j in indices])
    return out


def split_experts(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Inverse of `fuse_experts`: fused stacks -> per-expert tensors, as checkpoints store them."""
    out: dict[str, torch.Tensor] = {}
    for name, tensor in tensors.items():
        if name.endswith(".experts.gate_up_proj"):
            prefix = name.removesuffix(".gate_up_proj")
            for j, fused in enumerate(tensor):
                gate, up = fused.chunk(2, dim=0)
                out[f"{prefix}.{j}.gate_proj.weight"] = gate.contiguous()
                out[f"{prefix}.{j}.up_proj.weight"] = up.contiguous()
        elif name.endswith(".experts.down_proj"):
            prefix = name.removesuffix(".down_proj")
            for j, down in enumerate(tensor):
                out[f"{prefix}.{j}.down_proj.weight"] = down.contiguous()
        else:
            out[name] = tensor
    return out
