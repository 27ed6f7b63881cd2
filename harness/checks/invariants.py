"""State invariants after a verification pass, checked against a fresh target-only computation.

After a pass with committed tokens t_0..t_{L-1} (the decoder's PassSnapshot), from scratch:
    1. target cache: L-1 slots at positions 0..L-2 (every committed token but the newest);
    2. target cache contents: equal to a fresh prefill of t_0..t_{L-2}, layer by layer, keys and values
       (for MLA, the compressed latents the model caches);
    3. each MTP depth d: its entries sit at contiguous positions d, d+1, ... of committed tokens and equal
       what depth d computes from scratch on the committed prefix; the hidden states carried between
       levels equal the fresh h^e at the same indices;
    4. positions: the pass read positions L0-1.. (L0 = committed length before it), and the next pass
       starts at L-1;
    5. the next-token logits computed from the decoder's own cache equal target-only logits for the prefix;
    6. each recurrent (linear-attention) layer of the target: its conv state and recurrent state equal those
       of a fresh prefill of t_0..t_{L-2} (a recurrent state cannot be cropped; harness/models/recurrent_state.py).
Differences are max-abs over a tensor, compared with a tolerance per dtype (1e-10 in float64).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import DynamicCache

from harness.contract.decoder import Decoder, DecodeRequest, DecodeResult, PassSnapshot
from harness.models.loading import ModelBundle
from harness.models.recurrent_state import LayerState, advance_token_count, layer_states
from harness.models.target_hidden import run_target_decoder
from harness.models.teacher_forcing import mtp_hidden_states

TOLERANCE = {torch.float64: 1e-10, torch.float32: 1e-4, torch.bfloat16: 5e-2, torch.float16: 1e-2}


@dataclass(frozen=True)
class Violation:
    """One broken invariant: where (pass, layer or depth), what, and the largest difference with its index."""

    request_index: int
    pass_index: int
    invariant: str
    where: str
    difference: float | None
    at: str
    detail: str = ""

    def describe(self) -> str:
        size = "" if self.difference is None else f", largest difference {self.difference:.3g} at {self.at}"
        return (
            f"request {self.request_index}, pass {self.pass_index}: {self.invariant} broken in {self.where}{size}"
            + (f" ({self.detail})" if self.detail else "")
        )


@dataclass(frozen=True)
class FreshState:
    """What a target-only computation gives for a committed prefix t_0..t_{L-1}."""

    # per layer, (keys, values) over positions 0..L-2; () for a recurrent layer (its state is in `recurrent`)
    target_cache: tuple[tuple[torch.Tensor, ...], ...]
    hidden: tuple[torch.Tensor, ...]  # per level e: h^e [n_e, H], index i at row i
    depth_cache: tuple[tuple[torch.Tensor, torch.Tensor] | None, ...]  # depth d (1-based): positions d..
    next_logits: torch.Tensor  # [V]
    recurrent: dict[int, tuple[torch.Tensor, torch.Tensor]]  # per recurrent layer: (conv, recurrent) after t_{L-2}


_FRESH: dict[tuple[int, tuple[int, ...]], FreshState] = {}
# the memo's bound, in bytes of the tensors it holds (an entry grows with its prefix and the model's state: about
# 0.3 MB on tiny-mimo and 1.5 MB on tiny-deepseek-v3-mla576 at 100 tokens); over it, the memo starts again. 2 GiB
# keeps thousands of prefixes (the old bound was 8,192 entries, whatever their size) within a worker's share of memory
FRESH_MEMO_BYTES = 2 * 2**30
_fresh_bytes = 0


def fresh_state(bundle: ModelBundle, committed_ids: Sequence[int]) -> FreshState:
    """Prefill t_0..t_{L-2} into a fresh cache, run every MTP depth on the prefix, and score t_{L-1}.
    Memoised per (bundle, prefix): greedy runs revisit the same prefixes."""
    global _fresh_bytes
    key = (id(bundle), tuple(committed_ids))
    if key not in _FRESH:
        state = _fresh_state(bundle, key[1])
        size = held_bytes(state)
        if _fresh_bytes + size > FRESH_MEMO_BYTES:
            _FRESH.clear()
            _fresh_bytes = 0
        _FRESH[key] = state
        _fresh_bytes += size
    return _FRESH[key]


def held_bytes(state: FreshState) -> int:
    """Bytes of the storages a fresh state keeps alive (a view keeps its whole storage)."""
    tensors = [tensor for layer in state.target_cache for tensor in layer]
    tensors += [*state.hidden, state.next_logits]
    tensors += [tensor for pair in state.depth_cache if pair is not None for tensor in pair]
    tensors += [tensor for pair in state.recurrent.values() for tensor in pair]
    storages = {tensor.untyped_storage().data_ptr(): tensor.untyped_storage().nbytes() for tensor in tensors}
    return sum(storages.values())


def _fresh_state(bundle: ModelBundle, committed_ids: tuple[int, ...]) -> FreshState:
    device = bundle.device
    decoder = bundle.target.get_decoder()
    with torch.no_grad():
        cache = bundle.new_target_cache()
        prefix = torch.tensor([committed_ids[:-1]], device=device)
        h0, _ = run_target_decoder(bundle.target, input_ids=prefix, cache=cache, use_cache=True)
        target_cache = tuple(
            (layer.keys[0], layer.values[0]) if getattr(layer, "keys", None) is not None else ()
            for layer in cache.layers
        )
        # copies: a layer's state is a view into the states its prefill passed through (one per token)
        recurrent = {
            index: (state.conv[0].clone(), state.recurrent[0].clone()) for index, state in layer_states(cache).items()
        }
        last = torch.tensor([[committed_ids[-1]]], device=device)
        position = torch.tensor([[len(committed_ids) - 1]], device=device)
        out = decoder(input_ids=last, position_ids=position, cache=cache, use_cache=True).last_hidden_state
        next_logits = bundle.target.get_output_embeddings()(out)[0, -1]
        depth_caches = [DynamicCache() for _ in bundle.depths]
        tokens = torch.tensor([committed_ids], device=device)
        outputs = mtp_hidden_states(bundle.target, bundle.depths, tokens, h0, depth_caches)
        hidden = [h0[0], *(h[0] for h in outputs)]
        depth_cache = [
            (cache.layers[d].keys[0], cache.layers[d].values[0]) if d < len(outputs) else None
            for d, cache in enumerate(depth_caches)
        ]
    return FreshState(target_cache, tuple(hidden), tuple(depth_cache), next_logits, recurrent)


def _largest(a: torch.Tensor, b: torch.Tensor) -> tuple[float, str]:
    difference = (a - b).abs()
    flat = int(difference.argmax())
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), difference.shape))
    return float(difference.max()), str(index)


def check_snapshot(bundle: ModelBundle, snapshot: PassSnapshot, previous_length: int) -> list[Violation]:
    """Every invariant for one snapshot; previous_length = committed length before the pass."""
    tolerance = TOLERANCE.get(bundle.dtype, 1e-4)
    committed = snapshot.committed_ids
    length = len(committed)
    fresh = fresh_state(bundle, committed)
    found: list[Violation] = []

    def violation(invariant: str, where: str, difference: float | None = None, at: str = "", detail: str = "") -> None:
        found.append(Violation(snapshot.request_index, snapshot.pass_index, invariant, where, difference, at, detail))

    # 1 + 4: the target cache holds positions 0..L-2; the pass read L0-1..; the next pass starts at L-1
    if snapshot.target_positions != tuple(range(length - 1)):
        violation(
            "1 target cache length",
            "target cache",
            detail=_positions("positions", snapshot.target_positions, length - 1),
        )
    expected_verify = tuple(range(previous_length - 1, previous_length - 1 + len(snapshot.verify_position_ids)))
    if snapshot.verify_position_ids != expected_verify:
        violation(
            "4 position ids",
            "verification pass",
            detail=f"used {snapshot.verify_position_ids}, expected {expected_verify}",
        )
    if snapshot.next_position != length - 1:
        violation("4 position ids", "next pass", detail=f"starts at {snapshot.next_position}, expected {length - 1}")
    # 2: target cache contents, layer by layer
    if snapshot.target_positions == tuple(range(length - 1)):
        for layer, (view, expected) in enumerate(zip(snapshot.target_cache, fresh.target_cache, strict=False)):
            if len(view) != len(expected):
                violation("2 target cache contents", f"target layer {layer}", detail="holds no KV entries")
                continue
            if not view:  # a recurrent layer: checked in 6
                continue
            for name, ours, theirs in zip(("keys", "values"), view, expected, strict=True):
                difference, at = _largest(ours, theirs)
                if difference > tolerance:
                    violation("2 target cache contents", f"target layer {layer} {name}", difference, at)
        # 6: recurrent layers, restored (not cropped) to the state after t_{L-2}
        for layer, (conv, recurrent) in sorted(fresh.recurrent.items()):
            if layer not in snapshot.target_recurrent:
                violation("6 recurrent state", f"target layer {layer}", detail="the decoder reported no state")
                continue
            for name, ours, theirs in zip(
                ("conv state", "recurrent state"), snapshot.target_recurrent[layer], (conv, recurrent), strict=True
            ):
                difference, at = _largest(ours, theirs)
                if difference > tolerance:
                    violation("6 recurrent state", f"target layer {layer} {name}", difference, at)
        # 5: next-token logits from the decoder's own cache
        logits = _logits_from_cache(bundle, snapshot)
        difference, at = _largest(logits, fresh.next_logits)
        if difference > tolerance:
            violation("5 next-token logits", "target logits after rollback", difference, f"token {at}")
    # 3: each depth's cache and the hidden states carried between levels
    for d, (view, positions, expected) in enumerate(
        zip(snapshot.mtp_caches, snapshot.mtp_positions, fresh.depth_cache, strict=True), start=1
    ):
        if not positions:
            continue
        contiguous = tuple(range(d, d + len(positions)))
        if positions != contiguous or positions[-1] > length - 1:
            violation(
                "3 MTP cache",
                f"MTP depth {d}",
                detail=_positions("entry positions", positions, None, start=d, limit=length - 1),
            )
            continue
        if expected is None or expected[0].shape[-2] < len(positions):
            violation("3 MTP cache", f"MTP depth {d}", detail=f"{len(positions)} entries beyond the committed prefix")
            continue
        for name, ours, theirs in (("keys", view[0], expected[0]), ("values", view[1], expected[1])):
            difference, at = _largest(ours, theirs[..., : len(positions), :])
            if difference > tolerance:
                violation("3 MTP cache", f"MTP depth {d} {name}", difference, at)
    for level, (carried, start) in enumerate(zip(snapshot.mtp_hidden, snapshot.mtp_hidden_start, strict=True)):
        if carried.shape[0] == 0:
            continue
        reference = fresh.hidden[level] if level < len(fresh.hidden) else None
        if reference is None or start + carried.shape[0] > reference.shape[0]:
            violation(
                "3 MTP hidden state",
                f"level {level} (h^{level})",
                detail=f"carries indices {start}..{start + carried.shape[0] - 1} beyond the committed prefix",
            )
            continue
        difference, at = _largest(carried, reference[start : start + carried.shape[0]])
        if difference > tolerance:
            violation("3 MTP hidden state", f"level {level} (h^{level}, indices from {start})", difference, at)
    return found


def _positions(
    label: str, positions: Sequence[int], expected_count: int | None, start: int = 0, limit: int | None = None
) -> str:
    shown = (
        list(positions[:6])
        + (["..."] if len(positions) > 6 else [])
        + list(positions[-3:] if len(positions) > 6 else [])
    )
    expectation = (
        f"{start}..{start + expected_count - 1}"
        if expected_count is not None
        else f"contiguous from {start}, at most {limit}"
    )
    return f"{label} {shown} ({len(positions)}), expected {expectation}"


def _logits_from_cache(bundle: ModelBundle, snapshot: PassSnapshot) -> torch.Tensor:
    """Feed the newest committed token through the decoder's own (rolled back) target cache."""
    device = bundle.device
    cache = bundle.new_target_cache()
    with torch.no_grad():
        for layer, view in enumerate(snapshot.target_cache):
            if view:
                cache.update(view[0][None].clone(), view[1][None].clone(), layer)
        for layer, (conv, recurrent) in snapshot.target_recurrent.items():
            conv, recurrent = conv[None].clone(), recurrent[None].clone()
            layer_states(cache)[layer] = LayerState(conv, recurrent, conv[:, None], recurrent[:, None])
            # transformers >= 5.25 counts the tokens a linear-attention layer has read: as many as the KV slots restored
            advance_token_count(cache, layer, len(snapshot.target_positions))
        token = torch.tensor([[snapshot.committed_ids[-1]]], device=device)
        position = torch.tensor([[snapshot.next_position]], device=device)
        out = bundle.target.get_decoder()(input_ids=token, position_ids=position, cache=cache, use_cache=True)
        return bundle.target.get_output_embeddings()(out.last_hidden_state)[0, -1]


def check_run(
    bundle: ModelBundle, snapshots: Sequence[PassSnapshot], prompt_lengths: dict[int, int]
) -> list[Violation]:
    """Check every snapshot of a decode, pass by pass per request (prompt_lengths: request index -> length)."""
    previous = dict(prompt_lengths)
    found: list[Violation] = []
    for snapshot in snapshots:
        found += check_snapshot(bundle, snapshot, previous[snapshot.request_index])
        previous[snapshot.request_index] = len(snapshot.committed_ids)
    return found


def decode_inspected(
    decoder: Decoder, bundle: ModelBundle, requests: Sequence[DecodeRequest]
) -> tuple[list[DecodeResult], list[Violation], list[PassSnapshot]]:
    """Decode with the decoder's inspection hook (its `observer` attribute) attached, then check every pass."""
    snapshots: list[PassSnapshot] = []
    decoder.observer = snapshots.append  # type: ignore[attr-defined]
    try:
        results = decoder.decode(list(requests))
    finally:
        decoder.observer = None  # type: ignore[attr-defined]
    violations = check_run(bundle, snapshots, {i: len(r.prompt_ids) for i, r in enumerate(requests)})
    return results, violations, snapshots
