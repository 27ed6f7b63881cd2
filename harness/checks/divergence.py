"""Where two greedy token sequences part, and whether that is a bug or a floating-point near-tie.

In float64/float32 any divergence is a failure. In bf16/fp16 a divergence is a numerical near-tie only when the
decoder's token is within the dtype's tolerance of the best token of the precise re-scoring (float64 on CPU) on
the same prefix: one of the tied tokens, not any token at a close call. After a near-tie the check goes on: the
reference is continued from the decoder's own prefix (target-only greedy from there) and the rest of the output
is checked against it, as far as the output goes (check_greedy).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from harness.contract.decoder import DecodeRequest
from harness.contract.records import Divergence

if TYPE_CHECKING:
    from harness.models.loading import ModelBundle

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


def describe_divergence(divergence: Divergence) -> str:
    """A divergence in words: where, which tokens, the precise margin there and the context before it."""
    margin = "n/a" if divergence["margin"] is None else f"{divergence['margin']:.3g}"
    gap = divergence["token_gap"]
    below = "" if gap is None else f"; the decoder's token {gap:.3g} below the precise best"
    kind = "numerical near-tie" if divergence["near_tie"] else "DIVERGENCE"
    return (
        f"{kind} at generated index {divergence['index']}: expected token {divergence['expected_token']} "
        f"({divergence['expected_text']!r}), got {divergence['actual_token']} ({divergence['actual_text']!r}); "
        f"target top-2 logit margin there {margin}{below}; context ...{divergence['context_text']!r}"
    )


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


@dataclass(frozen=True)
class GreedyCheck:
    """What a greedy check found: the divergence that fails it (None: the output holds), the near-ties it passed
    over, the reference the output was judged against (re-anchored on the decoder's prefix after each near-tie)
    and how many output positions it compared with a target-only reference."""

    failure: Divergence | None
    near_ties: tuple[Divergence, ...]
    reference: tuple[int, ...]
    checked: int


def check_greedy(
    expected: Sequence[int],
    actual: Sequence[int],
    prompt_ids: Sequence[int],
    dtype: torch.dtype,
    decode_text: Callable[[list[int]], str],
    precise_logits: Callable[[Sequence[int]], torch.Tensor],
    continuation: Callable[[Sequence[int]], Sequence[int]],
    tolerance: float | None = None,
) -> GreedyCheck:
    """Compare `actual` with `expected`; at a divergence where the decoder's token is within the tolerance (the
    dtype's, unless given) of the precise best (precise_logits(prefix) -> logits [V] of the next token), record a
    near-tie and go on against continuation(prefix + the decoder's token): the target-only greedy tokens after it."""
    tolerance = NEAR_TIE_TOLERANCE.get(dtype, 0.0) if tolerance is None else tolerance
    actual, prompt = list(actual), list(prompt_ids)
    judged, ahead = [], list(expected)  # the reference up to the last near-tie, and from there on
    near_ties: list[Divergence] = []
    while True:
        index = first_divergence(ahead, actual[len(judged) :])
        reference = tuple(judged + ahead)
        if index is None:
            return GreedyCheck(None, tuple(near_ties), reference, len(actual))
        at = len(judged) + index
        margin = gap = None
        if tolerance > 0 and at < len(reference) and at < len(actual):
            logits = precise_logits(prompt + actual[:at]).double()
            margin = float(top2_margins(logits))
            gap = float(logits.max() - logits[actual[at]])
        divergence = _divergence(reference, actual, at, prompt, decode_text, margin, gap, tolerance)
        if not divergence["near_tie"]:
            return GreedyCheck(divergence, tuple(near_ties), reference, at)
        near_ties.append(divergence)
        judged = actual[: at + 1]
        ahead = list(continuation(prompt + judged))


def _divergence(
    reference: Sequence[int],
    actual: Sequence[int],
    index: int,
    prompt_ids: Sequence[int],
    decode_text: Callable[[list[int]], str],
    margin: float | None,
    gap: float | None,
    tolerance: float,
) -> Divergence:
    def token(sequence: Sequence[int]) -> int | None:
        return sequence[index] if index < len(sequence) else None

    context = [*prompt_ids, *reference[:index]][-12:]
    return Divergence(
        index=index,
        expected_token=token(reference),
        actual_token=token(actual),
        expected_text=decode_text([token(reference)]) if token(reference) is not None else "<end>",
        actual_text=decode_text([token(actual)]) if token(actual) is not None else "<end>",
        context_text=decode_text(context),
        margin=margin,
        near_tie=gap is not None and tolerance > 0 and gap <= tolerance,
        token_gap=gap,
    )


def check_against_target(
    bundle: ModelBundle,
    rescoring: ModelBundle,
    request: DecodeRequest,
    expected: Sequence[int],
    actual: Sequence[int],
    tolerance: float | None = None,
) -> GreedyCheck:
    """check_greedy for a decoder's output to `request`, against target-only greedy decoding on `bundle` (the
    reference's model and dtype): near-ties judged by `rescoring` (the precise model) within `tolerance` (the
    dtype's unless given), the reference continued after each on `bundle` with the request's EOS ids and what is
    left of its max_new_tokens."""
    from harness.decoding.target_decoder import TargetOnlyDecoder

    continuation = continued_by(request, lambda follow: TargetOnlyDecoder(bundle).decode([follow])[0].token_ids)
    decode = rescoring.tokenizer.decode
    return check_greedy(
        expected, actual, request.prompt_ids, bundle.dtype, decode, precise_logits(rescoring), continuation, tolerance
    )


def continued_by(
    request: DecodeRequest, decode: Callable[[DecodeRequest], Sequence[int]]
) -> Callable[[Sequence[int]], Sequence[int]]:
    """check_greedy's continuation for `request`: prefix -> the target-only greedy tokens after it, as `decode`
    gives them for the request's EOS ids and what is left of its max_new_tokens (none at an EOS or at the limit)."""

    def continuation(prefix: Sequence[int]) -> Sequence[int]:
        left = request.max_new_tokens - (len(prefix) - len(request.prompt_ids))
        if left <= 0 or prefix[-1] in request.eos_token_ids:
            return ()
        return decode(DecodeRequest(tuple(prefix), left, eos_token_ids=request.eos_token_ids))

    return continuation


def precise_logits(rescoring: ModelBundle) -> Callable[[Sequence[int]], torch.Tensor]:
    """prefix -> the precise model's logits [V] of the token after it (check_greedy's precise_logits)."""
    from harness.models.teacher_forcing import target_forward

    def next_token_logits(prefix: Sequence[int]) -> torch.Tensor:
        with torch.no_grad():
            _, logits = target_forward(rescoring.target, torch.tensor([list(prefix)], device=rescoring.device))
        return logits[0, -1]

    return next_token_logits
