"""Where two greedy token sequences part, and whether that is a bug or a floating-point near-tie.

At the first divergent index the target's top-2 logit margin (re-scored in float64 where possible) says
how close the reference's choice was. In float64/float32 any divergence is a failure. In bf16/fp16 a
divergence whose margin is below the dtype's tolerance is a numerical near-tie: reported, not failed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import torch

# Logit-margin tolerance under which a greedy divergence is a near-tie, per dtype of the run.
# float64 / float32: none (exact identity expected). bf16 keeps 8 mantissa bits, fp16 11: a margin
# below a few units in the last place of logits of magnitude ~10 can flip under a different kernel.
NEAR_TIE_TOLERANCE = {
    torch.float64: 0.0,
    torch.float32: 0.0,
    torch.bfloat16: 0.25,
    torch.float16: 0.03,
}


class NearTieWarning(UserWarning):
    """A greedy divergence at a numerical near-tie (bf16/fp16): reported, not failed."""


@dataclass(frozen=True)
class Divergence:
    """The first place where the decoder's tokens differ from the reference's."""

    index: int
    expected_token: int | None
    actual_token: int | None
    expected_text: str
    actual_text: str
    context_text: str
    margin: float | None
    near_tie: bool

    def describe(self) -> str:
        margin = "n/a" if self.margin is None else f"{self.margin:.3g}"
        kind = "numerical near-tie" if self.near_tie else "DIVERGENCE"
        return (
            f"{kind} at generated index {self.index}: expected token {self.expected_token} "
            f"({self.expected_text!r}), got {self.actual_token} ({self.actual_text!r}); "
            f"target top-2 logit margin there {margin}; context ...{self.context_text!r}"
        )

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def first_divergence(expected: Sequence[int], actual: Sequence[int]) -> int | None:
    """Index of the first difference (a length difference counts at the shorter length), or None."""
    for index, (a, b) in enumerate(zip(expected, actual, strict=False)):
        if a != b:
            return index
    return None if len(expected) == len(actual) else min(len(expected), len(actual))


def top2_margins(logits: torch.Tensor) -> torch.Tensor:
    """logits [..., V] -> top-1 minus top-2 logit [...]."""
    top = logits.topk(2, dim=-1).values
    return top[..., 0] - top[..., 1]


def classify(
    expected: Sequence[int],
    actual: Sequence[int],
    margins: Sequence[float],
    dtype: torch.dtype,
    decode_text: Callable[[list[int]], str],
    prompt_ids: Sequence[int] = (),
) -> Divergence | None:
    """The first divergence of `actual` from `expected`, classified by the reference's margin there.

    margins[i]: the reference's top-2 logit margin at generated index i. decode_text: ids -> str.
    """
    index = first_divergence(expected, actual)
    if index is None:
        return None
    both_have_a_token = index < len(expected) and index < len(actual)
    margin = float(margins[index]) if both_have_a_token and index < len(margins) else None
    tolerance = NEAR_TIE_TOLERANCE.get(dtype, 0.0)
    near_tie = margin is not None and margin < tolerance
    token = lambda seq: seq[index] if index < len(seq) else None  # noqa: E731
    context = [*prompt_ids, *expected[:index]][-12:]
    return Divergence(
        index=index,
        expected_token=token(expected),
        actual_token=token(actual),
        expected_text=decode_text([token(expected)]) if token(expected) is not None else "<end>",
        actual_text=decode_text([token(actual)]) if token(actual) is not None else "<end>",
        context_text=decode_text(context),
        margin=margin,
        near_tie=near_tie,
    )
