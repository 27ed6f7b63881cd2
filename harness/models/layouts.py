"""Checkpoint layouts of MTP layers: which tensor names hold which part of which MTP depth.

Every layout maps checkpoint tensor names to the parts of `harness.models.mtp_depth.MTPDepth`:

    enorm, hnorm       RMSNorms of the token embedding and of the incoming hidden state
    eh_proj            Linear 2H -> H over the concatenation (order: see `hidden_first`)
    block.*            one full decoder layer of the target's architecture
    final_norm         norm before the head (its output also feeds the next depth)
    embed_tokens, head per-depth copies (DeepSeek-V3 ships them); other layouts share the target's

| layout       | families                          | per-depth prefix                     | concat order  |
|--------------|-----------------------------------|--------------------------------------|---------------|
| deepseek-v3  | DeepSeek-V3/R1, GLM-4.5, Kimi-K2  | model.layers.{num_hidden_layers + d}.| embedding 1st |
| mtp-prefix   | Qwen3-Next, Mellum                | mtp. (fc and norms shared by depths) | embedding 1st |
| mimo         | MiMo-7B                           | model.mtp_layers.{d}.                | hidden 1st    |

The functions here are pure: names in, names out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from harness.contract.errors import NoMTPWeightsError, UnknownLayoutError

DEEPSEEK_V3 = "deepseek-v3"
MTP_PREFIX = "mtp-prefix"
MIMO = "mimo"


@dataclass(frozen=True)
class LayoutMatch:
    """A detected layout: its name, the number of MTP depths, and how the projection input is ordered."""

    name: str
    num_depths: int
    hidden_first: bool


# --- deepseek-v3: model.layers.{N + d}.<part> ---------------------------------------------------------------
_DEEPSEEK_PARTS = {
    "enorm": "enorm",
    "hnorm": "hnorm",
    "eh_proj": "eh_proj",
    "shared_head.norm": "final_norm",
    "shared_head.head": "head",
    "embed_tokens": "embed_tokens",
}
_DEEPSEEK_RE = re.compile(r"^model\.layers\.(\d+)\.(.+)$")

# --- mtp-prefix: mtp.fc, mtp.pre_fc_norm_*, mtp.norm shared; mtp.layers.{d}.<block> ------------------------
_MTP_SHARED_PARTS = {
    "mtp.fc": "eh_proj",
    "mtp.pre_fc_norm_embedding": "enorm",
    "mtp.pre_fc_norm_hidden": "hnorm",
    "mtp.norm": "final_norm",
}
# Some exports (transformers' own MtpLayer naming) keep those parts per depth instead.
_MTP_PER_DEPTH_PARTS = {"enorm": "enorm", "hnorm": "hnorm", "eh_proj": "eh_proj", "post_norm": "final_norm"}
_MTP_LAYER_RE = re.compile(r"^mtp\.layers\.(\d+)\.(.+)$")

# --- mimo: model.mtp_layers.{d}.<part> ----------------------------------------------------------------------
_MIMO_PARTS = {
    "token_layernorm": "enorm",
    "hidden_layernorm": "hnorm",
    "input_proj": "eh_proj",
    "final_layernorm": "final_norm",
}
_MIMO_RE = re.compile(r"^model\.mtp_layers\.(\d+)\.(.+)$")


def _split_part(rest: str, parts: dict[str, str]) -> str:
    """Map the in-depth part of a name ('shared_head.norm.weight') to harness naming ('final_norm.weight')."""
    for source, target in parts.items():
        if rest.startswith(source + "."):
            return target + rest[len(source) :]
    return "block." + rest


def detect_layout(tensor_names: Iterable[str], num_hidden_layers: int) -> LayoutMatch:
    """Detect the MTP layout from the checkpoint's tensor names.

    Raises NoMTPWeightsError when there are no MTP tensors, UnknownLayoutError when MTP-looking tensors
    match no known layout.
    """
    names = sorted(tensor_names)
    deepseek_depths = {
        int(m.group(1)) - num_hidden_layers
        for m in map(_DEEPSEEK_RE.match, names)
        if m and int(m.group(1)) >= num_hidden_layers and m.group(2).startswith("eh_proj.")
    }
    if deepseek_depths:
        return LayoutMatch(DEEPSEEK_V3, _contiguous(deepseek_depths, "model.layers.{N+d}.eh_proj"), False)

    mtp_depths = {int(m.group(1)) for m in map(_MTP_LAYER_RE.match, names) if m}
    if mtp_depths and ("mtp.fc.weight" in names or any(".eh_proj." in n for n in names if n.startswith("mtp."))):
        return LayoutMatch(MTP_PREFIX, _contiguous(mtp_depths, "mtp.layers.{d}"), False)

    mimo_depths = {int(m.group(1)) for m in map(_MIMO_RE.match, names) if m and m.group(2).startswith("input_proj.")}
    if mimo_depths:
        return LayoutMatch(MIMO, _contiguous(mimo_depths, "model.mtp_layers.{d}.input_proj"), True)

    suspicious = [n for n in names if "mtp" in n or "nextn" in n or _beyond_main_layers(n, num_hidden_layers)]
    if suspicious:
        raise UnknownLayoutError(
            "checkpoint has MTP-like tensors in no known layout (deepseek-v3: model.layers.N.eh_proj.weight; "
            "mtp-prefix: mtp.fc.weight + mtp.layers.0.*; mimo: model.mtp_layers.0.input_proj.weight); "
            f"found e.g. {', '.join(suspicious[:5])}"
        )
    raise NoMTPWeightsError(
        f"checkpoint has no MTP layers: expected model.layers.{num_hidden_layers}.eh_proj.weight "
        f"(deepseek-v3, num_hidden_layers={num_hidden_layers}), mtp.fc.weight (mtp-prefix) or "
        "model.mtp_layers.0.input_proj.weight (mimo)"
    )


def _beyond_main_layers(name: str, num_hidden_layers: int) -> bool:
    match = _DEEPSEEK_RE.match(name)
    return bool(match) and int(match.group(1)) >= num_hidden_layers


def _contiguous(depths: set[int], pattern: str) -> int:
    expected = set(range(len(depths)))
    if depths != expected:
        raise UnknownLayoutError(
            f"MTP depths must be numbered 0..{len(depths) - 1} in {pattern}; found {sorted(depths)}"
        )
    return len(depths)


def depth_tensor_name(layout: LayoutMatch, name: str, num_hidden_layers: int) -> tuple[int, str] | None:
    """Map one checkpoint tensor name to (depth, harness name), or None if it is not an MTP tensor.

    Shared mtp-prefix parts (mtp.fc, mtp.norm, ...) map to depth -1: they apply to every depth.
    """
    if layout.name == DEEPSEEK_V3:
        match = _DEEPSEEK_RE.match(name)
        if not match or int(match.group(1)) < num_hidden_layers:
            return None
        return int(match.group(1)) - num_hidden_layers, _split_part(match.group(2), _DEEPSEEK_PARTS)
    if layout.name == MTP_PREFIX:
        for source, target in _MTP_SHARED_PARTS.items():
            if name.startswith(source + "."):
                return -1, target + name[len(source) :]
        match = _MTP_LAYER_RE.match(name)
        if not match:
            return None
        return int(match.group(1)), _split_part(match.group(2), _MTP_PER_DEPTH_PARTS)
    match = _MIMO_RE.match(name)
    if not match:
        return None
    return int(match.group(1)), _split_part(match.group(2), _MIMO_PARTS)


def checkpoint_tensor_name(layout_name: str, depth: int, name: str, num_hidden_layers: int) -> str:
    """Inverse of `depth_tensor_name`: the name a harness tensor of `depth` has in the layout's checkpoint.

    For mtp-prefix the shared parts (eh_proj, enorm, hnorm, final_norm) are written once, for depth 0.
    """
    part, _, rest = name.partition(".")
    if layout_name == DEEPSEEK_V3:
        inverse = {v: k for k, v in _DEEPSEEK_PARTS.items()}
        source = rest if part == "block" else f"{inverse[part]}.{rest}"
        return f"model.layers.{num_hidden_layers + depth}.{source}"
    if layout_name == MTP_PREFIX:
        if part == "block":
            return f"mtp.layers.{depth}.{rest}"
        if part in ("embed_tokens", "head"):
            raise ValueError(f"mtp-prefix checkpoints share {part} with the target model; nothing to write")
        inverse = {v: k for k, v in _MTP_SHARED_PARTS.items()}
        return f"{inverse[part]}.{rest}"
    if layout_name == MIMO:
        if part in ("embed_tokens", "head"):
            raise ValueError(f"mimo checkpoints share {part} with the target model; nothing to write")
        inverse = {v: k for k, v in _MIMO_PARTS.items()}
        source = rest if part == "block" else f"{inverse[part]}.{rest}"
        return f"model.mtp_layers.{depth}.{source}"
    raise UnknownLayoutError(f"unknown layout {layout_name!r}; known: {DEEPSEEK_V3}, {MTP_PREFIX}, {MIMO}")
