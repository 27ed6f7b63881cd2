"""The features suite's truth: the target's processed conditionals along a given output, computed the slow,
obviously-right way (one teacher-forced forward over prompt + output, each position's history counted from the
output before it), and what a target-only decoder emits from a prefix under a request's features.

    raw logprobs at position i:   log_softmax(l_i),  l_i = the target's logits after prompt + output[:i]
    processed logits at i:        the constraint's mask after output[:i] (harness/decoding/grammar.py), then
                                  SamplingConfig's processors before temperature, with c = counts of output[:i],
                                  n = i, the prompt's tokens and the request's EOS ids (harness/decoding/processors.py)

The decoders compute the same quantities incrementally (KV caches, verification batches, drafts counted as history);
the features suite holds them to these.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from harness.contract.decoder import DecodeRequest
from harness.decoding.grammar import Grammar, mask_logits
from harness.decoding.processors import TokenHistory, apply_before_temperature
from harness.decoding.sampling import probability_dtype
from harness.decoding.stops import Stops, stop_at_first_stop
from harness.models.loading import ModelBundle
from harness.models.teacher_forcing import target_forward


def history_along(
    prompt_ids: Sequence[int], outputs: torch.Tensor, eos_ids: Sequence[int], vocab_size: int
) -> TokenHistory:
    """The history at output positions 0..L of `outputs` [n, L] (one prompt): c counts outputs[:, :i], n = i."""
    rows, length = outputs.shape
    one_hot = torch.nn.functional.one_hot(outputs, vocab_size).double()
    before = torch.cat([torch.zeros(rows, 1, vocab_size, dtype=torch.float64), one_hot.cumsum(dim=1)], dim=1)
    in_prompt = torch.zeros(rows, vocab_size, dtype=torch.bool)
    in_prompt[:, list(prompt_ids)] = True
    eos = torch.zeros(rows, vocab_size, dtype=torch.bool)
    eos[:, list(eos_ids)] = True
    generated = torch.arange(length + 1)[None, :].expand(rows, -1)
    return TokenHistory(before, generated, in_prompt, eos)


def target_logits_along(bundle: ModelBundle, prompt_ids: Sequence[int], outputs: torch.Tensor) -> torch.Tensor:
    """The target's logits at output positions 0..L of `outputs` [n, L]: [n, L+1, V], position i after prompt +
    outputs[:, :i]."""
    ids = torch.cat([torch.tensor(list(prompt_ids))[None, :].expand(len(outputs), -1), outputs], dim=1)
    with torch.no_grad():
        _, logits = target_forward(bundle.target, ids.to(bundle.device))
    return logits[:, len(prompt_ids) - 1 :].to(probability_dtype(logits.dtype)).cpu()


def processed_along(
    bundle: ModelBundle, request: DecodeRequest, outputs: Sequence[Sequence[int]]
) -> tuple[torch.Tensor, torch.Tensor]:
    """(raw logits, logits after the processors before temperature) at output positions 0..L of `outputs` (equal
    lengths L), each [n, L+1, V]."""
    tokens = torch.tensor([list(output) for output in outputs], dtype=torch.long).reshape(len(outputs), -1)
    raw = target_logits_along(bundle, request.prompt_ids, tokens)
    history = history_along(request.prompt_ids, tokens, request.eos_token_ids, raw.shape[-1])
    masked = (
        raw if request.structured_output is None else mask_logits(raw, grammar_masks_along(bundle, request, outputs))
    )
    return raw, apply_before_temperature(masked, request.sampling, history)


def grammar_of(bundle: ModelBundle, request: DecodeRequest) -> Grammar:
    """A fresh matcher of the request's constraint (it must have one)."""
    assert request.structured_output is not None
    return Grammar(request.structured_output, bundle.grammar_tokenizer(), bundle.vocab_size, request.eos_token_ids)


def grammar_masks_along(bundle: ModelBundle, request: DecodeRequest, outputs: Sequence[Sequence[int]]) -> torch.Tensor:
    """[n, L+1, V] bool: the constraint's mask at output positions 0..L of each output (after output[:i])."""
    return torch.stack([grammar_of(bundle, request).allowed_along(list(output)) for output in outputs])


def raw_logits_of_each(
    bundle: ModelBundle, prompt_ids: Sequence[int], outputs: Sequence[Sequence[int]]
) -> list[torch.Tensor]:
    """The target's logits at output positions 0..L_i of each output (lengths may differ): [L_i+1, V] each, from one
    forward over the outputs padded at the end (a causal model's earlier positions never read the padding)."""
    width = max((len(output) for output in outputs), default=0)
    padded = torch.tensor([[*output, *([0] * (width - len(output)))] for output in outputs], dtype=torch.long)
    logits = target_logits_along(bundle, prompt_ids, padded.reshape(len(outputs), width))
    return [logits[row, : len(output) + 1] for row, output in enumerate(outputs)]


def greedy_from(bundle: ModelBundle, request: DecodeRequest, prefix: Sequence[int]) -> tuple[int, ...]:
    """The target-only greedy output of `request` that starts with output `prefix`: each next token the argmax of
    the processed logits, until an EOS, a completed stop sequence or max_new_tokens (teacher-forced from scratch
    at every step: slow and independent of any cache)."""
    output = list(prefix)
    stops = stops_of(bundle, request)
    while len(output) < request.max_new_tokens and not ended(request, stops, output):
        _, processed = processed_along(bundle, request, [output])
        output.append(int(processed[0, -1].argmax()))
    return tuple(output)


def stops_of(bundle: ModelBundle, request: DecodeRequest) -> Stops:
    """The request's stop sequences and strings, its strings read by the bundle's tokenizer."""
    return Stops.of(request, bundle.token_bytes() if request.stop_strings else ())


def ended(request: DecodeRequest, stops: Stops, output: Sequence[int]) -> bool:
    """Whether `output` has ended: at an EOS, or at a completed stop sequence or string (past min_tokens)."""
    if output and output[-1] in request.eos_token_ids:
        return True
    if not stops or not output:
        return False
    return stop_at_first_stop(output[:-1], output[-1:], stops, request.sampling.min_tokens) == 1


def stop_position(bundle: ModelBundle, request: DecodeRequest, output: Sequence[int]) -> int | None:
    """The index of the token at which `output` first ends by a stop sequence or string (stop_at_first_stop)."""
    cut = stop_at_first_stop((), output, stops_of(bundle, request), request.sampling.min_tokens)
    return None if cut is None else cut - 1


LOGPROB_TOLERANCE = {torch.float64: 1e-9, torch.float32: 1e-4}  # any other dtype: 0.1


def logprob_tolerance(dtype: torch.dtype, decoder: object | None = None) -> float:
    """How far a decoder's logprob may be from the teacher-forced one: rounding of the logits in the run's dtype
    (a verification batch and a one-token pass sum in different orders) over a log-softmax of magnitude ~10; for a
    decoder that computes its logprobs in a coarser dtype than the run's (its `logprobs_dtype`,
    harness/contract/decoder.py), that dtype's."""
    tolerance = LOGPROB_TOLERANCE.get(dtype, 0.1)
    coarser = getattr(decoder, "logprobs_dtype", None)
    return max(tolerance, LOGPROB_TOLERANCE.get(getattr(torch, coarser), 0.1)) if coarser else tolerance
